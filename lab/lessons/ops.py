"""The lesson of notebook 08: shape specialization and dispatch, measured on a serving trace.

What it reads, from lab.measure.records.reference_dir() (results/h200 unless LAB_REFERENCE_RESULTS), each exactly as
lab.studies.ops_study writes it (`python -m lab.studies.ops_study DIR tune trace overhead latency` on a GPU):
    ops_trace.json      the trace: GPU time per step and method, lab.ops's decisions and counters, the checks, the hot
                        shape's choice forced everywhere, the decode boundary swept in M
    ops_tune.json       every bucket the trace touches, autotuned: each candidate's time or why it was rejected
    ops_latency.json    first-request latency of fresh processes: empty caches, warm caches, a warm-up manifest
    ops_overhead.json   host microseconds per call: lab.ops against its own launches replayed raw, and cupy.matmul
and the compile study's record, results/cpu/compile_variants.json (lab.studies.compile_study: NVRTC on the development
machine's CPU, no GPU).

The trace's steps are regenerated here (lab.studies.serving_trace.make_trace with the record's seed: CPU-only and
deterministic) and checked against the record's summary: the record keeps each distinct step's time, not how many
steps of each size the trace holds, and every GPU-time share below needs both.

Every number printed is computed, from these records or from the lab's own code (the dispatch table, the trace).
The targets are the runtime's, named as targets. The data shaping lives here; the figures are in lab.lessons.plots.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.core.errors import LabError
from lab.lessons.common import (
    Markdown,
    describe_provenance,
    md,
    mode_box,
    record_lines,
    replayed_record,
    run_stamp,
    shown_path,
)
from lab.measure import records

if TYPE_CHECKING:
    from lab.lessons.mode import Mode
    from lab.ops.rules import Table

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
# The lesson's own definition (a choice, not a measurement): the hot buckets are the fewest M buckets that hold at
# least this share of lab.ops's GPU time over the trace.
HOT_TIME_SHARE = 0.5

METHODS = ("lab_ops", "lab_ops_table", "cublas", "generic", "persistent", "hot_forced")
# The two "one generic kernel" baselines of the trace (lab.studies.serving_trace's methods).
ONE_KERNEL = {"generic": "gemm_tc rung 03 (cp.async + mma.sync, sm_80 on) for every GEMM, epilogue after: lab.ops's "
                         "own generic fallback path",
              "persistent": "gemm_tc rung 06 (TMA + wgmma, persistent, 128 x 256 tiles) for every GEMM, epilogue "
                            "fused: one tuned kernel everywhere"}
SCENARIOS = {"empty_caches": "empty compile caches", "warm_caches": "warm caches (a second process)",
             "empty_caches_with_manifest": "empty caches + warm-up manifest",
             "warm_caches_with_manifest": "warm caches + warm-up manifest (the recommended start)"}
USAGE_SHAPE = {"M": 8, "N": 4096, "K": 4096}  # section 1's live example: a decode-sized GEMM with a residual


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


def _us(value: float | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.1f}" if value < 1e4 else f"{value:,.0f}"


def as_x(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}x"


def _share(part: float, whole: float) -> float:
    return part / whole if whole else float("nan")


def _meets(value: float | None, target: float, at_most: bool = False, unit: str = "") -> str:
    if value is None or not math.isfinite(value):
        return "not in the record"
    ok = value <= target if at_most else value >= target
    return f"target {'<=' if at_most else '>='} {target:g}{unit}: {'met' if ok else 'MISSED'}"


def _config(config: dict | None) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted((config or {}).items()))


def candidate_label(path: str, config: dict | None) -> str:
    """'persistent BN=256 GROUP_M=8', 'decode': a path and its configuration."""
    cfg = _config(config)
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
# 1. lab.ops in six lines (LIVE only)
# ----------------------------------------------------------------------------------------------

def usage_inputs(seed: int = 0):
    """Section 1's operands on the GPU: x (M x K), a linear layer's weight w (N x K) and a residual h (M x N), fp16,
    random normal (never zeros), the weight scaled by 1/sqrt(K) so the outputs stay of order one."""
    import cupy as cp
    import numpy as np

    from lab.measure.check import random_array

    m, n, k = USAGE_SHAPE["M"], USAGE_SHAPE["N"], USAGE_SHAPE["K"]

    def draw(shape, s, scale=1.0):
        return (random_array(shape, np.float32, seed + s, "normal", xp=cp) * np.float32(scale)).astype(cp.float16)

    return draw((m, k), 0), draw((n, k), 1, k ** -0.5), draw((m, n), 2)


def usage_report(x, w, h, y, stats: dict) -> str:
    """What section 1's call did: the largest difference from x @ w.T + h in fp32, the decision lab.ops made for the
    shape, and the counters it kept."""
    import cupy as cp
    import numpy as np

    from lab.ops import api

    ref = x.astype(cp.float32) @ w.astype(cp.float32).T + h.astype(cp.float32)
    err = float(cp.abs(y.astype(cp.float32) - ref).max())
    scale = float(cp.abs(ref).max())
    roundoff = float(np.finfo(np.float16).eps) / 2
    lines = [f"y: {y.shape} {y.dtype}; largest |y - (x @ w.T + h)| against fp32 = {err:.3g} (outputs up to "
             f"{scale:.3g}; fp16's unit roundoff is {roundoff:.2g} of a value)"]
    rt = api.default_runtime()
    decision = getattr(rt, "last_decision", None) or next(
        (d for key, d in rt.decisions.items() if key[0] == x.shape and key[3] == w.shape), None)
    if decision is not None:
        lines.append(f"decision for this shape: {candidate_label(decision.path, decision.settings)} "
                     f"(from: {decision.source})")
    lines.append(stats_text(stats))
    return "\n".join(lines)


def stats_text(stats: dict) -> str:
    """lab.ops.stats() as lines: its counts, paths, fallbacks, shape families and compiles ('(none)' for empty)."""
    lines = ["lab.ops.stats():"]
    for section in ("counts", "paths", "fallbacks", "families", "compiles"):
        items = stats.get(section) or {}
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(items.items())) or "(none)"
        lines.append(f"  {section:10s} {shown}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 2. The trace
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trace:
    steps: tuple  # lab.studies.serving_trace.Step, in order
    seed: int
    note: str  # where the steps come from, and whether they match the record's summary
    matches: bool | None  # None: no record to compare with

    def counts(self) -> Counter:
        """Steps per (kind, M)."""
        return Counter((s.kind, s.M) for s in self.steps)

    def calls_per_m(self) -> Counter:
        """Steps per M, whatever their kind: each step calls each of the layer's GEMMs once at that M."""
        return Counter(s.M for s in self.steps)


def layer_gemms() -> Markdown:
    """The layer's GEMMs as lab.studies.serving_trace defines them (activations M x K times a weight N x K)."""
    from lab.studies import serving_trace as st

    rows = [[name, f"M × {n} × {k}", epi] for name, n, k, epi in st.GEMMS]
    return md(f"Hidden size {st.HIDDEN}, intermediate {st.INTERMEDIATE}, fused QKV width {st.QKV}; two RMSNorms "
              "per layer besides.\n\n" + md_table(["GEMM", "M × N × K", "epilogue (fused where the path can)"], rows))


def _plain(value):
    """A summary as JSON gives it back (integer keys become strings), so a fresh one compares with a record's."""
    return json.loads(json.dumps(value))


def trace_of(record: dict | None) -> Trace:
    """The trace's steps, regenerated with the record's seed and length (the study's own constants without one),
    and compared with the record's summary."""
    from lab.studies import ops_study
    from lab.studies import serving_trace as st

    summary = (record or {}).get("trace") or {}
    seed, n = int(summary.get("seed", ops_study.TRACE_SEED)), int(summary.get("steps", ops_study.TRACE_STEPS))
    share = float(summary.get("prefill_share", ops_study.TRACE_PREFILL_SHARE))
    skew = float(summary.get("skew", ops_study.TRACE_SKEW))
    steps = tuple(st.make_trace(seed, n, share, skew))
    made = f"lab.studies.serving_trace.make_trace(seed={seed}, steps={n}, prefill_share={share:g}, skew={skew:g})"
    if record is None:
        return Trace(steps, seed, f"regenerated here: {made}, the study's own constants (no {TRACE} record to "
                                  "check it against)", None)
    recorded = {k: v for k, v in summary.items() if k not in ("seed", "prefill_share", "skew")}
    same = _plain(st.summarize(list(steps))) == _plain(recorded)
    if same and record.get("step_counts"):  # the record's own counts per step, where it has them
        counts = Counter((s.kind, s.M) for s in steps)
        same = all(counts[(c["kind"], c["M"])] == c["steps"] for c in record["step_counts"])
    if same:
        note = f"regenerated here: {made}; its summary matches the {TRACE} record's exactly"
    else:
        note = (f"regenerated here: {made}; its summary DOES NOT MATCH the {TRACE} record's (lab.studies.serving_trace "
                "changed since the record was made): step counts below are the regenerated trace's, times the "
                "record's")
    return Trace(steps, seed, note, same)


def trace_summary(trace: Trace) -> str:
    """Steps, distinct steps, the decode share, the decode M quantiles, the prefill buckets, the most common M."""
    from lab.studies import serving_trace as st

    s = st.summarize(list(trace.steps))
    per_m = trace.calls_per_m()
    hot_m, hot_n = per_m.most_common(1)[0]
    q = s["decode_M_quantiles"]
    lines = [trace.note + ".",
             f"{s['steps']} steps ({s['distinct']} distinct (kind, M)); decode steps: {s['decode_share']:.1%}",
             "decode batch M quantiles: " + ", ".join(f"p{k} = {v}" for k, v in q.items()),
             "prefill steps per sequence bucket: " + (", ".join(f"M={m}: {n}" for m, n in
                                                              s["prefill_buckets"].items()) or "(none)"),
             f"distinct M values: {len(per_m)}; the most common M is {hot_m} ({hot_n} steps, "
             f"{_share(hot_n, len(trace.steps)):.1%} of them)"]
    return "\n".join(lines)


def _per_step(record: dict | None) -> dict[tuple[str, int], dict]:
    return {(r["kind"], r["M"]): r for r in (record or {}).get("per_step_us", [])}


def shape_rows(record: dict | None, trace: Trace) -> list[dict]:
    """One row per distinct (kind, M) of the trace: its steps and, with a record, lab.ops's time per step (us)."""
    per = _per_step(record)
    return [{"kind": kind, "M": m, "steps": n, "us": per.get((kind, m), {}).get("lab_ops")}
            for (kind, m), n in sorted(trace.counts().items(), key=lambda kv: (kv[0][1], kv[0][0]))]


def bucket_times(record: dict | None, trace: Trace) -> list[dict] | None:
    """Per M bucket (M rounded up to a power of two, as the tune cache files it): steps of each kind and each
    method's GPU time over the trace (steps x time per step); None without a trace record."""
    from lab.ops.shapes import m_bucket

    per = _per_step(record)
    if not per:
        return None
    rows: dict[int, dict] = {}
    for (kind, m), n in trace.counts().items():
        row = rows.setdefault(m_bucket(m), {"bucket": m_bucket(m), "decode_steps": 0, "prefill_steps": 0,
                                            "decode_us": 0.0, "prefill_us": 0.0, "us": Counter(), "unknown": 0})
        row[f"{kind}_steps"] += n
        times = per.get((kind, m))
        if times is None:
            row["unknown"] += n
            continue
        row[f"{kind}_us"] += n * times.get("lab_ops", 0.0)
        for method in METHODS:
            if times.get(method) is not None:
                row["us"][method] += n * times[method]
    total = sum(r["us"]["lab_ops"] for r in rows.values())
    for row in rows.values():
        row["share"] = _share(row["us"]["lab_ops"], total)
        row["us"] = dict(row["us"])
    return [rows[b] for b in sorted(rows)]


def hot_buckets(buckets: list[dict] | None, share: float = HOT_TIME_SHARE) -> list[dict]:
    """The fewest M buckets whose "share" (of lab.ops's GPU time, as bucket_times gives it) adds up to at least
    `share`, largest first."""
    if not buckets:
        return []
    chosen, held = [], 0.0
    for row in sorted(buckets, key=lambda r: -r["share"]):
        if held >= share:
            break
        chosen.append(row)
        held += row["share"]
    return chosen


def time_table(buckets: list[dict] | None) -> Markdown:
    """Steps and lab.ops's GPU time per M bucket: where the steps are against where the time goes."""
    if buckets is None:
        return md(missing(TRACE))
    steps = sum(r["decode_steps"] + r["prefill_steps"] for r in buckets)
    rows = [[bucket_label(r["bucket"]), r["decode_steps"], r["prefill_steps"],
             f"{_share(r['decode_steps'] + r['prefill_steps'], steps):.1%}", _us(r["us"].get("lab_ops")),
             f"{r['share']:.1%}"] for r in buckets]
    unknown = sum(r["unknown"] for r in buckets)
    note = f"\n\n{unknown} steps have no time in the record." if unknown else ""
    return md(md_table(["M bucket", "decode steps", "prefill steps", "share of steps", "lab.ops us (all its steps)",
                      "share of lab.ops time"], rows) + note)


# ----------------------------------------------------------------------------------------------
# 3. The dispatch table and the trace's decisions
# ----------------------------------------------------------------------------------------------

def rule_reasons(table=None) -> list[str]:
    """Each rule's note (why it is there) in `table` (lab.ops.rules.DEFAULT by default, whose notes `lab tune --table`
    wrote from its sweep), '' where a rule has none."""
    from lab.ops import rules

    table = table or rules.DEFAULT
    return list(table.notes) if len(table.notes) == len(table.rules) else [""] * len(table.rules)


def _when(rule) -> str:
    return ", ".join(f"{k}={v}" for k, v in rule.when) or "any shape"


def table_decision(table: Table, shape, arch: int) -> tuple[str, dict, str]:
    """What the table alone picks for `shape` on a GPU of `arch` (lab.ops.dispatch.Runtime.rule_decision's logic,
    without a GPU): (path, config, 'rule N' or 'fallback')."""
    from lab.ops.paths import PATHS

    for i, rule in enumerate(table.rules, 1):
        if rule.matches(shape) and PATHS[rule.path].refusal(shape, arch) is None:
            return rule.path, dict(rule.config), f"rule {i}"
    return "cublas", {}, "fallback"


def trace_shapes(trace: Trace, gpu: Gpu, gemms=None):
    """(GemmShape, gemm name, calls) for every GEMM of every distinct M of the trace."""
    from lab.ops.shapes import GemmShape
    from lab.studies import serving_trace as st

    for m, n_steps in sorted(trace.calls_per_m().items()):
        for name, n, k, epi in gemms or st.GEMMS:
            yield GemmShape(m, n, k, "float16", "TN", True, epi, gpu.sm_count), name, n_steps


def dispatch_table(trace: Trace, gpu: Gpu, table: Table | None = None) -> Markdown:
    """The dispatch table, one row per rule: its conditions, path, configuration and reason (the rule's note),
    and the share of the trace's GEMM calls it would take if the table alone decided (computed here)."""
    from lab.ops import rules

    table = table or rules.DEFAULT
    reasons = rule_reasons(table)
    taken = Counter()
    for shape, _, calls in trace_shapes(trace, gpu):
        taken[table_decision(table, shape, gpu.arch)[2]] += calls
    total = sum(taken.values())
    rows = []
    for i, rule in enumerate(table.rules, 1):
        why = reasons[i - 1]
        rows.append([i, f"`{_when(rule)}`", rule.path, _config(dict(rule.config)) or "-",
                     why or "(everything the rules above leave: the default path)",
                     f"{_share(taken[f'rule {i}'], total):.1%}"])
    if taken["fallback"]:
        rows.append(["-", "no rule serves the shape", "cublas", "-", "the last fallback: serves every shape",
                     f"{_share(taken['fallback'], total):.1%}"])
    head = ["#", "when", "path", "config", "why (the rule's note)", "trace calls, table alone"]
    return md(f"`{table.source}` (first match wins; evaluated for sm_{gpu.arch}, {gpu.sm_count} SMs: "
              f"{gpu.where})\n\n" + md_table(head, rows))


def decision_rows(record: dict | None, trace: Trace) -> list[dict] | None:
    """The record's decisions, each with the number of calls it served in the trace (one per step at its M)."""
    if record is None:
        return None
    per_m = trace.calls_per_m()
    return [d | {"calls": per_m.get(d["M"], 0)} for d in record.get("decisions", [])]


def _source_kind(source: str) -> str:
    return "fallback" if source.startswith("fallback") else source


def decisions_by_family(record: dict | None, trace: Trace) -> Markdown:
    """Which path each shape family of the trace took under lab.ops (tuned), and how often: distinct shapes, calls
    and their share, and where the decisions came from (the tune cache, a rule, a fallback)."""
    rows = decision_rows(record, trace)
    if rows is None:
        return md(missing(TRACE))
    groups: dict[tuple, dict] = {}
    for d in rows:
        g = groups.setdefault((d["family"], d["path"], _config(d.get("config"))),
                              {"shapes": 0, "calls": 0, "sources": Counter()})
        g["shapes"] += 1
        g["calls"] += d["calls"]
        g["sources"][_source_kind(d["source"])] += 1
    total = sum(g["calls"] for g in groups.values())
    table = [[fam, path, cfg or "-", g["shapes"], g["calls"], f"{_share(g['calls'], total):.1%}",
              ", ".join(f"{s} {n}" for s, n in g["sources"].most_common())]
             for (fam, path, cfg), g in sorted(groups.items(), key=lambda kv: -kv[1]["calls"])]
    return md(md_table(["shape family", "path", "config", "distinct shapes", "calls in the trace", "share of calls",
                      "decided by (shapes)"], table))


def decision_map(record: dict | None) -> Markdown:
    """The path of each GEMM of the layer per M bucket (several when the bucket's M values went different ways)."""
    if record is None:
        return md(missing(TRACE))
    from lab.ops.shapes import m_bucket

    gemms = list(dict.fromkeys(d["gemm"] for d in record.get("decisions", [])))
    cells: dict[tuple[int, str], Counter] = {}
    for d in record.get("decisions", []):
        cells.setdefault((m_bucket(d["M"]), d["gemm"]), Counter())[candidate_label(d["path"], d.get("config"))] += 1
    buckets = sorted({b for b, _ in cells})
    rows = [[bucket_label(b)] + [" / ".join(c for c, _ in cells.get((b, g), Counter()).most_common()) or "-"
                                 for g in gemms] for b in buckets]
    return md(md_table(["M bucket", *gemms], rows))


def counters_table(record: dict | None, trace: Trace) -> Markdown:
    """lab.ops's counters over the whole trace run in order (one layer per step), beside the calls per path that the
    decisions imply (each decision times the steps at its M), with what explains any difference."""
    if record is None:
        return md(missing(TRACE))
    c = record.get("counters") or {}
    counted = Counter(c.get("paths") or {})
    implied = Counter()
    for d in decision_rows(record, trace) or []:
        implied["matmul:" + d["path"]] += d["calls"]
    total = sum(implied.values())
    keys = sorted(set(counted) | set(implied), key=lambda k: (-max(counted[k], implied[k]), k))
    rows = [[k, counted[k], implied[k] if k.startswith("matmul:") else "-",
             f"{_share(implied[k], total):.1%}" if k.startswith("matmul:") else "-"] for k in keys]
    counts = c.get("counts") or {}
    lines = [md_table(["operation:path", "counted", "calls the decisions imply", "share of GEMM calls"], rows), "",
             "counts: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "(none)")]
    uncounted = total - sum(v for k, v in counted.items() if k.startswith("matmul:"))
    if uncounted > 0:
        lines.append(f"{uncounted} GEMM calls are not counted per path: a call replayed on lab.ops.api's fast path "
                     "(same shapes and addresses as a recorded one) counts as a replay only; the decisions give "
                     "their paths.")
    if not counts.get("decision_misses"):
        lines.append("No shape was decided during the counted run (each was decided when the trace was checked and "
                     "timed before it), so the shape families and fallbacks, counted when a shape is first decided, "
                     "read zero here: the decisions above say where each choice came from.")
    else:
        lines.append("families: " + (", ".join(f"{k} {v}" for k, v in (c.get("families") or {}).items()) or "(none)")
                     + "; fallbacks: " + (", ".join(f"{k} {v}" for k, v in (c.get("fallbacks") or {}).items())
                                          or "(none)"))
    return md("\n".join(lines))


def fallback_share(record: dict | None, trace: Trace) -> float | None:
    """The share of the trace's GEMM calls whose decision was a fallback (no rule served, or a path failed)."""
    rows = decision_rows(record, trace)
    if not rows:
        return None
    total = sum(d["calls"] for d in rows)
    return _share(sum(d["calls"] for d in rows if d["source"].startswith("fallback")), total)


def path_share(record: dict | None, trace: Trace, path: str) -> float | None:
    """The share of the trace's GEMM calls decided for `path` (each decision weighted by the steps at its M)."""
    rows = decision_rows(record, trace)
    if not rows:
        return None
    return _share(sum(d["calls"] for d in rows if d["path"] == path), sum(d["calls"] for d in rows))


# ----------------------------------------------------------------------------------------------
# 4. Autotune per bucket
# ----------------------------------------------------------------------------------------------

_BUCKET = re.compile(r"M<=(\d+) N=(\d+) K=(\d+) (\S+) (\S+) (\S+) epilogue=(\S+)")


def parse_bucket(text: str) -> dict | None:
    """lab.ops.shapes.bucket's string back into its fields; None for a string it did not write."""
    m = _BUCKET.fullmatch(text.strip())
    if not m:
        return None
    return {"M": int(m[1]), "N": int(m[2]), "K": int(m[3]), "dtype": m[4], "layout": m[5], "aligned": m[6] == "aligned",
            "epilogue": m[7]}


def gemm_name(n: int, k: int, epilogue: str, gemms=None) -> str:
    """The layer's GEMM with these sizes and epilogue (lab.studies.serving_trace.GEMMS), else 'N x K epilogue'."""
    from lab.studies import serving_trace as st

    for name, gn, gk, ge in gemms or st.GEMMS:
        if (gn, gk, ge) == (n, k, epilogue):
            return name
    return f"{n}x{k} {epilogue}"


def tune_rows(record: dict | None) -> list[dict] | None:
    """One row per tuned bucket: its GEMM, M bucket, tuned M, winner and every candidate's us (or rejection)."""
    if record is None:
        return None
    out = []
    for b in record.get("buckets", []):
        fields = parse_bucket(b.get("bucket", "")) or {}
        cands, rejected = {}, {}
        for c in b.get("candidates", []):
            key = candidate_label(c["path"], c.get("config"))
            if "us" in c:
                cands[key] = c["us"]
            else:
                rejected[key] = c.get("rejected", "rejected")
        out.append({"bucket": b.get("bucket", "?"), "gemm": gemm_name(fields.get("N"), fields.get("K"),
                                                                      fields.get("epilogue")),
                    "N": fields.get("N"), "K": fields.get("K"), "epilogue": fields.get("epilogue"),
                    "m_bucket": fields.get("M", b.get("tuned_M")), "tuned_M": b.get("tuned_M"),
                    "winner": candidate_label(b["path"], b.get("config")), "winner_path": b["path"],
                    "winner_us": b.get("us"), "candidates": cands, "rejected": rejected, "seconds": b.get("seconds")})
    return sorted(out, key=lambda r: (str(r["gemm"]), r["m_bucket"] or 0))


def tune_table(record: dict | None) -> Markdown:
    """Every bucket: the winner, its time, the runner-up and by how much, cuBLAS's and the generic path's time
    against the winner, and the rejected candidates with their reasons."""
    rows = tune_rows(record)
    if rows is None:
        return md(missing(TUNE))
    table = []
    for r in rows:
        timed = sorted(r["candidates"].items(), key=lambda kv: kv[1])
        second = timed[1] if len(timed) > 1 else None
        best = r["winner_us"]
        table.append([r["gemm"], bucket_label(r["m_bucket"]), r["tuned_M"], r["winner"], _us(best),
                      f"{second[0]} {as_x(second[1] / best) if best else '-'}" if second else "-",
                      as_x(r["candidates"]["cublas"] / best) if best and "cublas" in r["candidates"] else "-",
                      as_x(r["candidates"]["generic"] / best) if best and "generic" in r["candidates"] else "-",
                      "; ".join(f"{k}: {v}" for k, v in r["rejected"].items()) or "-"])
    head = ["GEMM", "bucket", "tuned at M", "winner", "winner us", "runner-up (its time / winner's)",
            "cublas / winner", "generic / winner", "rejected (why)"]
    return md(md_table(head, table))


def tune_wins(record: dict | None) -> str:
    """Wins per path, how long the whole autotune took and under which environment key."""
    if record is None:
        return missing(TUNE)
    wins = record.get("wins") or Counter(b["path"] for b in record.get("buckets", []))
    n = sum(wins.values())
    per_bucket = [b["seconds"] for b in record.get("buckets", []) if b.get("seconds") is not None]
    lines = [f"{n} buckets tuned; wins: " + ", ".join(f"{p} {w} ({_share(w, n):.0%})" for p, w in
                                                         sorted(wins.items(), key=lambda kv: -kv[1]))]
    if per_bucket:
        lines.append(f"autotune time: {record.get('seconds', sum(per_bucket)):.0f} s in all, median "
                     f"{statistics.median(per_bucket):.1f} s per bucket (each candidate checked, then timed)")
    if record.get("environment"):
        lines.append(f"tune cache environment key: {record['environment']}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 5. Compile time and cache growth (host CPU)
# ----------------------------------------------------------------------------------------------

def compile_summary(record: dict | None) -> str:
    """The compile study in a few lines: variants, seconds per miss (per rung and target), cache size, a hit's cost."""
    if record is None:
        return missing(COMPILE)
    s = record.get("summary", {})
    lines = [f"{CPU_LABEL.upper()}: {describe_provenance(record.get('provenance', {}))}, "
             f"{record.get('provenance', {}).get('cpus_usable', '?')} usable CPU(s).",
             f"{s.get('variants', 0)} variants built ({s.get('skipped', 0)} skipped), "
             f"{s.get('total_compile_s', 0):.1f} s of compiling in all; a miss (key + NVRTC + write): median "
             f"{s.get('median_compile_s', 0):.2f} s, from {s.get('min_compile_s', 0):.2f} to "
             f"{s.get('max_compile_s', 0):.2f} s",
             f"cache after all of them: {s.get('cache_bytes', 0) / 1e6:.2f} MB "
             f"({s.get('cache_disk_bytes', 0) / 1e6:.2f} MB on disk); a hit (the lookup): median "
             f"{1e3 * s.get('median_hit_s', 0):.2f} ms"]
    groups: dict[tuple, list] = {}
    for r in record.get("rows", []):
        groups.setdefault((r["rung"], r["target"]), []).append(r["compile_s"])
    for (rung, target), secs in groups.items():
        lines.append(f"  {rung} for {target}: {len(secs)} variants, median {statistics.median(secs):.2f} s each")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 6. First-request latency
# ----------------------------------------------------------------------------------------------

def latency_rows(record: dict | None) -> list[dict] | None:
    """One row per scenario of ops_latency.json (in the study's order), or None without the record. 'compiled'
    counts the whole process's NVRTC compiles; 'compiled_first' those made before the first result, the warm-up
    manifest's included, and 'compiled_in_first' those the first request itself made (the study records them)."""
    if record is None:
        return None
    rows = []
    for name, s in (record.get("scenarios") or {}).items():
        if "error" in s:
            rows.append({"scenario": name, "error": s["error"]})
            continue
        total = s.get("compiles_total") or {}
        first = s.get("compiles_by_first_request") or {}
        before = s.get("compiles_before_requests") or {}
        warm = s.get("warmup") or {}
        rows.append({"scenario": name, "first_ms": s.get("first_ms"), "p50_ms": s.get("p50_ms"),
                     "p99_ms": s.get("p99_ms"), "max_ms": s.get("max_ms"), "requests": s.get("requests"),
                     "compiled": total.get("compiled", 0), "from_disk": total.get("cache_hits", 0),
                     "compile_s": total.get("compile_ms", 0) / 1e3,
                     "compiled_first": before.get("compiled", 0) + first.get("compiled", 0),
                     "compiled_in_first": first.get("compiled", 0),
                     "warmup_s": warm.get("seconds"), "warmup_shapes": warm.get("shapes"),
                     "start_to_first_s": s.get("process_start_to_first_result_s")})
    return rows


def latency_table(record: dict | None) -> Markdown:
    rows = latency_rows(record)
    if rows is None:
        return md(missing(LATENCY))
    table = []
    for r in rows:
        if "error" in r:
            table.append([SCENARIOS.get(r["scenario"], r["scenario"]), "failed: " + r["error"].splitlines()[-1]]
                         + ["-"] * 7)
            continue
        warm = "-" if r["warmup_s"] is None else f"{r['warmup_s']:.2f} s ({r['warmup_shapes']} shapes)"
        table.append([SCENARIOS.get(r["scenario"], r["scenario"]), f"{r['first_ms']:.1f}", f"{r['p50_ms']:.2f}",
                      f"{r['p99_ms']:.2f}", r["compiled_first"], r["compiled_in_first"], r["compiled"], warm,
                      f"{r['start_to_first_s']:.2f}"])
    head = ["scenario", "first request ms", "p50 ms", "p99 ms", "compiles by the first result",
            "of them in the first request", "compiles in all", "warm-up", "process start to first result, s"]
    return md(f"{record.get('requests', '?')} requests per process (one layer each, M from the trace's shorter steps); "
              f"the manifest lists {record.get('manifest_shapes', '?')} shapes.\n\n" + md_table(head, table))


def warm_target(record: dict | None) -> dict | None:
    """The warm-cache target held against the record: a second process with a warm cache compiles nothing
    (TARGETS['warm_compiles']) and has its first result within TARGETS['warm_first_ms'], read as its first
    request's time from its first call to its result. None without the scenario."""
    warm = next((r for r in latency_rows(record) or [] if r["scenario"] == "warm_caches" and "error" not in r), None)
    if warm is None:
        return None
    compiles_ok = warm["compiled"] <= TARGETS["warm_compiles"]
    first_ok = warm["first_ms"] <= TARGETS["warm_first_ms"]
    return {"row": warm, "compiles_ok": compiles_ok, "first_ok": first_ok, "met": compiles_ok and first_ok}


def latency_target(record: dict | None) -> str:
    rows = latency_rows(record)
    if rows is None:
        return missing(LATENCY)
    target = warm_target(record)
    if target is None:
        failed = next((r for r in rows if r["scenario"] == "warm_caches"), None)
        return "warm_caches: not in the record" + (f" (failed: {failed['error'].splitlines()[-1]})" if failed else "")
    warm = target["row"]
    lines = [f"warm caches, second process: {warm['compiled']} NVRTC compiles "
             f"(target {TARGETS['warm_compiles']}: {'met' if target['compiles_ok'] else 'MISSED'}), "
             f"{warm['from_disk']} cubins loaded from the disk cache",
             f"its first request: {warm['first_ms']:.1f} ms "
             f"({_meets(warm['first_ms'], TARGETS['warm_first_ms'], True, ' ms')})",
             f"the warm-cache target: {'MET' if target['met'] else 'MISSED'}",
             f"(from process start, imports and the layer's arrays included: {warm['start_to_first_s']:.2f} s)"]
    both = next((r for r in rows if r["scenario"] == "warm_caches_with_manifest" and "error" not in r), None)
    if both:
        lines.append(f"warm caches and a warm-up manifest run at start ({both['warmup_s']:.2f} s, "
                     f"{both['compiled']} compiles): the first request then takes {both['first_ms']:.1f} ms "
                     f"({_meets(both['first_ms'], TARGETS['warm_first_ms'], True, ' ms')})")
    empty = next((r for r in rows if r["scenario"] == "empty_caches" and "error" not in r), None)
    if empty:
        lines.append(f"for contrast, empty caches: first request {empty['first_ms']:.0f} ms "
                     f"({as_x(empty['first_ms'] / warm['first_ms'])} the warm one), {empty['compiled']} compiles "
                     f"({empty['compile_s']:.1f} s of NVRTC)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 7. The trace's result
# ----------------------------------------------------------------------------------------------

def _methods(record: dict) -> list[str]:
    totals = record.get("totals_us") or {}
    return [m for m in METHODS if m in totals] + [m for m in totals if m not in METHODS]


def totals_table(record: dict | None) -> Markdown:
    """Each method's total GPU time over the trace (one layer per step), per step kind, and against lab.ops."""
    if record is None:
        return md(missing(TRACE))
    totals, ratios, what = record.get("totals_us") or {}, record.get("time_over_lab_ops") or {}, \
        record.get("methods") or {}
    rows = [[f"`{m}`", what.get(m, ""), _us(totals[m].get("total_us")), _us(totals[m].get("decode_us")),
             _us(totals[m].get("prefill_us")), as_x(ratios.get(m))] for m in _methods(record)]
    checks = record.get("checks") or []
    failed = record.get("checks_failed", sum(1 for c in checks if c.get("bad")))
    head = ["method", "what", "total us", "decode steps us", "prefill steps us", "time / lab_ops"]
    return md(f"Checked first: {len(checks)} distinct GEMMs of the trace through lab.ops against float64, "
              f"{failed} with elements outside the bound.\n\n" + md_table(head, rows))


def trace_targets(record: dict | None) -> str:
    """The trace's targets, from the record: lab.ops at least TARGETS['x_generic'] less total time than one
    generic kernel (both readings of 'one generic kernel') and TARGETS['x_cublas'] less than cuBLAS alone."""
    if record is None:
        return missing(TRACE)
    ratios = record.get("time_over_lab_ops") or {}
    lines = []
    for method, what in ONE_KERNEL.items():
        ratio = ratios.get(method)
        lines.append(f"{method} / lab_ops = {as_x(ratio)} -> {_meets(ratio, TARGETS['x_generic'])}   ({what})")
    ratio = ratios.get("cublas")
    lines.append(f"cublas / lab_ops = {as_x(ratio)} -> {_meets(ratio, TARGETS['x_cublas'])}   (cuBLAS for every GEMM, "
                 "one CuPy elementwise kernel per epilogue)")
    if "lab_ops_table" in ratios:
        lines.append(f"lab_ops_table / lab_ops = {as_x(ratios['lab_ops_table'])}: what the tune cache adds over the "
                     "dispatch table alone")
    return "\n".join(lines)


def gemm_share(gemms: dict | None, record: dict | None) -> str:
    """The GEMMs' part of the whole-layer ratio to cuBLAS: the trace's GEMMs alone (with their epilogues, without
    the RMSNorms), lab.ops against cuBLAS, from ops_trace_gemms.json."""
    if gemms is None:
        return missing(GEMMS_ONLY)
    t = gemms.get("totals_us") or {}
    lab, cub = (t.get(m, {}).get("total_us") for m in ("lab_ops", "cublas"))
    if not lab or not cub:
        return f"{GEMMS_ONLY}: no lab_ops and cublas totals in the record"
    line = (f"the GEMMs alone (epilogues included, RMSNorms left out): cuBLAS {_us(cub)} us, lab.ops {_us(lab)} us, "
            f"cublas / lab_ops = {as_x(cub / lab)} ({_meets(cub / lab, TARGETS['x_cublas'])} on the GEMMs alone)")
    whole = ((record or {}).get("totals_us") or {})
    if whole.get("lab_ops") and whole.get("cublas"):
        norms_lab = whole["lab_ops"]["total_us"] - lab
        norms_cub = whole["cublas"]["total_us"] - cub
        line += (f"\nthe rest of each layer, the two RMSNorms (the whole-layer record minus this one, two runs): "
                 f"CuPy's composition {_us(norms_cub)} us against lab.ops's kernel {_us(norms_lab)} us: "
                 f"{_share(norms_cub - norms_lab, whole['cublas']['total_us'] - whole['lab_ops']['total_us']):.0%} "
                 "of the whole-layer saving")
    return line


def speedup_rows(record: dict | None) -> list[dict] | None:
    """Per distinct step: lab.ops's speedup over cuBLAS, rung 03 (generic) and rung 06 (persistent)."""
    if record is None:
        return None
    out = []
    for r in record.get("per_step_us", []):
        base = r.get("lab_ops")
        if not base:
            continue
        out.append({"kind": r["kind"], "M": r["M"], "lab_ops_us": base,
                    **{f"over_{m}": r[m] / base for m in ("cublas", "generic", "persistent") if r.get(m)}})
    return sorted(out, key=lambda r: (r["M"], r["kind"]))


def speedup_reading(record: dict | None) -> str:
    """Per step kind: the range of lab.ops's speedups over cuBLAS and the generic kernel, and the steps it loses."""
    rows = speedup_rows(record)
    if rows is None:
        return missing(TRACE)
    lines = []
    for kind in ("decode", "prefill"):
        mine = [r for r in rows if r["kind"] == kind]
        for base in ("cublas", "generic"):
            vals = [(r[f"over_{base}"], r["M"]) for r in mine if f"over_{base}" in r]
            if not vals:
                continue
            lost = sorted(m for v, m in vals if v < 1.0)
            lines.append(f"{kind:7s} over {base:8s}: {min(vals)[0]:.2f}x (M={min(vals)[1]}) to {max(vals)[0]:.2f}x "
                         f"(M={max(vals)[1]}); slower than {base} at {len(lost)} of {len(vals)} step sizes"
                         + (f" (M = {', '.join(map(str, lost[:12]))}{' ...' if len(lost) > 12 else ''})" if lost
                            else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 8. Hot versus cold
# ----------------------------------------------------------------------------------------------

def hot_cold(record: dict | None, trace: Trace) -> dict | None:
    """The hot shape's choice forced everywhere against lab.ops: per step kind (the record's totals) and split into
    the hot steps (M = the record's hot M) and the cold ones (every other step), from the per-step times."""
    if record is None or "hot_forced" not in (record.get("totals_us") or {}):
        return None
    totals, hot_m, per = record["totals_us"], record.get("hot_M"), _per_step(record)
    groups = {"hot": Counter(), "cold": Counter()}
    steps = Counter()
    for (kind, m), n in trace.counts().items():
        times = per.get((kind, m))
        if times is None or times.get("hot_forced") is None:
            continue
        g = "hot" if m == hot_m else "cold"
        steps[g] += n
        for method in ("lab_ops", "hot_forced", "cublas"):
            groups[g][method] += n * times.get(method, float("nan"))
    kinds = {k: {m: totals[m].get(f"{k}_us") for m in ("lab_ops", "hot_forced")} for k in ("decode", "prefill")}
    return {"hot_M": hot_m, "choice": hot_choice(record), "kinds": kinds,
            "groups": {g: dict(v) for g, v in groups.items()}, "steps": dict(steps)}


def hot_choice(record: dict) -> str:
    """The path (and configuration) the study forced everywhere, from its description of the hot_forced method
    ("the hot shape's choice everywhere: decode {}")."""
    choice = record.get("hot_choice")
    if choice:
        config = " ".join(f"{k}={v}" for k, v in (choice.get("config") or {}).items())
        return f"{choice['path']} {config}".strip()
    text = (record.get("methods") or {}).get("hot_forced", "?")
    return text.split(": ", 1)[-1].removesuffix(" {}").strip() or "?"


def hot_cold_table(record: dict | None, trace: Trace) -> Markdown:
    hc = hot_cold(record, trace)
    if hc is None:
        return md(missing(TRACE) if record is None else f"(no hot_forced method in {TRACE})")
    rows = []
    for k, t in hc["kinds"].items():
        if t["lab_ops"]:
            rows.append([f"{k} steps", _us(t["lab_ops"]), _us(t["hot_forced"]), as_x(t["hot_forced"] / t["lab_ops"])])
    for g in ("hot", "cold"):
        t = hc["groups"][g]
        if t.get("lab_ops"):
            what = f"M = {hc['hot_M']}" if g == "hot" else f"M != {hc['hot_M']}"
            rows.append([f"{g} steps ({what}, {hc['steps'][g]} steps)", _us(t["lab_ops"]), _us(t["hot_forced"]),
                         as_x(t["hot_forced"] / t["lab_ops"])])
    return md(f"The hot shape: M = {hc['hot_M']}, the most common step; its choice: {hc['choice']} (cuBLAS where "
              "that path cannot serve a shape).\n\n" + md_table(["steps", "lab_ops us", "hot_forced us",
                                                               "hot_forced / lab_ops"], rows))


def boundary(record: dict | None) -> dict | None:
    """The trace record's boundary sweep ({} when the record has none), None without the record."""
    return None if record is None else (record.get("boundary") or {})


def decode_rule_max_m(table: Table | None = None) -> int | None:
    """The largest M the dispatch table sends to the decode GEMV (its first decode rule's max_m)."""
    from lab.ops import rules

    limits = [dict(r.when).get("max_m") for r in (table or rules.DEFAULT).rules if r.path == "decode"]
    return limits[0] if limits else None


def decode_wins(record: dict | None) -> list[tuple[int, bool, float]]:
    """Per M of the boundary sweep where decode and another path both ran: (M, decode is the fastest, the best other
    path's time over decode's)."""
    b = (record or {}).get("boundary") or {}
    ms, us = b.get("M") or [], b.get("us") or {}
    decode = us.get("decode") or []
    out = []
    for i, m in enumerate(ms):
        rivals = [v[i] for p, v in us.items() if p != "decode" and i < len(v) and v[i] is not None]
        d = decode[i] if i < len(decode) else None
        if d is not None and rivals:
            out.append((m, d < min(rivals), min(rivals) / d))
    return out


def decode_limit(record: dict | None) -> tuple[int | None, int | None]:
    """(the last M of the sweep at which decode is the fastest path, the first M after it at which it is not)."""
    wins = decode_wins(record)
    last = max((m for m, ok, _ in wins if ok), default=None)
    after = next((m for m, ok, _ in wins if not ok and (last is None or m > last)), None)
    return last, after


def boundary_against_table(record: dict | None) -> str:
    """The sweep's decode limit against the dispatch table's, in one sentence."""
    last, after = decode_limit(record)
    table = decode_rule_max_m()
    if table is None or last is None:
        return "the table has no decode rule" if table is None else "decode wins at no M of the sweep"
    if after is not None and table >= after:
        return (f"the table sends M up to {table} to decode, past M = {after} where the sweep has another path "
                "faster on this GEMM: its boundary is worth re-measuring")
    if table < last:
        return (f"the table stops decode at M = {table}, while the sweep has it fastest up to M = {last} on this GEMM")
    return f"the table's decode limit (M <= {table}) agrees with the sweep on this GEMM"


def boundary_reading(record: dict | None) -> str:
    """Where the decode GEMV stops paying on the boundary sweep: the last M at which it beats every other path, and
    the first after that at which it does not; beside the dispatch table's decode rule."""
    if record is None:
        return missing(TRACE)
    b = record.get("boundary")
    if not b:
        return f"(no boundary sweep in {TRACE})"
    lines = [f"{b.get('gemm', '?')} GEMM, N={b.get('N')} K={b.get('K')}: the best other path's time (rung 06, split-K, "
             "cuBLAS) over decode's, per M (above 1: decode is faster):",
             "  " + ", ".join(f"M={m}: {r:.2f}x" for m, _, r in decode_wins(record))]
    last, after = decode_limit(record)
    if last is None:
        lines.append("decode beats every other path at no M of the sweep")
    else:
        lines.append(f"decode pays up to M = {last}" + (f"; from M = {after} another path is faster" if after else
                                                         "; it still wins at the sweep's largest M"))
    if decode_rule_max_m() is not None:
        lines.append(f"the dispatch table sends M <= {decode_rule_max_m()} to decode (rules.DEFAULT): "
                     + boundary_against_table(record))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 9. Dispatch overhead
# ----------------------------------------------------------------------------------------------

OVERHEAD_COLUMNS = ("raw_replay", "lab_ops", "lab_ops_alloc", "cupy_matmul")


def overhead_rows(record: dict | None) -> list[dict] | None:
    if record is None:
        return None
    rows = []
    for path, r in (record.get("paths") or {}).items():
        rows.append({"path": path, "shape": r.get("shape", {}), "launches": r.get("launches_per_call"),
                     "overhead_us": r.get("overhead_us"),
                     **{c: r[c]["median"] for c in OVERHEAD_COLUMNS if isinstance(r.get(c), dict)},
                     "spread": {c: (r[c]["min"], r[c]["max"]) for c in OVERHEAD_COLUMNS if isinstance(r.get(c), dict)}})
    return rows


def overhead_table(record: dict | None) -> Markdown:
    """Host microseconds per call, per path: the same launches replayed raw, lab.ops (output given and allocated),
    cupy.matmul; lab.ops's overhead over the raw replay against the target."""
    rows = overhead_rows(record)
    if rows is None:
        return md(missing(OVERHEAD))
    table = []
    for r in rows:
        s = r["shape"]
        cells = [f"{r[c]:.2f} ({r['spread'][c][0]:.2f}-{r['spread'][c][1]:.2f})" if c in r else "-"
                 for c in OVERHEAD_COLUMNS]
        table.append([r["path"], f"{s.get('M')}×{s.get('N')}×{s.get('K')}", r["launches"], *cells,
                      f"{r['overhead_us']:.2f}", _meets(r["overhead_us"], TARGETS["overhead_us"], True, " us")])
    head = ["path", "M×N×K", "launches per call", *(f"{c} us (min-max)" for c in OVERHEAD_COLUMNS),
            "overhead us (lab_ops - raw_replay)", "target"]
    return md(f"Medians of {record.get('trials', '?')} trials of {record.get('calls_per_trial', '?')} calls each, "
              "host time per call (the GPU work is tiny, so the host is the bottleneck).\n\n" + md_table(head, table))


# ----------------------------------------------------------------------------------------------
# 10. When is specialization worth it
# ----------------------------------------------------------------------------------------------

def _sum_method(buckets: list[dict], method: str) -> float:
    return sum(b["us"].get(method, 0.0) for b in buckets)


def checklist_rows(files: dict[str, dict | None], trace: Trace) -> list[list[str]]:
    """The seed's points, each with the trace's numbers (or which record is missing): [point, number, reading]."""
    trace_rec, tune, latency, overhead = (files.get(n) for n in (TRACE, TUNE, LATENCY, OVERHEAD))
    compile_rec = files.get(COMPILE)
    rows = []
    buckets = bucket_times(trace_rec, trace)
    hot = hot_buckets(buckets)
    n_steps = len(trace.steps)

    # 1. A hot spot: the work clusters on a few shapes.
    if buckets:
        hot_steps = sum(b["decode_steps"] + b["prefill_steps"] for b in hot)
        held = sum(b["share"] for b in hot)
        by_count = hot_buckets([b | {"share": _share(b["decode_steps"] + b["prefill_steps"], n_steps)}
                                for b in buckets])
        same = {b["bucket"] for b in by_count} == {b["bucket"] for b in hot}
        reading = ("the buckets that hold most of the steps also hold most of the time" if same else
                   "most of the steps are in " + ", ".join(bucket_label(b["bucket"]) for b in by_count)
                   + ": where the steps are is not where the time is; rank by time before specializing")
        rows.append(["The operation is a hot spot, its shapes clustered on a few",
                     f"{len(hot)} of {len(buckets)} M buckets ({', '.join(bucket_label(b['bucket']) for b in hot)}) "
                     f"hold {held:.0%} of lab.ops's GPU time and {_share(hot_steps, n_steps):.0%} of the steps",
                     reading])
    else:
        rows.append(["The operation is a hot spot, its shapes clustered on a few", f"NO RECORDS for {TRACE}", "-"])

    # 2. The default is clearly slow there.
    if hot:
        lab = _sum_method(hot, "lab_ops")
        over = {m: _share(_sum_method(hot, m), lab) for m in ("cublas", "generic", "persistent")}
        ratios = (trace_rec or {}).get("time_over_lab_ops") or {}
        rows.append(["The default implementation is clearly slower on the hot shapes",
                     f"in the hot buckets: cuBLAS / lab.ops {as_x(over['cublas'])}, rung 03 / lab.ops "
                     f"{as_x(over['generic'])}, rung 06 / lab.ops {as_x(over['persistent'])}; whole trace: cuBLAS "
                     f"{as_x(ratios.get('cublas'))}, rung 03 {as_x(ratios.get('generic'))}",
                     f"cuBLAS {_meets(ratios.get('cublas'), TARGETS['x_cublas'])}; one generic kernel (rung 03) "
                     f"{_meets(ratios.get('generic'), TARGETS['x_generic'])}"])
    else:
        rows.append(["The default implementation is clearly slower on the hot shapes", f"NO RECORDS for {TRACE}", "-"])

    # 3. The shape distribution is predictable.
    per_m = trace.calls_per_m()
    from lab.ops.shapes import m_bucket

    n_buckets = len({m_bucket(m) for m in per_m})
    tuned = len((tune or {}).get("buckets", [])) if tune else None
    manifest = (latency or {}).get("manifest_shapes") if latency else None
    rows.append(["The shape distribution is predictable (a few families and buckets)",
                 f"{len(per_m)} distinct M values in {n_steps} steps fall into {n_buckets} M buckets; "
                 "tune cache entries for the whole trace: "
                 + (str(tuned) if tuned is not None else f"(NO RECORDS for {TUNE})")
                 + "; shapes in the latency study's warm-up manifest: "
                 + (str(manifest) if manifest is not None else f"(NO RECORDS for {LATENCY})"),
                 "bucketing M by powers of two turns an open set of batch sizes into a table one can tune and "
                 "warm up ahead of time"])

    # 4. The gain pays for compiles and upkeep.
    lat = {r["scenario"]: r for r in latency_rows(latency) or [] if "error" not in r}
    empty = lat.get("empty_caches")
    number, reading = [], "-"
    if compile_rec:
        s = compile_rec.get("summary", {})
        number.append(f"a variant costs a median {s.get('median_compile_s', 0):.2f} s to compile (development CPU); "
                      f"the compile study's {len(compile_rec.get('rows', []))} variants: "
                      f"{s.get('total_compile_s', 0):.0f} s and {s.get('cache_bytes', 0) / 1e6:.1f} MB")
    else:
        number.append(f"NO RECORDS for {COMPILE}")
    if empty:
        number.append(f"serving the first {latency.get('requests', '?')} requests compiled {empty['compiled']} kernels "
                      f"in {empty['compile_s']:.1f} s on the GPU machine")
    if tune:
        number.append(f"autotuning the trace's buckets took {tune.get('seconds', 0):.0f} s")
    totals = (trace_rec or {}).get("totals_us") or {}
    if empty and "cublas" in totals and "lab_ops" in totals:
        saved_s = (totals["cublas"]["total_us"] - totals["lab_ops"]["total_us"]) / 1e6
        if saved_s > 0:
            reading = (f"saved against cuBLAS: {1e3 * saved_s:.1f} ms per layer per trace; the compiles are repaid "
                       f"after about {math.ceil(empty['compile_s'] / saved_s)} trace-layers (autotune not counted)")
        else:
            reading = "lab.ops saves nothing against cuBLAS on this trace: no compile is repaid"
    rows.append(["The gain covers the cost: compiles, cache, tuning, upkeep", "; ".join(number), reading])

    # 5. Warm-up time and first-request jitter.
    if lat.get("empty_caches") and lat.get("warm_caches"):
        e, w = lat["empty_caches"], lat["warm_caches"]
        m = lat.get("empty_caches_with_manifest")
        manifest_txt = (f"; with a manifest: {m['warmup_s']:.1f} s of warm-up, then {m['first_ms']:.1f} ms"
                        if m and m.get("warmup_s") is not None else "")
        rows.append(["Warm-up and first-request jitter are under control",
                     f"first request with empty caches {e['first_ms']:.0f} ms, warm {w['first_ms']:.1f} ms "
                     f"(p50 {w['p50_ms']:.2f} ms){manifest_txt}",
                     "without a manifest (or a warm cache) the first users pay for NVRTC; the warm-cache "
                     f"target: {_met_word(warm_target(latency))}"])
    else:
        rows.append(["Warm-up and first-request jitter are under control", f"NO RECORDS for {LATENCY}", "-"])

    # 6. Dispatch: its cost, fallbacks, small shapes not sent to big kernels.
    fb, cub = fallback_share(trace_rec, trace), path_share(trace_rec, trace, "cublas")
    ov = overhead_rows(overhead) or []
    worst = max((r["overhead_us"] for r in ov if r.get("overhead_us") is not None), default=None)
    parts = [f"NO RECORDS for {TRACE}"] if fb is None else [f"fallback decisions: {fb:.1%} of the trace's GEMM calls"]
    if cub is not None:
        parts.append(f"GEMM calls decided for cuBLAS (by a rule, the tune cache or a fallback): {cub:.1%}")
    parts.append(f"dispatch overhead up to {worst:.2f} us per call" if worst is not None else
                 f"NO RECORDS for {OVERHEAD}")
    rows.append(["Dispatch is part of the performance: cheap, and fallbacks rare and known", "; ".join(parts),
                 f"overhead {_meets(worst, TARGETS['overhead_us'], True, ' us')}" if worst is not None else "-"])

    # 7. Optimizing the hot shape must not hurt the cold ones.
    hc = hot_cold(trace_rec, trace)
    if hc and hc["groups"]["cold"].get("lab_ops"):
        cold = hc["groups"]["cold"]
        ratio = cold["hot_forced"] / cold["lab_ops"]
        reading = (f"forcing the hot shape's choice ({hc['choice']}) everywhere costs the cold steps "
                   f"{_share(cold['hot_forced'] - cold['lab_ops'], cold['lab_ops']):.0%} more time: the table keeps it "
                   "to the shapes it wins on" if ratio > 1 else
                   f"the hot shape's choice ({hc['choice']}) is no slower on the cold steps: here a per-shape table "
                   "buys nothing over it")
        rows.append(["Specializing for the hot shape does not hurt the cold ones",
                     f"the hot shape's choice forced on the cold steps: {as_x(ratio)} lab.ops's time there", reading])
    else:
        rows.append(["Specializing for the hot shape does not hurt the cold ones", f"NO RECORDS for {TRACE}", "-"])

    # 8. The boundary is known and recorded, with a generic fallback behind it.
    if trace_rec and trace_rec.get("boundary"):
        last, after = decode_limit(trace_rec)
        b = trace_rec["boundary"]
        number = (f"decode GEMV on {b.get('gemm', '?')}: fastest up to M = {last}"
                  + (f", slower from M = {after}" if after else "") if last is not None else
                  "decode is the fastest path at no M of the sweep")
        rows.append(["The specialization's boundary is measured and written down, a generic fallback behind it",
                     number, boundary_against_table(trace_rec) + "; cuBLAS serves whatever no rule does"])
    else:
        rows.append(["The specialization's boundary is measured and written down, a generic fallback behind it",
                     f"NO RECORDS for {TRACE}", "-"])

    # 9. A profile located the time first.
    if buckets:
        decode_t = sum(b["decode_us"] for b in buckets)
        prefill_t = sum(b["prefill_us"] for b in buckets)
        rows.append(["A profile located the bottleneck first",
                     f"lab.ops's GPU time: decode steps {_share(decode_t, decode_t + prefill_t):.0%}, prefill "
                     f"steps {_share(prefill_t, decode_t + prefill_t):.0%}",
                     "the per-step times of the trace are that profile: they say which kind of step to work on"])
    else:
        rows.append(["A profile located the bottleneck first", f"NO RECORDS for {TRACE}", "-"])
    return rows


def _met_word(target: dict | None) -> str:
    return "not in the record" if target is None else ("met" if target["met"] else "MISSED")


def checklist(files: dict[str, dict | None], trace: Trace) -> Markdown:
    return md(md_table(["the seed's point", "the trace's numbers", "reading"], checklist_rows(files, trace)))


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
