"""Notebook 08, section 11: lab.ops against PyTorch, read from records (nothing here measures).

What it reads, from lab.measure.records.reference_dir() (results/h200 unless LAB_REFERENCE_RESULTS), each exactly as its
study writes it on a GPU:
    ops_sweep.json          `lab tune --table` (lab.studies.ops_sweep): per shape class, every path lab.ops has
    against the
                            library (cuBLASLt) and PyTorch on sample shapes; the class's winner ("choices"), the
                            dispatch table written from them ("table"); lab.ops under that table against PyTorch per
                            sample ("final", "summary": per-round ratios, cold L2 and back to back)
    ops_host_cost.json      `python -m lab.studies.ops_sweep DIR --host`: host microseconds per call, lab.ops
    replaying each
                            path's recorded call against torch.mm and F.linear, lab.ops.rmsnorm against F.rms_norm
    ops_vs_torch_<model>_<dtype>.json
                            `python -m lab.studies.ops_compare DIR --model M --dtype D`: one transformer layer per
                            step of a
                            serving trace, lab.ops and PyTorch, eager and as CUDA graphs, in interleaved rounds; each
                            op kind alone over the trace; host time per call of a few single ops
    rowops_study.json       `python -m lab.studies.rowops_study DIR`: the row ops (rmsnorm, layernorm, softmax) timed
    several
                            ways in interleaved rounds, beside PyTorch's kernels and the device copy

Every ratio is PyTorch's time over lab.ops's (above 1: lab.ops is faster), taken per round within one process, so
the spread across rounds is part of the reading. TARGETS are the runtime's targets, named as targets; whether each
is met is computed here from the records. The figure is lab.lessons.plots.ops_torch_ratios.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from pathlib import Path

from lab.core.errors import LabError
from lab.lessons.common import Markdown, describe_provenance, md, replayed_record, shown_path
from lab.lessons.ops_dispatch import table_decision
from lab.lessons.ops_records import as_x, candidate_label, label, md_table
from lab.measure import records

SWEEP, HOST = "ops_sweep", "ops_host_cost"
MODELS = ("llama3_8b", "qwen25_7b")
DTYPES = ("float16", "bfloat16")
TRACES = tuple(f"ops_vs_torch_{m}_{d}" for m in MODELS for d in DTYPES)
ROWOPS = "rowops_study"
FILES = (SWEEP, HOST, *TRACES, ROWOPS)

# The runtime's targets against PyTorch (what it sets out to reach, not measurements).
TARGETS = {"every_sample": 0.98, "unaligned": 2.5, "decode": 1.15, "trace_eager": 1.10, "trace_graph": 1.0,
           "rowops_spread": 0.05, "rowops_copy": 0.90, "rowops_copy_max_n": 8192}
# The unaligned samples the target names (M = N = K), and what a decode sample is for its target.
UNALIGNED_SIDES = (4095, 4097)
DECODE_MAX_M, DECODE_MIN_NK = 8, 4096
# The row-op study's lab.ops methods that time the steady state: all but the single call after the GPU idled.
AFTER_IDLE = "lab_ops_after_idle"
# A lab.ops row-op method and PyTorch's method timed the same way.
ROWOP_PAIRS = {"lab_ops_cold_write": "torch_cold_write", "lab_ops_cold_read": "torch_cold_read",
               "lab_ops_b2b": "torch_b2b", "lab_ops_graph": "torch_graph"}
HOST_COLUMNS = ("lab_ops:cublas", "lab_ops:decode", "lab_ops:persistent", "torch.mm", "F.linear")
_OUTSIDE = re.compile(r"(\d+) of (\d+) elements outside the bound")


# ----------------------------------------------------------------------------------------------
# Records: where they are, the command that makes each, loading
# ----------------------------------------------------------------------------------------------

def record_path(name: str) -> Path:
    return records.reference_dir() / f"{name}.json"


def _trace_args(name: str) -> tuple[str, str]:
    """('llama3_8b', 'float16') from 'ops_vs_torch_llama3_8b_float16'."""
    rest = name.removeprefix("ops_vs_torch_")
    dtype = next(d for d in DTYPES if rest.endswith("_" + d))
    return rest[:-len(dtype) - 1], dtype


def recorded_by(name: str) -> str:
    """The command, run on a GPU, that writes record `name` into the reference folder."""
    where = shown_path(records.reference_dir())
    if name == SWEEP:
        return f"lab tune --table --out {where} --write"
    if name == HOST:
        return f"python -m lab.studies.ops_sweep {where} --host"
    if name == ROWOPS:
        return f"python -m lab.studies.rowops_study {where}"
    model, dtype = _trace_args(name)
    return f"python -m lab.studies.ops_compare {where} --model {model} --dtype {dtype}"


def missing(name: str) -> str:
    """One line: which record is missing (so the cell shows nothing from it) and the command that makes it."""
    return (f"NO RECORDS for {name}: {shown_path(record_path(name))} is absent or unreadable, so nothing is shown "
            f"from it; run `{recorded_by(name)}` on a GPU to record it.")


def load(name: str) -> dict | None:
    """Record `name`, marked replayed; None when absent, unreadable or without provenance."""
    return replayed_record(record_path(name))


def replayed() -> dict[str, dict | None]:
    """Every record of FILES (None for those absent)."""
    return {name: load(name) for name in FILES}


def sources(files: dict[str, dict | None]) -> str:
    """One line per record: where it was made (device, date, commit), or that it is missing and how to make it."""
    lines = []
    for name in FILES:
        record = files.get(name)
        if record is None:
            lines.append(missing(name))
        else:
            lines.append(f"{name}: REPLAYED from {describe_provenance(record['provenance'])} "
                         f"({shown_path(record_path(name))}).")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------

def _median(values) -> float | None:
    values = [v for v in values or [] if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def _rounds(values) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "-"


def _span(values) -> str:
    """'1.21x (1.17-1.21)': the median and range of per-round ratios."""
    values = [v for v in values or [] if v is not None]
    if not values:
        return "-"
    return f"{as_x(statistics.median(values))} ({min(values):.2f}-{max(values):.2f})"


def _ms(stat: dict | None) -> str:
    if not stat:
        return "-"
    return f"{stat['median_ms']:.2f} ({stat['min_ms']:.2f}-{stat['max_ms']:.2f})"


def _when(when: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in when.items()) or "any shape"


def _x3(value: float) -> str:
    """A ratio held against a target: three decimals, so that one just below the target does not print as equal."""
    return f"{value:.3f}x"


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def outside_share(check: str | None) -> str:
    """A check's verdict in a table cell: '-' inside the bound, else the share of elements outside it."""
    if not check:
        return "-"
    m = _OUTSIDE.fullmatch(check.strip())
    return f"{int(m[1]) / int(m[2]):.1%} of the elements" if m else check


def _classes(record: dict) -> dict[str, str]:
    """Each sample's shape class, as the sweep measured it."""
    return {s["sample"]: s.get("class", "?") for s in record.get("samples", [])}


def _params(record: dict) -> dict[str, dict]:
    return {s["sample"]: s.get("params", {}) for s in record.get("samples", []) + record.get("final", [])}


# ----------------------------------------------------------------------------------------------
# The sweep: the classes' choices, and the table written from them
# ----------------------------------------------------------------------------------------------

def _rules_by_class(record: dict) -> dict[str, dict]:
    """The record's table rules by class (each rule's note starts with its class's name), else
    lab.studies.ops_sweep's."""
    rules = (record.get("table") or {}).get("rules") or []
    out = {}
    for choice, rule in zip(record.get("choices", []), rules, strict=False):
        if str(rule.get("note", "")).startswith(f"{choice['class']}:"):
            out[choice["class"]] = rule
    if len(out) < len(record.get("choices", [])):
        from lab.studies import ops_sweep

        for name, when, _, _ in ops_sweep.CLASSES:
            out.setdefault(name, {"when": when})
    return out


def sweep_choices(record: dict | None) -> Markdown:
    """Per shape class: its rule's conditions, the path the sweep chose, its score (geometric mean over the class's
    samples of the library's time over the path's, cold L2: the library scores 1), the other paths' scores, and the
    samples where another path was faster than the one chosen (by how much)."""
    if record is None:
        return md(missing(SWEEP))
    rules = _rules_by_class(record)
    rows = []
    for c in record.get("choices", []):
        others = sorted(((m, s) for m, s in (c.get("scores") or {}).items() if m != c["method"]), key=lambda kv: -kv[1])
        losses = "; ".join(f"{loss['sample']}: {loss['faster']} {as_x(loss['by'])} faster" for loss in c["losses"])
        rows.append([c["class"], f"`{_when(rules.get(c['class'], {}).get('when', {}))}`",
                     candidate_label(c["path"], c.get("config")), as_x(c["score"]),
                     ", ".join(f"{m} {as_x(s)}" for m, s in others) or "-", losses or "none"])
    head = ["class", "rule's conditions", "path chosen", "score (library time / path time)",
            "other paths' scores", "samples where another path was faster"]
    margin = record.get("win_margin")
    note = (f"A lab path takes a class from the library only when its score is at least {margin:g} "
            f"(the sweep's margin); {record.get('rounds', '?')} interleaved rounds, library: "
            f"{record.get('library', '?')}, PyTorch {record.get('torch', '?')}.") if margin else ""
    return md(md_table(head, rows) + ("\n\n" + note if note else "") + "\n\n" + table_in_force(record))


def table_in_force(record: dict | None) -> str:
    """Whether lab/ops/default_table.json (lab.ops.rules.DEFAULT) holds the sweep's table, rule for rule (conditions,
    path, configuration; the notes aside), and where they differ."""
    if record is None:
        return missing(SWEEP)
    from lab.ops import rules

    try:
        swept = rules.parse(record.get("table") or {}, "the sweep's table")
    except LabError as exc:  # a table today's parser refuses: say so rather than fail the cell
        return f"The sweep's table does not parse with today's lab.ops.rules: {exc}"
    in_force = rules.DEFAULT
    shown = shown_path(rules.DEFAULT_FILE)
    if swept.rules == in_force.rules:
        return f"`{shown}` (lab.ops.rules.DEFAULT) holds the sweep's table: the same {len(swept.rules)} rules."
    diffs = []
    for i in range(max(len(swept.rules), len(in_force.rules))):
        a = swept.rules[i] if i < len(swept.rules) else None
        b = in_force.rules[i] if i < len(in_force.rules) else None
        if a != b:
            diffs.append(f"rule {i + 1}: the sweep's {a.describe() if a else '(none)'}, "
                         f"the file's {b.describe() if b else '(none)'}")
    return (f"`{shown}` (lab.ops.rules.DEFAULT) DIFFERS from the sweep's table: " + "; ".join(diffs)
            + ". The comparison below was measured under the sweep's table.")


# ----------------------------------------------------------------------------------------------
# lab.ops under the sweep's table against PyTorch, per sample and per class
# ----------------------------------------------------------------------------------------------

def sample_rows(record: dict | None) -> list[dict] | None:
    """The record's summary, one row per sample, with its class, its parameters and the per-round ratios."""
    if record is None:
        return None
    classes, params = _classes(record), _params(record)
    return [r | {"class": classes.get(r["sample"], "?"), "params": params.get(r["sample"], {})}
            for r in record.get("summary", [])]


def per_sample(record: dict | None) -> Markdown:
    """lab.ops under the sweep's table against PyTorch, per sample: the class, lab.ops's decision, TFLOP/s of each
    (median cold time), PyTorch's time over lab.ops's per round (cold L2, then back to back), and where a result left
    the fp32-accumulation error bound."""
    rows = sample_rows(record)
    if rows is None:
        return md(missing(SWEEP))
    table = []
    for r in rows:
        outside = [f"PyTorch: {outside_share(r['torch_check'])}" if r.get("torch_check") else "",
                   f"lab.ops: {outside_share(r['lab_check'])}" if r.get("lab_check") else ""]
        table.append([r["class"], r["sample"], r.get("decision") or "-", f"{r['lab_tflops']:.1f}",
                      f"{r['torch_tflops']:.1f}", _rounds(r["ratio_cold"]), _rounds(r["ratio_b2b"]),
                      "; ".join(o for o in outside if o) or "-"])
    head = ["class", "sample (M×N×K type layout epilogue)", "lab.ops's decision", "lab.ops TFLOP/s",
            "PyTorch TFLOP/s", "PyTorch / lab.ops per round, cold L2", "per round, back to back",
            "outside the fp32-accumulation bound"]
    b2b = record.get("back_to_back", "?")
    return md(f"Cold L2: each call timed alone after an L2 flush, GPU time. Back to back: {b2b} calls issued by the "
              "host between one pair of events, no flush (what a serving loop sees when the host's cost per call "
              "is near the GPU's). Above 1, lab.ops is faster.\n\n" + md_table(head, table))


def class_summary(record: dict | None) -> Markdown:
    """Per class: its samples, lab.ops's decisions, and the median and range of every per-round ratio of its samples
    (cold L2 and back to back), the samples lab.ops loses (median cold ratio below 1), and those where PyTorch's
    result left the bound."""
    rows = sample_rows(record)
    if rows is None:
        return md(missing(SWEEP))
    table = []
    for cls in dict.fromkeys(r["class"] for r in rows):
        mine = [r for r in rows if r["class"] == cls]
        cold = [v for r in mine for v in r["ratio_cold"]]
        b2b = [v for r in mine for v in r["ratio_b2b"]]
        losing = [r for r in mine if (_median(r["ratio_cold"]) or 0) < 1.0]
        decisions = ", ".join(dict.fromkeys((r.get("decision") or "-").split(" (")[0] for r in mine))
        table.append([cls, len(mine), decisions, _span(cold), _span(b2b), len(losing),
                      sum(1 for r in mine if r.get("torch_check"))])
    head = ["class", "samples", "lab.ops's path", "PyTorch / lab.ops, cold: median (min-max over rounds)",
            "back to back: median (min-max)", "samples lab.ops loses (median cold below 1)",
            "samples where PyTorch left the bound"]
    return md(md_table(head, table))


def ratio_rows(record: dict | None) -> list[dict] | None:
    """For lab.lessons.plots.ops_torch_ratios: per sample its class, label, per-round cold ratios, lab.ops's path and
    whether
    PyTorch's result left the bound."""
    rows = sample_rows(record)
    if rows is None:
        return None
    return [{"class": r["class"], "sample": r["sample"], "ratios": list(r["ratio_cold"]),
             "path": (r.get("decision") or "lab_ops").split(" ", 1)[0], "torch_outside": bool(r.get("torch_check"))}
            for r in rows if r["ratio_cold"]]


# ----------------------------------------------------------------------------------------------
# Host time per call
# ----------------------------------------------------------------------------------------------

def _sweep_table(sweep: dict | None):
    """The table the sweep measured lab.ops under (its record's), else lab.ops.rules.DEFAULT; and which it is."""
    from lab.ops import rules

    if sweep and sweep.get("table"):
        try:
            return rules.parse(sweep["table"], "the sweep's table"), "the sweep's table"
        except LabError:  # a table today's parser refuses: the one in force instead
            pass
    return rules.DEFAULT, "lab.ops.rules.DEFAULT"


def host_rows(record: dict | None, sweep: dict | None = None) -> list[dict] | None:
    """Per GEMM shape of the host-cost record: each method's median, min and max host us per call, the path the
    sweep's table picks for the shape (fp16, TN, no epilogue) and its median beside torch.mm's."""
    if record is None:
        return None
    from lab.studies import ops_sweep

    table, _ = _sweep_table(sweep)
    arch = int(str(record["provenance"].get("arch", "sm_90")).removeprefix("sm_") or 90)
    sms = int(record["provenance"].get("sm_count", 132))
    shapes: dict[tuple, dict] = {}
    for r in record.get("rows", []):
        if len(r["shape"]) != 3:
            continue
        shapes.setdefault(tuple(r["shape"]), {})[r["method"]] = r
    out = []
    for (m, n, k), methods in shapes.items():
        shape = ops_sweep.gemm_shape(ops_sweep.Sample(m, n, k), sms)
        path = table_decision(table, shape, arch)[0]
        mine = methods.get(f"lab_ops:{path}")
        torch_mm = methods.get("torch.mm")
        out.append({"shape": (m, n, k), "methods": methods, "path": path,
                    "lab_us": mine["median"] if mine else None,
                    "torch_mm_us": torch_mm["median"] if torch_mm else None})
    return out


def host_table(record: dict | None, sweep: dict | None = None) -> Markdown:
    """Host us per call (median of the trials, min-max): lab.ops replaying each path's recorded call, torch.mm and
    F.linear on the same memory; the path the sweep's table picks against torch.mm; rmsnorm against F.rms_norm."""
    rows = host_rows(record, sweep)
    if rows is None:
        return md(missing(HOST))
    _, which = _sweep_table(sweep)

    def cell(r):
        return f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})" if r else "-"

    table = []
    for r in rows:
        diff = (f"{r['lab_us'] - r['torch_mm_us']:+.2f}" if r["lab_us"] is not None and r["torch_mm_us"] is not None
                else "-")
        table.append(["×".join(map(str, r["shape"])), *(cell(r["methods"].get(c)) for c in HOST_COLUMNS),
                      r["path"], diff])
    head = ["M×N×K (fp16, TN)", *(f"{c} us" for c in HOST_COLUMNS), f"path {which} picks",
            "its us - torch.mm's"]
    text = md_table(head, table)
    norms = {r["method"]: r for r in record.get("rows", []) if len(r["shape"]) == 2}
    if norms:
        lab, ref = norms.get("lab_ops:rmsnorm"), norms.get("F.rms_norm")
        shape = "×".join(map(str, next(iter(norms.values()))["shape"]))
        text += (f"\n\nrmsnorm, {shape}: lab.ops.rmsnorm {cell(lab)} us per call, F.rms_norm {cell(ref)} us.")
    return md(f"Host time per call, the GPU's work kept small so the host is the bottleneck: the median of "
              f"{record.get('trials', '?')} trials of {record.get('calls', '?')} calls (min-max over the trials)."
              "\n\n" + text)


def _traces(files: dict[str, dict | None]) -> tuple[list[dict], list[str]]:
    """The trace records present, in TRACES's order, and one line for each that is missing."""
    present = [files[name] for name in TRACES if files.get(name) is not None]
    return present, [missing(name) for name in TRACES if files.get(name) is None]


def trace_host_table(files: dict[str, dict | None]) -> Markdown:
    """The traces' single ops called back to back: wall us per call of each library beside the GPU time of the same
    op, and which of the two was the bottleneck."""
    table, (present, absent) = [], _traces(files)
    for record in present:
        for h in record.get("host_cost", []):
            lab, ref = h["lab"], h["torch"]
            table.append([f"{record['model']['name']} {record['dtype']}", h["op"],
                          f"{lab['wall_us']:.1f} ({lab['bottleneck']})", f"{lab['gpu_us']:.1f}",
                          f"{ref['wall_us']:.1f} ({ref['bottleneck']})", f"{ref['gpu_us']:.1f}"])
    head = ["trace", "op", "lab.ops wall us per call (bottleneck)", "lab.ops GPU us", "PyTorch wall us per call "
            "(bottleneck)", "PyTorch GPU us"]
    text = md_table(head, table) if table else ""
    return md("\n\n".join([text] + absent) if text else "\n".join(absent))


# ----------------------------------------------------------------------------------------------
# The traces: one layer per step, eager and graphed
# ----------------------------------------------------------------------------------------------

def _residual(record: dict) -> str:
    form = record.get("torch_residual_form")
    return (record.get("torch_residual_forms") or {}).get(form, form or "-")


def trace_table(files: dict[str, dict | None]) -> Markdown:
    """Per model and type: each method's GPU ms over the trace (median and range over rounds), PyTorch's time over
    lab.ops's per round, eager and graphed, and how much CUDA graphs gained each library (eager / graphed)."""
    table, (present, absent) = [], _traces(files)
    for record in present:
        s = record["summary"]
        meth, ratios, gain = s["methods"], s.get("ratios", {}), s.get("graph_gain", {})
        table.append([f"{record['model']['name']} {record['dtype']}", f"`{_residual(record)}`",
                      _ms(meth.get("lab_eager")), _ms(meth.get("torch_eager")),
                      _rounds(ratios.get("eager", {}).get("torch_over_lab")),
                      _ms(meth.get("lab_graph")), _ms(meth.get("torch_graph")),
                      _rounds(ratios.get("graph", {}).get("torch_over_lab")),
                      _span(gain.get("lab", {}).get("eager_over_graph")),
                      _span(gain.get("torch", {}).get("eager_over_graph"))])
    head = ["trace", "PyTorch's residual", "lab.ops eager ms", "PyTorch eager ms", "PyTorch / lab.ops eager, per round",
            "lab.ops graphed ms", "PyTorch graphed ms", "per round, graphed", "graphs' gain, lab.ops",
            "graphs' gain, PyTorch"]
    first = next((files[n] for n in TRACES if files.get(n)), None)
    head_note = ""
    if first:
        head_note = (f"{first['trace']['steps']} steps, one layer each, {len(first.get('rounds', []))} rounds; "
                     "GPU ms over the trace (median, min-max over rounds). Graphs' gain: eager time over graphed "
                     "time, median (min-max).\n\n")
    text = md_table(head, table) if table else ""
    return md(head_note + "\n\n".join(p for p in [text, "\n".join(absent)] if p))


def per_kind_table(files: dict[str, dict | None], name: str = TRACES[0]) -> Markdown:
    """One trace's op kinds alone: lab.ops's and PyTorch's ms over the trace, their ratio and each kind's share."""
    record = files.get(name)
    if record is None:
        return md(missing(name))
    pk = record.get("per_kind") or {}
    rows = [[kind, v["calls_per_layer"], f"{v['lab_ms']:.2f}", f"{v['torch_ms']:.2f}", as_x(v["torch_over_lab"]),
             f"{v['lab_share']:.1%}", f"{v['torch_share']:.1%}"] for kind, v in (pk.get("kinds") or {}).items()]
    if pk:
        rows.append(["all", "-", f"{pk['lab_ms']:.2f}", f"{pk['torch_ms']:.2f}", as_x(pk["torch_over_lab"]), "-", "-"])
    head = ["op kind", "calls per layer", "lab.ops ms", "PyTorch ms", "PyTorch / lab.ops", "share of lab.ops's time",
            "share of PyTorch's time"]
    how = (record.get("timing") or {}).get("ops_alone", "")
    return md(f"{record['model']['name']} {record['dtype']}, each op kind alone at every M of the trace, weighted by "
              f"the steps at each M ({how}); PyTorch's residual: `{_residual(record)}`.\n\n" + md_table(head, rows))


# ----------------------------------------------------------------------------------------------
# Row ops, round to round
# ----------------------------------------------------------------------------------------------

def _steady(methods: dict) -> list[str]:
    return [m for m in methods if m.startswith("lab_ops_") and m != AFTER_IDLE]


def _case_info(record: dict) -> dict[str, dict]:
    return {c["case"]: c for c in record["study"].get("cases", [])}


def rowop_rows(record: dict | None) -> list[dict] | None:
    """Per case of the row-op study: its width n, whether it fits the L2, the methods that varied by more than the
    study's threshold between rounds (and the study's reading), the steady lab.ops methods' lowest fraction of the
    device copy and largest spread, and the lowest ratio of a lab.ops method to PyTorch's timed the same way."""
    if record is None:
        return None
    study = record["study"]
    info = _case_info(record)
    l2 = study.get("l2_bytes") or record["provenance"].get("l2_bytes")
    out = []
    for case, s in (study.get("summary") or {}).items():
        methods = s["methods"]
        steady = _steady(methods)
        lows = [(min(methods[m]["fractions"]), m) for m in steady if methods[m]["fractions"]]
        spreads = [(methods[m]["spread"], m) for m in steady if methods[m].get("spread") is not None]
        pairs = [(_median(methods[m]["fractions"]) / _median(methods[t]["fractions"]), m)
                 for m, t in ROWOP_PAIRS.items() if m in methods and t in methods
                 and _median(methods[t]["fractions"])]
        c = info.get(case, {})
        out.append({"case": case, "n": c.get("n"), "fits_l2": bool(l2 and c.get("bytes_moved", 0) <= l2),
                    "varying": {m: methods[m]["spread"] for m in s.get("varying", [])}, "hints": s.get("hints", []),
                    "lowest": min(lows) if lows else None, "widest": max(spreads) if spreads else None,
                    "vs_torch": min(pairs) if pairs else None})
    return out


def rowops_table(record: dict | None) -> Markdown:
    """The round-to-round study, one row per case: what varied, what the study reads into it, and the steady
    methods' figures."""
    rows = rowop_rows(record)
    if rows is None:
        return md(missing(ROWOPS))
    threshold = record["study"].get("varies_threshold", TARGETS["rowops_spread"])
    table = []
    for r in rows:
        varying = ", ".join(f"{m} ({v:.1%})" for m, v in r["varying"].items()) or "none"
        table.append([r["case"], "yes" if r["fits_l2"] else "no", varying, "; ".join(r["hints"]) or "-",
                      f"{r['lowest'][0]:.3f} ({r['lowest'][1]})" if r["lowest"] else "-",
                      f"{r['widest'][0]:.1%} ({r['widest'][1]})" if r["widest"] else "-",
                      f"{as_x(r['vs_torch'][0])} ({r['vs_torch'][1]})" if r["vs_torch"] else "-"])
    head = ["case", "fits the L2", f"methods varying by more than {threshold:.0%} between rounds",
            "the study's reading", "steady lab.ops: lowest fraction of the copy", "steady lab.ops: widest spread",
            "lab.ops / PyTorch, same timing: lowest"]
    return md(f"{record['study'].get('rounds', '?')} rounds; fractions of the device copy timed in the same round. "
              f"Steady lab.ops methods: every lab.ops method but `{AFTER_IDLE}` (one call after the GPU idled)."
              "\n\n" + md_table(head, table))


def rowops_reading(record: dict | None) -> str:
    """Which methods varied between rounds, over all the cases, and the study's readings."""
    rows = rowop_rows(record)
    if rows is None:
        return missing(ROWOPS)
    counts: dict[str, list[str]] = {}
    for r in rows:
        for m in r["varying"]:
            counts.setdefault(m, []).append(r["case"])
    if not counts:
        return f"{len(rows)} cases: no method varied between rounds."
    lines = [f"{len(rows)} cases; methods that varied between rounds:"]
    for m, cases in sorted(counts.items(), key=lambda kv: -len(kv[1])):
        where = "every case" if len(cases) == len(rows) else ", ".join(cases)
        lines.append(f"  {m}: {len(cases)} of {len(rows)} cases ({where})")
    only_idle = [r for r in rows if list(r["varying"]) == [AFTER_IDLE]]
    lines.append(f"only the single call after idle varied in {len(only_idle)} of {len(rows)} cases")
    for r in rows:
        if set(r["varying"]) - {AFTER_IDLE}:
            lines.append(f"  {r['case']} ({'fits the L2' if r['fits_l2'] else 'larger than the L2'}): "
                         + ", ".join(f"{m} {v:.1%}" for m, v in r["varying"].items()))
    hints = dict.fromkeys(h for r in rows for h in r["hints"])
    lines.append("the study's readings: " + "; ".join(hints))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# The targets
# ----------------------------------------------------------------------------------------------

def _worst(rows: list[dict]) -> tuple[float, str] | None:
    meds = [(_median(r["ratio_cold"]), r["sample"]) for r in rows if _median(r["ratio_cold"]) is not None]
    return min(meds) if meds else None


def _ratio_target(rows: list[dict], target: float, what: str) -> str:
    worst = _worst(rows)
    if worst is None:
        return f"{what}: no such sample in the record"
    below = sum(1 for r in rows if (_median(r["ratio_cold"]) or 0) < target)
    return (f"{what}: lowest {_x3(worst[0])} ({worst[1]}); {below} of {len(rows)} below -> target >= {as_x(target)}: "
            f"{_met(worst[0] >= target)}")


def _is_unaligned_sample(p: dict) -> bool:
    return p.get("M") == p.get("N") == p.get("K") and p.get("M") in UNALIGNED_SIDES


def _is_decode_sample(p: dict) -> bool:
    return (p.get("M") or 1 << 30) <= DECODE_MAX_M and p.get("N") == p.get("K") and (p.get("N") or 0) >= DECODE_MIN_NK


def targets(files: dict[str, dict | None]) -> str:
    """Each runtime target against PyTorch with the measured value beside it, met or MISSED (per sample: the median
    of its per-round cold ratios), or the record that is missing."""
    t = TARGETS
    lines = ["lab.ops against PyTorch, held against the runtime's targets (targets, not measurements; ratios are "
             "PyTorch's time over lab.ops's, per sample the median of its rounds, cold L2):"]
    rows = sample_rows(files.get(SWEEP))
    if rows is None:
        lines.append(missing(SWEEP))
    else:
        lines.append(_ratio_target(rows, t["every_sample"], "every sample"))
        side = "/".join(f"{s}^3" for s in UNALIGNED_SIDES)
        lines.append(_ratio_target([r for r in rows if _is_unaligned_sample(r["params"])], t["unaligned"],
                                   f"the unaligned {side} samples"))
        lines.append(_ratio_target([r for r in rows if _is_decode_sample(r["params"])], t["decode"],
                                   f"decode samples (M <= {DECODE_MAX_M}, N = K >= {DECODE_MIN_NK})"))
    host = host_rows(files.get(HOST), files.get(SWEEP))
    if host is None:
        lines.append(missing(HOST))
    else:
        cells, ok = [], True
        for r in host:
            if r["lab_us"] is None or r["torch_mm_us"] is None:
                cells.append(f"{'×'.join(map(str, r['shape']))}: not in the record")
                ok = False
                continue
            ok &= r["lab_us"] <= r["torch_mm_us"]
            cells.append(f"{'×'.join(map(str, r['shape']))} {r['path']} {r['lab_us']:.2f} us, torch.mm "
                         f"{r['torch_mm_us']:.2f} us")
        lines.append("host time per replayed call, the table's path against torch.mm: " + "; ".join(cells)
                     + f" -> target <= torch.mm's on each shape: {_met(ok)}")
    traces = [(n, files[n]) for n in TRACES if files.get(n)]
    for n in TRACES:
        if files.get(n) is None:
            lines.append(missing(n))
    for pair, key in (("eager", "trace_eager"), ("graph", "trace_graph")):
        meds = [(r["summary"]["ratios"][pair]["median"], f"{r['model']['name']} {r['dtype']}") for _, r in traces
                if pair in r["summary"].get("ratios", {})]
        if meds:
            worst = min(meds)
            peer = "PyTorch eager" if pair == "eager" else "torch.cuda.graph"
            lines.append(f"trace, {'eager' if pair == 'eager' else 'graphed'} against {peer}: "
                         + ", ".join(f"{w} {_x3(v)}" for v, w in meds)
                         + f" -> target >= {as_x(t[key])}: {_met(worst[0] >= t[key])}")
    lines += _rowops_targets(files.get(ROWOPS))
    return "\n".join(lines)


def _rowops_targets(record: dict | None) -> list[str]:
    rows = rowop_rows(record)
    if rows is None:
        return [missing(ROWOPS)]
    t = TARGETS
    out = []
    widest = max((r["widest"] + (r["case"],) for r in rows if r["widest"]), default=None)
    if widest:
        out.append(f"row ops, every steady lab.ops method within {t['rowops_spread']:.0%} between rounds: widest "
                   f"{widest[0]:.1%} ({widest[1]}, {widest[2]}) -> {_met(widest[0] <= t['rowops_spread'])}")
    narrow = [r for r in rows if r["n"] is not None and r["n"] <= t["rowops_copy_max_n"] and r["lowest"]]
    if narrow:
        low = min(r["lowest"] + (r["case"],) for r in narrow)
        line = (f"row ops with n <= {t['rowops_copy_max_n']}, every steady lab.ops method >= {t['rowops_copy']:.2f} of "
                f"the device copy: lowest {low[0]:.3f} ({low[1]}, {low[2]}) -> {_met(low[0] >= t['rowops_copy'])}")
        big = [r for r in narrow if not r["fits_l2"]]
        if len(big) < len(narrow) and big:
            low_big = min(r["lowest"] + (r["case"],) for r in big)
            line += (f"; the cases larger than the L2 alone: lowest {low_big[0]:.3f} ({low_big[1]}, {low_big[2]}) "
                     f"-> {_met(low_big[0] >= t['rowops_copy'])}")
        out.append(line)
    paired = [r["vs_torch"] + (r["case"],) for r in rows if r["vs_torch"]]
    if paired:
        low = min(paired)
        out.append(f"row ops, lab.ops >= PyTorch timed the same way: lowest {_x3(low[0])} ({low[1]}, {low[2]}) -> "
                   f"{_met(low[0] >= 1.0)}")
    return out


# ----------------------------------------------------------------------------------------------
# The figure
# ----------------------------------------------------------------------------------------------

def show(fn: Callable, data, name: str, **kwargs) -> None:
    """lab.lessons.plots.<fn>(data, ...) shown inline (lab.lessons.figure), or the line saying record `name` is
    missing."""
    from lab.lessons.views import figure

    if data is None:
        print(missing(name))
        return
    figure(fn(data, **kwargs), f"{name} holds no rows for {fn.__name__}")


__all__ = ["FILES", "TARGETS", "TRACES", "class_summary", "host_table", "label", "missing", "per_kind_table",
           "per_sample", "ratio_rows", "recorded_by", "replayed", "rowops_reading", "rowops_table", "show",
           "sources", "sweep_choices", "table_in_force", "targets", "trace_host_table", "trace_table"]
