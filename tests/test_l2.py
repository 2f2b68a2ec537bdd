"""lab.studies.l2 and lab.studies.anomalies: reading their records (CPU), and the graph timing behind them (GPU)."""

from __future__ import annotations

import pytest

from lab.measure.records import Record, RecordSet
from lab.studies import anomalies, l2

MIB = 1 << 20


def _rec(rung: str, mib: int, gbs: float, method: str = "graph", l2_mode: str = "warm", kind: str = "l2",
         hbm: float = 4000.0) -> Record:
    size = mib * MIB
    ms = size / (gbs * 1e9) * 1e3 if size else gbs
    return Record("copy", rung, kind, {"n": size // 8}, size, l2_mode, ms, ms, ms, 5, "GB/s",
                  gbs if size else 0.0, "hbm_plateau", hbm, {"method": method})


def _sweep(top: float, bottom: float, edge_mib: int) -> list[Record]:
    return [_rec("cupy_device_copy", m, top if m <= edge_mib else bottom) for m in l2.SIZES_MIB]


def test_working_sets_are_dense_around_the_l2_and_binary():
    sizes = [s // MIB for s in l2.working_sets()]
    assert sum(16 <= s <= 96 for s in sizes) >= 6
    assert all(s * MIB in l2.working_sets() for s in sizes) and sizes == sorted(sizes)


def test_knee_brackets_the_fall_from_the_peak_to_hbm():
    rows = _sweep(7000.0, 4000.0, 48)
    assert l2.knee(rows, 4000.0) == (48 * MIB, 56 * MIB)
    assert l2.peak(rows).value == 7000.0


def test_knee_of_a_flat_curve_is_none():
    assert l2.knee(_sweep(4000.0, 4000.0, 48), 4000.0) is None


def test_marginal_bandwidth_cancels_a_fixed_cost():
    fixed_ms = 0.004
    rows = [_rec("04_unrolled", m, 1.0) for m in (16, 32)]
    for r in rows:  # 7000 GB/s plus a fixed cost per launch
        r.median_ms = r.bytes_moved / 7000e9 * 1e3 + fixed_ms
    assert l2.marginal(rows, 16 * MIB, 32 * MIB) == pytest.approx(7000.0)
    assert l2.marginal(rows, 16 * MIB, 64 * MIB) is None


def test_less_gap_takes_the_graph_gap_off_the_time():
    rec = _rec("04_unrolled", 32, 1.0)
    rec.median_ms = 0.006
    assert l2.less_gap(rec, 1.0) == pytest.approx(32 * MIB / 5e-6 / 1e9)


def test_summary_reports_the_graph_plateau_against_hbm_and_the_overheads():
    rows = _sweep(7000.0, 4000.0, 48)
    rows += [_rec("cupy_device_copy", m, 3900.0, "events", "cold") for m in l2.SIZES_MIB]
    rows += [_rec("cupy_device_copy", m, 3950.0, "events", "warm") for m in l2.SIZES_MIB]
    rows += [_rec("empty_kernel", 0, 0.004, "events", kind="overhead"),
             _rec("empty_kernel", 0, 0.001, "graph", kind="overhead")]
    text = l2.summary(RecordSet({"device": "test", "l2_bytes": 60 * MIB}, rows, replayed=True))
    assert "peak 7000 GB/s (1.75x HBM)" in text and "between 48 and 56 MiB" in text
    assert "4.00 us between two events, 1.00 us per launch inside a graph" in text
    assert "60 MiB" in text and "3950 GB/s (0.99x HBM)" in text


def test_summary_without_records_says_how_to_make_them():
    assert "lab study l2 --out" in l2.summary(None)
    assert "lab study probes --out" in anomalies.warm_cold_table(None)


def test_run_writes_the_measured_records_and_reports_their_summary(tmp_path, monkeypatch):
    """run(out_dir) -> Path: the sweep's and the probes' records under out_dir, as `lab study l2|probes` writes them
    (the measurement itself stubbed: this is the CPU)."""
    from lab.measure import records

    sweep = RecordSet({"device": "test", "l2_bytes": 60 * MIB}, _sweep(7000.0, 4000.0, 48))
    monkeypatch.setattr(l2, "measure", lambda quick=False, progress=None: sweep)
    lines = []
    path = l2.run(tmp_path, quick=True, progress=lines.append)
    assert path == tmp_path / l2.REFERENCE_FILE and len(records.load(path).records) == len(sweep.records)
    assert lines == [l2.summary(sweep)]

    probes = RecordSet({"device": "test"}, [])
    seen = {}
    monkeypatch.setattr(anomalies, "measure",
                        lambda progress=None, experiments=(): seen.update(e=experiments) or probes)
    assert anomalies.run(tmp_path, experiments=("tail_order",)) == tmp_path / anomalies.REFERENCE_FILE
    assert seen["e"] == ("tail_order",)


def test_an_unknown_probe_experiment_is_named_before_anything_runs(tmp_path):
    from lab.core.errors import LabError

    with pytest.raises(LabError, match="no experiment cold_start; the experiments are warm_cold, tail_order"):
        anomalies.run(tmp_path, experiments=("cold_start",))


def test_tail_parity_reads_even_and_odd_lengths():
    rows = []
    for n in range(16):
        for rung in ("cupy_device_copy", "01_naive", "04_unrolled"):
            value = 3700.0 if (rung == "04_unrolled" and n % 2) else 3600.0
            rec = _rec(rung, 0, value, kind="probe")
            rec.params, rec.value = {"n": (1 << 24) + n}, value
            rec.extra = {"experiment": "tail_order", "condition": "ascending"}
            rows.append(rec)
    text = anomalies.tail_parity(RecordSet({}, rows))
    line = next(ln for ln in text.splitlines() if ln.startswith("04_unrolled"))
    assert line.split()[-1] == f"{3700 / 3600:.3f}"
    spread = anomalies.tail_parity_spread(RecordSet({}, rows))
    assert spread.startswith(f"every odd/even ratio is within {100 * (3700 / 3600 - 1):.1f}% of one")
    assert "04_unrolled ascending (1.028)" in spread and "01_naive" not in spread


# --- GPU ---------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_graph_timing_shows_more_than_one_launch_per_event_pair_at_l2_sizes():
    """At a 16 MiB working set the event pair's fixed cost is about the copy's own time: the graph-timed
    figure must be clearly faster, and the graph's launches must still copy correctly."""
    import cupy as cp

    from lab.families import get_family
    from lab.measure import timing

    copy = get_family("copy")
    problem = copy.make_problem(seed=1, n=16 * MIB // 8)
    out = cp.full(problem.out_shape, cp.nan, problem.dtype)
    launch = lambda i: copy.launch(copy.rung("04"), problem, out, i)  # noqa: E731
    graph = timing.measure_graph(launch)
    events = timing.measure(launch, l2="warm", min_time_ms=5.0)
    assert graph.launches >= 8 and graph.per_launch_ms < 0.9 * events.median_ms, (graph, events)
    assert bool(cp.all(out == problem.inputs["x"][0]))


@pytest.mark.gpu
def test_an_empty_kernel_costs_less_per_launch_in_a_graph():
    from lab.measure import timing

    overhead = timing.launch_overhead()
    assert 0 < overhead["graph"].per_launch_ms < overhead["events"].median_ms


@pytest.mark.gpu
def test_read_flush_evicts_without_writing():
    import cupy as cp

    from lab.measure import timing

    flusher = timing.L2Flusher(by="read")
    before = int(flusher.buffer[123])
    flusher.flush()
    cp.cuda.get_current_stream().synchronize()
    assert int(flusher.buffer[123]) == before
