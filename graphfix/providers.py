"""ONNX Runtime's execution providers as graphfix probes and picks them (their names and the
choices a run takes are :data:`graphfix.options.PROVIDERS`, :func:`~graphfix.options.check_provider`).

    session_providers("cuda")     # ["CUDAExecutionProvider", "CPUExecutionProvider"]
    probe_provider("cuda")        # ProviderStatus: does a session really get it?
    resolve_provider("auto")      # "cuda" where it really loads, else "cpu"

``onnxruntime-gpu`` lists ``CUDAExecutionProvider`` among its *available* providers whether or
not the CUDA libraries are there, and a session asked for it silently falls back to the CPU.
So a provider counts as *loadable* only when a tiny session created with it really reports it
in ``session.get_providers()``; when it does not, ONNX Runtime's own error text (the library it
failed to open) is captured from its log and kept.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import io
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from graphfix.errors import ProviderUnavailableError, first_line
from graphfix.model_io import max_ir_version
from graphfix.options import PROVIDERS, OptionError, check_provider

__all__ = [
    "CUDA_FIX",
    "cuda_fix",
    "ProviderStatus",
    "Library",
    "session_providers",
    "probe_provider",
    "resolve_provider",
    "preload_cuda_libraries",
    "cuda_library_names",
    "open_library",
    "TENSORRT_LIBRARIES",
    "short_name",
]

logger = logging.getLogger(__name__)


CUDA_FIX = "pip install 'graphfix[cuda]' (the CUDA 13 and cuDNN 9 wheels for onnxruntime-gpu)"
DRIVER_FIX = ("install the NVIDIA driver: libcuda.so.1, the driver's library, is the one "
              "missing (a machine with an NVIDIA GPU is needed)")


def cuda_fix(missing: Sequence[str]) -> str:
    """What to do where the CUDA provider does not load, from the libraries it misses: the
    driver alone is not a pip install."""
    return DRIVER_FIX if list(missing) == ["libcuda.so.1"] else CUDA_FIX

# What onnxruntime-gpu 1.31 (CUDA 13 build) opens, when ORT cannot tell us itself.
_CUDA_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("libcuda.so.1", "driver"),
    ("libcudart.so.13", "cuda"),
    ("libcublas.so.13", "cuda"),
    ("libcublasLt.so.13", "cuda"),
    ("libcurand.so.10", "cuda"),
    ("libcufft.so.12", "cuda"),
    ("libnvrtc.so.13", "cuda"),
    ("libcudnn.so.9", "cudnn"),
)
TENSORRT_LIBRARIES: tuple[tuple[str, str], ...] = (("libnvinfer.so.10", "tensorrt"),)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclasses.dataclass
class ProviderStatus:
    """Whether ONNX Runtime lists a provider, and whether a session really gets it."""

    name: str
    available: bool
    loadable: bool
    error: str | None = None
    missing_libraries: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Library:
    """A shared library a provider needs: found (opened by the dynamic loader) or not."""

    name: str
    role: str
    found: bool
    path: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)



def session_providers(provider: str) -> list[str]:
    """The providers an ONNX Runtime session for ``provider`` (cpu, cuda, tensorrt) is given:
    that one, then the CPU for the nodes it has no kernel for."""
    return list(dict.fromkeys([PROVIDERS[check_provider(provider, allowed=tuple(PROVIDERS))],
                               PROVIDERS["cpu"]]))


def short_name(provider: str) -> str:
    key = provider.lower().removesuffix("executionprovider")
    if key not in PROVIDERS:
        raise OptionError(f"unknown provider {provider!r}; one of {', '.join(PROVIDERS)}")
    return key




@contextlib.contextmanager
def _stderr_captured() -> Iterator[list[str]]:
    """Collect what is written to file descriptor 2 (ONNX Runtime logs from C++ there)."""
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = _ANSI.sub("", sink.read().decode("utf-8", errors="replace"))
            lines.extend(line.strip() for line in text.splitlines() if line.strip())


@functools.cache
def preload_cuda_libraries() -> tuple[bool, tuple[str, ...]]:
    """Run ``onnxruntime.preload_dlls()`` once (it loads pip-installed CUDA/cuDNN libraries).

    Returns whether it ran and what it said; it prints, so its output is captured, not shown.
    """
    import onnxruntime as ort

    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return False, ("this onnxruntime has no preload_dlls()",)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            preload()
    except (OSError, RuntimeError) as err:
        return False, (f"preload_dlls() failed: {err}",)
    messages = tuple(
        line.strip() for line in _ANSI.sub("", buffer.getvalue()).splitlines() if line.strip()
    )
    logger.debug("preload_dlls: %s", messages)
    return True, messages


def open_library(name: str) -> Library:
    role = dict(_CUDA_LIBRARIES + TENSORRT_LIBRARIES).get(name, "cuda")
    try:
        handle = ctypes.CDLL(name)
    except OSError as err:
        return Library(name, role, False, error=str(err))
    del handle
    return Library(name, role, True, path=_loaded_path(name))


def _loaded_path(name: str) -> str | None:
    """Where the loader found ``name``: from /proc/self/maps on Linux, else None."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if os.path.basename(path) == name or os.path.basename(path).startswith(name + "."):
                    return path
    except OSError:
        return None
    return None


def cuda_library_names() -> tuple[tuple[str, str], ...]:
    """The CUDA/cuDNN libraries of the installed ORT build (ORT's own list when it has one)."""
    import onnxruntime as ort

    module = sys.modules.get(getattr(ort.preload_dlls, "__module__", ""), ort)
    listing = getattr(module, "_get_nvidia_dll_paths", None)
    if listing is None:
        return _CUDA_LIBRARIES
    try:
        paths = listing(sys.platform == "win32", True, True)
    except (TypeError, ValueError, OSError):
        return _CUDA_LIBRARIES
    names = [("libcuda.so.1", "driver")]
    for path in paths:
        name = path[-1]
        names.append((name, "cudnn" if "cudnn" in name else "cuda"))
    return tuple(names)


def _provider_library(key: str) -> str:
    import onnxruntime as ort

    folder = os.path.join(os.path.dirname(ort.__file__), "capi")
    return os.path.join(folder, f"libonnxruntime_providers_{key}.so")


def _probe_model_bytes() -> bytes:
    import onnx

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])],
        "probe",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 13)],
        ir_version=min(8, max_ir_version()),
    )
    return model.SerializeToString()


@functools.cache
def probe_provider(provider: str) -> ProviderStatus:
    """Whether ``provider`` (cpu, cuda, tensorrt) really loads: a tiny session is created with
    it and ``get_providers()`` checked. Cached for the process (ORT does not retry either)."""
    import onnxruntime as ort

    key = short_name(provider)
    name = PROVIDERS[key]
    available = name in ort.get_available_providers()
    if not available:
        return ProviderStatus(name, False, False, error=f"this onnxruntime build has no {name}")
    if key != "cpu":
        preload_cuda_libraries()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    error: str | None = None
    loaded: list[str] = []
    printed = io.StringIO()
    # ORT logs the failure from C++ (file descriptor 2); its Python layer prints its fallback.
    with _stderr_captured() as logged, contextlib.redirect_stdout(printed):
        try:
            session = ort.InferenceSession(
                _probe_model_bytes(),
                options,
                providers=list(dict.fromkeys([name, PROVIDERS["cpu"]])),
            )
            loaded = session.get_providers()
        except Exception as err:  # noqa: BLE001 - ORT raises its own exception types
            error = str(err).strip()
    if name in loaded:
        return ProviderStatus(name, True, True)
    if error is None:
        error = _load_error(logged + printed.getvalue().splitlines(), name)
    missing: list[str] = []
    if key != "cpu":
        try:
            ctypes.CDLL(_provider_library(key))
        except OSError as err:
            first = str(err).split(":", 1)[0].strip()
            if first and not first.endswith(f"providers_{key}.so"):
                missing.append(first)
        names = cuda_library_names() + (TENSORRT_LIBRARIES if key == "tensorrt" else ())
        for library, _role in names:
            if library not in missing and not open_library(library).found:
                missing.append(library)
    logger.debug("provider %s does not load: %s (missing %s)", name, error, missing)
    return ProviderStatus(name, True, False, error=error, missing_libraries=missing)


def _load_error(lines: list[str], name: str) -> str:
    """The reason in ORT's log for a provider that fell back: the library that failed to open
    when it says so, else its first complaint."""
    for line in lines:
        found = re.search(r"Failed to load library (\S+) with error: (.*)", line)
        if found:
            return f"{os.path.basename(found.group(1))}: {found.group(2).strip()}"
    for line in lines:
        if "Error" in line or "Failed" in line or "Please install" in line:
            return re.sub(r"^.*?\] ", "", line).strip()
    return f"{name} was asked for, but the session fell back to the CPU"



def resolve_provider(provider: str) -> str:
    """"cpu" or "cuda": "auto" is cuda when the CUDA provider really loads, else cpu; "cuda"
    that does not load raises :class:`ProviderUnavailableError` naming what is missing."""
    check_provider(provider)
    if provider == "cpu":
        return "cpu"
    status = probe_provider("cuda")
    if status.loadable:
        return "cuda"
    if provider == "auto":
        logger.info("CUDA provider does not load (%s); measuring on the CPU", status.error)
        return "cpu"
    missing = ", ".join(status.missing_libraries)
    missing = f"; missing: {missing}" if missing else ""
    raise ProviderUnavailableError(
        f"the CUDA execution provider cannot be loaded: "
        f"{first_line(RuntimeError(status.error))}{missing}",
        hint=f"{cuda_fix(status.missing_libraries)}; `graphfix doctor --provider cuda` "
        "shows the details",
    )


