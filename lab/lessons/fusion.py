"""The fusion lessons: notebook 06 (epilogue fusion: a GEMM that applies bias, scales, an activation, a clamp or a
quantizer on its way to memory) and notebook 07 (softmax, RMSNorm and LayerNorm: memory-bound row reductions).

What they read, all replayed from lab.measure.records.reference_dir() (results/h200 unless LAB_REFERENCE_RESULTS):
- the RecordSets of `lab bench FAMILY --json`: gemm_tc_epilogue and gemm_fp32_epilogue (06; ceiling "plain_gemm",
  the same rung without the epilogue), softmax, rmsnorm and layernorm (07; ceiling the device copy, baseline
  "cupy_composed");
- checklist.json, the record of `lab study checklist` (lab.studies.checklist: the optimization checklist's levels).
In LIVE mode (a GPU here) a short plan is checked and measured now and shown first, the full records beside it.

Every number printed here is computed: from records, from lab.families.epilogue's references, or from the sources' text.
The targets are the lessons' own, named as targets; `meets` says whether a computed figure reaches one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lab.core.build import REPO_ROOT
from lab.core.errors import LabError
from lab.lessons.common import Markdown, describe_provenance, md, mode_box, record_lines, run_stamp, shown_path
from lab.measure import records
from lab.measure.records import Record, RecordSet, format_bytes, format_value

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
# LIVE: a short plan, measured now
# ----------------------------------------------------------------------------------------------

def live_plan(name: str):
    """The lab.measure.bench plan a LIVE notebook runs for family `name`: the epilogue GEMMs at their first headline
    problem only (quick: 4096^3, shorter timings); the row ladders at every headline row length and every tail
    length, with a shorter minimum time."""
    from lab.measure.bench import BenchPlan

    if name in EPILOGUE_FAMILIES:
        return BenchPlan(kinds=("headline",), quick=True)
    return BenchPlan(kinds=("headline", "tail"), min_time_ms=5.0)


def live_plan_text(names: Iterable[str]) -> str:
    lines = ["LIVE plan (`lab bench FAMILY` runs the full plan; `lab study checklist` the checklist):"]
    for name in names:
        fam = ladder(name)
        if fam is None:
            lines.append(f"  {not_in_catalogue(name)}")
            continue
        plan = live_plan(name)
        heads = fam.headline_params()[: 1 if plan.quick else None]
        tails = fam.tail_params() if "tail" in plan.kinds else []
        what = f"{len(heads)} headline problem(s)" + (f" and {len(tails)} tail lengths" if tails else "")
        lines.append(f"  {name}: checked on a spread of its check cases, then {what}, "
                     f"at least {plan.min_time_ms / (3 if plan.quick else 1):.1f} ms of timing per target")
    if any(n in EPILOGUE_FAMILIES for n in names):
        lines.append("  checklist: NOT measured live (it needs Nsight Compute and Triton); replayed only")
    return "\n".join(lines)


def live_refusal(current: Mode, name: str) -> str | None:
    """Why family `name` is not measured live here (None when it is, and in REPLAY nothing is)."""
    if not current.live:
        return None
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    from lab.core import device
    from lab.lessons.mode import runs_on

    arch = device.current().arch
    blocked = [r.key for r in fam.rungs if not runs_on(r, arch)]
    if name in EPILOGUE_FAMILIES and blocked:  # the ceiling is the rung itself: nothing to time without it
        return f"this GPU is sm_{arch} and {name}'s rung {blocked[0]} cannot run on it; the replayed records follow"
    return None


def live_records(current: Mode, name: str) -> RecordSet | None:
    """LIVE: the family checked (a failure stops the notebook: correct before timed), then measured with
    live_plan(name). None in REPLAY, or where live_refusal says why not."""
    if not current.live or live_refusal(current, name):
        return None
    from lab.lessons.demos import check_ladder, few_cases
    from lab.measure import bench

    fam = ladder(name)
    start = time.perf_counter()
    results = check_ladder(fam, few_cases(fam))
    print(f"LIVE: {name}: " + ", ".join(f"{k} passed {len(v)} cases" for k, v in results.items()))
    rs = bench.run(fam, live_plan(name))
    print(f"LIVE: {name} checked and measured in {time.perf_counter() - start:.0f} s (compiling included)")
    return rs


def live_note(rs: RecordSet | None, current: Mode, name: str) -> str:
    """What the live cell did: measured (its label), skipped on this GPU (why), or nothing (REPLAY)."""
    if rs is not None:
        return f"LIVE: {name}: {len(rs.records)} records, {rs.label()}."
    if not current.live:
        return "(REPLAY: nothing is measured here; the reference GPU's records follow.)"
    return f"(LIVE: {name} not measured here: {live_refusal(current, name) or 'see above'})"


# ----------------------------------------------------------------------------------------------
# Judging a figure against a target
# ----------------------------------------------------------------------------------------------

def meets(value: float, target: float, at_most: bool = False) -> str:
    """'target >= 1.35: met' or '... NOT met', from the value itself (never typed)."""
    ok = value <= target if at_most else value >= target
    return f"target {'<=' if at_most else '>='} {target:g}: {'met' if ok else 'NOT met'}"


def _cube(params: dict) -> int | None:
    return params["M"] if params.get("M") == params.get("N") == params.get("K") else None


def problem_label(params: dict) -> str:
    """'4096^3 float16 TN bias+gelu_tanh -> int8/row': a GEMM-with-epilogue problem as the tables name it."""
    side = _cube(params)
    shape = f"{side}^3" if side else f"{params['M']}x{params['N']}x{params['K']}"
    kind = " ".join(str(params[k]) for k in ("dtype", "layout") if k in params)
    out = params.get("out", "same")
    tail = "" if out == "same" else f" -> {out}" + ("/row" if params.get("q_per_row") else "")
    return f"{shape} {kind} {params.get('epilogue', 'none')}{tail}".replace("  ", " ")


def _one(rs: RecordSet, kind: str, rung: str, params: dict) -> Record | None:
    found = rs.where(kind=kind, rung=rung, params=params)
    return found[0] if found else None


def _problems(rs: RecordSet, kind: str = "headline") -> list[dict]:
    from lab.measure.records import describe_params

    return list({describe_params(r.params): r.params for r in rs.records if r.kind == kind}.values())


# ----------------------------------------------------------------------------------------------
# Notebook 06: the epilogue chain in the sources
# ----------------------------------------------------------------------------------------------

def _header_text() -> str:
    return (REPO_ROOT / "kernels" / EPILOGUE_HEADER).read_text()


_DEFINE = re.compile(r"^#define LAB_EPI_(?P<name>\w+)[ \t]+(?P<code>\d+)[ \t]*(?://[ \t]*(?P<what>.*))?$", re.MULTILINE)


def header_codes() -> list[dict]:
    """Every LAB_EPI_* code of lab_epilogue.cuh: {"kind": "op" | "out", "name", "code", "what"}."""
    rows = []
    for m in _DEFINE.finditer(_header_text()):
        name = m["name"].lower()
        kind = "out" if name.startswith("out_") else "op"
        rows.append({"kind": kind, "name": name.removeprefix("out_"), "code": int(m["code"]),
                     "what": (m["what"] or "").strip()})
    return rows


def ops_table() -> Markdown:
    """The chain's ops and output types as the header defines them, beside lab.families.epilogue's names for them (the
    two
    must agree: the Python side builds the -D knobs from its own table)."""
    from lab.families import epilogue

    python = {"op": epilogue.OPS, "out": epilogue.OUTS}
    lines = ["| knob value | kind | `LAB_EPI_*` in the header | lab.families.epilogue | what the header says |",
             "|---:|---|---|---|---|"]
    for row in header_codes():
        if row["kind"] == "op" and row["name"] == "none":
            continue
        agrees = python[row["kind"]].get(row["name"]) == row["code"]
        mine = f"`{row['name']}`" if agrees else "**disagrees**"
        knob = "EPI_OP1..4" if row["kind"] == "op" else "EPI_OUT"
        lines.append(f"| {row['code']} | {knob} | `LAB_EPI_{'OUT_' if row['kind'] == 'out' else ''}"
                     f"{row['name'].upper()}` | {mine} | {row['what']} |")
    most = epilogue.MAX_OPS
    return md("\n".join(lines) + f"\n\nAt most {most} ops per chain (`EPI_OP1` .. `EPI_OP{most}`, 0 = none), "
              "applied in order to `v = alpha * acc (+ beta * C)`.")


def _block_from(lines: list[str], first: int) -> list[str]:
    """Lines from `first` through the brace that closes the first '{' at or after it (the line alone if it holds
    a whole statement and opens no brace)."""
    depth, opened, out = 0, False, []
    for line in lines[first:]:
        out.append(line)
        depth += line.count("{") - line.count("}")
        opened = opened or "{" in line
        if (opened and depth <= 0) or (not opened and line.rstrip().endswith(";")):
            break
    return out


def _dedent(lines: list[str]) -> str:
    import textwrap

    return textwrap.dedent("\n".join(lines)).strip()


def op_source(op: str) -> Markdown:
    """One op's code in lab_epilogue.cuh: its `if constexpr (OP == LAB_EPI_...)` statement."""
    lines = _header_text().splitlines()
    tag = f"OP == LAB_EPI_{op.upper()})"
    at = next((i for i, line in enumerate(lines) if tag in line), None)
    if at is None:
        return md(f"(`{EPILOGUE_HEADER}` has no op `{op}`)")
    return md(f"`kernels/{EPILOGUE_HEADER}`, op `{op}`:\n\n```cuda\n{_dedent(_block_from(lines, at))}\n```")


def function_source(name: str) -> Markdown:
    """A function of lab_epilogue.cuh (with its template line), as the header writes it."""
    lines = _header_text().splitlines()
    pattern = re.compile(rf"^__device__.*\b{re.escape(name)}\(")
    at = next((i for i, line in enumerate(lines) if pattern.match(line)), None)
    if at is None:
        return md(f"(`{EPILOGUE_HEADER}` defines no function `{name}`)")
    start = at - 1 if at and lines[at - 1].startswith("template") else at
    return md(f"`kernels/{EPILOGUE_HEADER}`, `{name}`:\n\n```cuda\n"
              f"{_dedent(lines[start:at] + _block_from(lines, at))}\n```")


def header_behaviour() -> str:
    """The header's opening comment from 'Defined behaviour' on: what the tests pin down."""
    comment = []
    for line in _header_text().splitlines():
        if not line.startswith("//"):
            break
        comment.append(line[2:].removeprefix(" "))
    text = "\n".join(comment)
    at = text.find("Defined behaviour")
    return text[at:].strip() if at >= 0 else text.strip()


# --- compile reports: the same rung, plain and fused -----------------------------------------------------------

@dataclass(frozen=True)
class Build:
    label: str
    report: object  # lab.core.build.CompileReport


def _family_spec(fam: Family):
    rung = fam.rungs[0]
    spec = rung.spec
    if rung.key in getattr(fam, "VEC_RUNGS", ()):
        spec = spec.with_knobs(VEC=4)  # the 16-byte variant, as the family launches aligned problems
    if fam.name == "gemm_tc_epilogue":
        spec = spec.with_knobs(BF16=0, TN=1)  # fp16, A row-major and B as N x K: the headline problems' build
    return rung, spec


def compile_builds(name: str, arch: int, chains: Iterable[tuple[str, str, bool]]) -> list[Build]:
    """Compile reports of family `name`'s rung without an epilogue, then with each chain of `chains` ((ops, out,
    per row) as lab.families.epilogue.Epilogue.parse takes them), for `arch` (or the arch the rung needs)."""
    from lab.core.build import compile_report, report_arch
    from lab.families.epilogue import Epilogue

    fam = ladder(name)
    if fam is None:
        raise LabError(not_in_catalogue(name))
    rung, spec = _family_spec(fam)
    smem = fam.dynamic_smem_bytes(rung)
    builds = [Build("plain (no epilogue)", compile_report(spec, report_arch(spec, arch), smem))]
    for ops, out, per_row in chains:
        epi = Epilogue.parse(ops, out, per_row)
        fused = spec.with_knobs(**epi.knobs())
        builds.append(Build(f"fused: {epi.name}", compile_report(fused, report_arch(fused, arch), smem)))
    return builds


def compile_table(builds: list[Build]) -> Markdown:
    """Registers, shared memory, spills and the notable SASS opcodes of each build."""
    from lab.studies.report import smem_text

    lines = ["| build | arch | registers | smem B | spills B | notable SASS (static counts) |",
             "|---|---|---:|---:|---:|---|"]
    for b in builds:
        r = b.report
        mix = " ".join(f"{k}x{v}" for k, v in r.instructions.items()) if r.sass_available else "(no nvdisasm)"
        lines.append(f"| {b.label} | {r.arch} | {r.registers} | {smem_text(r)} | "
                     f"{r.spill_store_bytes + r.spill_load_bytes} | {mix} |")
    return md(f"`kernels/{builds[0].report.source}`, entry `{builds[0].report.entry}`\n\n" + "\n".join(lines))


def compile_delta(builds: list[Build]) -> str:
    """What each fused build changed against the plain one: registers, spills, and every notable opcode whose
    count moved (static counts: instructions in the binary, not executed per output)."""
    base = builds[0].report
    lines = []
    for b in builds[1:]:
        r = b.report
        spills = (base.spill_store_bytes + base.spill_load_bytes, r.spill_store_bytes + r.spill_load_bytes)
        lines.append(f"{b.label}: registers {base.registers} -> {r.registers}; spills {spills[0]} -> {spills[1]} B")
        if not (base.sass_available and r.sass_available):
            lines.append("  (nvdisasm is not installed: no instruction mix; `pip install nvidia-cuda-nvdisasm`)")
            continue
        moved = [(op, base.instructions.get(op, 0), r.instructions.get(op, 0))
                 for op in sorted(set(base.instructions) | set(r.instructions))]
        moved = [m for m in moved if m[1] != m[2]]
        lines += [f"  {op:10s} {x:4d} -> {y:4d}" for op, x, y in moved] or ["  the notable opcodes are the same"]
    return "\n".join(lines)


# --- correctness: what the checks cover, and the quantizers on special values ---------------------------------

def check_coverage(name: str) -> str:
    """The family's check cases, summarized from the cases themselves: chains, output types, shapes on tiles'
    tails, layouts and types."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    cases = fam.check_cases()
    chains = sorted({c.get("epilogue", "none") for c in cases})
    outs = sorted({c.get("out", "same") + ("/row" if c.get("q_per_row") else "") for c in cases})
    odd_n = sum(1 for c in cases if c["N"] % 2)
    partial = sum(1 for c in cases if c["M"] % 64 or c["N"] % 64)
    kinds = sorted({f"{c.get('dtype', 'float32')} {c.get('layout', '')}".strip() for c in cases})
    beta = sum(1 for c in cases if c.get("beta"))
    return "\n".join([
        f"{name}: {len(cases)} check cases, each on three input distributions, outputs NaN-poisoned first "
        "(lab.measure.verify.check_rung)",
        f"  chains ({len(chains)}): {', '.join(chains)}",
        f"  outputs: {', '.join(outs)}; types and layouts: {', '.join(kinds)}",
        f"  {odd_n} cases with N odd (no paired stores at the row's end), {partial} with M or N off a multiple of "
        f"64 (partial tiles), {beta} that read C (beta != 0)"])


def bounds_doc() -> str:
    """lab.families.epilogue's account of its error bounds (the module docstring from 'Bounds.')."""
    from lab.families import epilogue

    doc = epilogue.__doc__ or ""
    at = doc.find("Bounds.")
    return " ".join(doc[at:].split()) if at >= 0 else "(lab.families.epilogue states no bounds)"


# (value, what it shows): the quantizers' decided cases. The codes beside them are computed by lab.families.epilogue.
QUANTIZER_VALUES = (
    (0.5, "tie: round to even"), (1.5, "tie: round to even"), (2.5, "tie: round to even"),
    (-2.5, "tie, negative"), (127.5, "int8: rounds past 127, saturates"), (-128.5, "int8: saturates at -128"),
    (1e6, "far past both grids"), (np.inf, "+inf saturates"), (-np.inf, "-inf saturates"), (np.nan, "NaN"),
    (17.0, "e4m3: between 16 and 18, tie to the even code"), (464.0, "e4m3: past 448, saturates"),
    (2.0 ** -10, "e4m3: half the smallest subnormal, tie to 0"),
    (3 * 2.0 ** -10, "e4m3: between two subnormals, tie to even"), (-0.0, "negative zero"),
)


def quantizer_demo(scale: float = 1.0) -> Markdown:
    """The int8 and e4m3 codes lab.families.epilogue's references give for QUANTIZER_VALUES (the kernels are checked bit
    for bit against these on the GPU): ties, saturation, infinities, NaN, subnormals."""
    from lab.families.epilogue import decode_e4m3, quantize_e4m3, quantize_int8

    values = np.array([v for v, _ in QUANTIZER_VALUES], dtype=np.float32)
    q8 = quantize_int8(values, np.float32(scale))
    fp8 = quantize_e4m3(values, np.float32(scale))
    back = decode_e4m3(fp8)
    lines = [f"Quantization scale {scale:g} (the kernels multiply by it, in fp32, then convert):", "",
             "| v | int8 code | e4m3 code | e4m3 value | what it shows |", "|---:|---:|---:|---:|---|"]
    for (v, what), a, b, c in zip(QUANTIZER_VALUES, q8, fp8, back, strict=True):
        lines.append(f"| {v:g} | {int(a)} | 0x{int(b):02X} | {c:g} | {what} |")
    return md("\n".join(lines))


# ----------------------------------------------------------------------------------------------
# Notebook 06: what the write-back costs, modelled before anything is measured
# ----------------------------------------------------------------------------------------------

def traffic_model(sides: Iterable[int] = TARGETS["fused_sides"], epilogue: str = "bias+gelu_tanh") -> str:
    """DRAM bytes of a fp16 GEMM with the epilogue fused (the family's minimum: A, B and the bias read once, C
    written once) against the same GEMM followed by one separate elementwise pass (C read back and written
    again), at each square size."""
    fam = ladder("gemm_tc_epilogue")
    if fam is None:
        return not_in_catalogue("gemm_tc_epilogue")
    lines = [f"{'size':8s} {'fused (minimum)':>16s} {'+ one pass':>12s} {'ratio':>6s}   (fp16, {epilogue})"]
    for n in sides:
        params = {"M": n, "N": n, "K": n, "epilogue": epilogue}
        fused = fam.min_dram_bytes(params)
        separate = fused + 2 * 2 * n * n  # C read back and written again, 2 bytes each way
        lines.append(f"{n}^3{'':3s} {format_bytes(fused):>16s} {format_bytes(separate):>12s} "
                     f"{separate / fused:6.2f}")
    return "\n".join(lines)


def unfused_cost(rs: RecordSet | None, name: str = "gemm_tc_epilogue") -> str:
    """What one separate elementwise pass over C would cost in time at the device copy's bandwidth (the copy
    records' headline ceiling, if recorded on the same device), against the plain GEMM's recorded time: the
    overhead an unfused epilogue cannot avoid, predicted from two measurements."""
    if rs is None:
        return status(rs, name)
    from lab.lessons.views import reference

    copy = reference("copy")
    device = rs.provenance.get("device")
    heads = [] if copy is None else copy.where(kind="headline", rung=copy.records[0].ceiling if copy.records else "")
    if not heads or copy.provenance.get("device") != device:
        return (f"(no copy records made on {device} to take a DRAM bandwidth from: `lab bench copy` records them; "
                "the prediction needs them)")
    bandwidth = max(heads, key=lambda r: r.bytes_moved).value  # GB/s at the largest headline copy
    lines = [f"one extra pass over C (read + write, fp16) at the device copy's {format_value(bandwidth, 'GB/s')} "
             f"GB/s ({copy.label()}), against the plain GEMM ({rs.label()}):"]
    for params in _problems(rs):
        plain = _one(rs, "headline", PLAIN, params)
        if plain is None or params.get("out", "same") != "same":
            continue
        extra_ms = 2 * 2 * params["M"] * params["N"] / (bandwidth * 1e9) * 1e3
        lines.append(f"  {problem_label(params)}: {extra_ms:.4f} ms extra on {plain.median_ms:.4f} ms -> "
                     f"{(plain.median_ms + extra_ms) / plain.median_ms:.3f}x the plain time, at best")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Notebook 06: fused vs plain vs library, from the records
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EpilogueRow:
    """One headline problem: the median times of the plain rung, the fused rung and the library paths."""

    params: dict
    plain_ms: float
    fused_ms: float | None
    ops_ms: float | None = None
    graph_ms: float | None = None

    @property
    def fused_over_plain(self) -> float | None:
        return self.fused_ms / self.plain_ms if self.fused_ms else None

    def speedup(self, library_ms: float | None) -> float | None:
        """How many times faster the fused rung is than a library path (its time over the fused time)."""
        return library_ms / self.fused_ms if library_ms and self.fused_ms else None


def epilogue_rows(rs: RecordSet | None, kind: str = "headline") -> list[EpilogueRow]:
    """Per problem of `kind` (cold L2): the plain rung (the ceiling), the fused rung and the library baselines."""
    if rs is None:
        return []
    rows = []
    for params in _problems(rs, kind):
        plain = _one(rs, kind, PLAIN, params)
        if plain is None:
            continue
        others = [r for r in rs.where(kind=kind, params=params) if r.rung != PLAIN and r.l2 == plain.l2]
        fused = next((r for r in others if r.rung[:2].isdigit()), None)
        ops, graph = (next((r for r in others if r.rung == k), None) for k in (OPS_PATH, GRAPH_PATH))
        rows.append(EpilogueRow(params, plain.median_ms, fused and fused.median_ms, ops and ops.median_ms,
                                graph and graph.median_ms))
    return rows


def _x(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def epilogue_table(rs: RecordSet | None, name: str) -> Markdown:
    """Median times (ms, cold L2) per headline problem, the fused rung over the plain one, and how many times
    faster the fused rung is than each library path; all from the same run."""
    if rs is None or ladder(name) is None:
        return md(status(rs, name))
    rows = epilogue_rows(rs)
    if not rows:
        return md(f"(no headline records with a {PLAIN} ceiling in {name}: {rs.label()})")
    paths = [(k, attr) for k, attr in ((OPS_PATH, "ops_ms"), (GRAPH_PATH, "graph_ms"))
             if any(getattr(r, attr) for r in rows)]  # only the library paths these records hold
    head = "| problem | plain ms | fused ms | fused / plain |" + "".join(
        f" {k} ms | fused speed-up over it |" for k, _ in paths)
    lines = [f"{name}, {rs.label()}", "", head, "|---|" + "---:|" * (3 + 2 * len(paths))]
    for r in rows:
        cells = "".join(f" {_x(getattr(r, a), 4)} | {_x(r.speedup(getattr(r, a)), 2)} |" for _, a in paths)
        lines.append(f"| {problem_label(r.params)} | {r.plain_ms:.4f} | {_x(r.fused_ms, 4)} | "
                     f"{_x(r.fused_over_plain)} |{cells}")
    return md("\n".join(lines))


def _at_side(rows: list[EpilogueRow], side: int, out: str = "same") -> EpilogueRow | None:
    return next((r for r in rows if _cube(r.params) == side and r.params.get("out", "same") == out), None)


def epilogue_targets(tc: RecordSet | None, fp32: RecordSet | None = None) -> str:
    """The epilogue lesson's targets against the records: the fused rung within TARGETS["fused_over_plain"] of the plain
    one at each of TARGETS["fused_sides"] (fp16 output; int8 shown beside), and at least TARGETS["ops_speedup"]
    times faster than the cupy_ops path at TARGETS["ops_side"]."""
    lines = []
    for name, rs in (("gemm_tc_epilogue", tc), ("gemm_fp32_epilogue", fp32)):
        if rs is None:
            lines.append(status(rs, name))
            continue
        rows = epilogue_rows(rs)
        lines.append(f"{name} ({rs.label()}):")
        for side in TARGETS["fused_sides"]:
            for out in ("same", "int8"):
                row = _at_side(rows, side, out)
                if row is None or row.fused_over_plain is None:
                    if out == "same":
                        lines.append(f"  {side}^3: no fused and plain records at this size: the target cannot be "
                                     "judged here")
                    continue
                judged = meets(row.fused_over_plain, TARGETS["fused_over_plain"], at_most=True)
                lines.append(f"  {problem_label(row.params)}: fused / plain = {row.fused_over_plain:.3f} -> {judged}")
        if name == "gemm_tc_epilogue":
            row = _at_side(rows, TARGETS["ops_side"])
            speedup = row and row.speedup(row.ops_ms)
            if speedup is None:
                lines.append(f"  {TARGETS['ops_side']}^3: no {OPS_PATH} record beside the fused rung: the library "
                             "target cannot be judged here")
            else:
                lines.append(f"  {problem_label(row.params)}: {OPS_PATH} / fused = {speedup:.2f} -> "
                             f"{meets(speedup, TARGETS['ops_speedup'])}")
    return "\n".join(lines)


def int8_against_fp16(rs: RecordSet | None, name: str = "gemm_tc_epilogue") -> str:
    """The fused rung's time with an int8 (per-row) output over its time with the fp16 output, per size."""
    if rs is None:
        return status(rs, name)
    rows = epilogue_rows(rs)
    lines = []
    for side in sorted({_cube(r.params) for r in rows if _cube(r.params)}):
        same, q8 = _at_side(rows, side, "same"), _at_side(rows, side, "int8")
        if same and q8 and same.fused_ms and q8.fused_ms:
            lines.append(f"  {side}^3: fused int8 time / fused fp16 time = {q8.fused_ms / same.fused_ms:.3f} "
                         f"(C stored in {format_bytes(side * side)} instead of {format_bytes(2 * side * side)})")
    if not lines:
        return f"(no size with both an fp16 and an int8 output in {name})"
    return "\n".join([f"{name} ({rs.label()}):", *lines])


def sweep_overhead(rs: RecordSet | None, name: str) -> str:
    """The fused rung over the plain one across the sweep's sizes (cold and warm L2): where the epilogue's fixed
    work per output weighs more, against a mainloop that shrinks with K."""
    if rs is None:
        return status(rs, name)
    if not any(r.kind == "sweep" for r in rs.records):
        return f"(no sweep records in {name}: `{recorded_by(name)}` records them with the headline)"
    lines = [f"{name}, sweep ({rs.label()}): fused time / plain time"]
    for l2 in ("cold", "warm"):
        pairs = []
        for params in _problems(rs, "sweep"):
            plain = [r for r in rs.where(kind="sweep", rung=PLAIN, params=params) if r.l2 == l2]
            fused = [r for r in rs.where(kind="sweep", params=params) if r.l2 == l2 and r.rung[:2].isdigit()]
            if plain and fused:
                pairs.append((params, fused[0].median_ms / plain[0].median_ms))
        if pairs:
            lines.append(f"  {l2} L2: " + ", ".join(f"{_cube(p) or p['M']}^3 {x:.3f}" for p, x in
                                                     sorted(pairs, key=lambda t: t[0]["M"])))
    return "\n".join(lines)


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


def fused_prediction(name: str) -> str:
    """The "Fused epilogue prediction" field of the family's rung header, or a sentence saying it has none."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    rung = fam.rungs[0]
    found = next((f for f in header_fields(name, rung.key) if f.lower().startswith("fused epilogue prediction")),
                 None)
    source = f"kernels/{rung.spec.source}"
    if found is None:
        return f"{source}: its header states no prediction for the fused epilogue."
    return f"{source}, as written in its header:\n  {found}"


_SIDE_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)x[^,;.]*?\bat (\d+)\^3")


def side_ranges(text: str) -> list[tuple[float, float, int]]:
    """'1.02-1.05x the plain time at 4096^3, 1.01-1.03x at 8192^3' -> [(1.02, 1.05, 4096), (1.01, 1.03, 8192)]."""
    return [(float(m[1]), float(m[2]), int(m[3])) for m in _SIDE_RANGE.finditer(text)]


def _against_range(value: float, lo: float, hi: float) -> str:
    if lo <= value <= hi:
        return "inside the range"
    return f"{'BELOW' if value < lo else 'ABOVE'} the range"


def fused_prediction_check(rs: RecordSet | None, name: str) -> str:
    """Each 'lo-hi x ... at N^3' range of the fused-epilogue prediction against the fused / plain time ratio of the
    fp16-output headline problem at N^3."""
    if rs is None or ladder(name) is None:
        return status(rs, name)
    text = fused_prediction(name)
    ranges = side_ranges(text)
    if not ranges:
        return f"{name}: no 'lo-hi x at N^3' range in the prediction to check; compare by eye."
    rows = epilogue_rows(rs)
    lines = [f"{name}: the prediction's ranges against the records ({rs.label()}):"]
    for lo, hi, side in ranges:
        row = _at_side(rows, side)
        if row is None or row.fused_over_plain is None:
            lines.append(f"  at {side}^3: predicted {lo:g}-{hi:g}x; no fused and plain records at this size")
            continue
        x = row.fused_over_plain
        lines.append(f"  at {side}^3: predicted {lo:g}-{hi:g}x the plain time, measured {x:.3f}x -> "
                     f"{_against_range(x, lo, hi)}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Notebook 06: the optimization checklist (lab.studies.checklist's record)
# ----------------------------------------------------------------------------------------------

_CHECKLIST_COLUMNS = (("size", "size"), ("level", "level"), ("status", "status"), ("median_ms", "median ms"),
                      ("p10_p90_ms", "p10-p90 ms"), ("x_gemm", "x GEMM"), ("kernels", "kernels"),
                      ("dram", "DRAM bytes"), ("lines", "lines of code"))


def checklist_table(record: dict | None) -> Markdown:
    """lab.studies.checklist.summary_rows as a Markdown table: time, its spread, multiple of the plain GEMM, kernels per
    call, DRAM bytes against the minimum and the lines of code of each level."""
    from lab.studies import checklist

    if record is None:
        return md(missing(CHECKLIST))
    head = "| " + " | ".join(t for _, t in _CHECKLIST_COLUMNS) + " |"
    lines = [checklist_status(record), "", head, "|" + "---|" * len(_CHECKLIST_COLUMNS)]
    for row in checklist.summary_rows(record):
        lines.append("| " + " | ".join(str(row[k]).replace("|", "/") for k, _ in _CHECKLIST_COLUMNS) + " |")
    return md("\n".join(lines))


def checklist_bytes(record: dict | None) -> str:
    """Per size: the minimum DRAM bytes of the operation, then each level's bytes as a multiple of it, and the
    unfused (library) path's bytes over the fused levels'."""
    from lab.studies import checklist

    if record is None:
        return missing(CHECKLIST)
    lines = [checklist_status(record)]
    for size in record["sizes"]:
        minimum = size["min_dram_bytes"]
        lines.append(f"{size['M']}x{size['N']}x{size['K']}: minimum {format_bytes(minimum)} "
                     "(A, W and the bias read once, Y written once)")
        entries = [("gemm (no epilogue)", size["gemm"])] + list(size["levels"].items())
        moved = {}
        for label, entry in entries:
            b = checklist.dram_bytes(entry) if entry.get("status", "ok") == "ok" else None
            if b is None:
                why = (entry.get("dram") or {}).get("error") or entry.get("reason") or "not measured"
                lines.append(f"  {label:20s} -: {why}")
                continue
            moved[label] = b
            lines.append(f"  {label:20s} {format_bytes(b):>10s} = {b / minimum:.2f}x the minimum")
        unfused = moved.get("library")
        for fused in ("triton", "lab_fused"):
            if unfused and moved.get(fused):
                lines.append(f"  library / {fused}: {unfused / moved[fused]:.2f}x the DRAM bytes")
    return "\n".join(lines)


def checklist_verdicts(record: dict | None) -> str:
    """lab.studies.checklist.verdicts: sentences derived from the record's numbers, one per finding and size."""
    from lab.studies import checklist

    if record is None:
        return missing(CHECKLIST)
    sentences = checklist.verdicts(record)
    return "\n".join(f"- {s}" for s in sentences) or "(the record holds no sizes to judge)"


def show_checklist(fn: Callable, record: dict | None, **kwargs) -> None:
    """lab.lessons.plots.<fn>(record) shown inline, or the sentence saying the record is missing."""
    from lab.lessons.views import figure

    if record is None:
        print(missing(CHECKLIST))
        return
    figure(fn(record, **kwargs), f"{CHECKLIST} holds no timed levels for {fn.__name__}")


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


# ----------------------------------------------------------------------------------------------
# Notebook 07: the row ladders' sources
# ----------------------------------------------------------------------------------------------

def rung_list(name: str) -> str:
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    lines = [f"{name}: {fam.title}; ceiling {fam.ceiling_name}, baselines {', '.join(fam.baselines()) or 'none'}"]
    lines += [f"  {r.key:22s} kernels/{r.spec.source:28s} {r.title}" for r in fam.rungs]
    return "\n".join(lines)


def rung_headers(name: str) -> Markdown:
    """Every rung's header (what changed, why, the prediction, requirements, knobs), one block each."""
    from lab.lessons.sources import rung_header

    fam = ladder(name)
    if fam is None:
        return md(not_in_catalogue(name))
    seen, parts = set(), []
    for r in fam.rungs:
        if r.spec.source in seen:
            continue
        seen.add(r.spec.source)
        parts.append(f"**{r.key}** (`kernels/{r.spec.source}`): {r.title}\n\n```text\n{rung_header(fam, r.key)}\n```")
    return md("\n\n".join(parts))


def shared_sources(a: str, b: str) -> str:
    """Whether two ladders' rungs are built from the same source files (one template, two entries)."""
    fa, fb = ladder(a), ladder(b)
    if fa is None or fb is None:
        return not_in_catalogue(a if fa is None else b)
    pairs = list(zip(fa.rungs, fb.rungs, strict=False))
    same = [ra.key for ra, rb in pairs if ra.spec.source == rb.spec.source]
    if len(same) == len(fa.rungs) == len(fb.rungs):
        entries = ", ".join(f"{ra.spec.entry} / {rb.spec.entry}" for ra, rb in pairs)
        return (f"{a} and {b} build every rung from the same files (entries {entries}): the headers above are "
                f"{b}'s too.")
    return f"{a} and {b} share the sources of rungs {', '.join(same) or 'none'}."


# ----------------------------------------------------------------------------------------------
# Notebook 07: bandwidth per rung against the device copy and the composed baseline
# ----------------------------------------------------------------------------------------------

def _row_label(params: dict) -> str:
    extra = "" if params.get("mask", "none") == "none" else f" {params['mask']}"
    return f"n={params['n']} {params.get('dtype', '')}{extra} ({params['rows']} rows)"


def _targets_in(rs: RecordSet, fam: Family) -> list[str]:
    rungs = [r.key for r in fam.rungs]
    present = list(dict.fromkeys(r.rung for r in rs.records if r.rung != r.ceiling))
    return [k for k in rungs if k in present] + [k for k in present if k not in rungs]


def bandwidth_table(rs: RecordSet | None, name: str) -> Markdown:
    """Per headline problem: the device copy's GB/s, then each rung's and the composed baseline's fraction of it
    (same run), and the path the last rung's launcher took."""
    fam = ladder(name)
    if fam is None or rs is None:
        return md(status(rs, name))
    heads = sorted(_problems(rs), key=lambda p: (p.get("dtype", ""), p["n"]))
    if not heads:
        return md(f"(no headline records in {name}: {rs.label()})")
    targets = _targets_in(rs, fam)
    last = fam.rungs[-1].key
    lines = [f"{name}, headline problems, fraction of {rs.records[0].ceiling} in the same run ({rs.label()})", "",
             "| problem | copy GB/s | " + " | ".join(targets) + f" | {last} path |",
             "|---|---:|" + "---:|" * len(targets) + "---|"]
    for params in heads:
        ceiling = next((r for r in rs.where(kind="headline", params=params) if r.rung == r.ceiling), None)
        cells = []
        for t in targets:
            rec = _one(rs, "headline", t, params)
            cells.append("-" if rec is None else f"{rec.ratio:.3f}")
        last_rec = _one(rs, "headline", last, params)
        path = last_rec.extra.get("path", "-") if last_rec is not None else "-"
        copy = "-" if ceiling is None else format_value(ceiling.value, "GB/s")
        lines.append(f"| {_row_label(params)} | {copy} | " + " | ".join(cells) + f" | {path} |")
    return md("\n".join(lines))


def copy_targets(rs: RecordSet | None, name: str) -> str:
    """The memory-bound ladders' target against the records: the ladder's last rung at >= TARGETS["copy_fraction"]
    of the device copy at every headline row length n >= TARGETS["copy_min_n"]; the composed baseline beside it."""
    fam = ladder(name)
    if fam is None or rs is None:
        return status(rs, name)
    last = fam.rungs[-1].key
    floor, min_n = TARGETS["copy_fraction"], TARGETS["copy_min_n"]
    mine = sorted((r for r in rs.where(kind="headline", rung=last) if r.params["n"] >= min_n),
                  key=lambda r: (r.params.get("dtype", ""), r.params["n"]))
    if not mine:
        return f"{name}: no headline records of {last} at n >= {min_n}: the target cannot be judged here."
    lines = [f"{name}, {last} at n >= {min_n} ({rs.label()}):"]
    for r in mine:
        base = _one(rs, "headline", COMPOSED, r.params)
        vs = "" if base is None or not base.value else f"; {r.value / base.value:.2f}x the {COMPOSED} baseline"
        lines.append(f"  {_row_label(r.params)}: {r.ratio:.3f} of the device copy -> {meets(r.ratio, floor)}{vs}")
    met = sum(r.ratio >= floor for r in mine)
    worst = min(mine, key=lambda r: r.ratio)
    lines.append(f"  met at {met} of {len(mine)} problems; the lowest {worst.ratio:.3f} at {_row_label(worst.params)}")
    return "\n".join(lines)


# --- the rungs' predictions, as ranges over row lengths -------------------------------------------------------

@dataclass(frozen=True)
class RowClaim:
    """A range a row ladder's prediction states ('0.9-0.97x of the device copy for n >= 1024'), the row lengths
    it names, and what it is a fraction of: the ceiling, or another rung ('02')."""

    text: str
    lo: float
    hi: float
    against: str  # "ceiling" or a rung number
    where: str  # the row lengths, as the header names them ('' when it names none)
    ns: tuple[tuple[float, float], ...]  # closed intervals of n the claim is about (empty: every n)

    def about(self, n: int) -> bool:
        return not self.ns or any(lo <= n <= hi for lo, hi in self.ns)


_RANGE = re.compile(r"(?P<plus>\+)?(?P<lo>\d+(?:\.\d+)?)\s*-\s*(?P<hi>\d+(?:\.\d+)?)\s*(?P<unit>x|%)")
_RUNG_AFTER = re.compile(r"^\s*(?:x\s*)?(?:over\s+)?(?:of\s+)?rung\s+(\d+)")
_N_BETWEEN = re.compile(r"(\d+)\s*<=\s*n\s*<=\s*(\d+)")
_N_AT_LEAST = re.compile(r"n\s*>=\s*(\d+)")
_N_PAST = re.compile(r"(?:past|longer than|beyond)\s+(\d+)")
_N_LIST = re.compile(r"\bn\s*=\s*(\d+(?:\s*-\s*\d+)?(?:\s*(?:,|and)\s*\d+(?:\s*-\s*\d+)?)*)")
_CLAUSE_END = re.compile(r";|\.(?:\s|$)")  # a ';' or a sentence's end: prose about another range follows


def _n_phrases(text: str) -> list[tuple[re.Match, list[tuple[float, float]]]]:
    """Every phrase naming row lengths in `text`, with the intervals of n it names, in order of position."""
    found = [(m, [(float(m[1]), float(m[2]))]) for m in _N_BETWEEN.finditer(text)]
    inside = [m.span() for m, _ in found]
    found += [(m, [(float(m[1]), float("inf"))]) for m in _N_AT_LEAST.finditer(text)
              if not any(a <= m.start() < b for a, b in inside)]
    found += [(m, [(float(m[1]) + 1, float("inf"))]) for m in _N_PAST.finditer(text)]
    for m in _N_LIST.finditer(text):
        parts = [[float(x) for x in re.split(r"\s*-\s*", part) if x] for part in re.split(r"\s*(?:,|and)\s*", m[1])]
        found.append((m, [(ends[0], ends[-1]) for ends in parts if ends]))
    return sorted(found, key=lambda f: f[0].start())


def _n_intervals(text: str) -> tuple[tuple[tuple[float, float], ...], str]:
    """The row lengths a piece of prose names ('n = 1024-4096', 'n = 128 and 512', 'n >= 1024', '1024 <= n <=
    8192', 'past 65536'), as intervals, and the phrases found."""
    phrases = _n_phrases(text)
    return tuple(i for _, found in phrases for i in found), "; ".join(m[0].strip() for m, _ in phrases)


def _owned_after(text: str) -> str:
    """The prose after a range that is about it: up to the clause's end, and up to the first comma after the
    first row lengths it names ('... at n = 1024-4096, ~0.35-0.5x at ...')."""
    text = _CLAUSE_END.split(text)[0]
    phrases = _n_phrases(text)
    if phrases:
        comma = text.find(",", phrases[0][0].end())
        if comma >= 0:
            return text[:comma]
    return text


def row_claims(text: str) -> list[RowClaim]:
    """The ranges in a row ladder's prediction with the row lengths each is about: those named after it in its
    clause, else those that open its clause before it ('n = 128 and 512 lower (~0.6-0.8x'), else the previous
    range's ('0.75-0.9x of the device copy for 1024 <= n <= 8192 (1.3-2x rung 01)'). '+5-30% over rung 02' is
    1.05-1.30x of rung 02."""
    ranges = list(_RANGE.finditer(text))
    claims: list[RowClaim] = []
    for i, m in enumerate(ranges):
        stop = ranges[i + 1].start() if i + 1 < len(ranges) else len(text)
        ns, where = _n_intervals(_owned_after(text[m.end():stop]))
        if not ns:
            gap = _CLAUSE_END.split(text[ranges[i - 1].end() if i else 0:m.start()])
            ns, where = _n_intervals(gap[-1] if len(gap) > 1 or not i else "")
        if not ns and claims:
            ns, where = claims[-1].ns, claims[-1].where
        lo, hi = float(m["lo"]), float(m["hi"])
        if m["unit"] == "%":
            lo, hi = (1 + lo / 100, 1 + hi / 100) if m["plus"] else (lo / 100, hi / 100)
        rung = _RUNG_AFTER.match(text[m.end():])
        shown = m[0] + (f" of rung {int(rung[1]):02d}" if rung else " of the copy")
        claims.append(RowClaim(shown, lo, hi, f"{int(rung[1]):02d}" if rung else "ceiling", where, ns))
    return claims


def prediction_text(name: str, key: str) -> str:
    """The rung header's "Prediction" field as written (its parenthesis included), else lab.lessons' reading."""
    from lab.lessons.predictions import prediction

    found = [f for f in header_fields(name, key) if f.startswith("Prediction")]
    return " ".join(found) if found else prediction(name, key)


def row_prediction_check(rs: RecordSet | None, name: str, key: str) -> str:
    """Each range of the rung's prediction against the headline records at the row lengths it names (both types
    where the records hold both): inside, below or above, with the measured fraction."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    rung = fam.rung(key)
    text = prediction_text(name, rung.key)
    lines = [f"{rung.key}: {text}"]
    if rs is None:
        return "\n".join(lines + [missing(name)])
    claims = row_claims(text)
    if not claims:
        return "\n".join(lines + ["  (no numeric range in the prediction: compare it with the table by eye)"])
    mine = sorted(rs.where(kind="headline", rung=rung.key), key=lambda r: (r.params["n"], r.params.get("dtype", "")))
    for c in claims:
        hits = [r for r in mine if c.about(r.params["n"])]
        shown = f"{c.text} ({c.where or 'no row length named: every headline n'})"
        if not hits:
            lines.append(f"  {shown}: no headline record at those row lengths")
            continue
        for r in hits:
            if c.against == "ceiling":
                value, unit = r.ratio, "of the copy"
            else:
                other = _one(rs, "headline", fam.rung(c.against).key, r.params)
                if other is None or not other.value:
                    lines.append(f"  {shown} at {_row_label(r.params)}: no record of rung {c.against}")
                    continue
                value, unit = r.value / other.value, f"x rung {c.against}"
            lines.append(f"  {shown} at {_row_label(r.params)}: measured {value:.3f} {unit} -> "
                         f"{_against_range(value, c.lo, c.hi)}")
    return "\n".join(lines)


def ladder_predictions(rs: RecordSet | None, name: str) -> str:
    """row_prediction_check for every rung of the ladder, one block each."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    return "\n\n".join(row_prediction_check(rs, name, r.key) for r in fam.rungs)


def tail_summary(rs: RecordSet | None, name: str, modulus: int = 8) -> str:
    """The tail records by n mod `modulus` (a vector's elements: the sawtooth's period) and the launch paths."""
    from lab.lessons.views import launch_paths, tail_residues

    if ladder(name) is None or rs is None:
        return status(rs, name)
    return tail_residues(rs, name, modulus) + "\n" + launch_paths(rs, name, "tail")


# ----------------------------------------------------------------------------------------------
# Notebook 07: numerics on the CPU (lab's references, NumPy)
# ----------------------------------------------------------------------------------------------

def online_softmax(row: np.ndarray) -> tuple[float, float]:
    """Milakov & Gimelshein's online normalizer, element by element in fp32: the running max m and the sum d of
    exp(x - m), rescaled by exp(m_old - m_new) whenever the max rises. One read of the row."""
    m, d = np.float32(-np.inf), np.float32(0.0)
    for x in row.astype(np.float32):
        new = max(m, x)
        d = d * np.exp(m - new, dtype=np.float32) + np.exp(x - new, dtype=np.float32) if new > -np.inf else d
        m = new
    return float(m), float(d)


def online_softmax_demo(n: int = 4096, seed: int = 0) -> str:
    """One row: the online (m, d) against the two-pass max and sum, and what the naive exp(x) without the shift
    gives on the same row raised by a large offset (overflow to inf, then inf / inf = NaN)."""
    rng = np.random.default_rng(seed)
    row = (rng.standard_normal(n) * 3).astype(np.float32)
    m, d = online_softmax(row)
    m2 = float(row.max())
    d2 = float(np.sum(np.exp(row.astype(np.float64) - m2)))
    shifted = row + np.float32(100.0)
    with np.errstate(over="ignore", invalid="ignore"):
        exps = np.exp(shifted)
        naive = exps / np.sum(exps)
    return "\n".join([
        f"a row of {n} fp32 values, N(0, 9):",
        f"  online, one read : max {m:.6f}, sum of exp(x - max) {d:.6f}",
        f"  two reads (fp64): max {m2:.6f}, sum of exp(x - max) {d2:.6f}  -> relative difference "
        f"{abs(d - d2) / d2:.2e}",
        f"  the same row + 100, exp(x) without the shift in fp32: {np.count_nonzero(np.isnan(naive))} of {n} "
        f"outputs NaN, {np.count_nonzero(np.isinf(exps))} exponentials overflowed to inf"])


def fp16_statistics_demo(n: int = 4096, scale: float = 8.0, seed: int = 0) -> str:
    """Why the statistics are fp32 when the data is fp16: the sum of squares of one fp16 row accumulated in fp16
    (overflow past 65504, then lost low bits) against fp32 and float64."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * scale).astype(np.float16)
    exact = float(np.sum(x.astype(np.float64) ** 2))
    with np.errstate(over="ignore"):
        in_fp16 = np.cumsum(x * x, dtype=np.float16)[-1]  # sequential, as one thread would add
    in_fp32 = np.cumsum(x.astype(np.float32) ** 2, dtype=np.float32)[-1]
    return "\n".join([
        f"sum of x^2 over one fp16 row of {n} values, N(0, {scale ** 2:g}) (RMSNorm's statistic):",
        f"  float64 : {exact:.6g}",
        f"  fp32    : {float(in_fp32):.6g} (relative error {abs(float(in_fp32) - exact) / exact:.1e})",
        f"  fp16    : {float(in_fp16):.6g} (fp16's largest finite value is {float(np.finfo(np.float16).max):g})"])


def variance_demo(n: int = 4096, mean: float = 300.0, seed: int = 0) -> str:
    """LayerNorm's variance in fp32 three ways on a row whose mean is large against its spread: E[x^2] - E[x]^2
    (cancellation), the two-pass centered sum (rungs 02-03), Welford's running update (rung 01); float64 as the
    reference."""
    rng = np.random.default_rng(seed)
    x = (mean + rng.standard_normal(n)).astype(np.float32)
    exact = float(np.var(x.astype(np.float64)))
    s, s2 = np.cumsum(x, dtype=np.float32)[-1], np.cumsum(x * x, dtype=np.float32)[-1]
    naive = float(s2 / np.float32(n) - (s / np.float32(n)) ** 2)
    mu = np.cumsum(x, dtype=np.float32)[-1] / np.float32(n)
    two_pass = float(np.cumsum((x - mu) ** 2, dtype=np.float32)[-1] / np.float32(n))
    w_mean, w_m2 = np.float32(0.0), np.float32(0.0)
    for k, v in enumerate(x, start=1):
        delta = v - w_mean
        w_mean = w_mean + delta / np.float32(k)
        w_m2 = w_m2 + delta * (v - w_mean)
    welford = float(w_m2 / np.float32(n))

    def err(v: float) -> str:
        return f"{v:.6g} (relative error {abs(v - exact) / exact:.1e})"

    return "\n".join([f"variance of one row of {n} fp32 values, mean {mean:g}, std 1: float64 {exact:.6g}",
                      f"  E[x^2] - E[x]^2 in fp32 : {err(naive)}",
                      f"  two passes (centered)   : {err(two_pass)}",
                      f"  Welford, one pass       : {err(welford)}"])


def special_rows_demo(n: int = 8) -> Markdown:
    """The softmax family's special rows (lab.families.softmax.SPECIAL_KINDS) on the CPU: the family's float64
    reference (its definitions: an all -inf row gives zeros) beside a naive softmax (x - max, exp, divide)."""
    fam = ladder("softmax")
    if fam is None:
        return md(not_in_catalogue("softmax"))
    from lab.families.softmax import SPECIAL_KINDS

    fam.array_module = np  # the family's own problem maker and reference, on the host
    problem = fam.make_problem(rows=len(SPECIAL_KINDS), n=n, special=1)
    x = problem.inputs["x"][0]
    reference = fam.reference(problem)
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = x.astype(np.float64) - x.max(axis=1, keepdims=True)
        naive = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)

    def shown(row: np.ndarray) -> str:
        if np.all(np.isnan(row)):
            return "all NaN"
        return " ".join("nan" if np.isnan(v) else f"{v:.3g}" for v in row[:4]) + (" ..." if n > 4 else "")

    lines = [f"Rows of {n}: the first four outputs of each.", "", "| row | naive (x - max, exp, divide) | "
             "lab reference |", "|---|---|---|"]
    for kind, a, b in zip(SPECIAL_KINDS, naive, reference, strict=True):
        lines.append(f"| {kind} | {shown(a)} | {shown(b)} |")
    return md("\n".join(lines))


def show(fn: Callable, rs: RecordSet | None, name: str, **kwargs) -> None:
    """lab.lessons.plots.<fn>(rs, name, ...) shown inline, or the sentence saying why there is nothing to show."""
    from lab.lessons.views import figure

    if rs is None or ladder(name) is None:
        print(status(rs, name))
        return
    figure(fn(rs, name, **kwargs), f"{name} holds no records for {fn.__name__}")

