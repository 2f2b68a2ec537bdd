"""CPU: the scheduling lesson's figures (lab.lessons.plots.scheduling) and summaries (lab.lessons.scheduling, its L2
model lab.lessons.scheduling_model and its LIVE plan lab.lessons.scheduling_live) on SYNTHETIC payloads
shaped like those `lab study orders|counters|fp32|streamk|items` writes (lab.studies.scheduling.run; test data, values
made up, never written under results/). tests/test_notebooks.py writes the same payloads to replay notebook 04 on
them."""

from __future__ import annotations

import json
import math

import matplotlib
import pytest

matplotlib.use("Agg")

from lab.families import work_queue  # noqa: E402
from lab.lessons import figure_check  # noqa: E402
from lab.lessons import scheduling as lesson  # noqa: E402
from lab.lessons import scheduling_live as live  # noqa: E402
from lab.lessons import scheduling_model as model  # noqa: E402
from lab.lessons.plots import scheduling as plots  # noqa: E402
from lab.studies import scheduling

PROVENANCE = {"device": "SYNTHETIC TEST DATA (not a measurement)", "arch": "sm_90", "sm_count": 132,
              "l2_bytes": 50 * 2**20, "commit": "synthetic", "date": "2000-01-01T00:00:00+00:00"}
# Made-up speeds per order: shapes of bars, not results.
_ORDER_FACTOR = {"row": 0.6, "column": 0.8, "grouped": 0.9, "snake": 0.92}
_ORDER_READS = {"row": 8.0, "column": 2.5, "grouped": 1.6, "snake": 1.5}


def _flops(shape: dict) -> float:
    return 2.0 * shape["M"] * shape["N"] * shape["K"]


def _order_payload(family: str, rung: str, shapes, settings, peak: float, provenance: dict) -> dict:
    rows = []
    for shape in shapes:
        cublas_ms = _flops(shape) / (peak * 1e12) * 1e3
        row_ms = None
        for order, group in settings:
            factor = _ORDER_FACTOR[order] * (1.0 if order == "row" else 1.0 + 0.001 * group)
            ms = cublas_ms / factor
            row_ms = ms if order == "row" else row_ms
            rows.append({**shape, "order": order, "group_m": group, "median_ms": ms, "p10_ms": ms * 0.99,
                         "p90_ms": ms * 1.02, "tflops": _flops(shape) / (ms * 1e-3) / 1e12, "cublas_ms": cublas_ms,
                         "x_cublas": cublas_ms / ms, "x_row": row_ms / ms})
    return {"provenance": provenance, "family": family, "rung": rung, "l2": "cold", "rows": rows}


def _counter_payload(family: str, rung: str, shapes, settings, provenance: dict) -> dict:
    rows = []
    for shape in shapes:
        minimum = 2 * shape["K"] * (shape["M"] + shape["N"])
        for order, group in settings:
            rows.append({**shape, "order": order, "group_m": group, "l2_hit_rate_pct": 90.0 - 8 * _ORDER_READS[order],
                         "dram_read_bytes": minimum * _ORDER_READS[order],
                         "dram_write_bytes": 2.0 * shape["M"] * shape["N"]})
    return {"provenance": provenance, "family": family, "rung": rung, "rows": rows,
            "ncu": {"clock_control": "none", "cache_control": "all"}}


def _rung_row(shape: dict, rung_keys, round_: int, tile: lesson.Tile, sm_count: int) -> dict:
    """Made-up times that follow the rounds of lab.core.tile_order (so the sawtooth has its teeth)."""
    r = lesson.rounds(shape, tile, sm_count)
    per_tile_ms = 0.05 * shape["K"] / 4096
    times = {"cublas_ms": per_tile_ms * r["waves"] * 1.05,
             "05_warp_specialized_ms": per_tile_ms * r["dp_rounds"] * 1.02,
             "06_persistent_ms": per_tile_ms * r["dp_rounds"],
             "07_stream_k_ms": per_tile_ms * (r["sk_rounds"] + 0.08)}
    row = {**shape, "round": round_, "tiles": r["tiles"], "cublas_ms": times["cublas_ms"]}
    row |= {f"{k}_ms": times[f"{k}_ms"] * (1 + 0.003 * round_) for k in rung_keys}
    row["tflops"] = {k.removesuffix("_ms"): _flops(shape) / (v * 1e-3) / 1e12 for k, v in row.items()
                     if k.endswith("_ms")}
    return row


def stream_k_payload(provenance: dict = PROVENANCE) -> dict:
    tile, sm_count = lesson.tile_knobs(), provenance["sm_count"]
    kinds = lesson.named_kinds()
    keys = ("05_warp_specialized", "06_persistent", "07_stream_k")
    named = [_rung_row(s, keys, i, tile, sm_count) | {"kind": kinds[lesson.shape_label(s)]}
             for s in scheduling.WAVE_QUANTIZED + scheduling.WELL_QUANTIZED + scheduling.SQUARES for i in range(3)]
    sweep = [_rung_row({"M": m, "N": scheduling.WAVE_N, "K": scheduling.WAVE_K}, keys[1:], 0, tile, sm_count)
             for m in scheduling.WAVE_MS]
    return {"provenance": provenance, "l2": "cold", "sm_count": sm_count, "tile": [tile.bm, tile.bn],
            "determinism": {"shape": scheduling.WAVE_QUANTIZED[0], "runs": 3, "differing_elements": 0},
            "checked": list(scheduling.STREAM_K_CHECKS), "named": named, "sweep": sweep}


def small_items_payload(provenance: dict = PROVENANCE) -> dict:
    rows = []
    for length in work_queue.SIZES:
        nbytes = work_queue.BYTES_PER_ELEMENT * length
        work_us = 1.5 + nbytes / 50e3  # one item on one SM: made up
        rows.append({"mix": "uniform", "length": length, "mean_length": float(length), "max_length": length,
                     "bytes_per_item": float(nbytes), "n_items": work_queue.n_items_for(length),
                     "launch_us": max(6.0, work_us), "graph_us": 0.7 + work_us, "per_block_us": 0.05 + nbytes / 3e6,
                     "queue_us": 0.04 + nbytes / 3.2e6, "alone_us": 0.7 + work_us, "alone_length": length,
                     "spread_us": {}, "blocks_per_sm": 8, "queue_blocks": 1056, "graph_launches": {},
                     "checked": True})
    return work_queue.make_payload(rows, provenance, empty_kernel={"events_us": 4.0, "graph_us": 0.7})


def synthetic_payloads(provenance: dict = PROVENANCE) -> dict[str, dict]:
    """Every payload notebook 04 replays, by file stem: SYNTHETIC test data."""
    fp32 = _order_payload("gemm_fp32", "08_multistage", scheduling.FP32_ORDER_SHAPES, scheduling.FP32_ORDER_SETTINGS,
                          50.0, provenance)
    fp32["counters"] = _counter_payload("gemm_fp32", "08_multistage", scheduling.FP32_ORDER_SHAPES,
                                        scheduling.FP32_ORDER_SETTINGS, provenance)
    return {
        "schedule_orders": _order_payload("gemm_tc", "06_persistent", scheduling.ORDER_SHAPES,
                                          scheduling.ORDER_SETTINGS, 700.0, provenance),
        "schedule_orders_ncu": _counter_payload("gemm_tc", "06_persistent", scheduling.ORDER_SHAPES,
                                                scheduling.ORDER_SETTINGS, provenance),
        "schedule_orders_fp32": fp32,
        "schedule_stream_k": stream_k_payload(provenance),
        "small_items": small_items_payload(provenance),
    }


def write_synthetic_payloads(directory, provenance: dict = PROVENANCE) -> None:
    for name, payload in synthetic_payloads(provenance).items():
        (directory / f"{name}.json").write_text(json.dumps(payload))


@pytest.fixture
def replay_dir(tmp_path, monkeypatch):
    write_synthetic_payloads(tmp_path)
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


@pytest.fixture
def payloads(replay_dir):
    return lesson.replayed()


# ----------------------------------------------------------------------------------------------
# Loading and provenance
# ----------------------------------------------------------------------------------------------

def test_payloads_load_marked_replayed_with_their_provenance(payloads):
    assert set(payloads) == set(lesson.PAYLOADS)
    assert all(p is not None and p["replayed"] for p in payloads.values())
    line = lesson.source(payloads["schedule_orders"], "schedule_orders")
    assert "REPLAYED from SYNTHETIC TEST DATA" in line and "commit synthetic" in line and "2000-01-01" in line


def test_missing_and_unreadable_payloads_say_so(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    (tmp_path / "schedule_orders.json").write_text("{not json")
    (tmp_path / "small_items.json").write_text(json.dumps({"kind": "something else"}))
    found = lesson.replayed()
    assert all(p is None for p in found.values())
    assert lesson.missing("schedule_orders").startswith("NO RECORDS for schedule_orders")
    for summary in (lesson.order_table(None), lesson.order_gains(None, None), lesson.ncu_table(None),
                    lesson.fp32_contrast(None), lesson.small_items_gains(None), lesson.persistent_rounds(None),
                    lesson.stream_k_ratios(None, lesson.tile_knobs()), lesson.determinism(None)):
        assert "NO RECORDS for" in summary


def test_banner_lists_every_file(payloads, tmp_path, monkeypatch):
    replay = lesson.banner(_replay_mode(), payloads)
    assert "REPLAY MODE" in replay and replay.count("REPLAYED from SYNTHETIC TEST DATA") == len(lesson.PAYLOADS)
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path / "none"))
    empty = lesson.banner(_replay_mode(), lesson.replayed())
    assert empty.count("NO RECORDED RESULTS") == len(lesson.PAYLOADS)


def _replay_mode():
    from lab.lessons.mode import Mode

    return Mode(False, "a test")


def test_gpu_facts_come_from_the_records_else_an_assumption(payloads, tmp_path, monkeypatch):
    gpu = lesson.gpu_facts(_replay_mode(), payloads)
    assert (gpu.sm_count, gpu.l2_bytes) == (132, 50 * 2**20) and "SYNTHETIC" in gpu.where
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path / "none"))
    gpu = lesson.gpu_facts(_replay_mode(), {name: None for name in lesson.PAYLOADS})
    assert gpu.sm_count == lesson.ASSUMED_GPU["sm_count"] and "assumed" in gpu.where


# ----------------------------------------------------------------------------------------------
# Predictions
# ----------------------------------------------------------------------------------------------

def test_rounds_follow_the_waves():
    tile = lesson.tile_knobs()
    wave_plus = lesson.rounds({"M": 1152, "N": 4096, "K": 4096}, tile, 132)  # 144 tiles: one wave and 12
    assert wave_plus["tiles"] == 144 and wave_plus["dp_rounds"] == 2 and wave_plus["sk_rounds"] < 1.2
    whole = lesson.rounds({"M": 1536, "N": 2816, "K": 4096}, tile, 132)  # 132 tiles: exactly one wave
    assert whole["predicted"] == 1.0 and whole["dp_efficiency"] == 1.0


def test_the_read_model_reads_the_minimum_when_everything_fits_and_more_when_not():
    tile, big_l2 = lesson.tile_knobs(), lesson.Gpu(132, 1 << 40, "test")
    small = {"M": 4096, "N": 4096, "K": 4096}
    assert model.predicted_reads(small, tile, big_l2, "row", 0) == lesson.min_reads(small)
    tight = lesson.Gpu(132, 60 * 2**20, "test")
    shape = lesson.HEADLINE_SHAPE
    row = model.predicted_reads(shape, tile, tight, "row", 0)
    grouped = model.predicted_reads(shape, tile, tight, "grouped", 16)
    assert row > grouped >= lesson.min_reads(shape)
    assert "x L2" in model.footprint_table([shape], [("row", 0), ("grouped", 8)], tile, tight)


def test_live_sweep_straddles_the_wave_boundaries():
    tile = lesson.tile_knobs()
    ms = live.live_sweep_ms(132, tile)
    tiles = [lesson.rounds({"M": m, "N": scheduling.WAVE_N, "K": scheduling.WAVE_K}, tile, 132)["tiles"] for m in ms]
    for j in range(1, live.LIVE_WAVES + 1):
        assert any(t <= j * 132 for t in tiles) and any(t > j * 132 for t in tiles)


# ----------------------------------------------------------------------------------------------
# Summaries against the expectations
# ----------------------------------------------------------------------------------------------

def test_order_gains_compare_the_best_order_with_row_major(payloads):
    text = lesson.order_gains(payloads["schedule_orders"], payloads["schedule_orders_ncu"])
    best = lesson.best_order(payloads["schedule_orders"])
    row = next(r for r in payloads["schedule_orders"]["rows"] if r["order"] == "row")
    assert best["order"] == "snake" and f"{row['median_ms'] / best['median_ms']:.3f}x" in text
    assert "DRAM reads" in text and text.count("as expected (") == 2 and "target" not in text
    assert "no row-order record" in lesson.order_gains({"rows": []}, None)


def test_small_items_gains_use_items_under_the_work_limit(payloads):
    text = lesson.small_items_gains(payloads["small_items"])
    small = [r for r in payloads["small_items"]["rows"] if r["alone_us"] < lesson.EXPECTED["queue_item_us"]]
    assert small and f"{min(r['launch_us'] / r['queue_us'] for r in small):.1f}x" in text
    assert "empty kernel" in text


def test_persistent_and_stream_k_ratios(payloads):
    sk = payloads["schedule_stream_k"]
    text = lesson.persistent_rounds(sk)
    assert text.count("per round") == len(scheduling.SQUARES) and "median" in text
    ratios = lesson.stream_k_ratios(sk, lesson.tile_knobs())
    assert "wave-quantized: 07 / 06" in ratios and "well-quantized: 07 / 06" in ratios
    assert "0 output elements differ" in lesson.determinism(sk)
    crossings = lesson.sweep_crossings(sk)
    assert "wave boundaries in the sweep" in crossings and "M 4224 -> 4352 (tiles 528 -> 544)" in crossings


def test_fp32_contrast_and_ncu_table(payloads):
    assert "DRAM reads" in lesson.fp32_contrast(payloads["schedule_orders_fp32"])
    assert "L2 hit %" in lesson.ncu_table(payloads["schedule_orders_ncu"])


# ----------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------

def _title_text(fig) -> str:
    texts = [fig._suptitle.get_text()] if fig._suptitle else []
    return "\n".join(texts + [ax.get_title() for ax in fig.axes])


def test_tile_order_pictures_highlight_the_first_wave():
    fig = plots.tile_orders(8, 12, [("row", 0), ("column", 0), ("grouped", 4), ("snake", 4)], workers=12)
    text = _title_text(fig)
    assert "row: wave 0 reads 1 A panels, 12 B panels" in text and "grouped 4: wave 0 reads 4 A panels, 3 B" in text
    wide = plots.tile_orders(32, 128, [("row", 0), ("grouped", 8)], workers=132)
    assert len(wide.axes) >= 2 and "grouped 8: wave 0 reads 8 A panels, 17 B panels" in _title_text(wide)


def test_record_figures_say_replayed_and_draw_every_shape(payloads, tmp_path):
    orders = plots.order_speeds(payloads["schedule_orders"])
    assert "REPLAYED on SYNTHETIC" in _title_text(orders)
    assert sum(ax.get_visible() for ax in orders.axes) == len(scheduling.ORDER_SHAPES)
    assert plots.order_dram(payloads["schedule_orders_ncu"]) is not None
    traffic = plots.order_traffic(payloads["schedule_orders_ncu"], lesson.HEADLINE_SHAPE, 132, (128, 256))
    assert "fewest DRAM bytes" in _title_text(traffic)
    tile = lesson.tile_knobs()
    predicted = lesson.sawtooth_prediction(scheduling.WAVE_MS, tile, 132)
    saw = plots.stream_k_sawtooth(payloads["schedule_stream_k"], predicted)
    assert len(saw.axes) == 2 and "predicted from lab.core.tile_order" in _title_text(saw)
    lines = [line for line in saw.axes[0].lines if line.get_linestyle() == ":"]
    assert lines, "the wave boundaries are drawn"
    named = plots.stream_k_named(payloads["schedule_stream_k"], {"1152x4096x4096": 1.8}, lesson.EXPECTED)
    assert named is not None
    assert plots.order_speeds(payloads["schedule_orders_fp32"]) is not None
    assert plots.small_items(payloads["small_items"]) is not None
    path = plots.stream_k_sawtooth(payloads["schedule_stream_k"], predicted, path=tmp_path / "saw.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figures_of_empty_payloads_are_none():
    assert plots.order_speeds({"rows": []}) is None and plots.order_dram({"rows": []}) is None
    assert plots.order_traffic({"rows": []}, lesson.HEADLINE_SHAPE, 132, (128, 256)) is None
    assert plots.stream_k_sawtooth({"sweep": []}) is None and plots.stream_k_named({"named": []}) is None
    assert plots.tile_orders(4, 4, [], workers=4) is None


def test_live_payload_titles_say_measured():
    payload = synthetic_payloads()["schedule_orders"]
    assert "measured on SYNTHETIC" in _title_text(plots.order_speeds(payload))
    assert not math.isnan(payload["rows"][0]["tflops"])


# ----------------------------------------------------------------------------------------------
# LIVE plan, with the GPU work replaced by synthetic rows: the payloads it builds read like the recorded ones
# ----------------------------------------------------------------------------------------------

def test_live_payloads_feed_the_same_summaries_and_figures(monkeypatch):
    from lab.lessons.mode import Mode
    from lab.measure import records

    tile = lesson.tile_knobs()
    gpu = lesson.Gpu(132, 50 * 2**20, "test")
    calls = []

    def time_orders(shapes, settings, family_name="gemm_tc", rung_key="06_persistent", min_time_ms=20.0):
        calls.append(("orders", family_name, len(list(shapes)), min_time_ms))
        return _order_payload(family_name, rung_key, shapes, settings, 700.0, PROVENANCE)

    def time_rungs(shapes, rung_keys, rounds=1, min_time_ms=10.0):
        calls.append(("rungs", tuple(rung_keys), rounds))
        return [_rung_row(s, rung_keys, i, tile, 132) for s in shapes for i in range(rounds)]

    monkeypatch.setattr(scheduling, "time_orders", time_orders)
    monkeypatch.setattr(scheduling, "time_rungs", time_rungs)
    monkeypatch.setattr(work_queue, "measure", lambda sizes, n: small_items_payload()["rows"][:len(sizes)])
    monkeypatch.setattr(records, "provenance", lambda: dict(PROVENANCE))
    monkeypatch.setattr(live, "hopper_refusal", lambda current: None)
    monkeypatch.setattr(live, "_check_rungs", lambda keys, cases: None)
    monkeypatch.setattr(live, "stream_k_bits", lambda shape, runs=3: 0)
    on_gpu = Mode(True, "a test")

    orders = live.live_orders(on_gpu)
    assert "measured in this run" in live.live_note(orders, on_gpu, "schedule_orders (live)")
    assert "the fastest order is" in lesson.order_gains(orders, None) and plots.order_speeds(orders) is not None
    assert "TFLOP/s" in lesson.fp32_contrast(live.live_fp32(on_gpu))
    items = live.live_small_items(on_gpu)
    assert "faster per item" in lesson.small_items_gains(items) and plots.small_items(items) is not None
    persistent = live.live_persistent(on_gpu, gpu, tile)
    assert lesson.persistent_rounds(persistent).count("per round") == len(scheduling.SQUARES)
    sk = live.live_stream_k(on_gpu, gpu, tile)
    assert "wave-quantized: 07 / 06" in lesson.stream_k_ratios(sk, tile) and "0 output" in lesson.determinism(sk)
    saw = plots.stream_k_sawtooth(sk, lesson.sawtooth_prediction(sorted({r["M"] for r in sk["sweep"]}), tile, 132))
    assert "measured on SYNTHETIC" in _title_text(saw)
    assert all(c[-1] == live.LIVE_MIN_TIME_MS for c in calls if c[0] == "orders")
    assert ("rungs", (lesson.WS_RUNG, lesson.DP_RUNG), 3) in calls
    # REPLAY: nothing runs, and the live cells say so.
    replay = _replay_mode()
    assert live.live_orders(replay) is None and live.live_stream_k(replay, gpu, tile) is None
    assert "REPLAY" in live.live_note(None, replay, "x")


# --- lab.studies.scheduling.run: one study's payload written where the registry says ---------------------------------

def test_run_writes_the_payload_of_the_study_named(tmp_path, monkeypatch):
    payload = {"provenance": PROVENANCE, "rows": [{"M": 1, "median_ms": 0.5}]}
    asked = []
    monkeypatch.setattr(scheduling, "run_study", lambda name, progress=None, **options: asked.append(
        (name, options)) or payload)
    path = scheduling.run(tmp_path / "out", "streamk")
    assert path == tmp_path / "out" / scheduling.STUDY_FILES["streamk"]
    assert json.loads(path.read_text()) == payload and asked == [("streamk", {})]


def test_only_the_small_items_study_takes_options():
    from lab.core.errors import LabError

    with pytest.raises(LabError, match="the orders study takes no options"):
        scheduling.run_study("orders", quick=True)
    with pytest.raises(LabError, match="no study 'waves'; the studies are orders, counters, fp32, streamk, items"):
        scheduling.run_study("waves")


# --- what the notebook writes out: sources, records of the written-out cells, legible figures ----------------------

def test_the_tile_order_source_and_rung_excerpts_are_the_kernels_own():
    text = lesson.tile_order_source().text
    assert "lab_tile_coords" in text and "LAB_RASTER_SNAKE" in text and text.startswith("`kernels/common/")
    assert "struct StreamK {" in lesson.rung_excerpt("07", "struct StreamK {", 5).text
    assert "has no line with" in lesson.rung_excerpt("07", "no such line anywhere", 5).text
    diff = lesson.code_diff("07").text
    assert "+++ gemm_tc/07_stream_k.cu" in diff
    assert not any(line.lstrip("+- ").startswith("//") for line in diff.splitlines()[1:-1])


def test_the_header_prediction_stops_at_the_next_field():
    text = lesson.header_prediction(work_queue.SOURCE)
    assert text.startswith("Prediction") and "Requires:" not in text and "Knobs:" not in text
    assert "states no prediction" in lesson.header_prediction("common/lab_tile_order.cuh")


def test_the_replayed_check_and_timing_of_the_written_out_cells(payloads):
    sk = payloads["schedule_stream_k"]
    checked = lesson.checked_shapes(sk)
    assert "REPLAYED from SYNTHETIC" in checked and lesson.shape_label(scheduling.STREAM_K_CHECKS[0]) in checked
    shape = scheduling.WAVE_QUANTIZED[0]
    times = lesson.recorded_times(sk, shape)
    rows = [r for r in sk["named"] if lesson.shape_label(r) == lesson.shape_label(shape)]
    ratio = sorted(r["cublas_ms"] for r in rows)[1] / sorted(r["07_stream_k_ms"] for r in rows)[1]
    assert f"rung 07 runs at {ratio:.3f}x cuBLAS's speed" in times and "median of 3 rounds" in times
    assert "no rows at 1x1x1" in lesson.recorded_times(sk, {"M": 1, "N": 1, "K": 1})
    assert "NO RECORDS for" in lesson.checked_shapes(None) and "NO RECORDS for" in lesson.recorded_times(None, shape)


def test_summaries_speak_of_expectations(payloads):
    tile = lesson.tile_knobs()
    texts = [lesson.order_gains(payloads["schedule_orders"], payloads["schedule_orders_ncu"]),
             lesson.small_items_gains(payloads["small_items"]), lesson.persistent_rounds(payloads["schedule_stream_k"]),
             lesson.stream_k_ratios(payloads["schedule_stream_k"], tile),
             model.predicted_order_ratio(lesson.HEADLINE_SHAPE, tile, lesson.Gpu(132, 60 * 2**20, "test"),
                                         scheduling.ORDER_SETTINGS)]
    assert all("target" not in t.lower() for t in texts)
    assert all("expect" in t for t in texts)


def test_every_figure_is_legible(payloads):
    tile = lesson.tile_knobs()
    items = dict(payloads["small_items"])
    skewed = dict(items["rows"][2], mix="skewed", bytes_per_item=items["rows"][2]["bytes_per_item"] + 8)
    items["rows"] = items["rows"] + [skewed]  # a mix whose mean lands next to a uniform size: one tick label, not two
    figures = [plots.tile_orders(8, 12, [("row", 0), ("column", 0), ("grouped", 4), ("snake", 4)], workers=12),
               plots.tile_orders(*tile.grid(lesson.HEADLINE_SHAPE), [("row", 0), ("grouped", 8)], workers=132),
               plots.order_speeds(payloads["schedule_orders"]), plots.order_dram(payloads["schedule_orders_ncu"]),
               plots.order_traffic(payloads["schedule_orders_ncu"], lesson.HEADLINE_SHAPE, 132, (tile.bm, tile.bn)),
               plots.order_speeds(payloads["schedule_orders_fp32"]), plots.small_items(items),
               plots.stream_k_sawtooth(payloads["schedule_stream_k"],
                                       lesson.sawtooth_prediction(scheduling.WAVE_MS, tile, 132)),
               plots.stream_k_named(payloads["schedule_stream_k"], lesson.predicted_ratios(tile, 132),
                                    lesson.EXPECTED)]
    legend = "\n".join(t.get_text() for t in figures[-1].axes[0].get_legend().get_texts())
    for fig in figures:
        assert figure_check.problems(fig) == [], _title_text(fig)
        matplotlib.pyplot.close(fig)
    assert "expected, wave-quantized" in legend
