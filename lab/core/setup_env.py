"""Print the pip requirements for CuPy and NVRTC that match this machine's NVIDIA driver.

Run by run.sh before `lab` is installed, so it uses the standard library only. The rule:
the driver's CUDA version (from nvidia-smi) picks cupy-cuda12x or cupy-cuda13x, and NVRTC is
capped at that minor version, because PTX from a newer NVRTC will not load on an older driver.
With no driver, cupy-cuda13x and the newest NVRTC 13 still give compile-only builds for any arch.
With a driver, NVIDIA's cuda-bindings of the same major version come too: the Hopper rungs encode their TMA
tensor maps with it (lab/core/tma.py), which CuPy does not wrap; and nvmath-python, whose cuBLASLt bindings are the
library GEMM lab.ops and the baselines call (lab/tools/library_gemm.py). Never the source-only `cupy` package.
"""

from __future__ import annotations

import re
import shutil
import subprocess


def driver_cuda_version() -> tuple[int, int] | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def requirements(version: tuple[int, int] | None) -> list[str]:
    if version is None:
        return ["cupy-cuda13x", "nvidia-cuda-nvrtc>=13.0"]
    major, minor = version
    if major >= 13:
        return ["cupy-cuda13x", f"nvidia-cuda-nvrtc>=13.0,<=13.{minor}.99", "cuda-bindings>=13.0,<14",
                "nvmath-python>=0.6"]
    if major == 12:
        return ["cupy-cuda12x", f"nvidia-cuda-nvrtc-cu12>=12.0,<=12.{minor}.99", "cuda-bindings>=12.6,<13",
                "nvmath-python>=0.6"]
    raise SystemExit(f"This driver supports CUDA {major}.{minor}; the lab needs CUDA 12 or newer. Update the driver.")


if __name__ == "__main__":
    print(" ".join(requirements(driver_cuda_version())))
