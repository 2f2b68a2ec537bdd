"""What the notebooks share, split by concern; this package's namespace is the notebooks' API.

- mode:        LIVE (a GPU here: check and measure in this run) or REPLAY (the reference GPU's records), and the banner
- sources:     a rung's header, knobs, diff from the previous rung, compile reports and instruction mix
- views:       records measured in this run or replayed, picked by rung and size: summaries, ratios, tails, figures
- demos:       live-only checks of a ladder before any timing
- nsight:      Nsight Compute counters: bank conflicts, DRAM bytes against the minimum
- predictions: a header's prediction and its numeric ranges held against the records; the FP32 peak
- walk:        RungWalk, one call for the steps every rung repeats
- layouts:     the tensor-core ladder's index arithmetic (fragments, ldmatrix, bank groups, pipelines)
- diagrams:    figures drawn from that arithmetic, not from records (imported as lab.lessons.diagrams)
- underfill:   notebook 05's shapes that do not fill the GPU: split-K, decode, grouped GEMM (lab.lessons.underfill)

No figure in a notebook is typed in: every number these print is computed from records. With LAB_CHECK_FIGURES=1 (the
notebook tests set it) every figure is checked for legibility before it is drawn (lab.lessons.figure_check).
"""

from lab.lessons.common import Markdown, describe_provenance, md
from lab.lessons.demos import (
    check_ladder,
    check_summary,
    few_cases,
)
from lab.lessons.mode import (
    MODE_VARIABLE,
    Mode,
    arch_note,
    compile_arch,
    describe_gpu,
    mode,
    mode_banner,
    rung_listing,
    runs_on,
)
from lab.lessons.nsight import (
    conflict_metrics,
    dram_change,
    dram_plot,
    dram_rate,
    dram_summary,
    dram_table,
    profile_plot,
    profile_records,
    profile_status,
    profile_value,
)
from lab.lessons.predictions import Claim, claims, fp32_peak, peak_status, prediction, prediction_check
from lab.lessons.sources import (
    compile_pair,
    instruction_delta,
    knobs_line,
    mma_mix,
    mostly_rewritten,
    operand_mix,
    rung_diff,
    rung_header,
    rung_pair,
    show_diff,
    show_source,
)
from lab.lessons.views import (
    REGIMES,
    Ratio,
    best_rung,
    ceiling_name,
    ceiling_summary,
    cold_versus_warm,
    copy_ceiling,
    figure,
    headline_sizes,
    headline_summary,
    headline_table,
    kinds_status,
    ladder_records,
    launch_paths,
    missing,
    one_record,
    plot,
    provenance_fields,
    ratio,
    ratio_by_size,
    record_fields,
    records_status,
    reference,
    reference_path,
    regime_bounds,
    select,
    size_change,
    so_far,
    spread_table,
    tail_residues,
    tail_sawtooth,
    tail_steps,
)
from lab.lessons.walk import RungWalk

__all__ = [
    "Claim", "MODE_VARIABLE", "Markdown", "Mode", "REGIMES", "Ratio", "RungWalk", "arch_note", "best_rung",
    "ceiling_name", "ceiling_summary", "check_ladder", "check_summary", "claims", "cold_versus_warm", "compile_arch",
    "compile_pair", "conflict_metrics", "copy_ceiling", "describe_gpu", "describe_provenance", "dram_change",
    "dram_plot", "dram_rate", "dram_summary", "dram_table", "few_cases", "figure",
    "fp32_peak", "headline_sizes", "headline_summary", "headline_table",
    "instruction_delta", "kinds_status", "knobs_line", "ladder_records", "launch_paths", "md", "missing",
    "mma_mix", "mode", "mode_banner", "mostly_rewritten", "one_record", "operand_mix", "peak_status", "plot",
    "prediction", "prediction_check", "profile_plot", "profile_records", "profile_status", "profile_value",
    "provenance_fields", "ratio", "ratio_by_size", "record_fields", "records_status", "reference",
    "reference_path", "regime_bounds", "rung_diff", "rung_header", "rung_listing", "rung_pair", "runs_on",
    "select", "show_diff", "show_source", "size_change", "so_far", "spread_table", "tail_residues",
    "tail_sawtooth", "tail_steps",
]

from lab.lessons.figure_check import install_if_asked  # noqa: E402

install_if_asked()
