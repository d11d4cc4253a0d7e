"""Build the CPU serving image of containers/triton-cpu on this host's Docker engine, with no container registry:

1. a Debian root filesystem made with debootstrap from the mirror apt uses (/etc/apt/sources.list*), with Python and
   its shared libpython (the backend stub embeds it), imported with `docker import`;
2. the context: the nvidia-pytriton wheel's tritonserver, Python backend, this Python's stub and vendored libraries in
   the NGC image's layout (/opt/tritonserver), and ONNX Runtime + NumPy installed on this host for the image's Python;
3. `docker build`, labelled as containers/triton labels the NGC image (org.recommender.triton, .tensorrt), plus
   org.recommender.backends=python.

The image is cached by version: its tag names the wheel's version and a key over everything that goes in (the
Dockerfile, this script, the suite, the package versions), and `docker save` keeps it in the cache folder
(RECOMMENDER_IMAGE_CACHE, default ~/.cache/recommender/images; only the current version is kept), so a second build
on a fresh engine is a `docker load`. Needs root (debootstrap) and the docker CLI pointed at a running engine
(DOCKER_HOST).

    python3 containers/triton-cpu/build_image.py   # prints the tag
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEBIAN_PACKAGES = ("python3-minimal", "libpython3-stdlib", "libexpat1")  # plus libpython<version>, found below
RUNNER_PACKAGES = ("onnxruntime", "numpy")  # the Python-backend runner's `onnx` engine, at this host's versions
WHEEL = "nvidia-pytriton"
REPOSITORY = "recommender-triton-cpu"
STUB = "triton_python_backend_stub"


class BuildFailed(Exception):
    """One line saying which step failed and why."""


def cache_dir() -> Path:
    return Path(os.environ.get("RECOMMENDER_IMAGE_CACHE") or Path.home() / ".cache" / "recommender" / "images")


def apt_mirror(root: Path = Path("/etc/apt")) -> tuple[str, str]:
    """(mirror URI, suite) of the first Debian `deb` source apt uses that is not -updates/-security; BuildFailed when
    there is none."""
    entries: list[tuple[str, str]] = []
    for path in sorted(root.glob("sources.list.d/*.sources")):
        for block in path.read_text().split("\n\n"):
            fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line and not line.startswith("#"))
            fields = {key.strip(): value.split() for key, value in fields.items()}
            if "deb" in fields.get("Types", []) and fields.get("URIs") and fields.get("Suites"):
                entries += [(fields["URIs"][0], suite) for suite in fields["Suites"]]
    listing = root / "sources.list"
    for line in listing.read_text().splitlines() if listing.is_file() else []:
        words = re.sub(r"\[[^]]*\]", "", line).split()
        if len(words) >= 3 and words[0] == "deb":
            entries.append((words[1], words[2]))
    debian = [(uri, suite) for uri, suite in entries if "/debian" in uri and "-" not in suite]
    if not debian:
        raise BuildFailed(f"no Debian mirror found in {root}/sources.list*: debootstrap needs the mirror apt uses")
    return debian[0]


def versions() -> dict[str, str]:
    """The installed versions of what goes into the image."""
    try:
        return {name: importlib.metadata.version(name) for name in (WHEEL, *RUNNER_PACKAGES)}
    except importlib.metadata.PackageNotFoundError as error:
        raise BuildFailed(f"{error.name} is not installed here: the image is made from this host's copy") from None


def image_tag(suite: str) -> str:
    """The image's tag: the wheel's version and a key over everything that goes into the image."""
    found = versions()
    digest = hashlib.sha256()
    for part in ((HERE / "Dockerfile").read_text(), Path(__file__).read_text(), suite, repr(sorted(found.items()))):
        digest.update(part.encode())
    return f"{REPOSITORY}:{found[WHEEL]}-{digest.hexdigest()[:12]}"


def docker(*args: str, timeout: float = 1800, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which("docker") is None:
        raise BuildFailed("the docker command is not installed (apt-get install docker.io)")
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, stdin=stdin)


def checked(step: str, done: subprocess.CompletedProcess[str]) -> str:
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        raise BuildFailed(f"{step} failed (exit {done.returncode}): {detail}")
    return done.stdout


def ensure_image(log=print) -> str:
    """The CPU image's tag, on the engine: already there, loaded from the cache, or built (then saved there)."""
    mirror, suite = apt_mirror()
    tag = image_tag(suite)
    if docker("image", "inspect", tag).returncode == 0:
        return tag
    saved = cache_dir() / f"{tag.replace(':', '-')}.tar"
    if saved.is_file():
        log(f"loading {tag} from {saved}")
        checked("docker load", docker("load", "--input", str(saved)))
        return tag
    with tempfile.TemporaryDirectory(prefix="triton-cpu-") as scratch:
        log(f"building {tag}: debootstrap {suite} from {mirror}")
        base = base_image(Path(scratch), mirror, suite, tag.split(":", 1)[1])
        context, python = stage_context(Path(scratch) / "context", Path(scratch) / "rootfs")
        shutil.rmtree(Path(scratch) / "rootfs", ignore_errors=True)
        arguments = {"BASE_IMAGE": base, "TRITON_VERSION": f"{WHEEL}-{versions()[WHEEL]}", "PYTHON_VERSION": python}
        build_args = [arg for key, value in arguments.items() for arg in ("--build-arg", f"{key}={value}")]
        checked("docker build", docker("build", "--network", "host", *build_args, "--tag", tag, str(context)))
        docker("image", "rm", base)
    saved.parent.mkdir(parents=True, exist_ok=True)
    partial = saved.with_suffix(".partial")
    checked("docker save", docker("save", "--output", str(partial), tag))
    partial.replace(saved)  # whole or absent: a killed save never passes for the cache
    for stale in saved.parent.glob(f"{REPOSITORY}-*"):  # other versions' images: the cache keeps the current one
        if stale != saved:
            stale.unlink()
    return tag


def base_image(scratch: Path, mirror: str, suite: str, key: str) -> str:
    """A Debian root filesystem from the mirror, imported as an image; returns its tag."""
    rootfs = scratch / "rootfs"
    if shutil.which("debootstrap") is None:
        raise BuildFailed("debootstrap is not installed (scripts/install_system_packages.sh installs it)")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"  # the stub and wheels must match the image's Python
    packages = ",".join((*DEBIAN_PACKAGES, f"libpython{python}", f"python{python}-minimal"))
    done = subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={packages}", suite, str(rootfs), mirror],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    checked(f"debootstrap {suite} (Python {python})", done)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (rootfs / cache).glob("*.deb" if "archives" in cache else "*_*"):
            item.unlink()
    tag = f"{REPOSITORY}-base:{key}"
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
    imported = docker("import", "-", tag, stdin=tar.stdout.fileno() if tar.stdout else None)
    tar.wait()
    checked("docker import", imported)
    return tag


def stage_context(context: Path, rootfs: Path) -> tuple[Path, str]:
    """The build context: the Dockerfile, the wheel's server in /opt/tritonserver's layout, the runner's packages.
    Returns it and the image's Python version."""
    import pytriton  # the wheel that ships tritonserver

    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not (rootfs / f"usr/lib/x86_64-linux-gnu/libpython{python}.so.1.0").exists():
        raise BuildFailed(f"the Debian root filesystem has no libpython{python}: build with Python {python} there")
    wheel = Path(pytriton.__file__).parent
    server = context / "tritonserver"
    shutil.copytree(wheel / "tritonserver" / "bin", server / "bin")
    shutil.copytree(wheel / "tritonserver" / "caches", server / "caches")
    shutil.copytree(
        wheel / "tritonserver" / "backends" / "python",
        server / "backends" / "python",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy2(wheel / "tritonserver" / "python_backend_stubs" / python / STUB, server / "backends" / "python")
    shutil.copytree(wheel.parent / "nvidia_pytriton.libs", server / "lib")
    found = versions()
    pins = [f"{name}=={found[name]}" for name in RUNNER_PACKAGES]
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(context / "site-packages"), *pins]
    checked("pip install " + " ".join(pins), subprocess.run(install, capture_output=True, text=True, timeout=900))
    shutil.copy2(HERE / "Dockerfile", context / "Dockerfile")
    return context, python


def main() -> int:
    try:
        print(ensure_image(log=lambda line: print(line, file=sys.stderr)))
    except (BuildFailed, subprocess.TimeoutExpired) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
