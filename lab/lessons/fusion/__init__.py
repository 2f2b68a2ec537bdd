"""The fusion lessons, split by concern; this package's namespace is what notebooks 06 and 07 (and their tests) use.

Notebook 06 (epilogue fusion: a GEMM that applies bias, scales, an activation, a clamp or a quantizer on its way to
memory) and notebook 07 (softmax, RMSNorm and LayerNorm: memory-bound row reductions). What they read, all replayed
from lab.measure.records.reference_dir() (results/h200 unless LAB_REFERENCE_RESULTS):
- the RecordSets of `lab bench FAMILY --json`: gemm_tc_epilogue and gemm_fp32_epilogue (06; the plain rung
  "plain_gemm", the same rung without the epilogue), softmax, rmsnorm and layernorm (07; the device copy of the same
  bytes, and the baseline "cupy_composed");
- checklist.json, the record of `lab study checklist` (lab.studies.checklist: the optimization checklist's levels).
In LIVE mode (a GPU here) a short plan is checked and measured in this run and shown first, the full records beside it.

- records:       the families, the record files and their provenance, the banner, the targets, shared readers
- live:          the short plan a LIVE notebook measures in this run
- epilogue_code: the chain in kernels/common/lab_epilogue.cuh, compile reports, check coverage, the quantizers
- epilogue:      the epilogue records: bytes, fused against plain and the library, targets, the fused prediction
- checklist:     the optimization checklist's record
- rows:          the row ladders' sources, their records against the device copy, predictions, tails
- numerics:      the row ladders' numerics on the CPU

Every number printed here is computed: from records, from lab.families.epilogue's references, or from the sources'
text. The targets are the lessons' own, named as targets; `meets` says whether a computed figure reaches one.
"""

from __future__ import annotations

from lab.lessons.fusion.checklist import (
    checklist_bytes,
    checklist_table,
    checklist_verdicts,
    show_checklist,
)
from lab.lessons.fusion.epilogue import (
    EpilogueRow,
    epilogue_rows,
    epilogue_table,
    epilogue_targets,
    fused_prediction,
    fused_prediction_check,
    int8_against_fp16,
    side_ranges,
    sweep_overhead,
    traffic_model,
    unfused_cost,
)
from lab.lessons.fusion.epilogue_code import (
    QUANTIZER_VALUES,
    Build,
    bounds_doc,
    check_coverage,
    compile_builds,
    compile_delta,
    compile_table,
    function_source,
    header_behaviour,
    header_codes,
    op_source,
    ops_table,
    quantizer_demo,
)
from lab.lessons.fusion.live import (
    live_note,
    live_plan,
    live_plan_text,
    live_records,
    live_refusal,
)
from lab.lessons.fusion.numerics import (
    fp16_statistics_demo,
    online_softmax,
    online_softmax_demo,
    special_rows_demo,
    variance_demo,
)
from lab.lessons.fusion.records import (
    CHECKLIST,
    COMPOSED,
    EPILOGUE_FAMILIES,
    EPILOGUE_HEADER,
    GRAPH_PATH,
    OPS_PATH,
    PLAIN,
    ROW_FAMILIES,
    TARGETS,
    against_range,
    banner,
    check_status,
    checklist_status,
    cube_side,
    exercise_pointer,
    header_fields,
    ladder,
    load_checklist,
    meets,
    missing,
    not_in_catalogue,
    problem_label,
    problems_of,
    record_at,
    record_path,
    recorded_by,
    replayed,
    show,
    status,
)
from lab.lessons.fusion.rows import (
    RowClaim,
    bandwidth_table,
    copy_targets,
    ladder_predictions,
    prediction_text,
    row_claims,
    row_prediction_check,
    rung_headers,
    rung_list,
    shared_sources,
    tail_summary,
)

__all__ = [
    "Build", "CHECKLIST", "COMPOSED", "EPILOGUE_FAMILIES", "EPILOGUE_HEADER", "EpilogueRow", "GRAPH_PATH",
    "OPS_PATH", "PLAIN", "QUANTIZER_VALUES", "ROW_FAMILIES", "RowClaim", "TARGETS", "against_range",
    "bandwidth_table", "banner", "bounds_doc", "check_coverage", "checklist_bytes", "check_status", "checklist_status",
    "checklist_table", "checklist_verdicts", "compile_builds", "compile_delta", "compile_table", "copy_targets",
    "cube_side", "epilogue_rows", "epilogue_table", "epilogue_targets", "exercise_pointer", "fp16_statistics_demo",
    "function_source", "fused_prediction", "fused_prediction_check", "header_behaviour", "header_codes",
    "header_fields", "int8_against_fp16", "ladder", "ladder_predictions", "live_note", "live_plan",
    "live_plan_text", "live_records", "live_refusal", "load_checklist", "meets", "missing", "not_in_catalogue",
    "online_softmax", "online_softmax_demo", "op_source", "ops_table", "prediction_text", "problem_label",
    "problems_of", "quantizer_demo", "record_at", "record_path", "recorded_by", "replayed", "row_claims",
    "row_prediction_check", "rung_headers", "rung_list", "shared_sources", "show", "show_checklist", "side_ranges",
    "special_rows_demo", "status", "sweep_overhead", "tail_summary", "traffic_model", "unfused_cost",
    "variance_demo"
]
