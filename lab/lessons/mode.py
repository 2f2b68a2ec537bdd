"""LIVE or REPLAY: whether the notebook measures now or replays the reference GPU's records, and the
banner that says so loudly.

LIVE when a GPU is here (the notebook checks and measures now), REPLAY when none is (the notebook
replays the reference GPU's records from results/h200/). LAB_NOTEBOOK_MODE=replay forces replay on a
GPU machine (the CPU tests use it); =live insists on a GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lab import device
from lab.errors import LabError
from lab.lessons.common import describe_provenance
from lab.lessons.views import reference, reference_path
from lab.records import RecordSet, format_bytes

MODE_VARIABLE = "LAB_NOTEBOOK_MODE"


@dataclass(frozen=True)
class Mode:
    live: bool
    reason: str  # why this mode: the GPU found, or why there is none / why replay was forced

    @property
    def name(self) -> str:
        return "LIVE" if self.live else "REPLAY"


def mode() -> Mode:
    """LIVE when a GPU is usable here, else REPLAY; LAB_NOTEBOOK_MODE=replay|live overrides the choice."""
    wanted = os.environ.get(MODE_VARIABLE, "").strip().lower()
    if wanted not in ("", "auto", "live", "replay"):
        raise LabError(f"{MODE_VARIABLE} must be live, replay or auto, not {wanted!r}.")
    if wanted == "replay":
        return Mode(False, f"{MODE_VARIABLE}=replay was set, so no GPU is used")
    if device.gpu_available():
        gpu = device.current()
        return Mode(True, f"{gpu.name} ({gpu.sm}) found")
    if wanted == "live":
        raise LabError(f"{MODE_VARIABLE}=live asks for a GPU, but {device.why_no_gpu()}. Unset it to replay.")
    return Mode(False, f"no GPU here ({device.why_no_gpu()})")


def compile_arch(current: Mode | None = None) -> int:
    """The arch compile reports are made for: this GPU's (as the build would load it), else the
    reference GPU's (lab.device.REFERENCE_ARCH)."""
    current = current or mode()
    if not current.live:
        return device.REFERENCE_ARCH
    from lab import nvrtc

    arch = device.current().arch
    supported = nvrtc.supported_archs()
    return arch if arch in supported else max(a for a in supported if a <= arch)


def _box(lines: list[str], char: str = "#") -> str:
    width = max(len(line) for line in lines) + 4
    edge = char * width
    return "\n".join([edge] + [f"{char} {line.ljust(width - 4)} {char}" for line in lines] + [edge])


def mode_banner(*family_names: str, current: Mode | None = None) -> str:
    """A loud box saying whether the numbers below are measured now or replayed, and from where."""
    current = current or mode()
    if current.live:
        gpu = device.current()
        return _box([
            f"LIVE MODE: measuring on this machine's {gpu.name} ({gpu.sm}, {gpu.sm_count} SMs,",
            f"{format_bytes(gpu.l2_bytes)} L2, CUDA {gpu.driver_cuda} driver) right now.",
            "Every figure below is measured in this run, with a reduced plan (fewer sizes",
            "and shorter timings than `lab bench`; the notebook prints it).",
        ], "=")
    lines = ["REPLAY MODE: NOTHING BELOW IS MEASURED ON THIS MACHINE.", f"Why: {current.reason}."]
    for name in family_names or ("copy",):
        rs = reference(name)
        if rs is None:
            lines.append(f"{name}: NO RECORDED RESULTS at {reference_path(name)};")
            lines.append("  its measurement cells say so and show nothing. Record them on a GPU with")
            lines.append(f"  `lab bench {name} --json {reference_path(name)}`.")
        else:
            lines.append(f"{name}: REPLAYED from {describe_provenance(rs.provenance)}.")
    lines.append("Compile reports ARE computed here: NVRTC compiles without a GPU.")
    return _box(lines, "#")


def describe_gpu(current: Mode, rs: RecordSet | None = None) -> str:
    """LIVE: what lab.device reads from the driver. REPLAY: the GPU the records were made on."""
    if current.live:
        gpu = device.current()
        rows = gpu.as_dict() | {"datasheet_bandwidth_gbs": round(gpu.datasheet_bandwidth_gbs, 1)}
        return "This machine's GPU (lab.device.current()):\n" + "\n".join(
            f"  {k:22s} {v}" for k, v in rows.items())
    lines = [f"REPLAY: {current.reason}."]
    if rs is None:
        return "\n".join(lines + ["No records to replay either, so no GPU to describe."])
    keys = ("device", "arch", "sm_count", "l2_bytes", "driver_cuda", "runtime_cuda", "cupy", "date", "host")
    return "\n".join(lines + ["The replayed records were made on (their provenance):"]
                     + [f"  {k:22s} {rs.provenance.get(k, '?')}" for k in keys])
