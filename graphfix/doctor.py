"""What the installed environment can run: versions, execution providers, CUDA libraries, GPUs.

    report = diagnose(provider="cuda")
    report.ok_for("cuda")        # False when the CUDA provider cannot really be used
    for problem in report.problems:
        problem.what, problem.fix

``onnxruntime-gpu`` lists ``CUDAExecutionProvider`` among its *available* providers whether or
not the CUDA libraries are there, and a session asked for it silently falls back to the CPU.
So a provider counts as *loadable* only when a tiny session created with it really reports it
in ``session.get_providers()``; when it does not, ONNX Runtime's own error text (the library it
failed to open) is captured from its log and kept.

:func:`graphfix.providers.probe_provider` (which bench, parity and ort-offline share: they
refuse a provider that does not load) is the probe.

``DoctorReport.to_dict()`` (JSON-safe)::

    {
      "versions": {"python": str, "graphfix": str, "onnx": str|null, "onnxruntime": str|null,
                   "onnxsim": str|null, "numpy": str|null},
      "onnxruntime_distribution": "onnxruntime-gpu"|"onnxruntime"|...|null,
      "onnxruntime_distributions": [str],     # every installed distribution providing the module
      "notes": [str],                         # facts that are not problems (a shadowed install)
      "onnxruntime_cuda_version": str|null,   # the CUDA version the ORT build targets
      "max_ir_version": int|null,             # the highest IR version the installed ORT loads
      "requested": "cpu"|"cuda"|"tensorrt"|null,
      "providers": {"cpu"|"cuda"|"tensorrt": {"name": str, "available": bool, "loadable": bool,
                    "error": str|null, "missing_libraries": [str]}},
      "preload": {"ran": bool, "messages": [str]},   # onnxruntime.preload_dlls()
      "libraries": [{"name": str, "role": str, "found": bool, "path": str|null,
                     "error": str|null}],
      "gpus": [{"name": str, "memory_total_mib": int|null, "memory_used_mib": int|null,
                "driver_version": str|null}],
      "problems": [{"provider": str, "what": str, "fix": str}],
      "ok": bool                              # ok_for(requested), or for "cpu" when none asked
    }
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from graphfix.model_io import max_ir_version
from graphfix.options import PROVIDERS
from graphfix.version import __version__
from graphfix.providers import (
    CUDA_FIX,
    TENSORRT_LIBRARIES,
    Library,
    ProviderStatus,
    cuda_library_names,
    open_library,
    preload_cuda_libraries,
    probe_provider,
    short_name,
)

__all__ = [
    "GpuInfo",
    "Problem",
    "DoctorReport",
    "diagnose", "format_doctor"]

logger = logging.getLogger(__name__)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclasses.dataclass
class GpuInfo:
    """One GPU as nvidia-smi describes it."""

    name: str
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    driver_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Problem:
    """Something that keeps ``provider`` ("any" for all of them) from working, and its fix."""

    provider: str
    what: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class DoctorReport:
    """The environment as graphfix sees it. See the module docstring for ``to_dict()``."""

    versions: dict[str, str | None]
    onnxruntime_distribution: str | None
    onnxruntime_distributions: list[str]
    onnxruntime_cuda_version: str | None
    max_ir_version: int | None
    providers: dict[str, ProviderStatus]
    preload_ran: bool
    preload_messages: list[str]
    libraries: list[Library]
    gpus: list[GpuInfo]
    problems: list[Problem]
    requested: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    def problems_for(self, provider: str) -> list[Problem]:
        """The problems that affect ``provider`` (cpu, cuda, tensorrt), including general ones."""
        return [p for p in self.problems if p.provider in (provider, "any")]

    def ok_for(self, provider: str) -> bool:
        """True when ``provider`` (cpu, cuda, tensorrt) loads; unknown names raise ValueError."""
        key = short_name(provider)
        status = self.providers.get(key)
        return status is not None and status.loadable and not any(
            p.provider == "any" for p in self.problems
        )

    @property
    def ok(self) -> bool:
        """Whether what was asked for (the CPU provider when nothing was) is usable."""
        return self.ok_for(self.requested or "cpu")

    def to_dict(self) -> dict[str, Any]:
        return {
            "versions": dict(self.versions),
            "onnxruntime_distribution": self.onnxruntime_distribution,
            "onnxruntime_distributions": list(self.onnxruntime_distributions),
            "notes": list(self.notes),
            "onnxruntime_cuda_version": self.onnxruntime_cuda_version,
            "max_ir_version": self.max_ir_version,
            "requested": self.requested,
            "providers": {key: status.to_dict() for key, status in self.providers.items()},
            "preload": {"ran": self.preload_ran, "messages": list(self.preload_messages)},
            "libraries": [library.to_dict() for library in self.libraries],
            "gpus": [gpu.to_dict() for gpu in self.gpus],
            "problems": [problem.to_dict() for problem in self.problems],
            "ok": self.ok,
        }


# --------------------------------------------------------------------------------------------
# Probes


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _ort_distributions() -> list[str]:
    """Every installed distribution that provides the ``onnxruntime`` module."""
    return sorted(set(importlib.metadata.packages_distributions().get("onnxruntime", [])))


def _gpus() -> list[GpuInfo]:
    """GPUs from nvidia-smi when it is on PATH; none otherwise."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    query = "--query-gpu=name,memory.total,memory.used,driver_version"
    try:
        done = subprocess.run(
            [smi, query, "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        )
    except (OSError, subprocess.SubprocessError) as err:
        logger.debug("nvidia-smi failed: %s", err)
        return []
    gpus = []
    for line in done.stdout.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 4:
            continue
        gpus.append(GpuInfo(fields[0], _int_or_none(fields[1]), _int_or_none(fields[2]), fields[3]))
    return gpus


def _int_or_none(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# The report


def diagnose(*, provider: str | None = None) -> DoctorReport:
    """Diagnose the environment; ``provider`` (cpu, cuda, tensorrt) is what the user needs, so
    :attr:`DoctorReport.ok` says whether that one works."""
    requested = short_name(provider) if provider is not None else None
    versions: dict[str, str | None] = {
        "python": sys.version.split()[0],
        "graphfix": __version__,
        "onnx": _version("onnx"),
        "onnxsim": _version("onnxsim"),
        "numpy": _version("numpy"),
    }
    problems: list[Problem] = []
    distributions = _ort_distributions()
    try:
        import onnxruntime as ort
    except ImportError as err:
        versions["onnxruntime"] = None
        problems.append(Problem(
            "any",
            f"onnxruntime cannot be imported ({err})",
            "pip install onnxruntime-gpu (or onnxruntime where no GPU wheel exists)",
        ))
        return DoctorReport(
            versions, None, distributions, None, None, {}, False, [], [], _gpus(), problems,
            requested,
        )
    versions["onnxruntime"] = ort.__version__
    distribution, sharing, shadowed = imported_distribution(
        _module_locations(distributions), getattr(ort, "__file__", None) or "", distributions)
    notes = [f"{name} is installed too, in another folder, and is not the one imported "
             f"(whichever comes first on sys.path wins)" for name in shadowed]
    if len(sharing) > 1:
        problems.append(Problem(
            "any",
            f"several distributions installed the onnxruntime module in the same folder "
            f"({', '.join(sharing)}); whichever was installed last overwrote the others' files",
            f"pip uninstall {' '.join(sharing)}, then install one of them",
        ))
    cuda_version = _build_cuda_version()
    try:
        ir = max_ir_version()
    except Exception as err:  # noqa: BLE001 - ORT cannot even run the CPU probe
        ir = None
        problems.append(Problem("any", f"ONNX Runtime cannot load a one-node model ({err})",
                                "reinstall onnxruntime-gpu"))

    statuses = {key: probe_provider(key) for key in PROVIDERS}
    preload_ran, preload_messages = preload_cuda_libraries() if statuses["cuda"].available else (
        False, ())
    libraries: list[Library] = []
    if statuses["cuda"].available:
        libraries = [open_library(name) for name, _role in cuda_library_names()]
    if statuses["tensorrt"].available:
        libraries += [open_library(name) for name, _role in TENSORRT_LIBRARIES]
    problems += _provider_problems(statuses, libraries, distribution, cuda_version)
    report = DoctorReport(
        versions=versions,
        onnxruntime_distribution=distribution,
        onnxruntime_distributions=distributions,
        onnxruntime_cuda_version=cuda_version,
        max_ir_version=ir,
        providers=statuses,
        preload_ran=preload_ran,
        preload_messages=list(preload_messages),
        libraries=libraries,
        gpus=_gpus(),
        problems=problems,
        requested=requested,
        notes=notes,
    )
    logger.debug("doctor: %s", report.to_dict())
    return report


def _module_locations(distributions: list[str]) -> dict[str, Path]:
    """Where each distribution put ``onnxruntime/__init__.py`` (from its file list)."""
    found: dict[str, Path] = {}
    for name in distributions:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in dist.files or []:
            if file.as_posix() == "onnxruntime/__init__.py":
                found[name] = Path(str(dist.locate_file(file))).resolve()
    return found


def imported_distribution(locations: dict[str, Path], module_file: str | os.PathLike[str],
                          distributions: list[str]) -> tuple[str | None, list[str], list[str]]:
    """Which distribution the imported ``onnxruntime`` (``module_file``) comes from, which
    distributions installed it in that same folder (more than one: one overwrote the other's
    files), and which installed it elsewhere (shadowed). Where no file list says (``locations``
    lacks them), every distribution counts as sharing the folder, a GPU build first."""
    here = Path(module_file).resolve() if module_file else None
    sharing = sorted(n for n, p in locations.items() if p == here)
    shadowed = sorted(n for n, p in locations.items() if p != here)
    unknown = [n for n in distributions if n not in locations]
    if not sharing:
        sharing = sorted(unknown)
    elif unknown:
        sharing = sorted(set(sharing) | set(unknown))
    gpu = [name for name in sharing if "gpu" in name.lower()]
    return (gpu or sharing or [None])[0], sharing, shadowed


def _build_cuda_version() -> str | None:
    try:
        from onnxruntime.capi import build_and_package_info
    except ImportError:
        return None
    version = getattr(build_and_package_info, "cuda_version", None)
    return str(version) if version else None


def _provider_problems(
    statuses: dict[str, ProviderStatus],
    libraries: list[Library],
    distribution: str | None,
    cuda_version: str | None,
) -> list[Problem]:
    problems: list[Problem] = []
    cpu = statuses["cpu"]
    if not cpu.loadable:
        problems.append(Problem("cpu", f"the CPU provider does not load ({cpu.error})",
                                "reinstall onnxruntime-gpu"))
    cuda = statuses["cuda"]
    missing = {library.name for library in libraries if not library.found}
    if not cuda.available:
        problems.append(Problem(
            "cuda",
            f"{distribution or 'the installed onnxruntime'} is built without the CUDA provider",
            "pip uninstall onnxruntime && pip install onnxruntime-gpu "
            "(on Linux or Windows x86-64)",
        ))
    elif not cuda.loadable:
        detail = ", ".join(cuda.missing_libraries)
        detail = f" (missing: {detail})" if detail else ""
        if "libcuda.so.1" in missing:
            problems.append(Problem(
                "cuda", "no NVIDIA driver: libcuda.so.1 cannot be opened",
                "install the NVIDIA driver (a machine with an NVIDIA GPU is needed)",
            ))
        needs = "CUDA and cuDNN"
        if cuda_version:
            needs = f"CUDA {cuda_version.split('.')[0]} and cuDNN 9"
        if list(cuda.missing_libraries) != ["libcuda.so.1"]:  # not the driver alone
            problems.append(Problem(
                "cuda",
                f"the CUDA provider does not load{detail}: {cuda.error}",
                f"{CUDA_FIX}; or install {needs} system-wide and put their libraries on "
                "LD_LIBRARY_PATH",
            ))
    trt = statuses["tensorrt"]
    if trt.available and not trt.loadable:
        detail = f" (missing: {', '.join(trt.missing_libraries)})" if trt.missing_libraries else ""
        problems.append(Problem(
            "tensorrt",
            f"the TensorRT provider does not load{detail}",
            "install TensorRT 10 for the CUDA version of onnxruntime-gpu and put libnvinfer on "
            "LD_LIBRARY_PATH; the CUDA provider must load too",
        ))
    elif not trt.available:
        problems.append(Problem("tensorrt", "the installed onnxruntime has no TensorRT provider",
                                "pip install onnxruntime-gpu"))
    return problems


# --------------------------------------------------------------------------------------------
# For a terminal


def format_doctor(found: dict[str, Any]) -> str:
    """The environment check (``DoctorReport.to_dict()``) for a terminal."""
    lines = ["versions: " + ", ".join(
        f"{k} {v or 'missing'}" for k, v in found["versions"].items())]
    lines.append(f"onnxruntime from: {found.get('onnxruntime_distribution') or '?'}"
                 + (f" (built for CUDA {found['onnxruntime_cuda_version']})"
                    if found.get("onnxruntime_cuda_version") else ""))
    lines.append(f"highest IR version ORT loads: {found.get('max_ir_version')}")
    for key, status in found["providers"].items():
        state = "loads" if status["loadable"] else (
            "listed but does not load" if status["available"] else "not available")
        lines.append(f"provider {key}: {state}"
                     + (f" ({status['error']})" if status.get("error") and not status["loadable"]
                        else ""))
    for library in found.get("libraries", []):
        lines.append(f"library {library['name']} ({library['role']}): "
                     + (library.get("path") or "found" if library["found"] else "missing"))
    for gpu in found.get("gpus", []):
        lines.append(f"GPU {gpu['name']}, {gpu.get('memory_total_mib')} MiB, "
                     f"driver {gpu.get('driver_version')}")
    for note in found.get("notes", []):
        lines.append(f"note: {note}")
    for problem in found.get("problems", []):
        lines.append(f"problem ({problem['provider']}): {problem['what']}\n  fix: {problem['fix']}")
    lines.append("ok" if found.get("ok") else f"not usable: {found.get('requested') or 'cpu'}")
    return "\n".join(lines)
