"""`lab doctor`: what is installed, what is missing, and what to do about each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Finding:
    item: str
    ok: bool
    detail: str
    advice: str = ""


def _driver_cuda_from_smi() -> str | None:
    from lab.core.setup_env import driver_cuda_version

    version = driver_cuda_version()
    return f"{version[0]}.{version[1]}" if version else None


def findings() -> list[Finding]:
    from lab.core import build, device, nvrtc
    from lab.studies import profile

    found: list[Finding] = []
    driver = _driver_cuda_from_smi()
    found.append(Finding("NVIDIA driver", driver is not None,
                         f"supports CUDA {driver}" if driver else "nvidia-smi not found",
                         "" if driver else "No NVIDIA driver: kernels can still be compiled (`lab inspect`)."))
    try:
        import cupy

        wheel = next((d for d in ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x") if _installed(d)), "cupy (source?)")
        found.append(Finding("CuPy", True, f"{cupy.__version__} from {wheel}"))
        if driver and wheel.startswith("cupy-cuda"):
            want = f"cupy-cuda{driver.split('.')[0]}x"
            if want != wheel:
                found.append(Finding("CuPy wheel matches driver", False, f"{wheel} with a CUDA {driver} driver",
                                     f"`pip install {want}` (and uninstall {wheel})."))
    except ImportError:
        found.append(Finding("CuPy", False, "not installed", "Run `bash run.sh test`, or `pip install cupy-cuda13x`."))
    try:
        found.append(Finding("NVRTC", True, f"{'.'.join(map(str, nvrtc.version()))}, archs "
                             f"{min(nvrtc.supported_archs())}-{max(nvrtc.supported_archs())}, {nvrtc.library_path()}"))
    except Exception as exc:
        found.append(Finding("NVRTC", False, str(exc).split(";")[0], "`pip install nvidia-cuda-nvrtc`."))
    disasm = build.find_nvdisasm()
    found.append(Finding("nvdisasm", disasm is not None, disasm or "not found",
                         "" if disasm else "`pip install nvidia-cuda-nvdisasm` for the SASS instruction mix."))
    if device.gpu_available():
        gpu = device.current()
        from lab.measure.records import format_bytes

        found.append(Finding("GPU", True, f"{gpu.name}, {gpu.sm}, {gpu.sm_count} SMs, L2 {format_bytes(gpu.l2_bytes)}, "
                             f"{format_bytes(gpu.total_memory)}"))
        if gpu.arch < 75:
            found.append(Finding("GPU arch", False, f"{gpu.sm} is older than the lab's minimum sm_75",
                                 "Use a Turing (sm_75) or newer GPU."))
        if gpu.arch == 90:  # the Hopper rungs (gemm_tc 04 on) build TMA tensor maps with cuda-bindings
            have = _installed("cuda-bindings")
            found.append(Finding("cuda-bindings", have, "installed" if have else "not installed",
                                 "" if have else "`pip install cuda-bindings` (your driver's CUDA major version) "
                                 "for the Hopper rungs' TMA tensor maps."))
    else:
        found.append(Finding("GPU", False, device.why_no_gpu(),
                             "`lab inspect` and `lab tour` still work: compile-only plus replayed results."))
    ncu = profile.find_ncu()
    found.append(Finding("Nsight Compute (ncu)", ncu is not None, ncu or "not found",
                         "" if ncu else "Optional: bank-conflict and DRAM counters need it (CUDA toolkit)."))
    return found


def _installed(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(dist)
        return True
    except PackageNotFoundError:
        return False
