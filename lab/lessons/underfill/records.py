"""Notebook 05's record files, their provenance and the lesson's constants: which files it reads, where each
comes from (replayed, measured in this run, or missing, with the command that records it), the banner, the GPU
facts, and the small formatting helpers every part of the lesson shares.

What it reads, all replayed from lab.measure.records.reference_dir() (results/h200 unless LAB_REFERENCE_RESULTS):
- JSON payloads (loaded as lab.lessons.scheduling loads its own): split_k_factors.json (lab.studies.split_k, `lab study
  splitk`), split_k_ncu.json (scripts/split_k_ncu.py: the raw Nsight Compute CSV rows of the split kernels) and
  grouped_table_cost.json (lab.studies.grouped_table_cost, `lab study grouped-table-cost`: the host time to build
  the grouped problem table);
- the RecordSets of `lab bench FAMILY --json`: gemm_split_k, decode, grouped_gemm;
- for the predictions: the copy records (the device copy's time against bytes) and the gemm_tc records (rung 06's
  time per k-step of one tile).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lab.core.errors import LabError
from lab.lessons import scheduling as scheduling_lesson  # its loader reads any {"provenance": ...} payload
from lab.lessons.common import describe_provenance, mode_box, record_lines, run_stamp, shown_path
from lab.measure import records
from lab.measure.records import Record, RecordSet

if TYPE_CHECKING:
    from lab.core.ladder import Family
    from lab.lessons.mode import Mode
    from lab.lessons.scheduling import Gpu

SPLIT_FACTORS, SPLIT_NCU, TABLE_COST = "split_k_factors", "split_k_ncu", "grouped_table_cost"
PAYLOADS = (SPLIT_FACTORS, SPLIT_NCU, TABLE_COST)
SPLIT_FAMILY, DECODE_FAMILY, GROUPED_FAMILY = "gemm_split_k", "decode", "grouped_gemm"
FAMILIES = (SPLIT_FAMILY, DECODE_FAMILY, GROUPED_FAMILY)
PREDICTION_INPUTS = ("copy", "gemm_tc")  # other ladders' records the predictions read
FILES = (SPLIT_FACTORS, SPLIT_FAMILY, SPLIT_NCU, DECODE_FAMILY, GROUPED_FAMILY, TABLE_COST) + PREDICTION_INPUTS
_RECORDED_BY = {
    SPLIT_FACTORS: "lab study splitk --out {dir}",
    SPLIT_NCU: "python3 scripts/split_k_ncu.py {dir}",
    TABLE_COST: "lab study grouped-table-cost --out {dir}",
}

# The lesson's targets (what it sets out to show), not measurements.
TARGETS = {"split_x_cublas": 1.0, "decode_x_copy": 0.85, "decode_x_cublas": 1.15, "decode_side": 8192,
           "decode_max_tokens": 16, "grouped_x_loop": 5.0, "grouped_min_groups": 64, "grouped_small_case": "small",
           "grouped_batched_time": 1.2}

SPLIT_SHAPES = ({"M": 256, "N": 256, "K": 65536}, {"M": 128, "N": 128, "K": 131072})  # lab.studies.split_k.SHAPES
SPLIT_MODES = ("08_split_k", "08_split_k_in_kernel", "08_split_k_atomic")  # lab.studies.split_k.MODES
PLAIN_RUNG, CUBLAS = "06_persistent", "cublas"
BK = 64  # the gemm_tc rungs' k-step
RATE_SHAPE = {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16", "layout": "TN"}  # rung 06's rate is read here
DECODE_RUNG, DECODE_CUBLAS, COPY = "01_mma_gemv", "cublas", "cupy_device_copy"
DECODE_SIDES, DECODE_TOKENS = (4096, 8192), (1, 2, 4, 8, 16, 32, 64, 128)
# Little's law needs a latency; rung 01's header assumes about a microsecond of DRAM latency. An assumption stated
# as one, not a measurement.
ASSUMED_DRAM_LATENCY_US = 1.0
GROUPED_RUNG, LOOP, BATCHED = "01_grouped_persistent", "cupy_loop", "cublas_batched"
GROUPED_CASES = ("moe", "uniform", "small")

# LIVE: a short plan (a few minutes on an H200), the full studies being `lab study splitk` and `lab bench`.
LIVE_SPLIT_SHAPE = SPLIT_SHAPES[0]
LIVE_FACTORS = (1, 4, 16, 33, 66, 132)
LIVE_DETERMINISM_RUNS = 5
LIVE_DECODE = tuple({"M": m, "N": n, "K": n, "dtype": "float16"} for n in DECODE_SIDES for m in (1, 16, 128))
LIVE_GROUPED = tuple({"case": c, "dtype": "float16"} for c in GROUPED_CASES)
LIVE_MIN_TIME_MS = 5.0


# ----------------------------------------------------------------------------------------------
# Families and where their records come from
# ----------------------------------------------------------------------------------------------

def ladder(name: str) -> Family | None:
    """The family `name`: from lab.families' catalogue, else (decode, before it is registered) from its module;
    None when this checkout has neither."""
    from lab.families import get_family

    try:
        return get_family(name)
    except LabError:
        pass
    if name == DECODE_FAMILY:
        try:
            from lab.families.decode import DecodeFamily
        except ImportError:
            return None
        return DecodeFamily()
    return None


def record_path(name: str) -> Path:
    return records.reference_dir() / f"{name}.json"


def recorded_by(name: str) -> str:
    where = shown_path(records.reference_dir())
    if name in _RECORDED_BY:
        return _RECORDED_BY[name].format(dir=where)
    return f"lab bench {name} --json {where}/{name}.json"


def missing(name: str) -> str:
    return (f"NO RECORDS for {name}: {shown_path(record_path(name))} is absent or unreadable, so this cell shows "
            f"nothing from it. On a GPU, `{recorded_by(name)}` records it.")


def load(name: str) -> dict | None:
    """A JSON payload of PAYLOADS, marked replayed; None when absent or unreadable."""
    return scheduling_lesson.load(name)


def replayed_records(name: str) -> RecordSet | None:
    """The reference GPU's RecordSet of family (or prediction input) `name`, None when absent."""
    from lab.lessons.views import reference

    return reference(name)


def replayed() -> dict[str, dict | RecordSet | None]:
    """Every file of FILES: payloads as dicts, family records as RecordSets."""
    return {name: load(name) if name in PAYLOADS else replayed_records(name) for name in FILES}


def provenance_of(item: dict | RecordSet) -> dict:
    return item.provenance if isinstance(item, RecordSet) else item.get("provenance", {})


def source(item: dict | RecordSet | None, name: str) -> str:
    """Where a payload's or RecordSet's numbers come from: replayed (device, date, commit), measured in this
    run, or missing."""
    if item is None:
        return missing(name)
    where = describe_provenance(provenance_of(item))
    again = item.replayed if isinstance(item, RecordSet) else item.get("replayed")
    if again:
        return f"{name}: REPLAYED from {where} ({shown_path(record_path(name))}), not measured here."
    return f"{name}: measured in this run, on {where}."


def banner(current: Mode, files: dict[str, dict | RecordSet | None]) -> str:
    """A loud box: LIVE (a short plan measured in this run, the full records replayed beside it) or REPLAY; then every
    record file with its provenance, or NO RECORDED RESULTS and the command that records it."""
    live = []
    if current.live:
        live = [f"A SHORT plan, checked and {run_stamp()};", "no Nsight Compute in it.",
                "Beside each live table, the FULL records of the reference GPU are REPLAYED, and labelled so:"]
    body = []
    for name in FILES:
        item = files.get(name)
        role = " (read by the predictions)" if name in PREDICTION_INPUTS else ""
        body += record_lines(name + role, None if item is None else provenance_of(item), record_path(name),
                             f"Recorded on a GPU by `{recorded_by(name)}`")
    body.append("Predictions (tiles, waves, bytes, launch plans) ARE computed here, from the shapes and the families.")
    return mode_box(current.live, current.reason, live, body)


def gpu_facts(current: Mode, files: dict[str, dict | RecordSet | None]) -> Gpu:
    """LIVE: this GPU; REPLAY: the GPU the records were made on (lab.lessons.scheduling.gpu_facts on their
    provenance), else the reference H200 as that module assumes it."""
    with_provenance = {name: {"provenance": provenance_of(item)} for name, item in files.items() if item is not None}
    return scheduling_lesson.gpu_facts(current, with_provenance)


def meets(value: float, target: float, at_most: bool = False) -> str:
    ok = value <= target if at_most else value >= target
    return f"target {'<=' if at_most else '>='} {target:g}: {'met' if ok else 'MISSED'}"


def dash_or(value: float | None, spec: str) -> str:
    """`value` formatted by `spec` ('10.1f'), or a dash right-aligned to the same width when there is none."""
    if value is None:
        return "-".rjust(int(spec.split(".")[0]))
    return format(value, spec)


def shape_label(shape: dict) -> str:
    return f"{shape['M']}x{shape['N']}x{shape['K']}"


def problems_of(recs: list[Record]) -> list[dict]:
    """The distinct params of `recs`, in order of first appearance."""
    return list({json.dumps(r.params, sort_keys=True): r.params for r in recs}.values())


def sm_count_of(item: dict | RecordSet | None, gpu: Gpu) -> int:
    """The SM count a payload or RecordSet was measured with (its own field, else its provenance's), else `gpu`'s:
    predictions set beside replayed records use the records' GPU."""
    if item is None:
        return gpu.sm_count
    own = None if isinstance(item, RecordSet) else item.get("sm_count")
    return int(own or provenance_of(item).get("sm_count") or gpu.sm_count)


def show(fn: Callable, item: dict | RecordSet | None, name: str, **kwargs) -> None:
    """lab.lessons.plots.<fn>(item, ...) shown inline, or the sentence saying the records are missing."""
    from lab.lessons.views import figure

    if item is None:
        print(missing(name))
        return
    figure(fn(item, **kwargs), f"{name} holds no rows for {fn.__name__}")


def header_prediction(name: str, key: str) -> str:
    """The rung header's 'Prediction:' text (lab.lessons.predictions.prediction), or why there is none."""
    fam = ladder(name)
    if fam is None:
        return f"{name}: not in this checkout, so its header cannot be read."
    from lab.lessons.predictions import prediction

    return f"{fam.rung(key).spec.source}: {prediction(fam, key)}"




def header_field(name: str, key: str, field: str = "What changed") -> str:
    """One field of a rung's header ('What changed (vs rung 06): ...' up to the next field), as it is written."""
    from lab.lessons.sources import rung_header

    fam = ladder(name)
    if fam is None:
        return f"{name}: not in this checkout, so its header cannot be read."
    text, keep = [], False
    for line in rung_header(fam, key).splitlines():
        starts_field = bool(line) and not line.startswith(" ") and ":" in line.split(".")[0]
        if line.startswith(field):
            keep = True
        elif keep and starts_field:
            break
        if keep:
            text.append(line)
    return "\n".join(text) or f"({fam.rung(key).spec.source} has no '{field}' field)"


def code_diff(before: tuple[str, str], after: tuple[str, str], context: int = 1):
    """The unified diff of two rungs' code (each a (family, key)), their header comments left out (the headers say
    in words what changed): as Markdown, a diff block."""
    import difflib

    from lab.core.build import read_source
    from lab.lessons.common import md

    def code(family: str, key: str) -> tuple[str, list[str]]:
        spec = ladder(family).rung(key).spec
        lines = read_source(spec).splitlines(keepends=True)
        start = next((i for i, line in enumerate(lines) if not line.startswith("//")), len(lines))
        return spec.source, lines[start:]

    (a_name, a), (b_name, b) = code(*before), code(*after)
    diff = "".join(difflib.unified_diff(a, b, fromfile=a_name, tofile=b_name, n=context))
    return md(f"```diff\n{diff}```")
