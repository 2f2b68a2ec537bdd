"""Matplotlib figures drawn from records (never from literals), one module per notebook topic on shared style:

- style:      titles, colours per series, plain ticks, legends outside, log axes where values span decades, save
- ladders:    notebooks 00-03 and the tour: bandwidth, tails, ladder bars, throughput, profiles, the L2 sweep
- scheduling: notebook 04: tile orders, DRAM traffic, stream-K against the waves
- underfill:  notebook 05: split-K factors, decode bandwidth, grouped GEMM
- fusion:     notebooks 06 and 07: epilogues, the checklist's levels, row ladders
- ops:        notebook 08: the compile cache and lab.ops on the serving trace

The notebooks call them as `plots.NAME`; this namespace re-exports each module's public names.
"""

from lab.lessons.plots.fusion import (  # noqa: F401
    checklist_levels,
    epilogue_times,
    row_ladder,
    tail_by_base,
)
from lab.lessons.plots.ladders import (  # noqa: F401  # noqa: F401
    BAR_LABEL,
    BAR_LABEL_POINTS,
    CROWDED_SHARE,
    SLANTED,
    all_zero,
    bandwidth_vs_bytes,
    dram_bars,
    headline_by_size,
    l2_sweep,
    ladder_bars,
    ladder_grid,
    profile_bars,
    tail,
    throughput_vs_size,
)
from lab.lessons.plots.ops import (  # noqa: F401  # noqa: F401
    HIT_COLOR,
    OPS_COLORS,
    RATIO_LOG_SPAN,
    STEP_MARKERS,
    autotune_candidates,
    compile_growth,
    compile_time_per_variant,
    decode_boundary,
    dispatch_overhead,
    first_request_latency,
    ops_torch_ratios,
    scenario_label,
    trace_shapes,
    trace_speedups,
)
from lab.lessons.plots.scheduling import (  # noqa: F401  # noqa: F401
    KIND_COLORS,
    ORDER_COLORS,
    WAVE0_COLOR,
    order_dram,
    order_speeds,
    order_traffic,
    setting_label,
    small_items,
    stream_k_named,
    stream_k_sawtooth,
    tile_orders,
)
from lab.lessons.plots.style import (  # noqa: F401
    BASELINE_COLOR,
    CEILING_COLOR,
    CEILING_NAMES,
    DECADES_FOR_LOG,
    READ_COLOR,
    RUNG_COLORS,
    WRITE_COLOR,
    axes_or_new,
    figure_title,
    legend_outside,
    log_if_decades,
    payload_source,
    plain_log_ticks,
    plain_ticks,
    save,
    series,
    series_style,
    shape_key,
    shape_panels,
    shape_text,
    tail_step,
)
from lab.lessons.plots.underfill import (  # noqa: F401
    GROUPED_LABELS,
    LOOP_COLOR,
    SPLIT_COLORS,
    decode_bandwidth,
    expert_rows,
    grouped_cases,
    split_factors,
    split_kernel_times,
    ticks_inside,
)
