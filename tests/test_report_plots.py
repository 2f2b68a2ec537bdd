"""CPU: tables and figures drawn from a small synthetic RecordSet (test data, never written to results/)."""

import io

import pytest
from rich.console import Console

from lab.lessons import plots
from lab.measure import shapes
from lab.measure.records import Record, RecordSet
from lab.studies import report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CEILING = "cupy_device_copy"
COPY_RUNGS = ("01_naive", "02_grid_stride", "03_vectorized", "04_unrolled")
TRANSPOSE_RUNGS = ("01_naive", "02_smem_tiled", "03_padded", "04_swizzled")
PROVENANCE = {
    "device": "TEST GPU (synthetic data)",
    "arch": "sm_90",
    "sm_count": 132,
    "l2_bytes": 50 << 20,
    "date": "2026-01-02T03:04:05+00:00",
    "commit": "test",
}


def _record(family, rung, kind, params, nbytes, l2, value, ceiling_value):
    ms = nbytes / (value * 1e9) * 1e3
    return Record(
        family,
        rung,
        kind,
        params,
        nbytes,
        l2,
        ms,
        0.98 * ms,
        1.05 * ms,
        20,
        "GB/s",
        value,
        CEILING,
        ceiling_value,
    )


def synthetic(family: str) -> RecordSet:
    """Headline, sweep and tail records for a family: the ceiling at 4000 GB/s, rungs at 70-100% of it."""
    rungs = COPY_RUNGS if family == "copy" else TRANSPOSE_RUNGS

    def params(size):
        return {"n": size} if family == "copy" else {"rows": size, "cols": size}

    def nbytes(size):
        return 8 * size if family == "copy" else 8 * size * size

    recs = []
    head = 1 << 26 if family == "copy" else 8192
    recs.append(_record(family, CEILING, "headline", params(head), nbytes(head), "cold", 4000.0, 4000.0))
    recs += [
        _record(family, r, "headline", params(head), nbytes(head), "cold", 4000.0 * (0.7 + 0.1 * i), 4000.0)
        for i, r in enumerate(rungs)
    ]
    for b in shapes.byte_sweep(1 << 10, 1 << 24, per_octave=1)[::2]:
        size = b // 8 if family == "copy" else shapes.square_for_bytes(b)
        for l2, boost in (("cold", 1.0), ("warm", 1.5)):
            ceil = boost * min(4000.0, b / 2e3)
            recs.append(_record(family, CEILING, "sweep", params(size), nbytes(size), l2, ceil, ceil))
            recs += [
                _record(family, r, "sweep", params(size), nbytes(size), l2, ceil * (0.7 + 0.1 * i), ceil)
                for i, r in enumerate(rungs)
            ]
    base = 1 << 24 if family == "copy" else 8184
    for size in shapes.tail_range(base, 8):
        recs.append(_record(family, CEILING, "tail", params(size), nbytes(size), "warm", 4000.0, 4000.0))
        recs += [
            _record(family, r, "tail", params(size), nbytes(size), "warm", 3000.0 + 100 * (size % 4), 4000.0)
            for r in rungs
        ]
    return RecordSet(dict(PROVENANCE), recs)


def _is_png(path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("family,rungs", [("copy", COPY_RUNGS), ("transpose", TRANSPOSE_RUNGS)])
def test_headline_markdown_has_every_rung_and_its_ratio(family, rungs):
    md = report.headline_markdown(synthetic(family), family)
    lines = md.splitlines()
    assert lines[0].startswith("| rung |") and len(lines) == 2 + 1 + len(
        rungs
    )  # header, rule, ceiling, rungs
    for i, rung in enumerate(rungs):
        row = next(line for line in lines if line.startswith(f"| {rung} |"))
        assert f"| {0.7 + 0.1 * i:.3f}x |" in row, row
        assert f"{4000 * (0.7 + 0.1 * i):.0f} GB/s" in row
    ceiling_row = next(line for line in lines if line.startswith(f"| {CEILING} |"))
    assert "| 1.000x |" in ceiling_row


def test_headline_rows_only_take_headline_records_of_the_family():
    rs = synthetic("copy")
    rs.records += synthetic("transpose").records
    rows = report.headline_rows(rs, "copy")
    assert [r["rung"] for r in rows] == [CEILING, *COPY_RUNGS]
    assert rows[0]["size"] == f"n={1 << 26}"
    assert report.headline_rows(rs, "gemm") == []


def test_headline_table_renders_rungs_and_percent_of_ceiling():
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(
        report.headline_table(synthetic("transpose"), "transpose")
    )
    text = buf.getvalue()
    assert "TEST GPU (synthetic data)" in text and "measured on" in text
    for i, rung in enumerate(TRANSPOSE_RUNGS):
        row = next(line for line in text.splitlines() if rung in line)
        assert f"{100 * (0.7 + 0.1 * i):.1f}%" in row, row
        assert "rows=8192, cols=8192" in row


def test_provenance_markdown():
    md = report.provenance_markdown(synthetic("copy"))
    assert "- device: `TEST GPU (synthetic data)`" in md and "- runtime_cuda: `?`" in md


def test_write_summary(tmp_path):
    path = report.write_summary(tmp_path, "# Title\n", ["## A\n\nbody a\n", "## B"])
    assert path == tmp_path / "summary.md"
    assert path.read_text() == "# Title\n\n## A\n\nbody a\n\n## B\n"


@pytest.mark.parametrize("family", ["copy", "transpose"])
@pytest.mark.parametrize(
    "plot", [plots.bandwidth_vs_bytes, plots.tail, plots.ladder_bars], ids=lambda f: f.__name__
)
def test_plots_write_png_files(tmp_path, family, plot):
    path = tmp_path / "figs" / f"{family}_{plot.__name__}.png"
    assert plot(synthetic(family), family, path) == path
    assert _is_png(path)


@pytest.mark.filterwarnings("error")
def test_l2_marker_stays_inside_the_axes_when_bandwidth_is_flat(tmp_path):
    """The 'L2 50 MB' label sits at the foot of the axes whatever the y range (no tight_layout warning)."""
    flat = [
        _record("copy", rung, "sweep", {"n": b // 8}, b, l2, 1000.0, 1000.0)
        for rung in (CEILING, "01_naive")
        for l2 in ("cold", "warm")
        for b in (1 << 20, 1 << 30)
    ]
    path = plots.bandwidth_vs_bytes(RecordSet(dict(PROVENANCE), flat), "copy", tmp_path / "flat.png")
    assert _is_png(path)


def test_profile_bars_write_a_png(tmp_path):
    rows = [
        {"rung": r, "smem_bank_conflicts_ld": c}
        for r, c in zip(TRANSPOSE_RUNGS, (0, 1 << 20, 0, 0), strict=True)
    ]
    path = plots.profile_bars(rows, "smem_bank_conflicts_ld", "transpose", {"rows": 64, "cols": 64}, "synthetic",
                              tmp_path / "bank.png")
    assert _is_png(path)


@pytest.mark.parametrize(
    "plot", [plots.bandwidth_vs_bytes, plots.tail, plots.ladder_bars], ids=lambda f: f.__name__
)
def test_plots_return_none_without_records(tmp_path, plot):
    empty = RecordSet(dict(PROVENANCE), [])
    assert plot(empty, "copy", tmp_path / "empty.png") is None
    assert plot(synthetic("transpose"), "copy", tmp_path / "other.png") is None  # another family's records
    assert not list(tmp_path.iterdir())


def test_profile_bars_return_none_without_rows(tmp_path):
    assert plots.profile_bars([], "smem_bank_conflicts_ld", "t", path=tmp_path / "x.png") is None
    assert not (tmp_path / "x.png").exists()


def test_plot_without_a_path_returns_the_figure():
    import matplotlib.pyplot as plt

    fig = plots.ladder_bars(synthetic("copy"), "copy")
    try:
        labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        assert labels == [CEILING, *COPY_RUNGS]
    finally:
        plt.close(fig)


def test_format_bytes_is_binary_and_labelled_so():
    from lab.measure.records import format_bytes

    assert format_bytes(50 << 20) == "50 MiB"
    assert format_bytes(1024) == "1 KiB" and format_bytes(1000) == "1000 B"
    assert format_bytes(3 << 40) == "3 TiB" and format_bytes(5 << 50) == "5120 TiB"


# ----------------------------------------------------------------------------------------------
# A compute-bound family (TFLOP/s, M/N/K params): synthetic GEMM records
# ----------------------------------------------------------------------------------------------

GEMM_RUNGS = ("04_register_tile_1d", "08_multistage")


def _gemm_record(rung, kind, M, N, K, value, ceiling_value, l2="cold"):
    params = {"M": M, "N": N, "K": K, "alpha": 1.0, "beta": 0.0, "pad": 0, "lda": K, "ldb": N, "ldc": N}
    ms = 2 * M * N * K / (value * 1e12) * 1e3
    return Record("gemm_fp32", rung, kind, params, 4 * (M * K + K * N + M * N), l2, ms, ms, ms, 10, "TFLOP/s",
                  value, "cublas_sgemm", ceiling_value)


def gemm_synthetic() -> RecordSet:
    recs = []
    for rung, v in (("cublas_sgemm", 50.0), ("04_register_tile_1d", 11.0), ("08_multistage", 44.0)):
        recs.append(_gemm_record(rung, "headline", 4096, 4096, 4096, v, 50.0))
        recs += [_gemm_record(rung, "sweep", n, n, n, v * n / 4096, 50.0 * n / 4096) for n in (256, 1024, 4096)]
        recs += [_gemm_record(rung, "tail", 4096, n, 4096, v * (1 if n % 4 == 0 else 0.8), 50.0, "warm")
                 for n in range(4094, 4100)]
    return RecordSet(dict(PROVENANCE), recs)


def test_gemm_tables_print_tflops_with_decimals_and_no_derived_params():
    md = report.headline_markdown(gemm_synthetic(), "gemm_fp32")
    row = next(line for line in md.splitlines() if line.startswith("| 04_register_tile_1d |"))
    assert "| M=4096, N=4096, K=4096 |" in row and "11.0 TFLOP/s" in row and "lda" not in row
    assert "| 0.220x |" in row


@pytest.mark.parametrize("plot", [plots.throughput_vs_size, plots.tail, plots.ladder_bars],
                         ids=lambda f: f.__name__)
def test_plots_of_a_tflops_family_write_png_files(tmp_path, plot):
    path = tmp_path / f"gemm_{plot.__name__}.png"
    kwargs = {} if plot is plots.tail else {"peak": 66.9, "peak_label": "FP32 peak"}
    assert plot(gemm_synthetic(), "gemm_fp32", path, **kwargs) == path
    assert _is_png(path)


def test_the_tail_plot_steps_the_parameter_that_varies():
    import matplotlib.pyplot as plt

    fig = plots.tail(gemm_synthetic(), "gemm_fp32")
    try:
        assert fig.axes[0].get_xlabel() == "N (M=4096, K=4096)"
        assert fig.axes[0].get_ylabel() == "TFLOP/s"
    finally:
        plt.close(fig)


def test_throughput_vs_size_returns_none_without_sweep_records(tmp_path):
    assert plots.throughput_vs_size(synthetic("copy"), "gemm_fp32", tmp_path / "x.png") is None
    assert not (tmp_path / "x.png").exists()


def test_dram_bars_and_the_profile_table_against_the_minimum(tmp_path):
    from lab.studies import profile

    payload = {"params": {"M": 4096, "N": 4096, "K": 4096},
               "rows": [{"rung": "01_naive", "dram_read_bytes": 3e9, "dram_write_bytes": 1e8},
                        {"rung": "08_multistage", "dram_read_bytes": 2.2e8, "dram_write_bytes": 6.7e7},
                        {"rung": "no_dram_counters", "l2_hit_rate_pct": 50.0}]}
    minimum = 4 * 3 * 4096**2
    rows = profile.dram_rows(payload, minimum)
    assert [r["rung"] for r in rows] == ["01_naive", "08_multistage"]
    assert rows[1]["over_minimum"] == pytest.approx(2.87e8 / minimum)
    assert _is_png(plots.dram_bars(rows, minimum, "gemm_fp32", payload["params"], "synthetic", tmp_path / "dram.png"))
    assert plots.dram_bars([], minimum, "t", path=tmp_path / "none.png") is None
    table = report.profile_markdown(payload, minimum)
    assert f"DRAM / minimum ({minimum / 1e6:.1f} MB)" in table.splitlines()[0]
    assert f"| {2.87e8 / minimum:.2f}x |" in table
    assert "minimum" not in report.profile_markdown(payload)


def test_describe_params_and_format_value():
    from lab.measure.records import describe_params, format_value

    assert describe_params({"n": 5, "x_offset": 0, "y_offset": 2}) == "n=5, y_offset=2"
    assert describe_params({"M": 3, "N": 4, "K": 5, "alpha": 1.0, "beta": 0.5, "pad": 0, "lda": 5}) == \
        "M=3, N=4, K=5, beta=0.5"
    assert format_value(4079.4, "GB/s") == "4079"
    assert format_value(0.394, "TFLOP/s") == "0.39" and format_value(41.63, "TFLOP/s") == "41.6"


# ----------------------------------------------------------------------------------------------
# The helpers every figure goes through: titles, series styles, ticks, legends, log scales
# ----------------------------------------------------------------------------------------------

def _two_headline_sizes() -> RecordSet:
    rs = synthetic("copy")
    n = 1 << 27
    extra = [_record("copy", r, "headline", {"n": n}, 8 * n, "cold", 3900.0 * (1 - 0.05 * i), 3900.0)
             for i, r in enumerate((CEILING, *COPY_RUNGS))]
    return RecordSet(rs.provenance, rs.records + extra)


def test_headline_by_size_draws_every_target_across_the_sizes():
    import matplotlib.pyplot as plt

    assert plots.headline_by_size(synthetic("copy"), "copy") is None  # one headline size: nothing to compare
    fig = plots.headline_by_size(_two_headline_sizes(), "copy")
    try:
        left, right = fig.axes[:2]
        assert {ln.get_label() for ln in left.get_lines()} == {CEILING, *COPY_RUNGS}
        assert all(ln.get_ydata()[0] == 1.0 for ln in right.get_lines())  # each against its own first size
    finally:
        plt.close(fig)


def _all_figures():
    """Every figure function on records that have what it needs, as (name, figure)."""
    from lab.studies import profile

    payload = {"params": {"M": 4096, "N": 4096, "K": 4096},
               "rows": [{"rung": "01_naive", "dram_read_bytes": 3e9, "dram_write_bytes": 1e8},
                        {"rung": "08_multistage", "dram_read_bytes": 2.2e8, "dram_write_bytes": 6.7e7}]}
    rows = profile.dram_rows(payload, 201326592)
    bank = [{"rung": r, "smem_bank_conflicts_ld": c}
            for r, c in zip(TRANSPOSE_RUNGS, (0, 2.7e8, 6.5e3, 12), strict=True)]
    return [("bandwidth_vs_bytes", plots.bandwidth_vs_bytes(synthetic("copy"), "copy")),
            ("tail", plots.tail(gemm_synthetic(), "gemm_fp32")),
            ("ladder_bars", plots.ladder_bars(gemm_synthetic(), "gemm_fp32", peak=66.9)),
            ("throughput_vs_size", plots.throughput_vs_size(gemm_synthetic(), "gemm_fp32", peak=66.9)),
            ("headline_by_size", plots.headline_by_size(_two_headline_sizes(), "copy")),
            ("profile_bars", plots.profile_bars(bank, "smem_bank_conflicts_ld", "transpose", {"rows": 8192})),
            ("dram_bars", plots.dram_bars(rows, 201326592, "gemm_fp32", payload["params"], "synthetic"))]


def _titles(fig) -> list[str]:
    texts = [ax.get_title() for ax in fig.axes]
    return texts + ([fig._suptitle.get_text()] if fig._suptitle else [])


def test_no_figure_title_prints_a_raw_dict():
    import matplotlib.pyplot as plt

    for name, fig in _all_figures():
        try:
            assert fig is not None, name
            for title in _titles(fig):
                assert "{" not in title and "'" not in title, f"{name}: {title!r}"
        finally:
            plt.close(fig)
    assert plots.figure_title("gemm_fp32", "x", {"M": 1, "N": 2, "K": 3, "lda": 3}) == "gemm_fp32: x at M=1, N=2, K=3"


def _line_colors(fig, label: str) -> set:
    from matplotlib.colors import to_hex

    return {to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines() if line.get_label() == label}


def test_a_series_keeps_its_colour_across_figures_and_the_ceiling_is_dashed_black():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    rs = gemm_synthetic()
    sizes, tail, bars = (plots.throughput_vs_size(rs, "gemm_fp32"), plots.tail(rs, "gemm_fp32"),
                         plots.ladder_bars(rs, "gemm_fp32"))
    try:
        rung_color = to_hex(plots.series_style("08_multistage")["color"])
        assert _line_colors(sizes, "08_multistage") == _line_colors(tail, "08_multistage") == {rung_color}
        bar = next(p for p, t in zip(bars.axes[0].patches, bars.axes[0].get_xticklabels(), strict=False)
                   if t.get_text() == "08_multistage")
        assert to_hex(bar.get_facecolor()) == rung_color
        for fig in (sizes, tail):
            ceiling = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "cublas_sgemm"]
            assert ceiling and to_hex(ceiling[0].get_color()) == "#000000" and ceiling[0].get_linestyle() == "--"
        assert len({plots.series_style(f"0{i}_x")["color"] for i in range(1, 9)}) == 8  # rungs never share one
    finally:
        for fig in (sizes, tail, bars):
            plt.close(fig)


def test_bank_conflict_bars_use_a_log_scale_when_the_rungs_span_decades():
    import matplotlib.pyplot as plt

    decades = [{"rung": r, "smem_bank_conflicts_ld": c} for r, c in zip(TRANSPOSE_RUNGS, (0, 2.7e8, 6.5e3, 12),
                                                                         strict=True)]
    close = [{"rung": r, "smem_bank_conflicts_ld": c} for r, c in zip(TRANSPOSE_RUNGS, (10, 20, 30, 40), strict=True)]
    wide, narrow = (plots.profile_bars(rows, "smem_bank_conflicts_ld", "transpose") for rows in (decades, close))
    try:
        assert wide.axes[0].get_yscale() in ("log", "symlog") and "log scale" in wide.axes[0].get_ylabel()
        assert narrow.axes[0].get_yscale() == "linear"
    finally:
        plt.close(wide)
        plt.close(narrow)


def test_tail_ticks_are_plain_numbers_and_the_title_states_the_records_step():
    import matplotlib.pyplot as plt

    recs = [r for r in gemm_synthetic().records if r.kind != "tail" or r.params["N"] % 2 == 0]
    fig = plots.tail(RecordSet(dict(PROVENANCE), recs), "gemm_fp32")
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        assert not ax.xaxis.get_major_formatter().get_useOffset()
        assert ax.xaxis.get_offset_text().get_text() == ""
        assert "stepping by 2" in ax.get_title()
    finally:
        plt.close(fig)


def test_legends_sit_outside_the_axes_and_cover_no_data():
    import matplotlib.pyplot as plt

    for name, fig in _all_figures():
        try:
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            for ax in fig.axes:
                legend = ax.get_legend()
                if legend is None or name == "bandwidth_vs_bytes":  # its per-panel legend sits in an empty corner
                    continue
                box = legend.get_window_extent(renderer)
                for line in ax.get_lines():
                    for x, y in ax.transData.transform(line.get_xydata()):
                        assert not box.contains(x, y), f"{name}: the legend covers a point of {line.get_label()}"
        finally:
            plt.close(fig)


def test_the_readme_sentence_names_each_rung_that_is_best_somewhere():
    """A ladder whose best rung depends on the shape (an aligned and a misaligned side) says so, with each
    rung's range, instead of quoting one rung over sizes where another wins."""
    recs = []
    for n, (r3, r5) in {4096: (3800.0, 3600.0), 4095: (2500.0, 3300.0)}.items():
        p = {"rows": n, "cols": n}
        recs += [_record("transpose", "cupy_device_copy", "headline", p, 8 * n * n, "cold", 4000.0, 4000.0),
                 _record("transpose", "03_padded", "headline", p, 8 * n * n, "cold", r3, 4000.0),
                 _record("transpose", "05_sector_aligned", "headline", p, 8 * n * n, "cold", r5, 4000.0)]
    text = report.readme_results({"transpose": RecordSet({"device": "X", "date": "2026-11-30"}, recs)})
    assert "03_padded is the best rung at 1 of the 2 sizes above (0.950x of cupy_device_copy)" in text
    assert "05_sector_aligned is the best rung at 1 of the 2 sizes above (0.825x of cupy_device_copy)" in text


def _tc_headline() -> RecordSet:
    """Headline records shaped like gemm_tc's (two types x two layouts x two sizes), values made up."""
    recs = []
    for dtype in ("float16", "bfloat16"):
        for layout in ("TN", "NN"):
            for n in (4096, 4095):
                p = {"M": n, "N": n, "K": n, "layout": layout, "dtype": dtype}
                ceiling = 700.0 if n % 8 == 0 else 150.0
                for rung, factor in (("cublas_gemm", 1.0), ("01_mma_global", 0.02), ("03_swizzled_multistage", 0.5)):
                    ms = 2 * n**3 / (ceiling * factor * 1e12) * 1e3
                    recs.append(Record("gemm_tc", rung, "headline", p, 6 * n * n, "cold", ms, ms, ms, 5, "TFLOP/s",
                                       ceiling * factor, "cublas_gemm", ceiling))
    return RecordSet(dict(PROVENANCE), recs)


def test_ladder_grid_draws_a_panel_per_type_and_layout(tmp_path):
    import matplotlib.pyplot as plt

    fig = plots.ladder_grid(_tc_headline(), "gemm_tc")
    try:
        titles = [ax.get_title() for ax in fig.axes]
        assert titles == ["dtype=float16, layout=TN", "dtype=float16, layout=NN", "dtype=bfloat16, layout=TN",
                          "dtype=bfloat16, layout=NN"]
        labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        assert labels == ["4096^3", "4095^3"]
        ratios = sorted(t.get_text() for t in fig.axes[0].texts)
        assert ratios == ["0.02", "0.02", "0.50", "0.50"]  # each rung's fraction of cuBLAS at each size
    finally:
        plt.close(fig)
    path = plots.ladder_grid(_tc_headline(), "gemm_tc", tmp_path / "grid.png")
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_ladder_grid_returns_none_without_headline_records_or_panel_keys():
    assert plots.ladder_grid(RecordSet(dict(PROVENANCE), []), "gemm_tc") is None
    assert plots.ladder_grid(synthetic("copy"), "copy") is None  # copy's params have no dtype or layout


# ----------------------------------------------------------------------------------------------
# Legibility: no text under 7 pt, no labels over each other (lab.lessons.figure_check), nothing drawn of all zeros
# ----------------------------------------------------------------------------------------------

def test_every_figure_passes_the_legibility_check():
    import matplotlib.pyplot as plt

    from lab.lessons import figure_check

    figures = _all_figures() + [("ladder_grid", plots.ladder_grid(_tc_headline(), "gemm_tc"))]
    for name, fig in figures:
        try:
            assert figure_check.problems(fig) == [], name
        finally:
            plt.close(fig)


def _crowded_tc_headline(rungs: int = 12) -> RecordSet:
    """_tc_headline with many more rungs per panel than the bars have room to label."""
    recs = list(_tc_headline().records)
    base = [r for r in recs if r.rung == "03_swizzled_multistage"]
    for i in range(4, 4 + rungs):
        recs += [Record("gemm_tc", f"{i:02d}_more", r.kind, r.params, r.bytes_moved, r.l2, r.median_ms, r.p10_ms,
                        r.p90_ms, r.reps, r.metric, r.value * (0.9 + 0.01 * i), r.ceiling, r.ceiling_value)
                 for r in base]
    return RecordSet(dict(PROVENANCE), recs)


def test_ladder_grid_labels_are_never_under_7_points_and_drop_out_where_they_do_not_fit():
    import matplotlib.pyplot as plt

    from lab.lessons import figure_check

    for rs in (_tc_headline(), _crowded_tc_headline(), _crowded_tc_headline(30)):
        fig = plots.ladder_grid(rs, "gemm_tc")
        try:
            labels = [t for ax in fig.axes for t in ax.texts]
            assert all(t.get_fontsize() >= figure_check.MIN_POINTS for t in labels)
            assert figure_check.problems(fig) == []
            bars = sum(1 for r in rs.records if r.rung != r.ceiling)
            assert len(labels) <= bars
        finally:
            plt.close(fig)
    fig = plots.ladder_grid(_crowded_tc_headline(30), "gemm_tc")
    try:  # bars too narrow for a 7-point label: the labels go, they do not shrink
        assert len([t for ax in fig.axes for t in ax.texts]) < sum(1 for r in _crowded_tc_headline(30).records
                                                                    if r.rung != r.ceiling)
    finally:
        plt.close(fig)
    fig = plots.ladder_grid(_tc_headline(), "gemm_tc")
    try:  # with room to spare, every rung's bar keeps its label
        assert len([t for ax in fig.axes for t in ax.texts]) == sum(1 for r in _tc_headline().records
                                                                     if r.rung != r.ceiling)
    finally:
        plt.close(fig)


def test_profile_bars_draw_nothing_when_every_rung_counts_zero(tmp_path):
    zeros = [{"rung": r, "smem_bank_conflicts_ldsm": 0.0} for r in TRANSPOSE_RUNGS]
    assert plots.ladders.all_zero(zeros, "smem_bank_conflicts_ldsm")
    assert plots.ladders.all_zero([{"rung": "01_naive"}], "smem_bank_conflicts_ldsm")  # absent counts as zero
    assert not plots.ladders.all_zero([], "smem_bank_conflicts_ldsm")
    assert plots.profile_bars(zeros, "smem_bank_conflicts_ldsm", "gemm_tc", path=tmp_path / "z.png") is None
    assert not (tmp_path / "z.png").exists()
    one = zeros[:-1] + [{"rung": TRANSPOSE_RUNGS[-1], "smem_bank_conflicts_ldsm": 3.0}]
    assert not plots.ladders.all_zero(one, "smem_bank_conflicts_ldsm")
    assert _is_png(plots.profile_bars(one, "smem_bank_conflicts_ldsm", "gemm_tc", path=tmp_path / "one.png"))


def test_tick_labels_stay_inside_the_axes_limits():
    """matplotlib keeps labels for ticks past an axis's limits (undrawn); the figures keep only the drawn ones."""
    import matplotlib.pyplot as plt

    fig = plots.ladder_bars(gemm_synthetic(), "gemm_fp32", peak=66.9)
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        lo, hi = ax.get_ylim()
        assert all(lo <= t <= hi for t in ax.get_yticks())
    finally:
        plt.close(fig)
