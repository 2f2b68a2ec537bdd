"""Notebook 08's trace (lab.lessons.ops): the layer's GEMMs, the steps regenerated from the record's seed and checked
against its summary, and where the steps and the GPU time fall per M bucket.

The record keeps each distinct step's time, not how many steps of each size the trace holds, and every GPU-time share
needs both: the steps are regenerated here (lab.studies.serving_trace.make_trace, CPU-only and deterministic).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from lab.lessons.common import Markdown, md
from lab.lessons.ops_records import METHODS, TRACE, bucket_label, md_table, missing, share_of, us_text

# The lesson's own definition (a choice, not a measurement): the hot buckets are the fewest M buckets that hold at
# least this share of lab.ops's GPU time over the trace.
HOT_TIME_SHARE = 0.5


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
             f"{share_of(hot_n, len(trace.steps)):.1%} of them)"]
    return "\n".join(lines)


def per_step(record: dict | None) -> dict[tuple[str, int], dict]:
    return {(r["kind"], r["M"]): r for r in (record or {}).get("per_step_us", [])}


def shape_rows(record: dict | None, trace: Trace) -> list[dict]:
    """One row per distinct (kind, M) of the trace: its steps and, with a record, lab.ops's time per step (us)."""
    per = per_step(record)
    return [{"kind": kind, "M": m, "steps": n, "us": per.get((kind, m), {}).get("lab_ops")}
            for (kind, m), n in sorted(trace.counts().items(), key=lambda kv: (kv[0][1], kv[0][0]))]


def bucket_times(record: dict | None, trace: Trace) -> list[dict] | None:
    """Per M bucket (M rounded up to a power of two, as the tune cache files it): steps of each kind and each
    method's GPU time over the trace (steps x time per step); None without a trace record."""
    from lab.ops.shapes import m_bucket

    per = per_step(record)
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
        row["share"] = share_of(row["us"]["lab_ops"], total)
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
             f"{share_of(r['decode_steps'] + r['prefill_steps'], steps):.1%}", us_text(r["us"].get("lab_ops")),
             f"{r['share']:.1%}"] for r in buckets]
    unknown = sum(r["unknown"] for r in buckets)
    note = f"\n\n{unknown} steps have no time in the record." if unknown else ""
    return md(md_table(["M bucket", "decode steps", "prefill steps", "share of steps", "lab.ops us (all its steps)",
                      "share of lab.ops time"], rows) + note)
