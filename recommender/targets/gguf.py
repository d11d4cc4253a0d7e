"""The Llama folder (modelrepo/llama.py: the weights vLLM serves) as one GGUF file, the format llama.cpp's server loads,
converted by the converter llama.cpp's own source ships (convert_hf_to_gguf.py, unpacked by llamacpp_venv.py).

    gguf_file(folder, "q8_0", converter, python) -> <folder>.q8_0-<key>.gguf beside the folder (converted once)

The key hashes what decides the file's bytes: every file of the folder (by content), the GGUF type and the
converter's version, so changed weights or another type are another file and an unchanged one is never converted
again. The converter writes to a staging file that is renamed last (a conversion cut short is never taken as done),
under a lock (two jobs convert one at a time). It runs with a Python that has torch, transformers, numpy and
sentencepiece (the caller's choice: vLLM's virtualenv has them), since llama.cpp's virtualenv has none of them.

The vocabulary. The Llama folder carries the packaged bert-uncased tokenizer (WordPiece), which the converter's Llama
class writes as a BPE ("gpt2") vocabulary without merges: llama-server refuses such a file ("cannot find tokenizer
merges"). So the converter runs (CONVERT) with its Llama class given the vocabulary of its own BERT class:
`tokenizer.ggml.model` "bert" (llama.cpp's WordPiece tokenizer), the tokens in id order in llama.cpp's form (a word's
first piece after a phantom space, `##` pieces bare, special tokens as they are), their types, the special ids
([CLS] as bos, [SEP] as eos and sep, [UNK], [PAD], [MASK]), add_bos / add_eos as the tokenizer's post-processor adds
them ([CLS] ... [SEP]), its lower-casing, and the folder's chat template. llama.cpp's WordPiece tokenizer then gives
the ids the folder's tokenizer gives (the llamacpp tier checks it through the server's /tokenize).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from recommender.errors import BuildError
from recommender.targets.infinity_venv import locked

# the GGUF types offered (the converter's --outtype): fp32 as the folder holds it (exact), the two 16-bit floats, and
# one quantised type (8-bit blocks)
GGUF_TYPES = ("f32", "f16", "bf16", "q8_0")
CONVERT_TIMEOUT_S = 1800
VOCABULARY = "bert"  # the vocabulary written (in the content key: a file written otherwise is converted again)
# the converter, its Llama class given its BERT class's WordPiece vocabulary: `python -c CONVERT <script> <args...>`
CONVERT = """
import os, runpy, sys
script = sys.argv[1]
here = os.path.dirname(os.path.abspath(script))
sys.path[:0] = [here, os.path.join(here, "gguf-py")]
from conversion.bert import BertModel
from conversion.llama import LlamaModel
LlamaModel.set_vocab = BertModel.set_vocab
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


def gguf_path(folder: Path, gguf_type: str, converter_version: str) -> Path:
    """Where the folder's GGUF of this type is kept: beside the folder, named by its content key."""
    return folder.parent / f"{folder.name}.{gguf_type}-{content_key(folder, gguf_type, converter_version)}.gguf"


def content_key(folder: Path, gguf_type: str, converter_version: str) -> str:
    """16 hex digits of every file in the folder (name and bytes), the type, the converter's version and the
    vocabulary written."""
    digest = hashlib.sha256(f"{gguf_type}\0{converter_version}\0{VOCABULARY}\0".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as data:
            for block in iter(lambda: data.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def gguf_file(folder: Path, gguf_type: str, converter: Path, python: Path, converter_version: str) -> Path:
    """The folder as GGUF of `gguf_type`, converted on first use (BuildError with the converter's last line when
    it fails: its whole output is kept beside the file as <file>.log)."""
    if gguf_type not in GGUF_TYPES:
        raise BuildError(f"GGUF type {gguf_type!r} is not one of {', '.join(GGUF_TYPES)}")
    target = gguf_path(folder, gguf_type, converter_version)
    if target.exists():
        return target
    with locked(target):
        if target.exists():  # another job converted it meanwhile
            return target
        staging = target.with_name(f"{target.name}.tmp{os.getpid()}")
        log = target.with_name(f"{target.name}.log")
        command = [str(python), "-c", CONVERT, str(converter), str(folder), "--outfile", str(staging)]
        command += ["--outtype", gguf_type]
        try:
            with open(log, "w") as out:
                done = subprocess.run(
                    command, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=CONVERT_TIMEOUT_S
                )
            if done.returncode != 0 or not staging.exists():
                tail = log.read_text(errors="replace").strip().splitlines()
                raise BuildError(
                    f"converting {folder} to GGUF {gguf_type} failed (exit {done.returncode}): "
                    f"{tail[-1] if tail else 'no output'}",
                    hint=f"see {log}",
                )
            staging.rename(target)  # last: the file is whole
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"converting {folder} to GGUF {gguf_type} took over {CONVERT_TIMEOUT_S} s", hint=f"see {log}"
            ) from None
        finally:
            staging.unlink(missing_ok=True)
    return target
