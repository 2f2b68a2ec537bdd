"""The lesson of notebook 05: shapes that do not fill the GPU. Split-K for long K and few output tiles, decode (a
handful of tokens against a large weight), and grouped GEMM (many small GEMMs of different sizes).

Split by concern; this package's namespace is what the notebook and the tests use:
- records:  the record files it reads, their provenance, the banner, the lesson's constants and targets
- facts:    the two measured facts the predictions stand on (the device copy's time against bytes, rung 06's time
            per k-step of a tile), both other ladders' records
- split_k:  part 1, split-K: predictions, the factor study, Nsight Compute, the reading
- decode:   part 2, decode: the shape, the launcher's plan against Little's law, the records
- grouped:  part 3, grouped GEMM: the cases' tiles and padding, the records against the loop of cuBLAS calls
- live:     the short LIVE plan (a GPU here), checked and measured in this run; nothing in REPLAY

Every number printed is computed: from the shapes and the families' own launch arithmetic (predictions), or from
records (measurements). The targets are the lesson's, named as targets.
"""

from lab.lessons.underfill.decode import (
    decode_limits,
    decode_plan,
    decode_prediction,
    decode_reading,
    decode_shapes,
    decode_table,
    decode_targets,
    replayed_decode_timing,
    resident_blocks,
    w_bytes,
)
from lab.lessons.underfill.facts import CopyModel, TileRate, copy_model, prediction_inputs, tile_rate
from lab.lessons.underfill.grouped import (
    case_groups,
    grouped_reading,
    grouped_shape,
    grouped_shapes,
    grouped_table,
    grouped_targets,
    replayed_grouped_timing,
    table_cost_table,
)
from lab.lessons.underfill.live import (
    live_bench,
    live_note,
    live_plan_text,
    live_refusal,
    live_split_k,
    live_table_costs,
    with_headlines,
)
from lab.lessons.underfill.records import (
    ASSUMED_DRAM_LATENCY_US,
    BATCHED,
    BK,
    COPY,
    CUBLAS,
    DECODE_CUBLAS,
    DECODE_FAMILY,
    DECODE_RUNG,
    DECODE_SIDES,
    DECODE_TOKENS,
    FAMILIES,
    FILES,
    GROUPED_CASES,
    GROUPED_FAMILY,
    GROUPED_RUNG,
    LIVE_DECODE,
    LIVE_DETERMINISM_RUNS,
    LIVE_FACTORS,
    LIVE_GROUPED,
    LIVE_MIN_TIME_MS,
    LIVE_SPLIT_SHAPE,
    LOOP,
    PAYLOADS,
    PLAIN_RUNG,
    PREDICTION_INPUTS,
    RATE_SHAPE,
    SPLIT_FACTORS,
    SPLIT_FAMILY,
    SPLIT_MODES,
    SPLIT_NCU,
    SPLIT_SHAPES,
    TABLE_COST,
    TARGETS,
    banner,
    code_diff,
    dash_or,
    gpu_facts,
    header_field,
    header_prediction,
    ladder,
    load,
    meets,
    missing,
    problems_of,
    provenance_of,
    record_path,
    recorded_by,
    replayed,
    replayed_records,
    shape_label,
    show,
    sm_count_of,
    source,
)
from lab.lessons.underfill.split_k import (
    REDUCE_KERNEL,
    SPLIT_KERNEL,
    best_factors,
    cluster_plans_text,
    cluster_rounds_text,
    determinism_table,
    gemm_bytes,
    launcher_splits,
    ncu_kernels,
    ncu_launches,
    ncu_table,
    replayed_split_timing,
    show_kernel_times,
    slice_bytes,
    split_auto_table,
    split_bench_table,
    split_predicted_curves,
    split_prediction,
    split_prediction_table,
    split_reading,
    split_shapes,
    split_targets,
    split_tile,
    split_time_shares,
    tile_for_splits,
    variants,
)

__all__ = [
    "ASSUMED_DRAM_LATENCY_US", "BATCHED", "BK", "COPY", "CUBLAS", "DECODE_CUBLAS", "DECODE_FAMILY", "DECODE_RUNG",
    "DECODE_SIDES", "DECODE_TOKENS", "FAMILIES", "FILES", "GROUPED_CASES", "GROUPED_FAMILY", "GROUPED_RUNG",
    "LIVE_DECODE", "LIVE_DETERMINISM_RUNS", "LIVE_FACTORS", "LIVE_GROUPED", "LIVE_MIN_TIME_MS", "LIVE_SPLIT_SHAPE",
    "LOOP", "PAYLOADS", "PLAIN_RUNG", "PREDICTION_INPUTS", "RATE_SHAPE", "REDUCE_KERNEL", "SPLIT_FACTORS",
    "SPLIT_FAMILY", "SPLIT_KERNEL", "SPLIT_MODES", "SPLIT_NCU", "SPLIT_SHAPES", "TABLE_COST", "TARGETS",
    "CopyModel", "TileRate", "banner", "code_diff", "header_field", "replayed_decode_timing",
    "replayed_grouped_timing", "replayed_split_timing", "best_factors", "case_groups", "copy_model", "dash_or",
    "decode_limits", "decode_plan", "decode_prediction", "decode_reading", "decode_shapes", "decode_table",
    "decode_targets", "determinism_table", "cluster_plans_text", "cluster_rounds_text", "gemm_bytes", "gpu_facts",
    "grouped_reading",
    "grouped_shape", "grouped_shapes", "grouped_table", "grouped_targets", "header_prediction", "ladder",
    "launcher_splits", "live_bench", "live_note", "live_plan_text", "live_refusal", "live_split_k",
    "live_table_costs", "load", "meets", "missing", "ncu_kernels", "ncu_launches", "ncu_table", "prediction_inputs",
    "problems_of", "provenance_of", "record_path", "recorded_by", "replayed", "replayed_records", "resident_blocks",
    "shape_label", "show", "show_kernel_times", "slice_bytes", "sm_count_of", "source", "split_auto_table",
    "split_bench_table", "split_predicted_curves", "split_prediction", "split_prediction_table", "split_reading",
    "split_shapes", "split_targets", "split_tile", "split_time_shares", "table_cost_table", "tile_for_splits",
    "tile_rate", "variants", "w_bytes", "with_headlines",
]
