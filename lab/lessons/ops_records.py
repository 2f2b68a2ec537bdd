"""Notebook 08's records (lab.lessons.ops): where each lives, loading them replayed, their provenance, the banner, the
GPU the dispatch table is evaluated for, the runtime's targets, and the small formatters the other ops_* modules share.

What it reads, from lab.measure.records.reference_dir() (results/h200 unless LAB_REFERENCE_RESULTS), each exactly as
lab.studies.ops_study writes it (`python -m lab.studies.ops_study DIR tune trace overhead latency` on a GPU):
    ops_trace.json      the trace: GPU time per step and method, lab.ops's decisions and counters, the checks, the hot
                        shape's choice forced everywhere, the decode boundary swept in M
    ops_tune.json       every bucket the trace touches, autotuned: each candidate's time or why it was rejected
    ops_latency.json    first-request latency of fresh processes: empty caches, warm caches, a warm-up manifest
    ops_overhead.json   host microseconds per call: lab.ops against its own launches replayed raw, and cupy.matmul
and the compile study's record, results/cpu/compile_variants.json (lab.studies.compile_study: NVRTC on the development
machine's CPU, no GPU).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.core.errors import LabError
from lab.lessons.common import describe_provenance, mode_box, record_lines, replayed_record, run_stamp, shown_path
from lab.measure import records

if TYPE_CHECKING:
    from lab.lessons.mode import Mode

TRACE, TUNE, LATENCY, OVERHEAD = "ops_trace", "ops_tune", "ops_latency", "ops_overhead"
GEMMS_ONLY = "ops_trace_gemms"
PAYLOADS = (TRACE, TUNE, LATENCY, OVERHEAD, GEMMS_ONLY)
COMPILE = "compile_variants"
FILES = (*PAYLOADS, COMPILE)
_STUDY = {TRACE: "trace", TUNE: "tune", LATENCY: "latency", OVERHEAD: "overhead", GEMMS_ONLY: "trace-gemms"}
_STUDY_NOTE = {TRACE: " (after `tune`: the trace times lab.ops with the tune cache that study fills)"}
CPU_LABEL = "measured on the development machine's CPU (NVRTC), no GPU"

# The runtime's targets: what the runtime sets out to reach, not measurements.
TARGETS = {"x_generic": 1.3, "x_cublas": 1.1, "warm_first_ms": 50.0, "warm_compiles": 0, "overhead_us": 3.0}
# The methods the trace times (lab.studies.serving_trace's), in the order the tables show them.
METHODS = ("lab_ops", "lab_ops_table", "cublas", "generic", "persistent", "hot_forced")


# ----------------------------------------------------------------------------------------------
# Records: where they are, loading, provenance, the banner
# ----------------------------------------------------------------------------------------------

def compile_record_path() -> Path:
    """The compile study's record: a CPU measurement, so it lives in results/cpu, not with the GPU's records."""
    return records.RESULTS_DIR / "cpu" / f"{COMPILE}.json"


def record_path(name: str) -> Path:
    if name == COMPILE:
        return compile_record_path()
    return records.reference_dir() / f"{name}.json"


def recorded_by(name: str) -> str:
    """The command that records file `name`."""
    if name == COMPILE:
        return f"python -m lab.studies.compile_study {shown_path(compile_record_path())}"
    return f"python -m lab.studies.ops_study {shown_path(records.reference_dir())} {_STUDY[name]}"


def missing(name: str) -> str:
    """Two lines: that the record is absent (so the cell shows nothing from it), and the command that records it."""
    where = "on any machine (NVRTC, no GPU needed)" if name == COMPILE else "on a GPU"
    return (f"NO RECORDS for {name}: {shown_path(record_path(name))} is absent or unreadable, so this cell shows "
            f"nothing from it.\nmissing: run `{recorded_by(name)}` {where} to record it{_STUDY_NOTE.get(name, '')}.")


def load(name: str) -> dict | None:
    """Record `name` of FILES, marked replayed; None when absent or unreadable."""
    if name == COMPILE:
        from lab.studies import compile_study

        try:
            return compile_study.load(record_path(name))
        except LabError:
            return None
    return replayed_record(record_path(name))


def replayed() -> dict[str, dict | None]:
    """Every record of FILES (None for those absent)."""
    return {name: load(name) for name in FILES}


def label(record: dict | None) -> str:
    """A figure's second title line: 'REPLAYED on NVIDIA H200 (sm_90), 2026-11-30' (without a record: what is
    drawn is computed here from the lab's code)."""
    if record is None:
        return "computed here from the lab's code (no record, no GPU)"
    p = record.get("provenance", {})
    tag = "REPLAYED" if record.get("replayed") else "measured"
    return f"{tag} on {p.get('device', '?')} ({p.get('arch', '?')}), {str(p.get('date', '?'))[:10]}"


def source(record: dict | None, name: str) -> str:
    """Where a record's numbers come from (device, date, commit), or that it is missing."""
    if record is None:
        return missing(name)
    where = describe_provenance(record.get("provenance", {}))
    cpu = f"; {CPU_LABEL}" if name == COMPILE else ""
    return f"{name}: REPLAYED from {where} ({shown_path(record_path(name))}){cpu}."


def banner(current: Mode, files: dict[str, dict | None]) -> str:
    """A loud box: LIVE (section 1 runs lab.ops in this run; the studies are read from their records) or REPLAY;
    then each record file with its provenance, or NO RECORDED RESULTS and the command that records it."""
    live = []
    if current.live:
        live = [f"Section 1 ran lab.ops: {run_stamp()}.",
                "The studies take minutes of GPU time each: every other section REPLAYS their records:"]
    body = []
    for name in FILES:
        item = files.get(name)
        role = " (host CPU, no GPU)" if name == COMPILE else ""
        body += record_lines(name + role, None if item is None else item["provenance"], record_path(name),
                             f"Recorded by `{recorded_by(name)}`")
    body.append("Computed here, no GPU: the trace's shapes (lab.studies.serving_trace) and the dispatch table's "
                "choices.")
    return mode_box(current.live, current.reason, live, body)


@dataclass(frozen=True)
class Gpu:
    arch: int
    sm_count: int
    where: str


def gpu_of(files: dict[str, dict | None]) -> Gpu:
    """The GPU the dispatch table is evaluated for: the ops records' (their provenance), else the reference H200 as
    lab.core.device and lab.ops.shapes assume it."""
    from lab.core import device
    from lab.ops.shapes import GemmShape

    for name in PAYLOADS:
        p = (files.get(name) or {}).get("provenance", {})
        arch = re.fullmatch(r"sm_(\d+)", str(p.get("arch", "")))
        if arch and p.get("sm_count"):
            return Gpu(int(arch.group(1)), int(p["sm_count"]), f"the provenance of {name}.json")
    sms = GemmShape.__dataclass_fields__["sms"].default
    return Gpu(device.REFERENCE_ARCH, sms, "the reference GPU's (no ops record to read a GPU from)")


# ----------------------------------------------------------------------------------------------
# Small formatting helpers
# ----------------------------------------------------------------------------------------------

def md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def us_text(value: float | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.1f}" if value < 1e4 else f"{value:,.0f}"


def as_x(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}x"


def share_of(part: float, whole: float) -> float:
    return part / whole if whole else float("nan")


def meets(value: float | None, target: float, at_most: bool = False, unit: str = "") -> str:
    if value is None or not math.isfinite(value):
        return "not in the record"
    ok = value <= target if at_most else value >= target
    return f"target {'<=' if at_most else '>='} {target:g}{unit}: {'met' if ok else 'MISSED'}"


def config_text(config: dict | None) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted((config or {}).items()))


def candidate_label(path: str, config: dict | None) -> str:
    """'persistent BN=256 GROUP_M=8', 'decode': a path and its configuration."""
    cfg = config_text(config)
    return f"{path} {cfg}" if cfg else path


def bucket_label(m_bucket: int) -> str:
    return f"M<={m_bucket}"


def targets_text() -> str:
    """The runtime's targets, as the cells below hold the records against them."""
    t = TARGETS
    return "\n".join([
        "the runtime's targets (what it sets out to reach, not measurements):",
        f"  trace: lab.ops's total GPU time at least {t['x_generic']:g}x less than one generic kernel's, and at least "
        f"{t['x_cublas']:g}x less than cuBLAS alone's",
        f"  first request: a second process with a warm cache compiles {t['warm_compiles']} kernels and has its first "
        f"result within {t['warm_first_ms']:g} ms",
        f"  dispatch: at most {t['overhead_us']:g} us of host time per call over replaying the same launches raw"])



# ----------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------

def show(fn: Callable, data, name: str, **kwargs) -> None:
    """lab.lessons.plots.<fn>(data, ...) shown inline, or the sentence saying record `name` is missing."""
    from lab.lessons.views import figure

    if data is None:
        print(missing(name))
        return
    figure(fn(data, **kwargs), f"{name} holds no rows for {fn.__name__}")
