"""LIVE or REPLAY: whether the notebook measures now or replays the reference GPU's records, and the
banner that says so loudly.

LIVE when a GPU is here (the notebook checks and measures now), REPLAY when none is (the notebook
replays the reference GPU's records from results/h200/). LAB_NOTEBOOK_MODE=replay forces replay on a
GPU machine (the CPU tests use it); =live insists on a GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lab.core import device
from lab.core.errors import LabError
from lab.core.ladder import Family, Rung
from lab.lessons.common import box, describe_provenance, family_of, run_stamp
from lab.lessons.views import reference, reference_path
from lab.measure.records import RecordSet

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
    reference GPU's (lab.core.device.REFERENCE_ARCH)."""
    current = current or mode()
    if not current.live:
        return device.REFERENCE_ARCH
    from lab.core import nvrtc

    arch = device.current().arch
    supported = nvrtc.supported_archs()
    return arch if arch in supported else max(a for a in supported if a <= arch)


def runs_on(rung: Rung, arch: int) -> bool:
    """Whether a GPU of compute capability `arch` can run the rung: at least its min_arch, and exactly it
    for arch-specific code (sm_90a's wgmma and setmaxnreg run on sm_90 only, not on later archs)."""
    from lab.core.build import arch_refusal

    return arch_refusal(rung.spec, arch) is None


def live_arch(current: Mode) -> int | None:
    """This GPU's compute capability in LIVE mode; None in REPLAY (nothing runs here)."""
    return device.current().arch if current.live else None


def arch_note(family: str | Family, key: str, current: Mode) -> str:
    """A sentence for a rung this machine cannot run ('' for one it can): LIVE on too old (or too new) a
    GPU, or REPLAY of a rung that needs a specific arch. Says what is shown instead."""
    fam = family_of(family)
    rung = fam.rung(key)
    spec = rung.spec
    needs = f"sm_{spec.min_arch}{spec.arch_suffix}"
    arch = live_arch(current)
    if arch is not None and not runs_on(rung, arch):
        return (f"COMPILE-ONLY HERE: {rung.key} needs {needs} and this GPU is sm_{arch}. Its header, diff and "
                f"compile report (for {needs}) are shown; it is not checked or measured on this machine, and "
                f"its numbers below are missing (the reference H200's records are in results/h200/).")
    if arch is None and spec.arch_suffix:
        return (f"{rung.key} needs {needs} (Hopper): compiled here for {needs} only; any numbers below are "
                f"replayed from the reference GPU's records.")
    return ""


def rung_listing(family: str | Family, current: Mode) -> str:
    """The ladder's rungs, each with the arch it needs and whether this machine runs it (LIVE), can only
    compile it, or replays it (REPLAY)."""
    fam = family_of(family)
    arch = live_arch(current)
    lines = [f"{fam.name}: {fam.title}"]
    for rung in fam.rungs:
        spec = rung.spec
        needs = f"sm_{spec.min_arch}{spec.arch_suffix}" + ("" if spec.arch_suffix else "+")
        where = ("compiled here, numbers from the replayed records" if arch is None else
                 "checked and measured here" if runs_on(rung, arch) else f"COMPILE-ONLY here (this GPU is sm_{arch})")
        lines.append(f"  {rung.key:26s} needs {needs:8s} {where}: {rung.title}")
    return "\n".join(lines)


_box = box  # the name the lessons modules import

def mode_banner(*family_names: str, current: Mode | None = None) -> str:
    """A loud box saying whether the numbers below were measured in this run (where, at which commit, when) or
    replayed, and from where."""
    current = current or mode()
    if current.live:
        return _box([
            run_stamp() + ".",
            "Every figure below was measured in that run, with a reduced plan (fewer sizes",
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
    """LIVE: what lab.core.device reads from the driver. REPLAY: the GPU the records were made on."""
    if current.live:
        gpu = device.current()
        rows = gpu.as_dict() | {"datasheet_bandwidth_gbs": round(gpu.datasheet_bandwidth_gbs, 1)}
        return "This machine's GPU (lab.core.device.current()):\n" + "\n".join(
            f"  {k:22s} {v}" for k, v in rows.items())
    lines = [f"REPLAY: {current.reason}."]
    if rs is None:
        return "\n".join(lines + ["No records to replay either, so no GPU to describe."])
    keys = ("device", "arch", "sm_count", "l2_bytes", "driver_cuda", "runtime_cuda", "cupy", "date", "host")
    return "\n".join(lines + ["The replayed records were made on (their provenance):"]
                     + [f"  {k:22s} {rs.provenance.get(k, '?')}" for k in keys])
