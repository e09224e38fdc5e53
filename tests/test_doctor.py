"""Tests for graphfix.doctor: the report's structure and what it says about this machine."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime
import pytest

import graphfix
from graphfix import doctor
from graphfix.model_io import max_ir_version


@pytest.fixture(scope="module")
def report() -> doctor.DoctorReport:
    return doctor.diagnose()


def test_versions_are_present(report: doctor.DoctorReport) -> None:
    versions = report.versions
    assert versions["graphfix"] == graphfix.__version__
    assert versions["onnxruntime"] == onnxruntime.__version__
    for name in ("python", "onnx", "numpy"):
        assert versions[name]
    assert "onnxsim" in versions
    assert report.onnxruntime_distribution in report.onnxruntime_distributions
    assert report.onnxruntime_distribution.startswith("onnxruntime")


def test_max_ir_version_is_the_runtime_probe(report: doctor.DoctorReport) -> None:
    assert report.max_ir_version == max_ir_version()


def test_cpu_is_loadable(report: doctor.DoctorReport) -> None:
    cpu = report.providers["cpu"]
    assert cpu.name == "CPUExecutionProvider"
    assert cpu.available and cpu.loadable and cpu.error is None
    assert report.ok_for("cpu") and report.ok_for("CPUExecutionProvider")
    assert report.ok  # nothing asked for: the CPU
    assert not report.problems_for("cpu")


def test_every_provider_is_probed(report: doctor.DoctorReport) -> None:
    assert set(report.providers) == {"cpu", "cuda", "tensorrt"}
    for key, status in report.providers.items():
        assert status.name == doctor.PROVIDERS[key]
        assert status.available == (status.name in onnxruntime.get_available_providers())
        assert not status.loadable or status.available


def test_cuda_unusable_here_is_reported_with_a_fix() -> None:
    cuda = doctor.probe_provider("cuda")
    if cuda.loadable:
        pytest.skip("the CUDA provider loads here")
    report = doctor.diagnose(provider="cuda")
    assert report.requested == "cuda"
    assert not report.ok_for("cuda") and not report.ok
    problems = report.problems_for("cuda")
    assert problems and all(p.fix for p in problems)
    if cuda.available:  # onnxruntime-gpu without its CUDA libraries
        assert cuda.error
        if list(cuda.missing_libraries) == ["libcuda.so.1"]:  # the driver alone: no pip fix
            assert any("NVIDIA driver" in p.fix for p in problems)
            assert not any("graphfix[cuda]" in p.fix for p in problems)
        else:
            assert any("graphfix[cuda]" in p.fix for p in problems)
        assert cuda.missing_libraries
        assert {lib.name for lib in report.libraries if not lib.found} >= set(
            cuda.missing_libraries
        )


def test_libraries_are_listed_when_the_build_has_cuda(report: doctor.DoctorReport) -> None:
    if not report.providers["cuda"].available:
        pytest.skip("this onnxruntime has no CUDA provider")
    names = {library.name for library in report.libraries}
    assert "libcudnn.so.9" in names and any(n.startswith("libcublas") for n in names)
    for library in report.libraries:
        assert library.found == (library.error is None)


def test_unknown_provider_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        doctor.diagnose(provider="tpu")
    with pytest.raises(ValueError, match="unknown provider"):
        doctor.probe_provider("rocm")


def test_to_dict_is_json_safe(report: doctor.DoctorReport) -> None:
    data = json.loads(json.dumps(report.to_dict()))
    assert set(data) == {
        "versions", "onnxruntime_distribution", "onnxruntime_distributions",
        "onnxruntime_cuda_version", "max_ir_version", "requested", "providers", "preload",
        "libraries", "gpus", "problems", "ok", "notes",
    }
    assert data["providers"]["cpu"]["loadable"] is True
    assert data["ok"] is True
    for problem in data["problems"]:
        assert set(problem) == {"provider", "what", "fix"}


def test_probing_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    doctor.probe_provider.cache_clear()
    doctor.probe_provider("cuda")
    doctor.probe_provider("tensorrt")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_two_distributions_in_one_folder_are_a_problem_and_in_two_folders_a_note(tmp_path) -> None:
    # onnxruntime and onnxruntime-gpu both write onnxruntime/: in one site folder the last
    # install overwrote the other's files; in two folders (a --target install ahead of a
    # virtual environment's) the first on sys.path is imported whole, and the other is only
    # shadowed. The imported module's file says which is which.
    site, other = tmp_path / "site", tmp_path / "venv"
    gpu_init, cpu_init = site / "onnxruntime/__init__.py", other / "onnxruntime/__init__.py"
    names = ["onnxruntime", "onnxruntime-gpu"]
    same = {"onnxruntime": gpu_init, "onnxruntime-gpu": gpu_init}
    assert doctor.imported_distribution(same, gpu_init, names) == (
        "onnxruntime-gpu", names, [])
    apart = {"onnxruntime": cpu_init, "onnxruntime-gpu": gpu_init}
    assert doctor.imported_distribution(apart, gpu_init, names) == (
        "onnxruntime-gpu", ["onnxruntime-gpu"], ["onnxruntime"])
    assert doctor.imported_distribution(apart, cpu_init, names) == (
        "onnxruntime", ["onnxruntime"], ["onnxruntime-gpu"])
    # without file lists nothing says where each went: both count as sharing the folder
    assert doctor.imported_distribution({}, gpu_init, names) == ("onnxruntime-gpu", names, [])


def test_the_installed_distribution_is_found_where_its_module_is(
        report: doctor.DoctorReport) -> None:
    assert report.onnxruntime_distribution in report.onnxruntime_distributions
    located = doctor._module_locations(report.onnxruntime_distributions)
    assert Path(onnxruntime.__file__).resolve() in located.values()
