"""What the fusion lessons (notebooks 06 and 07) share: the families they read, where each record file lives and how
it is recorded, the banner, the lessons' targets, and the small readers every other module of lab.lessons.fusion uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from lab.core.build import REPO_ROOT
from lab.core.errors import LabError
from lab.lessons.common import describe_provenance, mode_box, record_lines, run_stamp, shown_path
from lab.measure import records
from lab.measure.records import Record, RecordSet

if TYPE_CHECKING:
    from lab.core.ladder import Family
    from lab.lessons.mode import Mode


EPILOGUE_FAMILIES = ("gemm_tc_epilogue", "gemm_fp32_epilogue")
ROW_FAMILIES = ("softmax", "rmsnorm", "layernorm")
CHECKLIST = "checklist"  # results/h200/checklist.json (lab.studies.checklist.STUDY_FILE)
EPILOGUE_HEADER = "common/lab_epilogue.cuh"
PLAIN = "plain_gemm"  # the epilogue families' ceiling: the same rung without the epilogue
OPS_PATH, GRAPH_PATH = "cupy_ops", "cupy_fused"  # cuBLAS + one CuPy op per op; cuBLAS + one elementwise kernel
COMPOSED = "cupy_composed"  # the row ladders' baseline: CuPy's operations as a user composes them

# The lessons' targets (what they set out to show), not measurements.
TARGETS = {"fused_over_plain": 1.05, "fused_sides": (4096, 8192), "ops_speedup": 1.35, "ops_side": 4096,
           "copy_fraction": 0.90, "copy_min_n": 1024}


# ----------------------------------------------------------------------------------------------
# Families and where their records come from
# ----------------------------------------------------------------------------------------------

def ladder(name: str) -> Family | None:
    """The family `name` from lab.families, or None when this checkout does not have it (yet)."""
    from lab.families import get_family

    try:
        return get_family(name)
    except LabError:
        return None


def not_in_catalogue(name: str) -> str:
    return (f"{name}: NOT IN lab.families in this checkout, so its sources cannot be shown and its records "
            "cannot be read. It appears once its family module is registered in lab/families/__init__.py.")


def check_status(name: str) -> str:
    """The STATUS paragraph of family `name`'s module docstring (where and at which commit its GPU tests and the
    sanitizer passed, and which records it has), on one line; or a sentence saying it has none."""
    import importlib

    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    doc = importlib.import_module(type(fam).__module__).__doc__ or ""
    at = doc.find("STATUS:")
    if at < 0:
        return f"{name}: its module (lab/families/) states no STATUS of its checks."
    return " ".join(doc[at + len("STATUS:"):].split("\n\n")[0].split())


def record_path(name: str) -> Path:
    return records.reference_dir() / f"{name}.json"


def recorded_by(name: str) -> str:
    where = shown_path(records.reference_dir())
    if name == CHECKLIST:
        return f"lab study checklist --out {where}"
    return f"lab bench {name} --json {where}/{name}.json"


def missing(name: str) -> str:
    return (f"NO RECORDS for {name}: {shown_path(record_path(name))} is absent or unreadable, so this cell shows "
            f"nothing. On a GPU, `{recorded_by(name)}` records it.")


def replayed(name: str) -> RecordSet | None:
    """The reference GPU's records of family `name` (replayed: RecordSet.replayed is True), None when absent."""
    from lab.lessons.views import reference

    return reference(name) if ladder(name) is not None else None


def load_checklist() -> dict | None:
    """The reference GPU's checklist record, marked replayed; None when absent or not a checklist record."""
    try:
        record = json.loads(record_path(CHECKLIST).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("provenance"), dict):
        return None
    if not isinstance(record.get("sizes"), list) or not isinstance(record.get("levels"), list):
        return None
    return record | {"replayed": True}


def status(rs: RecordSet | None, name: str) -> str:
    """How many records of which kinds, and where they come from; or why there are none."""
    if ladder(name) is None:
        return not_in_catalogue(name)
    if rs is None:
        return missing(name)
    from lab.lessons.views import records_status

    return records_status(rs, name)


def checklist_status(record: dict | None) -> str:
    if record is None:
        return missing(CHECKLIST)
    where = describe_provenance(record["provenance"])
    sizes = ", ".join(f"{s['M']}x{s['N']}x{s['K']}" for s in record["sizes"])
    tag = "REPLAYED from" if record.get("replayed") else "measured in this run on"
    return f"{CHECKLIST}: {tag} {where}; {len(record['levels'])} levels at {sizes or 'no sizes'}."


def banner(current: Mode, names: Iterable[str], checklist: bool = False) -> str:
    """A loud box: LIVE (a short plan measured in this run, the full records replayed beside it) or REPLAY; then each
    record file with its provenance, or NO RECORDED RESULTS and the command that records it."""
    live = []
    if current.live:
        live = [f"A SHORT plan, checked and {run_stamp()}.",
                "Beside each live table, the FULL records of the reference GPU are REPLAYED, and labelled so:"]
    body = []
    for name in list(names) + ([CHECKLIST] if checklist else []):
        payload = load_checklist() if name == CHECKLIST else replayed(name)
        if name != CHECKLIST and ladder(name) is None:
            body.append(f"{name}: NOT IN lab.families in this checkout (no sources, no records).")
            continue
        provenance = None if payload is None else (payload["provenance"] if name == CHECKLIST else payload.provenance)
        body += record_lines(name, provenance, record_path(name), f"Recorded on a GPU by `{recorded_by(name)}`")
    body.append("Sources, compile reports and the CPU demonstrations ARE computed here (NVRTC needs no GPU).")
    return mode_box(current.live, current.reason, live, body)


# ----------------------------------------------------------------------------------------------
# Judging a figure against a target
# ----------------------------------------------------------------------------------------------

def meets(value: float, target: float, at_most: bool = False) -> str:
    """'target >= 1.35: met' or '... NOT met', from the value itself (never typed)."""
    ok = value <= target if at_most else value >= target
    return f"target {'<=' if at_most else '>='} {target:g}: {'met' if ok else 'NOT met'}"


def cube_side(params: dict) -> int | None:
    return params["M"] if params.get("M") == params.get("N") == params.get("K") else None


def problem_label(params: dict) -> str:
    """'4096^3 float16 TN bias+gelu_tanh -> int8/row': a GEMM-with-epilogue problem as the tables name it."""
    side = cube_side(params)
    shape = f"{side}^3" if side else f"{params['M']}x{params['N']}x{params['K']}"
    kind = " ".join(str(params[k]) for k in ("dtype", "layout") if k in params)
    out = params.get("out", "same")
    tail = "" if out == "same" else f" -> {out}" + ("/row" if params.get("q_per_row") else "")
    return f"{shape} {kind} {params.get('epilogue', 'none')}{tail}".replace("  ", " ")


def record_at(rs: RecordSet, kind: str, rung: str, params: dict) -> Record | None:
    found = rs.where(kind=kind, rung=rung, params=params)
    return found[0] if found else None


def problems_of(rs: RecordSet, kind: str = "headline") -> list[dict]:
    from lab.measure.records import describe_params

    return list({describe_params(r.params): r.params for r in rs.records if r.kind == kind}.values())



# --- the header's prediction for the fused epilogue, against the records --------------------------------------

def header_fields(name: str, key: str) -> list[str]:
    """The rung's header split into its fields: a line at the left margin starts one, indented lines continue it
    (each field joined onto one line)."""
    from lab.lessons.sources import rung_header

    fields: list[str] = []
    for line in rung_header(name, key).splitlines():
        if not line.strip():
            continue
        if line[0].isspace() and fields:
            fields[-1] += " " + line.strip()
        else:
            fields.append(line.strip())
    return fields



def against_range(value: float, lo: float, hi: float) -> str:
    if lo <= value <= hi:
        return "inside the range"
    return f"{'BELOW' if value < lo else 'ABOVE'} the range"



# ----------------------------------------------------------------------------------------------
# Notebooks 06 and 07: exercises on these ladders
# ----------------------------------------------------------------------------------------------

def exercise_pointer(number: str | None = None, families: Iterable[str] = ()) -> str:
    """The exercises on these ladders in this checkout: exercises/<number>_* and any whose exercise.json names one
    of `families`; for a numbered one that is absent, that it is coming (computed from the folders)."""
    root = REPO_ROOT / "exercises"
    families = set(families)
    found = []
    for folder in sorted(p for p in root.glob("[0-9][0-9]_*") if p.is_dir()):
        try:
            meta = json.loads((folder / "exercise.json").read_text())
        except (OSError, json.JSONDecodeError):
            meta = {}
        if (number and folder.name.startswith(f"{number}_")) or meta.get("family") in families:
            found.append(f"exercises/{folder.name}: {meta.get('title', '(no exercise.json)')} (family "
                         f"{meta.get('family', '?')}, rung {meta.get('rung', '?')}); `lab check {folder.name[:2]} "
                         "kernel.cu` checks it")
    if found:
        return "\n".join(found)
    if number:
        return (f"Exercise {number} is coming: there is no exercises/{number}_* in this checkout yet. Until then, "
                "kernels/common/lab_epilogue.cuh and lab/families/epilogue.py are the places to start.")
    return f"No exercise on {', '.join(sorted(families))} in this checkout yet."



def show(fn: Callable, rs: RecordSet | None, name: str, **kwargs) -> None:
    """lab.lessons.plots.<fn>(rs, name, ...) shown inline, or the sentence saying why there is nothing to show."""
    from lab.lessons.views import figure

    if rs is None or ladder(name) is None:
        print(status(rs, name))
        return
    figure(fn(rs, name, **kwargs), f"{name} holds no records for {fn.__name__}")
