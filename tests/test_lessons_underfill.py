"""lab.lessons.underfill (a package; notebook 05: split-K, decode, grouped GEMM) and its figures in lab.lessons.plots,
on synthetic records. CPU only.

The writers below (write_synthetic_underfill) can also feed tests/test_notebooks.py's synthetic replay: made-up values
with the shape of real records (`lab study splitk`, scripts/split_k_ncu.py, `lab bench FAMILY --json`,
`lab study grouped-table-cost`), never written under results/.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from lab.lessons import (
    Mode,  # noqa: E402
    plots,  # noqa: E402
)
from lab.lessons import underfill as lesson  # noqa: E402
from lab.measure.records import Record, RecordSet  # noqa: E402

PROVENANCE = {"device": "SYNTHETIC TEST DATA (not a measurement)", "arch": "sm_90", "sm_count": 132,
              "l2_bytes": 50 * 2**20, "date": "2000-01-01T00:00:00+00:00", "commit": "synthetic"}
REPLAY = Mode(False, "no GPU here (test)")
REPO = Path(__file__).resolve().parent.parent

# Made-up speeds: fractions of a synthetic cuBLAS per split rung, shapes of curves, not results.
SPLIT_FRACTION = {"08_split_k": 0.9, "08_split_k_in_kernel": 0.85, "08_split_k_atomic": 0.6,
                  "08_split_k_interleaved": 0.92}
CUBLAS_TFLOPS = {"256x256x65536": 280.0, "128x128x131072": 140.0}


def _flops(shape: dict) -> float:
    return 2.0 * shape["M"] * shape["N"] * shape["K"]


def _ms(shape: dict, tflops: float) -> float:
    return _flops(shape) / (tflops * 1e12) * 1e3


# ----------------------------------------------------------------------------------------------
# Synthetic records
# ----------------------------------------------------------------------------------------------

def synthetic_split_factors(provenance: dict = PROVENANCE, fraction: dict | None = None) -> dict:
    """split_k_factors.json's layout: per shape an 'auto' row (each variant at S = one wave), 'factor' rows whose
    speed rises with S to a wave and falls past it, and the determinism rows (the atomic mode's bits move)."""
    fraction = fraction or SPLIT_FRACTION
    rows, bits = [], []
    for shape in lesson.SPLIT_SHAPES:
        label = lesson.shape_label(shape)
        cublas = CUBLAS_TFLOPS[label]
        wave = lesson.launcher_splits(shape, 132)
        auto = {**shape, "kind": "auto", "pad": 0, "cublas_ms": _ms(shape, cublas),
                "06_persistent_ms": _ms(shape, cublas / 20)}
        for key, f in fraction.items():
            auto[f"{key}_ms"] = _ms(shape, cublas * f)
            auto[f"{key}_splits"] = wave
        auto["tflops"] = {k.removesuffix("_ms"): _flops(shape) / (v * 1e9) for k, v in auto.items()
                          if k.endswith("_ms")}
        rows.append(auto)
        for s in (1, 2, 4, 8, 16, 33, 66, 132):
            row = {**shape, "kind": "factor", "splits": s}
            for key, f in fraction.items():
                scale = min(s, wave) / wave * (1.0 if s <= wave else 0.9)
                row[f"{key}_ms"] = _ms(shape, cublas * f * scale)
            row["tflops"] = {k.removesuffix("_ms"): _flops(shape) / (v * 1e9) for k, v in row.items()
                             if k.endswith("_ms")}
            rows.append(row)
        elements = shape["M"] * shape["N"]
        for key in lesson.SPLIT_MODES:
            moved = [0] * 19 if not key.endswith("atomic") else [40 + i for i in range(19)]
            bits.append({**shape, "rung": key, "runs": 20, "elements": elements, "differing_per_run": moved,
                         "runs_with_differences": sum(1 for m in moved if m), "max_ulps": 30 if any(moved) else 0,
                         "splits": wave})
    return {"provenance": provenance, "l2": "cold", "dtype": "float16", "layout": "TN", "sm_count": 132,
            "checked": [], "rows": rows, "determinism": bits}


def _ncu_row(kid: int, kernel: str, grid: int, metric: str, unit: str, value: float) -> str:
    shown = f"{value:,.2f}" if unit == "%" else f"{int(value):,}"
    return ",".join(f'"{x}"' for x in (kid, 1, "python3", "127.0.0.1", kernel, 1, 7, "(384, 1, 1)", f"({grid}, 1, 1)",
                                        0, "9.0", "Command line profiler metrics", metric, unit, shown))


def synthetic_ncu(provenance: dict = PROVENANCE) -> dict:
    """split_k_ncu.json's layout: the raw CSV rows of scripts/split_k_ncu.py, per shape each mode twice, the
    workspace mode's launches followed by their reduction kernel."""
    rows, kid = [], 0
    for shape in lesson.SPLIT_SHAPES:
        ab = lesson.gemm_bytes(shape)
        for j in range(len(lesson.SPLIT_MODES)):
            for _ in range(2):
                kernels = [(lesson.SPLIT_KERNEL, 132, 24000 + 8000 * j, ab)]
                if j == 0:
                    kernels.append((lesson.REDUCE_KERNEL, 512, 8000, lesson.slice_bytes(shape, 66) / 2))
                for name, grid, ns, read in kernels:
                    for metric, unit, value in (("dram__bytes_read.sum", "byte", read),
                                                ("dram__bytes_write.sum", "byte", 2e6),
                                                ("gpu__time_duration.sum", "ns", ns),
                                                ("lts__t_sector_hit_rate.pct", "%", 35.5)):
                        rows.append(_ncu_row(kid, name, grid, metric, unit, value))
                    kid += 1
    return {"provenance": provenance, "shapes": list(lesson.SPLIT_SHAPES), "order": "synthetic", "rows": rows,
            "stderr": ""}


def _record(family: str, rung: str, params: dict, ms: float, value: float, ceiling: str, ceiling_value: float,
            metric: str, nbytes: int, extra: dict | None = None) -> dict:
    return {"family": family, "rung": rung, "kind": "headline", "params": params, "bytes_moved": nbytes, "l2": "cold",
            "median_ms": ms, "p10_ms": ms * 0.99, "p90_ms": ms * 1.02, "reps": 50, "metric": metric, "value": value,
            "ceiling": ceiling, "ceiling_value": ceiling_value, "extra": extra or {}}


def synthetic_split_bench() -> list[dict]:
    """gemm_split_k headline records at the two K-heavy shapes, fp16: cuBLAS (the ceiling), rung 06, the modes."""
    out = []
    for shape in lesson.SPLIT_SHAPES:
        cublas = CUBLAS_TFLOPS[lesson.shape_label(shape)]
        params = {**shape, "layout": "TN", "dtype": "float16", "alpha": 1.0, "beta": 0.0, "pad": 0, "splits": 0}
        for rung, f in [("cublas_gemm", 1.0), ("06_persistent", 0.05)] + list(SPLIT_FRACTION.items())[:3]:
            extra = {"splits": lesson.launcher_splits(shape, 132)} if rung.startswith("08") else {}
            out.append(_record("gemm_split_k", rung, params, _ms(shape, cublas * f), cublas * f, "cublas_gemm",
                               cublas, "TFLOP/s", lesson.gemm_bytes(shape), extra))
    return out


def synthetic_decode(copy_fraction: float = 0.9) -> list[dict]:
    """decode headline records: the device copy (the ceiling), cuBLAS, rung 01 and rung 02 at every headline M and
    size, fp16 and bf16; rung 01 at `copy_fraction` of the copy up to M = 16, falling after; rung 02 at half the
    copy throughout (faster than rung 01 from M = 32); cuBLAS at 0.75 of the copy."""
    out = []
    for dtype in ("float16", "bfloat16"):
        for n in lesson.DECODE_SIDES:
            for m in lesson.DECODE_TOKENS:
                params = {"M": m, "N": n, "K": n, "dtype": dtype, "ldx": n, "ldw": n, "ldy": n}
                nbytes = 2 * (n * n + m * n + m * n)
                copy_gbs = 3600.0 if n == 8192 else 2500.0
                rung_f = copy_fraction if m <= 16 else copy_fraction * 16 / m
                for rung, f in ((lesson.COPY, 1.0), ("cublas", 0.75), (lesson.DECODE_RUNG, rung_f),
                                ("02_split_k_gemm", 0.5)):
                    gbs = copy_gbs * f
                    out.append(_record("decode", rung, params, nbytes / (gbs * 1e6), gbs, lesson.COPY, copy_gbs,
                                       "GB/s", nbytes, {"path": "16-byte loads"} if rung[0].isdigit() else {}))
    return out


def synthetic_grouped(loop_x: float = 6.0, batched_time: float = 1.1) -> list[dict]:
    """grouped_gemm headline records per case (fp16): the loop (the ceiling), the kernel `loop_x` times faster,
    and on the uniform case cuBLAS batched taking 1 / `batched_time` of the kernel's time."""
    from lab.families.grouped_gemm import case_groups

    out = []
    for case in lesson.GROUPED_CASES:
        groups = case_groups(case)
        flops = sum(2 * m * n * k for m, n, k in groups)
        params = {"case": case, "dtype": "float16"}
        kernel_ms = flops / (500e12) * 1e3
        loop = flops / (kernel_ms * loop_x * 1e9)
        targets = [(lesson.LOOP, kernel_ms * loop_x, {}),
                   (lesson.GROUPED_RUNG, kernel_ms, {"groups": len(groups), "tiles": 1000, "blocks": 132})]
        if case == "uniform":
            targets.append((lesson.BATCHED, kernel_ms / batched_time, {}))
        for rung, ms, extra in targets:
            out.append(_record("grouped_gemm", rung, params, ms, flops / (ms * 1e9), lesson.LOOP, loop, "TFLOP/s",
                               1, extra))
    return out


def synthetic_table_cost(provenance: dict = PROVENANCE) -> dict:
    rows = [{"case": c, "groups": 64, "empty_groups": 5, "maps": 118, "table_bytes": 64 * 384, "median_ms": 2.0,
             "best_ms": 1.8, "per_map_us": 17.0} for c in lesson.GROUPED_CASES]
    return {"provenance": provenance, "repeats": 5, "rows": rows}


def synthetic_copy() -> list[dict]:
    """The device copy's cold sweep: a fixed 4 us plus bytes at 4 TB/s, from 1 KiB to 4 GiB."""
    out = []
    for e in range(10, 33):
        nbytes = 1 << e
        ms = 4e-3 + nbytes / 4e12 * 1e3
        out.append(_record("copy", lesson.COPY, {"n": nbytes // 8}, ms, nbytes / (ms * 1e6), lesson.COPY,
                           nbytes / (ms * 1e6), "GB/s", nbytes) | {"kind": "sweep"})
    return out


def synthetic_gemm_tc() -> list[dict]:
    params = dict(lesson.RATE_SHAPE) | {"alpha": 1.0, "beta": 0.0, "pad": 0}
    shape = lesson.RATE_SHAPE
    return [_record("gemm_tc", "06_persistent", params, _ms(shape, 650.0), 650.0, "cublas_gemm", 700.0, "TFLOP/s",
                    lesson.gemm_bytes(shape))]


def _write_set(directory: Path, name: str, recs: list[dict], provenance: dict) -> None:
    (directory / f"{name}.json").write_text(json.dumps({"schema": 1, "provenance": provenance, "records": recs}))


def write_synthetic_underfill(directory: Path, provenance: dict = PROVENANCE, inputs: bool = False) -> list[str]:
    """Every record file notebook 05 reads (not copy and gemm_tc unless `inputs`: tests/test_notebooks.py writes
    its own), in `directory` (never results/); returns the names written."""
    directory = Path(directory)
    if directory.resolve().is_relative_to((REPO / "results").resolve()):
        raise ValueError("synthetic records must never be written under results/")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{lesson.SPLIT_FACTORS}.json").write_text(json.dumps(synthetic_split_factors(provenance)))
    (directory / f"{lesson.SPLIT_NCU}.json").write_text(json.dumps(synthetic_ncu(provenance)))
    (directory / f"{lesson.TABLE_COST}.json").write_text(json.dumps(synthetic_table_cost(provenance)))
    _write_set(directory, lesson.SPLIT_FAMILY, synthetic_split_bench(), provenance)
    _write_set(directory, lesson.DECODE_FAMILY, synthetic_decode(), provenance)
    _write_set(directory, lesson.GROUPED_FAMILY, synthetic_grouped(), provenance)
    names = [lesson.SPLIT_FACTORS, lesson.SPLIT_NCU, lesson.TABLE_COST, *lesson.FAMILIES]
    if inputs:
        _write_set(directory, "copy", synthetic_copy(), provenance)
        _write_set(directory, "gemm_tc", synthetic_gemm_tc(), provenance)
        names += list(lesson.PREDICTION_INPUTS)
    return names


@pytest.fixture
def replay_dir(tmp_path, monkeypatch):
    write_synthetic_underfill(tmp_path, inputs=True)
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


@pytest.fixture
def empty_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


def _rs(recs: list[dict]) -> RecordSet:
    return RecordSet(PROVENANCE, [Record(**r) for r in recs], replayed=True)


# ----------------------------------------------------------------------------------------------
# Loading, provenance, missing records
# ----------------------------------------------------------------------------------------------

def test_every_file_loads_replayed_with_its_provenance(replay_dir):
    files = lesson.replayed()
    assert set(files) == set(lesson.FILES) and all(v is not None for v in files.values())
    text = lesson.banner(REPLAY, files)
    assert "REPLAY MODE" in text and text.count("REPLAYED from SYNTHETIC TEST DATA") == len(lesson.FILES)
    assert "NO RECORDED RESULTS" not in text
    assert "REPLAYED from SYNTHETIC" in lesson.source(files["decode"], "decode")
    assert lesson.gpu_facts(REPLAY, files).sm_count == 132


def test_missing_records_say_so_and_every_view_copes(empty_dir):
    files = lesson.replayed()
    assert all(v is None for v in files.values())
    text = lesson.banner(REPLAY, files)
    assert text.count("NO RECORDED RESULTS") == len(lesson.FILES)
    assert "lab study splitk --out" in text and "scripts/split_k_ncu.py" in text
    assert "lab study grouped-table-cost --out" in text
    views = {
        "split_k_factors": [lesson.split_auto_table(None), lesson.split_targets(None), lesson.best_factors(None),
                            lesson.determinism_table(None), lesson.split_reading(None, None, None, None, 132)],
        "split_k_ncu": [lesson.ncu_table(None, None, None, 132), lesson.split_time_shares(None)],
        "gemm_split_k": [lesson.split_bench_table(None)],
        "decode": [lesson.decode_table(None), lesson.decode_targets(None), lesson.decode_limits(None, None),
                   lesson.decode_reading(None, None)],
        "grouped_gemm": [lesson.grouped_table(None), lesson.grouped_targets(None), lesson.grouped_reading(None, None,
                                                                                                          132)],
        "grouped_table_cost": [lesson.table_cost_table(None, None)],
        "copy": [lesson.decode_prediction(None), lesson.split_prediction_table(132, None, None)],
    }
    for name, outs in views.items():
        for out in outs:
            assert f"NO RECORDS for {name}:" in out, (name, out)
    assert lesson.copy_model() is None and lesson.tile_rate() is None
    inputs = lesson.prediction_inputs(None, None)
    assert "NO RECORDS for copy" in inputs and "NO RECORDS for gemm_tc" in inputs
    assert lesson.split_predicted_curves(132, None, None) == {}


def test_an_unreadable_payload_is_treated_as_missing(empty_dir):
    (empty_dir / f"{lesson.SPLIT_FACTORS}.json").write_text("{not json")
    (empty_dir / f"{lesson.SPLIT_NCU}.json").write_text(json.dumps({"rows": []}))  # no provenance
    assert lesson.load(lesson.SPLIT_FACTORS) is None and lesson.load(lesson.SPLIT_NCU) is None


def test_live_helpers_in_replay_measure_nothing():
    assert lesson.live_split_k(REPLAY) is None and lesson.live_table_costs(REPLAY) is None
    assert lesson.live_bench(REPLAY, "decode", lesson.LIVE_DECODE) is None
    assert lesson.live_refusal(REPLAY, "grouped_gemm") is None
    assert "REPLAY: nothing is measured here" in lesson.live_note(None, REPLAY, "decode")
    plan = lesson.live_plan_text()
    assert "256x256x65536 only" in plan and "Nsight Compute: NOT measured live" in plan


def test_with_headlines_replaces_one_instances_problems_only():
    from lab.families.grouped_gemm import GroupedGemmFamily

    fam = lesson.with_headlines(GroupedGemmFamily(), lesson.LIVE_GROUPED)
    assert fam.headline_params() == [dict(p) for p in lesson.LIVE_GROUPED]
    assert GroupedGemmFamily().headline_params() != fam.headline_params()


def test_decode_is_found_before_it_is_in_the_catalogue():
    fam = lesson.ladder("decode")
    assert fam is not None and fam.rungs[0].key == lesson.DECODE_RUNG
    assert lesson.ladder("no_such_family") is None


# ----------------------------------------------------------------------------------------------
# Predictions: arithmetic on the shapes and the families, no records
# ----------------------------------------------------------------------------------------------

def test_rung_06_keeps_a_handful_of_sms_busy_on_the_k_heavy_shapes():
    rows = [line.split() for line in lesson.split_shapes(132).splitlines()]
    # gemm_tc's 128 x 256 tiles: 2 tiles at 256 x 256 and 1 at 128 x 128, each through every k-step
    assert ["256x256x65536", "128x256", "2", "2/132", "1024", "128"] in rows
    assert ["128x128x131072", "128x256", "1", "1/132", "2048", "64"] in rows
    p = lesson.split_prediction({"M": 256, "N": 256, "K": 65536}, 1, 132, None, None, (128, 256))
    assert (p["tiles"], p["busy_sms"], p["ksteps"]) == (2, 2, 1024)


def test_split_prediction_counts_units_rounds_and_slices():
    shape = {"M": 256, "N": 256, "K": 65536}
    p = lesson.split_prediction(shape, 66, 132, None, None, (128, 256))
    assert (p["units"], p["busy_sms"], p["ksteps"]) == (132, 132, 16)  # 1024 k-steps in 66 splits: 15 or 16 each
    assert p["slices"] == 2 * 4 * 66 * 256 * 256  # written once and read once, fp32
    assert lesson.split_prediction(shape, 67, 132, None, None, (128, 256))["ksteps"] == 2 * 16  # 134 units: 2 rounds
    assert p["compute_us"] is None and p["tflops"] is None  # nothing to predict time from without records
    # a record that ran S = 66 at this shape used 128 x 256 tiles (the narrow tile's one-wave S is 33)
    assert lesson.tile_for_splits(shape, 66, 132) == (128, 256)
    assert lesson.tile_for_splits(shape, lesson.launcher_splits(shape, 132), 132) == lesson.split_tile(256, 256)


def test_copy_model_interpolates_the_sweep_and_keeps_its_floor():
    model = lesson.copy_model(_rs(synthetic_copy()))
    assert model.floor_us == pytest.approx(4.0 + 1024 / 4e6, rel=1e-6)
    exact = 1 << 20
    assert model.time_us(exact) == pytest.approx(4.0 + exact / 4e6, rel=1e-9)
    between = 3 << 19
    assert model.time_us(1 << 20) < model.time_us(between) < model.time_us(1 << 21)
    assert model.time_us(1 << 34) == pytest.approx(model.points[-1][1] * 4, rel=1e-9)  # linear past the sweep
    assert model.peak_gbs == pytest.approx(max(b / (t * 1e3) for b, t in model.points))


def test_tile_rate_divides_rung_06s_time_by_rounds_and_k_steps():
    rate = lesson.tile_rate(_rs(synthetic_gemm_tc()))
    ms = _ms(lesson.RATE_SHAPE, 650.0)
    assert rate.us_per_kstep == pytest.approx(ms * 1e3 / 4 / 64)  # 512 tiles over 132 SMs: 4 rounds; 64 k-steps
    assert rate.kstep_us(128, 128) == pytest.approx(rate.us_per_kstep / 2)
    assert lesson.tile_rate(_rs([])) is None


def test_the_split_prediction_is_the_slower_of_compute_and_bytes():
    copy, rate = lesson.copy_model(_rs(synthetic_copy())), lesson.tile_rate(_rs(synthetic_gemm_tc()))
    shape = lesson.SPLIT_SHAPES[0]
    p = lesson.split_prediction(shape, 66, 132, copy, rate, (128, 256))
    assert p["compute_us"] == pytest.approx(16 * rate.us_per_kstep)
    assert p["bytes_us"][0] == pytest.approx(copy.time_us(lesson.gemm_bytes(shape)))
    slow = max(p["compute_us"], p["bytes_us"][1])
    assert p["tflops"][0] == pytest.approx(p["flops"] / (slow * 1e6))
    table = lesson.split_prediction_table(132, copy, rate)
    assert table.count("256x256x65536") == 2 and table.count("128x128x131072") == 2
    curves = lesson.split_predicted_curves(132, copy, rate, (1, 33, 4096))
    assert [c["S"] for c in curves["256x256x65536"]] == [1, 33]  # no more splits than k-steps


def test_decode_shapes_show_rung_06s_few_tiles_and_the_empty_rows():
    rows = [line.split() for line in lesson.decode_shapes(132, tokens=(1,)).splitlines()]
    assert ["4096", "1", "32", "MiB", "16", "16/132", "0.008", "1"] in rows
    assert ["8192", "1", "128", "MiB", "32", "32/132", "0.008", "1"] in rows


def test_decode_plan_uses_the_families_launch_plan(monkeypatch):
    from lab.lessons.underfill import decode as decode_lesson

    monkeypatch.setattr(decode_lesson, "resident_blocks", lambda spec, arch: 2)  # no compile: two blocks per SM
    copy = lesson.copy_model(_rs(synthetic_copy()))
    text = lesson.decode_plan(132, 90, copy, sides=(4096,), tokens=(1, 128))
    rows = [line.split() for line in text.splitlines()]
    # M = 1: 256 blocks of 16 rows, 8 warps each (256 <= 132 x 2 fit at once), 8 KB of W in flight per warp
    assert ["4096", "1", "1", "1", "8", "256", "8", "2", "0.97", "128", "KiB"] in rows
    assert any(r[:3] == ["4096", "128", "16"] for r in rows) and "Little's law" in text


def test_decode_prediction_is_the_copys_time_for_the_minimum_bytes():
    copy = lesson.copy_model(_rs(synthetic_copy()))
    text = lesson.decode_prediction(copy, sides=(4096,), tokens=(1,))
    nbytes = 2 * (4096 * 4096 + 4096 + 4096)
    assert f"{copy.time_us(nbytes):8.1f}" in text and f"{copy.floor_us / copy.time_us(nbytes):12.0%}" in text


def test_grouped_shapes_agree_with_the_kernel_headers_figures():
    """The grouped rung's header predicts from these counts (written before any GPU run); the lesson computes them
    from the family's routing and the tile: they must agree."""
    moe = lesson.grouped_shape("moe", 132)
    assert (moe["groups"], moe["empty"], moe["largest"], moe["tile_rows"], moe["tiles"], moe["rounds"]) == \
        (64, 5, 2685, 166, 2656, 21)
    assert round(moe["useful"], 2) == 0.77 and moe["calls"] == 59
    uniform = lesson.grouped_shape("uniform", 132)
    assert (uniform["tiles"], uniform["useful"], uniform["calls_under_a_wave"]) == (2048, 1.0, 64)
    small = lesson.grouped_shape("small", 132)
    assert (small["tokens"], small["tile_rows"], small["tiles"], small["rounds"]) == (35475, 337, 1348, 11)
    text = lesson.grouped_shapes(132, lesson.tile_rate(_rs(synthetic_gemm_tc())))
    assert "moe" in text and "predicted" in text


def test_header_predictions_are_read_from_the_kernels():
    for family, key in (("gemm_split_k", "08_split_k"), ("decode", "01_mma_gemv"),
                        ("grouped_gemm", "01_grouped_persistent")):
        text = lesson.header_prediction(family, key)
        assert "written before any GPU run" in text, text


# ----------------------------------------------------------------------------------------------
# The records: tables, Nsight Compute, targets that follow the numbers
# ----------------------------------------------------------------------------------------------

def test_ncu_rows_become_launches_of_each_shape_and_mode():
    launches = lesson.ncu_launches(synthetic_ncu())
    assert [(lesson.shape_label(r), r["mode"]) for r in launches] == [
        (lesson.shape_label(s), m) for s in lesson.SPLIT_SHAPES for m in lesson.SPLIT_MODES]
    first = launches[0]
    assert first["split_us"] == pytest.approx(24.0) and first["reduce_us"] == pytest.approx(8.0)
    assert first["split_read"] == lesson.gemm_bytes(lesson.SPLIT_SHAPES[0]) and first["split_l2_hit_pct"] == 35.5
    assert launches[1]["reduce_us"] == 0.0 and launches[1]["split_us"] == pytest.approx(32.0)
    broken = synthetic_ncu()
    broken["rows"] = broken["rows"][:-4]  # one kernel short: the order no longer fits
    assert lesson.ncu_launches(broken) is None
    assert "do not follow the script's order" in lesson.ncu_table(broken, None, None, 132)


def test_ncu_table_names_the_splits_of_the_profiled_commit():
    factors, ncu = synthetic_split_factors(), synthetic_ncu()
    text = lesson.ncu_table(ncu, factors, None, 132)
    assert "as the records of the profiled commit name it" in text and "cuBLAS us" in text
    other = dict(factors, provenance=PROVENANCE | {"commit": "elsewhere"})
    assert "'*' is the current launcher's" in lesson.ncu_table(ncu, other, None, 132)
    shares = lesson.split_time_shares(ncu)
    assert "the split kernel takes 75% of the workspace mode's 32.0 us" in shares


def test_split_targets_flip_with_the_records():
    met = lesson.split_targets(synthetic_split_factors(fraction={"08_split_k": 1.05, "08_split_k_atomic": 0.5}))
    assert met.count("target >= 1: met") == 2
    missed = lesson.split_targets(synthetic_split_factors())
    assert missed.count("MISSED") == 2 and "fastest variant 08_split_k_interleaved" in missed


def test_split_tables_show_every_variant_and_the_bits():
    payload = synthetic_split_factors()
    auto = lesson.split_auto_table(payload)
    assert all(v in auto for v in SPLIT_FRACTION) and "x cuBLAS" in auto
    best = lesson.best_factors(payload)
    assert "08_split_k_atomic" in best and best.count("256x256x65536") == len(SPLIT_FRACTION)
    bits = lesson.determinism_table(payload)
    assert "bits that change from run to run: 08_split_k_atomic" in bits
    assert "the same bits on every run: 08_split_k, 08_split_k_in_kernel" in bits
    bench = lesson.split_bench_table(_rs(synthetic_split_bench()))
    assert "cuBLAS 280 TFLOP/s" in bench and "08_split_k 252 (0.90x" in bench


def test_split_reading_holds_the_records_against_the_prediction():
    copy, rate = lesson.copy_model(_rs(synthetic_copy())), lesson.tile_rate(_rs(synthetic_gemm_tc()))
    text = lesson.split_reading(synthetic_split_factors(), synthetic_ncu(), copy, rate, 132)
    assert text.count("(below the lesson's target)") == 2 and "the prediction" in text
    assert "Nsight Compute: the workspace mode's split kernel 24.0 us" in text


def test_decode_targets_flip_with_the_fraction_of_the_copy():
    assert "target >= 0.85: met" in lesson.decode_targets(_rs(synthetic_decode(0.9)))
    low = lesson.decode_targets(_rs(synthetic_decode(0.8)))
    assert "target >= 0.85: MISSED" in low and low.count("N = K = 8192") == 2  # fp16 and bf16
    assert "x cuBLAS (M = " in low


def test_decode_table_reports_gbs_of_w_and_both_ratios():
    rs = _rs(synthetic_decode(0.9))
    table = lesson.decode_table(rs)
    problems = len(lesson.DECODE_SIDES) * len(lesson.DECODE_TOKENS)
    assert table.count("\n  float16 ") == table.count("\n  bfloat16 ") == 2 * problems  # two rungs each
    rows = [line.split() for line in table.splitlines()]
    first = next(r for r in rows if r[:3] == ["float16", "4096", "1"])
    assert first[3] == "01_mma_gemv*"  # the fastest rung of the problem, starred
    assert first[6:8] == ["0.900", "1.200"]  # rung 01 at 0.9 of the copy, cuBLAS at 0.75: 1.2x faster
    assert any(r[:4] == ["float16", "4096", "128", "02_split_k_gemm*"] for r in rows)  # rung 02 wins past M = 32
    copy = lesson.copy_model(_rs(synthetic_copy()))
    limits = lesson.decode_limits(rs, copy)
    assert "the copy's fixed cost" in limits and limits.count("\n  float16 ") == 5  # M = 1, 2, 4, 8, 16 at 4096
    reading = lesson.decode_reading(rs, copy)
    assert "float16 N = K = 4096: M <= 16: 0.90-0.90x of the copy and 1.20-1.20x cuBLAS's speed (01_mma_gemv)" \
        in reading and "fixed cost is" in reading
    assert "M > 16: 0.50-0.50x of the copy and 0.67-0.67x cuBLAS's speed (02_split_k_gemm)" in reading


def test_grouped_targets_flip_with_the_records():
    good = lesson.grouped_targets(_rs(synthetic_grouped(6.0, 1.1)))
    assert "small float16: 6.00x the loop's speed (128 groups), target >= 5: met" in good
    assert "uniform float16: 1.100x cuBLAS batched's time, target <= 1.2: met" in good
    assert "moe" not in good  # the moe case is not the target's many small problems
    bad = lesson.grouped_targets(_rs(synthetic_grouped(3.0, 1.5)))
    assert bad.count("MISSED") == 2
    table = lesson.grouped_table(_rs(synthetic_grouped()))
    assert table.count("float16") == 3 and "time / batched" in table
    reading = lesson.grouped_reading(_rs(synthetic_grouped()), lesson.tile_rate(_rs(synthetic_gemm_tc())), 132)
    assert reading.count("predicted") == 3 and "6.0x the loop" in reading


def test_table_costs_sit_beside_the_kernel_time_of_the_same_device():
    text = lesson.table_cost_table(synthetic_table_cost(), _rs(synthetic_grouped()))
    assert text.count("118") == 3 and "host / kernel" in text
    kernel_ms = next(r for r in synthetic_grouped() if r["rung"] == lesson.GROUPED_RUNG)["median_ms"]
    assert f"{2.0 / kernel_ms:14.1f}" in text
    elsewhere = RecordSet(PROVENANCE | {"device": "another GPU"}, _rs(synthetic_grouped()).records, True)
    assert "host / kernel" in lesson.table_cost_table(synthetic_table_cost(), elsewhere)
    assert f"{2.0 / kernel_ms:14.1f}" not in lesson.table_cost_table(synthetic_table_cost(), elsewhere)


# ----------------------------------------------------------------------------------------------
# Figures: drawn from records, declined without them
# ----------------------------------------------------------------------------------------------

def test_figures_draw_from_records_and_decline_without_them():
    import matplotlib.pyplot as plt

    copy, rate = lesson.copy_model(_rs(synthetic_copy())), lesson.tile_rate(_rs(synthetic_gemm_tc()))
    payload = synthetic_split_factors()
    figs = [plots.split_factors(payload, lesson.split_predicted_curves(132, copy, rate, payload=payload)),
            plots.split_kernel_times(lesson.ncu_launches(synthetic_ncu()), {"256x256x65536": 30.0}),
            plots.decode_bandwidth(_rs(synthetic_decode()), target=0.85),
            plots.grouped_cases(_rs(synthetic_grouped())),
            plots.expert_rows(lesson.case_groups("moe"))]
    assert all(f is not None for f in figs)
    band = [c for c in figs[0].axes[0].collections]
    assert band, "the predicted band is drawn"
    for f in figs:
        plt.close(f)
    assert plots.split_factors({"rows": []}) is None and plots.split_kernel_times([]) is None
    assert plots.decode_bandwidth(_rs([])) is None and plots.grouped_cases(_rs([])) is None
    assert plots.expert_rows([]) is None


def test_show_says_what_is_missing(capsys):
    lesson.show(plots.split_factors, None, lesson.SPLIT_FACTORS)
    lesson.show_kernel_times(None, None)
    out = capsys.readouterr().out
    assert "NO RECORDS for split_k_factors:" in out and "NO RECORDS for split_k_ncu:" in out


def test_sm_count_of_prefers_the_records_gpu():
    gpu = lesson.gpu_facts(REPLAY, {})
    assert lesson.sm_count_of({"sm_count": 100, "provenance": {}}, gpu) == 100
    assert lesson.sm_count_of(_rs([]), gpu) == 132 and lesson.sm_count_of(None, gpu) == gpu.sm_count
    assert math.isfinite(gpu.l2_bytes)


# ----------------------------------------------------------------------------------------------
# The notebook's inline steps: one timing from the records, the header's fields, the code's diff
# ----------------------------------------------------------------------------------------------

def test_the_replayed_timings_read_one_problem_from_the_records():
    split = lesson.replayed_split_timing(synthetic_split_factors())
    assert "256x256x65536 fp16, cold L2: 08_split_k" in split and "cuBLAS's time / the rung's = 0.90" in split
    decode = lesson.replayed_decode_timing(_rs(synthetic_decode(0.9)))
    assert "rung / copy = 0.900" in decode and "its time / the rung's = 1.20" in decode
    grouped = lesson.replayed_grouped_timing(_rs(synthetic_grouped(6.0)))
    assert "the loop's time / the kernel's = 6.00" in grouped and "ceiling" not in grouped
    assert "NO RECORDS for split_k_factors:" in lesson.replayed_split_timing(None)
    assert "NO RECORDS for decode:" in lesson.replayed_decode_timing(None)
    assert "NO RECORDS for grouped_gemm:" in lesson.replayed_grouped_timing(None)
    assert lesson.replayed_decode_timing(_rs([])).startswith("(no headline record")


def test_header_fields_and_code_diffs_come_from_the_kernels():
    changed = lesson.header_field("gemm_split_k", "08_split_k")
    assert changed.startswith("What changed (vs rung 06)") and "Prediction" not in changed
    assert lesson.header_field("decode", "01_mma_gemv", "What it is").startswith("What it is:")
    assert "has no 'Nothing' field" in lesson.header_field("decode", "01_mma_gemv", "Nothing")
    diff = lesson.code_diff(("gemm_tc", "06_persistent"), ("grouped_gemm", "01_grouped_persistent")).text
    assert diff.startswith("```diff\n--- gemm_tc/06_persistent.cu") and "+struct __align__(128) LabGroup" in diff
    assert "\n-// gemm_tc / rung 06" not in diff  # the headers are left out: they say in words what changed


def test_figures_keep_no_tick_label_past_an_axis():
    import matplotlib.pyplot as plt

    from lab.lessons import figure_check

    payload = synthetic_split_factors()
    figs = [plots.split_factors(payload), plots.decode_bandwidth(_rs(synthetic_decode()), target=0.85),
            plots.grouped_cases(_rs(synthetic_grouped()))]
    for fig in figs:
        assert figure_check.problems(fig) == []
        for ax in fig.axes:
            lo, hi = sorted(ax.get_ylim())
            assert all(lo - 1e-6 <= v <= hi + 1e-6 for v in ax.get_yticks())
        plt.close(fig)
    labels = [t.get_text() for t in figs[2].axes[0].get_legend().get_texts()]
    assert any("loop of cuBLAS calls (baseline)" in s for s in labels) and not any("ceiling" in s for s in labels)
