"""The lesson of notebook 08: shape specialization and dispatch, measured on a serving trace.

This module is the notebook's namespace (`from lab.lessons import ops as lesson`); the code lives in one module per
concern, each under about 500 lines:

- ops_records:   where each record lives, loading it replayed, provenance, the banner, the targets, the formatters
- ops_live:      the live-only helpers: section 1's operands on the GPU and the report of its call
- ops_trace:     the layer's GEMMs, the trace regenerated from the record's seed, steps and GPU time per M bucket
- ops_dispatch:  the dispatch table as data, the matcher and the bucketing, the trace's decisions and counters
- ops_tune:      the autotune record: every bucket's candidates, one bucket's rows, the table held against it
- ops_latency:   compile time as variants multiply (host CPU), the first request of fresh processes
- ops_results:   the trace's totals against cuBLAS and one generic kernel, speedups, hot versus cold, host overhead
- ops_boundary:  where the decode GEMV stops paying on the boundary sweep, against the table's decode rule
- ops_checklist: when specialization is worth it, filled in with the trace's numbers

Every number printed is computed, from the records or from the lab's own code (the dispatch table, the trace). The
targets are the runtime's, named as targets. The figures are in lab.lessons.plots.ops.
"""

from lab.lessons.ops_boundary import (
    boundary,
    boundary_against_table,
    boundary_reading,
    decode_limit,
    decode_rule_max_m,
    decode_runs,
    decode_wins,
    sweep_points,
)
from lab.lessons.ops_checklist import (
    checklist,
    checklist_rows,
    met_word,
    sum_method,
)
from lab.lessons.ops_dispatch import (
    counters_table,
    decision_map,
    decision_rows,
    decisions_by_family,
    dispatch_table,
    fallback_share,
    path_share,
    rule_reasons,
    table_decision,
    trace_shapes,
)
from lab.lessons.ops_latency import (
    SCENARIOS,
    compile_figure,
    compile_share,
    compile_summary,
    compile_view,
    first_request_profile,
    latency_rows,
    latency_table,
    latency_target,
    show_compile,
    warm_target,
)
from lab.lessons.ops_live import (
    USAGE_SHAPE,
    stats_text,
    usage_inputs,
    usage_report,
)
from lab.lessons.ops_records import (
    COMPILE,
    CPU_LABEL,
    FILES,
    GEMMS_ONLY,
    LATENCY,
    METHODS,
    OVERHEAD,
    PAYLOADS,
    TARGETS,
    TRACE,
    TUNE,
    Gpu,
    as_x,
    banner,
    bucket_label,
    candidate_label,
    compile_record_path,
    config_text,
    gpu_of,
    label,
    load,
    md_table,
    meets,
    missing,
    record_path,
    recorded_by,
    replayed,
    share_of,
    show,
    source,
    targets_text,
    us_text,
)
from lab.lessons.ops_results import (
    ONE_KERNEL,
    OVERHEAD_COLUMNS,
    gemm_share,
    hot_choice,
    hot_cold,
    hot_cold_table,
    overhead_rows,
    overhead_table,
    speedup_reading,
    speedup_rows,
    totals_table,
    trace_targets,
)
from lab.lessons.ops_trace import (
    HOT_TIME_SHARE,
    Trace,
    bucket_times,
    hot_buckets,
    layer_gemms,
    per_step,
    shape_rows,
    time_table,
    trace_of,
    trace_summary,
)
from lab.lessons.ops_tune import (
    gemm_name,
    parse_bucket,
    recorded_candidates,
    table_against_tune,
    tune_rows,
    tune_table,
    tune_wins,
)

__all__ = [
    "as_x", "banner", "boundary", "boundary_against_table", "boundary_reading", "bucket_label", "bucket_times",
    "candidate_label", "checklist", "checklist_rows", "COMPILE", "compile_record_path", "compile_figure",
    "compile_share", "compile_summary", "compile_view",
    "config_text", "counters_table", "CPU_LABEL", "decision_map", "decision_rows", "decisions_by_family",
    "decode_limit", "decode_rule_max_m", "decode_runs", "decode_wins", "dispatch_table", "fallback_share", "FILES",
    "first_request_profile", "gemm_name", "gemm_share", "GEMMS_ONLY", "Gpu", "gpu_of", "hot_buckets", "hot_choice",
    "hot_cold", "hot_cold_table", "HOT_TIME_SHARE", "label", "LATENCY", "latency_rows", "latency_table",
    "latency_target", "layer_gemms", "load", "md_table", "meets", "met_word", "METHODS", "missing", "ONE_KERNEL",
    "OVERHEAD", "OVERHEAD_COLUMNS", "overhead_rows", "overhead_table", "parse_bucket", "path_share", "PAYLOADS",
    "per_step", "record_path", "recorded_by", "recorded_candidates", "replayed", "rule_reasons", "SCENARIOS",
    "shape_rows", "share_of", "show", "show_compile", "source", "speedup_reading", "speedup_rows", "stats_text",
    "sum_method",
    "sweep_points", "table_against_tune", "table_decision", "TARGETS", "targets_text", "time_table", "totals_table",
    "TRACE", "Trace", "trace_of", "trace_shapes", "trace_summary", "trace_targets", "TUNE", "tune_rows",
    "tune_table", "tune_wins", "us_text", "usage_inputs", "usage_report", "USAGE_SHAPE", "warm_target",
]
