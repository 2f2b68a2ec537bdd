"""Notebook 08's dispatch table (lab.lessons.ops): the rules with their notes, what the table alone picks for a shape
(the runtime's matcher, without a GPU), and what lab.ops decided on the trace (its decisions and its counters)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from lab.lessons.common import Markdown, md
from lab.lessons.ops_records import TRACE, Gpu, bucket_label, candidate_label, config_text, md_table, missing, share_of

if TYPE_CHECKING:
    from lab.lessons.ops_trace import Trace
    from lab.ops.rules import Table


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
        rows.append([i, f"`{_when(rule)}`", rule.path, config_text(dict(rule.config)) or "-",
                     why or "(everything the rules above leave: the default path)",
                     f"{share_of(taken[f'rule {i}'], total):.1%}"])
    if taken["fallback"]:
        rows.append(["-", "no rule serves the shape", "cublas", "-", "the last fallback: serves every shape",
                     f"{share_of(taken['fallback'], total):.1%}"])
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
        g = groups.setdefault((d["family"], d["path"], config_text(d.get("config"))),
                              {"shapes": 0, "calls": 0, "sources": Counter()})
        g["shapes"] += 1
        g["calls"] += d["calls"]
        g["sources"][_source_kind(d["source"])] += 1
    total = sum(g["calls"] for g in groups.values())
    table = [[fam, path, cfg or "-", g["shapes"], g["calls"], f"{share_of(g['calls'], total):.1%}",
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
             f"{share_of(implied[k], total):.1%}" if k.startswith("matmul:") else "-"] for k in keys]
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
    return share_of(sum(d["calls"] for d in rows if d["source"].startswith("fallback")), total)


def path_share(record: dict | None, trace: Trace, path: str) -> float | None:
    """The share of the trace's GEMM calls decided for `path` (each decision weighted by the steps at its M)."""
    rows = decision_rows(record, trace)
    if not rows:
        return None
    return share_of(sum(d["calls"] for d in rows if d["path"] == path), sum(d["calls"] for d in rows))
