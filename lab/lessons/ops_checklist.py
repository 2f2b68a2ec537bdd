"""Notebook 08's checklist (lab.lessons.ops): when specialization is worth it, each point filled in with the trace's
numbers from the records (or which record is missing)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lab.lessons.common import Markdown, md
from lab.lessons.ops_boundary import boundary_against_table, decode_runs
from lab.lessons.ops_dispatch import fallback_share, path_share
from lab.lessons.ops_latency import latency_rows, warm_target
from lab.lessons.ops_records import (
    COMPILE,
    LATENCY,
    OVERHEAD,
    TARGETS,
    TRACE,
    TUNE,
    as_x,
    bucket_label,
    md_table,
    meets,
    share_of,
)
from lab.lessons.ops_results import hot_cold, overhead_rows
from lab.lessons.ops_trace import bucket_times, hot_buckets

if TYPE_CHECKING:
    from lab.lessons.ops_trace import Trace


# ----------------------------------------------------------------------------------------------
# 10. When is specialization worth it
# ----------------------------------------------------------------------------------------------

def sum_method(buckets: list[dict], method: str) -> float:
    return sum(b["us"].get(method, 0.0) for b in buckets)


def checklist_rows(files: dict[str, dict | None], trace: Trace) -> list[list[str]]:
    """The course text's points on when specialization pays, each with the trace's numbers (or which record is
    missing): [point, number, reading]."""
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
        by_count = hot_buckets([b | {"share": share_of(b["decode_steps"] + b["prefill_steps"], n_steps)}
                                for b in buckets])
        same = {b["bucket"] for b in by_count} == {b["bucket"] for b in hot}
        reading = ("the buckets that hold most of the steps also hold most of the time" if same else
                   "most of the steps are in " + ", ".join(bucket_label(b["bucket"]) for b in by_count)
                   + ": where the steps are is not where the time is; rank by time before specializing")
        rows.append(["The operation is a hot spot, its shapes clustered on a few",
                     f"{len(hot)} of {len(buckets)} M buckets ({', '.join(bucket_label(b['bucket']) for b in hot)}) "
                     f"hold {held:.0%} of lab.ops's GPU time and {share_of(hot_steps, n_steps):.0%} of the steps",
                     reading])
    else:
        rows.append(["The operation is a hot spot, its shapes clustered on a few", f"NO RECORDS for {TRACE}", "-"])

    # 2. The default is clearly slow there.
    if hot:
        lab = sum_method(hot, "lab_ops")
        over = {m: share_of(sum_method(hot, m), lab) for m in ("cublas", "generic", "persistent")}
        ratios = (trace_rec or {}).get("time_over_lab_ops") or {}
        rows.append(["The default implementation is clearly slower on the hot shapes",
                     f"in the hot buckets: cuBLAS / lab.ops {as_x(over['cublas'])}, rung 03 / lab.ops "
                     f"{as_x(over['generic'])}, rung 06 / lab.ops {as_x(over['persistent'])}; whole trace: cuBLAS "
                     f"{as_x(ratios.get('cublas'))}, rung 03 {as_x(ratios.get('generic'))}",
                     f"cuBLAS {meets(ratios.get('cublas'), TARGETS['x_cublas'])}; one generic kernel (rung 03) "
                     f"{meets(ratios.get('generic'), TARGETS['x_generic'])}"])
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
                     f"target: {met_word(warm_target(latency))}"])
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
                 f"overhead {meets(worst, TARGETS['overhead_us'], True, ' us')}" if worst is not None else "-"])

    # 7. Optimizing the hot shape must not hurt the cold ones.
    hc = hot_cold(trace_rec, trace)
    if hc and hc["groups"]["cold"].get("lab_ops"):
        cold = hc["groups"]["cold"]
        ratio = cold["hot_forced"] / cold["lab_ops"]
        reading = (f"forcing the hot shape's choice ({hc['choice']}) everywhere costs the cold steps "
                   f"{share_of(cold['hot_forced'] - cold['lab_ops'], cold['lab_ops']):.0%} more time: the table "
                   "keeps it to the shapes it wins on" if ratio > 1 else
                   f"the hot shape's choice ({hc['choice']}) is no slower on the cold steps: here a per-shape table "
                   "buys nothing over it")
        rows.append(["Specializing for the hot shape does not hurt the cold ones",
                     f"the hot shape's choice forced on the cold steps: {as_x(ratio)} lab.ops's time there", reading])
    else:
        rows.append(["Specializing for the hot shape does not hurt the cold ones", f"NO RECORDS for {TRACE}", "-"])

    # 8. The boundary is known and recorded, with a generic fallback behind it.
    if trace_rec and trace_rec.get("boundary"):
        runs = decode_runs(trace_rec)
        last, after = runs["pays_up_to"], runs["first_loss"]
        b = trace_rec["boundary"]
        again = ", ".join(f"M = {m}" for m, _ in runs["wins_again"])
        number = (f"decode GEMV on {b.get('gemm', '?')}: fastest up to M = {last}"
                  + (f", slower from M = {after}" if after else "") + (f", fastest again at {again}" if again else "")
                  if last is not None else "decode is the fastest path at no M of the first run of the sweep")
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
                     f"lab.ops's GPU time: decode steps {share_of(decode_t, decode_t + prefill_t):.0%}, prefill "
                     f"steps {share_of(prefill_t, decode_t + prefill_t):.0%}",
                     "the per-step times of the trace are that profile: they say which kind of step to work on"])
    else:
        rows.append(["A profile located the bottleneck first", f"NO RECORDS for {TRACE}", "-"])
    return rows


def met_word(target: dict | None) -> str:
    return "not in the record" if target is None else ("met" if target["met"] else "MISSED")


def checklist(files: dict[str, dict | None], trace: Trace) -> Markdown:
    return md(md_table(["the course's point", "the trace's numbers", "reading"], checklist_rows(files, trace)))
