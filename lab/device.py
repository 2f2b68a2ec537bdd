"""What GPU is here (or that none is), read once from the driver through CuPy.

Everything that sizes itself to the GPU (the L2 flush, occupancy, grid sizes) asks this module
instead of hard-coding H200 numbers.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from lab.errors import LabError


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    arch: int  # compute capability as an integer: 90 for sm_90
    sm_count: int
    l2_bytes: int
    smem_per_block_optin: int
    smem_per_sm: int
    total_memory: int
    memory_clock_khz: int  # (the SM clock attribute is left out: CUDA 13 reads back nonsense, 19 on the H200)
    memory_bus_bits: int
    driver_cuda: str  # CUDA version the driver supports, e.g. "13.0"
    runtime_cuda: str  # CUDA version CuPy was built for

    @property
    def sm(self) -> str:
        return f"sm_{self.arch}"

    @property
    def datasheet_bandwidth_gbs(self) -> float:
        """Peak DRAM bandwidth from the memory clock and bus width (DDR: two transfers per clock)."""
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8 / 1e9

    def as_dict(self) -> dict:
        return asdict(self)


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


@functools.lru_cache(maxsize=1)
def _probe() -> DeviceInfo | str:
    """DeviceInfo, or the reason there is no usable GPU (a string)."""
    try:
        import cupy
        from cupy.cuda import runtime
    except Exception as exc:  # ImportError, or a broken wheel
        return f"CuPy is not importable ({exc}); run `bash run.sh test` or `pip install cupy-cuda13x`"
    try:
        count = runtime.getDeviceCount()
    except Exception as exc:
        return f"no usable CUDA driver/GPU ({str(exc).split(':')[0]})"
    if count == 0:
        return "the CUDA driver sees no GPU"
    dev = cupy.cuda.Device()
    props = runtime.getDeviceProperties(dev.id)
    attrs = dev.attributes
    return DeviceInfo(
        name=props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        arch=int(props["major"]) * 10 + int(props["minor"]),
        sm_count=int(props["multiProcessorCount"]),
        l2_bytes=int(props["l2CacheSize"]),
        smem_per_block_optin=int(attrs.get("MaxSharedMemoryPerBlockOptin", props["sharedMemPerBlock"])),
        smem_per_sm=int(props["sharedMemPerMultiprocessor"]),
        total_memory=int(props["totalGlobalMem"]),
        memory_clock_khz=int(attrs.get("MemoryClockRate", 0)),
        memory_bus_bits=int(attrs.get("GlobalMemoryBusWidth", 0)),
        driver_cuda=_version(runtime.driverGetVersion()),
        runtime_cuda=_version(runtime.runtimeGetVersion()),
    )


def gpu_available() -> bool:
    return isinstance(_probe(), DeviceInfo)


def why_no_gpu() -> str:
    probe = _probe()
    return "" if isinstance(probe, DeviceInfo) else probe


def current() -> DeviceInfo:
    """The current GPU; raises LabError with what to do when there is none."""
    probe = _probe()
    if isinstance(probe, str):
        raise LabError(
            f"This needs a CUDA GPU, but {probe}. Run it on a machine with an NVIDIA GPU, "
            "or use `lab inspect` / `lab tour` (compile-only and replayed results) here."
        )
    return probe
