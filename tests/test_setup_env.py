"""CPU: run.sh's wheel choice (lab/core/setup_env.py) for each driver CUDA version."""

import subprocess
import sys

import pytest

from lab.core import setup_env


def test_no_driver_gets_cuda_13_for_compile_only():
    assert setup_env.requirements(None) == ["cupy-cuda13x", "nvidia-cuda-nvrtc>=13.0"]


def test_cuda_13_driver_caps_nvrtc_at_its_minor():
    assert setup_env.requirements((13, 0)) == ["cupy-cuda13x", "nvidia-cuda-nvrtc>=13.0,<=13.0.99",
                                               "cuda-bindings>=13.0,<14", "nvmath-python>=0.6"]
    assert setup_env.requirements((13, 2)) == ["cupy-cuda13x", "nvidia-cuda-nvrtc>=13.0,<=13.2.99",
                                               "cuda-bindings>=13.0,<14", "nvmath-python>=0.6"]


def test_cuda_12_driver_gets_the_cu12_wheels():
    assert setup_env.requirements((12, 4)) == ["cupy-cuda12x", "nvidia-cuda-nvrtc-cu12>=12.0,<=12.4.99",
                                               "cuda-bindings>=12.6,<13", "nvmath-python>=0.6"]


@pytest.mark.parametrize("version", [(11, 8), (10, 2)])
def test_older_driver_is_refused_with_a_sentence(version):
    with pytest.raises(SystemExit) as info:
        setup_env.requirements(version)
    message = str(info.value.code)
    assert f"CUDA {version[0]}.{version[1]}" in message and "CUDA 12 or newer" in message


def test_never_the_source_only_cupy_package():
    for version in (None, (12, 0), (12, 9), (13, 0), (13, 1)):
        assert all(not req.startswith("cupy ") and req != "cupy" for req in setup_env.requirements(version))


def test_driver_version_is_read_from_nvidia_smi(monkeypatch):
    banner = "| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06      CUDA Version: 13.0     |"

    class Done:
        stdout = banner

    monkeypatch.setattr(setup_env.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(setup_env.subprocess, "run", lambda *a, **k: Done())
    assert setup_env.driver_cuda_version() == (13, 0)


def test_no_nvidia_smi_means_no_driver(monkeypatch):
    monkeypatch.setattr(setup_env.shutil, "which", lambda name: None)
    assert setup_env.driver_cuda_version() is None


def test_runs_as_a_plain_script_with_the_standard_library():
    """run.sh calls it before the lab is installed: `python lab/core/setup_env.py` must print requirements."""
    proc = subprocess.run(
        [sys.executable, "-S", setup_env.__file__], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] in ("cupy-cuda12x", "cupy-cuda13x")
