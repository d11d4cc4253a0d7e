"""Generic Triton Python-backend model: serves a TorchScript, ONNX, OpenVINO or TensorRT artifact with real batching.

Written into every model repository by recommender.modelrepo.repository. It reads its settings from
the `parameters` of config.pbtxt:

    artifact_file     the model file next to this model.py (in the version directory)
    artifact_format   "torchscript" (torch.jit.load), "onnx" (onnxruntime.InferenceSession) or "openvino"
                      (openvino.Core().compile_model of the ONNX file, on the CPU device) or "tensorrt"
                      (a serialized engine, deserialized with the TensorRT runtime on the instance's GPU)
    intra_op_threads  intra-op threads of this instance (instances x threads should fit the cores)

execute() concatenates the inputs of every request that Triton hands over (the dynamic batcher
groups them) along the batch dimension, runs the model once, and splits the outputs back per
request. Requests whose non-batch shapes differ are run as separate groups, except where the config marks the inputs
`allow_ragged_batch` (variants.padding: none): there every input is padded with 0 to the batch's longest sequence
(an attention mask of 0 hides the padding from the model), and the batch runs as one. A failure is answered
as a TritonError for the requests concerned; the instance keeps serving.

A runner gets the batch by input name and binds each input by name (ONNX Runtime feeds, OpenVINO ports, TensorRT
tensors), whatever order the model declares its inputs in; only TorchScript takes them positionally, in the config's
order (input_ids, attention_mask: the order of the exported forward).
"""

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

# nvidia-pytriton 0.7.0's stub moves arrays through the numpy 1 C API it was built with: under numpy 2 it misreads
# them (outputs: "output tensor shape does not match size of output", every request; inputs: wrong values). Under
# numpy 2 inputs and outputs go through DLPack instead; numpy 1's DLPack capsule is one the stub refuses, so numpy 1
# keeps the arrays.
_BY_DLPACK = int(np.__version__.split(".")[0]) >= 2


class TorchScriptRunner:
    """A TorchScript module on CPU (or on the instance's GPU for KIND_GPU)."""

    def __init__(self, path, threads, device):
        import torch

        self._torch = torch
        torch.set_num_threads(threads)
        self._device = torch.device(device)
        self._module = torch.jit.load(path, map_location=self._device).eval()
        if self._device.type != "cpu":
            retarget_device_constants(self._module, str(self._device))

    def __call__(self, inputs, output_names):
        torch = self._torch
        with torch.inference_mode():  # forward(input_ids, attention_mask): positional, in the config's order
            tensors = [torch.from_numpy(array).to(self._device) for array in inputs.values()]
            result = self._module(*tensors)
        if isinstance(result, dict):
            result = [result[name] for name in output_names]
        elif not isinstance(result, (tuple, list)):
            result = [result]
        return [tensor.detach().cpu().numpy() for tensor in result]


def retarget_device_constants(module, device):
    """Point the CPU device constants of a traced module at `device`; returns how many were changed.

    The export traces on the CPU, and a trace records the device of every tensor the model made as a constant
    (transformers' attention masks: `torch.arange(..., device=cpu)`, `attention_mask.to(cpu)`). `map_location` moves
    the weights, not those constants, so on a GPU every request failed with "Expected all tensors to be on the same
    device" (docs/gpu.md). Done once, before the first call (the graphs are compiled on first use)."""
    changed = 0
    for submodule in module.modules():
        try:
            graph = submodule.graph
        except RuntimeError:  # a container without forward (a ModuleList)
            continue
        for node in graph.findAllNodes("prim::Constant"):
            if node.output().type().kind() == "DeviceObjType" and node.s("value") == "cpu" != device:
                node.s_("value", device)
                changed += 1
    return changed


class OnnxRunner:
    """An ONNX Runtime session; each input fed by its name in the model."""

    def __init__(self, path, threads, device):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        providers: list[str | tuple[str, dict[str, int]]] = ["CPUExecutionProvider"]
        if device.startswith("cuda"):
            device_id = int(device.partition(":")[2] or 0)
            providers = [("CUDAExecutionProvider", {"device_id": device_id}), "CPUExecutionProvider"]
        self._session = onnxruntime.InferenceSession(path, sess_options=options, providers=providers)
        used = self._session.get_providers()
        if device.startswith("cuda") and "CUDAExecutionProvider" not in used:  # it would serve on the CPU, unsaid
            raise RuntimeError(
                f"onnxruntime {onnxruntime.__version__} serves this KIND_GPU instance with {', '.join(used)}, not "
                "CUDAExecutionProvider: pip uninstall onnxruntime, then pip install onnxruntime-gpu"
            )
        self._input_names = [node.name for node in self._session.get_inputs()]

    def __call__(self, inputs, output_names):
        return self._session.run(None, _by_name(self._input_names, inputs))


class OpenVinoRunner:
    """An OpenVINO compiled model on the CPU device (one infer request per instance); each input fed by its name."""

    def __init__(self, path, threads, device):
        import openvino

        if device != "cpu":
            raise ValueError("the openvino runner serves on the CPU only (use KIND_CPU instances)")
        core = openvino.Core()
        # f32: the candidate is fp32 (a CPU with bf16 support would otherwise run bf16 by default)
        config = {
            "INFERENCE_NUM_THREADS": threads,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32",
        }
        self._compiled = core.compile_model(path, "CPU", config)
        self._request = self._compiled.create_infer_request()
        self._input_names = [port.get_any_name() for port in self._compiled.inputs]

    def __call__(self, inputs, output_names):
        results = self._request.infer(_by_name(self._input_names, inputs))
        return [np.asarray(results[port]) for port in self._compiled.outputs]


class TensorRTRunner:
    """A serialized TensorRT engine (TensorRT >= 8.5 I/O-tensor API) on the instance's GPU: one execution context and
    one CUDA stream per model instance; torch CUDA tensors are the device buffers; each input tensor bound by its name
    in the engine. Not run on a GPU yet (docs/gpu.md)."""

    def __init__(self, path, threads, device):
        import tensorrt as trt
        import torch

        if not device.startswith("cuda"):
            raise ValueError("the tensorrt runner needs a GPU instance (instance_group kind KIND_GPU)")
        self._torch, self._device = torch, torch.device(device)
        torch.cuda.set_device(self._device)
        with open(path, "rb") as handle:
            self._engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(handle.read())
        if self._engine is None:
            raise ValueError(f"TensorRT could not deserialize {path} (built for another TensorRT version or GPU?)")
        self._context = self._engine.create_execution_context()
        self._stream = torch.cuda.Stream(device=self._device)
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        is_input = {name: self._engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT for name in names}
        self._inputs = [name for name in names if is_input[name]]
        self._outputs = [name for name in names if not is_input[name]]
        self._dtypes = {name: np.dtype(trt.nptype(self._engine.get_tensor_dtype(name))) for name in names}

    def __call__(self, inputs, output_names):
        torch = self._torch
        feed = _by_name(self._inputs, inputs)
        with torch.cuda.stream(self._stream):
            bound = [self._bind_input(name, array) for name, array in feed.items()]
            outputs = [self._bind_output(name) for name in self._outputs]
            if not self._context.execute_async_v3(self._stream.cuda_stream):
                raise RuntimeError("TensorRT execute_async_v3 failed")
            host = [output.to("cpu", non_blocking=True) for output in outputs]
        self._stream.synchronize()
        del bound  # the device inputs lived until the stream finished with them
        return [tensor.numpy() for tensor in host]

    def _bind_input(self, name, array):
        array = np.ascontiguousarray(array, dtype=self._dtypes[name])
        tensor = self._torch.from_numpy(array).to(self._device, non_blocking=True)
        if not self._context.set_input_shape(name, tuple(tensor.shape)):
            raise ValueError(
                f"TensorRT refused input {name!r} of shape {tuple(tensor.shape)}: outside the engine's optimization "
                "profile (batch 1..max_batch_size, the shortest to the longest sequence it was built for)"
            )
        self._context.set_tensor_address(name, tensor.data_ptr())
        return tensor

    def _bind_output(self, name):
        dtype = self._torch.from_numpy(np.empty(0, dtype=self._dtypes[name])).dtype
        tensor = self._torch.empty(tuple(self._context.get_tensor_shape(name)), dtype=dtype, device=self._device)
        self._context.set_tensor_address(name, tensor.data_ptr())
        return tensor


def _by_name(names, inputs):
    """The model's inputs `names`, in its order, taken by name from the request batch `inputs` (name -> array)."""
    missing = [name for name in names if name not in inputs]
    if missing:
        raise ValueError(f"the model takes input(s) {missing}, which the config does not declare ({list(inputs)})")
    return {name: inputs[name] for name in names}


# each runner: (artifact path, intra-op threads, device) -> a callable (batch by input name, output names) -> outputs
RUNNERS: dict[str, Callable[[str, int, str], Any]] = {
    "torchscript": TorchScriptRunner,
    "onnx": OnnxRunner,
    "openvino": OpenVinoRunner,
    "tensorrt": TensorRTRunner,
}


class TritonPythonModel:
    """Triton's entry point: one object per model instance (its own stub process)."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.input_names = [tensor["name"] for tensor in config["input"]]
        self.output_names = [tensor["name"] for tensor in config["output"]]
        self.output_dtypes = [pb_utils.triton_string_to_numpy(tensor["data_type"]) for tensor in config["output"]]
        self.ragged = any(tensor.get("allow_ragged_batch", False) for tensor in config["input"])
        path = os.path.join(args["model_repository"], args["model_version"], parameters["artifact_file"])
        device = _device(args)
        runner = RUNNERS[parameters["artifact_format"]]
        self.runner = runner(path, int(parameters.get("intra_op_threads", "1")), device)

    def execute(self, requests):
        responses = [None] * len(requests)
        groups: dict[Any, list] = {}  # shape key -> [(request index, arrays)]
        for index, request in enumerate(requests):
            try:
                arrays = [self._input(request, name) for name in self.input_names]
            except Exception as error:  # a malformed request fails alone
                responses[index] = _error_response(error)
                continue
            signature = tuple((array.dtype.str, array.ndim if self.ragged else array.shape[1:]) for array in arrays)
            groups.setdefault(signature, []).append((index, arrays))
        for members in groups.values():
            for index, response in self._run_group(members):
                responses[index] = response
        return responses

    def finalize(self):
        self.runner = None

    def _input(self, request, name):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            raise ValueError(f"request has no input {name!r}")
        return np.from_dlpack(tensor) if _BY_DLPACK else tensor.as_numpy()

    def _run_group(self, members):
        """Run the requests of one shape group as one batch; yield (request index, response)."""
        sizes = [arrays[0].shape[0] for _, arrays in members]
        try:
            columns = [[arrays[i] for _, arrays in members] for i in range(len(self.input_names))]
            batch = [np.concatenate(pad_to_longest(column) if self.ragged else column) for column in columns]
            outputs = self.runner(dict(zip(self.input_names, batch, strict=True)), self.output_names)
            if len(outputs) != len(self.output_names):
                raise ValueError(f"model returned {len(outputs)} outputs, config declares {len(self.output_names)}")
            outputs = [
                np.asarray(out).astype(dtype, copy=False)
                for out, dtype in zip(outputs, self.output_dtypes, strict=False)
            ]
        except Exception as error:
            for index, _ in members:
                yield index, _error_response(error)
            return
        offsets = np.cumsum([0, *sizes])
        for (index, _), start, stop in zip(members, offsets[:-1], offsets[1:], strict=False):
            tensors = [_output(name, out[start:stop]) for name, out in zip(self.output_names, outputs, strict=False)]
            yield index, pb_utils.InferenceResponse(output_tensors=tensors)


def _output(name, array):
    if _BY_DLPACK:
        return pb_utils.Tensor.from_dlpack(name, np.ascontiguousarray(array))
    return pb_utils.Tensor(name, array)


def pad_to_longest(arrays):
    """Arrays [rows, seq, ...] padded with 0 at the end of the sequence (axis 1) to the longest one's."""
    longest = max(array.shape[1] for array in arrays)
    return [np.pad(a, [(0, 0), (0, longest - a.shape[1])] + [(0, 0)] * (a.ndim - 2)) for a in arrays]


def _device(args):
    if args.get("model_instance_kind") == "GPU":
        return f"cuda:{args.get('model_instance_device_id', '0')}"
    return "cpu"


def _error_response(error):
    message = f"{type(error).__name__}: {error}"
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))
