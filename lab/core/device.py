"""What GPU is here (or that none is), read once from the driver through CuPy.

Everything that sizes itself to the GPU (the L2 flush, occupancy, grid sizes) asks this module
instead of hard-coding H200 numbers.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass

from lab.core.errors import LabError

# The reference GPU's arch (the H200 whose records are committed under results/h200/): what compile
# reports, compile-only checks and replays target when there is no GPU here to ask. The one place it
# is written; everything else imports it.
REFERENCE_ARCH = 90


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


# ----------------------------------------------------------------------------------------------
# FP32 peak: SMs x FP32 lanes per SM x 2 FLOP (an FMA) x SM clock
# ----------------------------------------------------------------------------------------------

# FP32 lanes per SM, i.e. "results per clock cycle per multiprocessor" of 32-bit floating-point
# add, multiply and multiply-add in the CUDA C++ Programming Guide's table of arithmetic instruction
# throughput (compute capabilities 6.0 to 9.0); sm_100 and sm_120 from the Blackwell product pages
# (128 CUDA cores per SM, e.g. the RTX 5090's 21760 cores on 170 SMs).
FP32_LANES_PER_SM = {60: 64, 61: 128, 62: 128, 70: 64, 72: 64, 75: 64, 80: 64, 86: 128, 87: 128, 89: 128,
                     90: 128, 100: 128, 120: 128}

# The SM clock used when the driver's attribute is absent or nonsense (CUDA 13 reads back 19 kHz on
# the H200). sm_90: the boost clock of the H100 SXM and H200 SXM, 1980 MHz, which is how NVIDIA's
# H100/H200 datasheets arrive at 67 TFLOP/s FP32 for the SXM parts (132 SMs x 128 lanes x 2 FLOP x
# 1.98 GHz = 66.9 TFLOP/s). An H100 PCIe (114 SMs, 1755 MHz boost) is over-estimated by the clock
# part of this: there the figure is an upper bound, and the notebooks say where the clock came from.
DATASHEET_BOOST_CLOCK_MHZ = {90: 1980}
SANE_CLOCK_MHZ = (200, 4000)  # a driver-reported SM clock outside this range is ignored


@dataclass(frozen=True)
class Fp32Peak:
    """The FP32 (non-tensor-core) FMA peak of a GPU, and where each factor came from."""

    arch: int
    sm_count: int
    lanes_per_sm: int | None  # None: an arch the table does not know
    clock_mhz: float | None  # None: no sane clock from the driver and none in the table
    clock_source: str

    @property
    def tflops(self) -> float | None:
        if not (self.lanes_per_sm and self.clock_mhz and self.sm_count):
            return None
        return self.sm_count * self.lanes_per_sm * 2 * self.clock_mhz * 1e6 / 1e12

    def __str__(self) -> str:
        if self.tflops is None:
            missing = "FP32 lanes per SM" if not self.lanes_per_sm else "SM clock" if not self.clock_mhz else "SM count"
            return f"FP32 peak of sm_{self.arch} unknown: no {missing} ({self.clock_source})"
        return (f"FP32 peak {self.tflops:.1f} TFLOP/s = {self.sm_count} SMs x {self.lanes_per_sm} FP32 lanes x "
                f"2 FLOP (FMA) x {self.clock_mhz:.0f} MHz (clock: {self.clock_source})")


def arch_number(arch: int | str) -> int:
    """90 from 90, "90", "sm_90" or "sm_90a"."""
    if isinstance(arch, int):
        return arch
    m = re.fullmatch(r"(?:sm_)?(\d+)a?", str(arch).strip().lower())
    if not m:
        raise ValueError(f"not an arch: {arch!r} (write it like 90 or sm_90)")
    return int(m[1])


def fp32_peak(arch: int | str, sm_count: int, clock_khz: int | None = None) -> Fp32Peak:
    """The FP32 peak from the SM count, the per-arch lanes table and a clock: the driver's (clock_khz,
    when it is sane), else the datasheet boost clock of the arch (DATASHEET_BOOST_CLOCK_MHZ)."""
    arch = arch_number(arch)
    lanes = FP32_LANES_PER_SM.get(arch)
    lo, hi = SANE_CLOCK_MHZ
    if clock_khz and lo <= clock_khz / 1e3 <= hi:
        return Fp32Peak(arch, sm_count, lanes, clock_khz / 1e3, "the driver's SM clock attribute")
    heard = f"the driver's attribute read {clock_khz} kHz" if clock_khz else "no clock from the driver"
    if arch in DATASHEET_BOOST_CLOCK_MHZ:
        return Fp32Peak(arch, sm_count, lanes, float(DATASHEET_BOOST_CLOCK_MHZ[arch]),
                        f"datasheet boost clock for sm_{arch}, H100/H200 SXM; {heard}")
    return Fp32Peak(arch, sm_count, lanes, None, f"{heard}, and no datasheet clock for sm_{arch} in lab.core.device")


def sm_clock_khz() -> int:
    """The driver's SM clock attribute (kHz), as it reads: 0 where it is absent. May be nonsense."""
    current()
    try:
        import cupy

        return int(cupy.cuda.Device().attributes.get("ClockRate", 0))
    except Exception:  # an attribute this CuPy/driver pair cannot read
        return 0


def current_fp32_peak() -> Fp32Peak:
    """This GPU's FP32 peak (needs a GPU)."""
    gpu = current()
    return fp32_peak(gpu.arch, gpu.sm_count, sm_clock_khz())
