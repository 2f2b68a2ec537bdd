"""lab.lessons.attention and lab.lessons.plots.attention (notebook 09) on the CPU: the recurrence equals the softmax,
the count, the sentences for missing records, and every figure on SYNTHETIC records (test data written into pytest's
tmp_path, shaped like `lab bench attention --json` files; never written under results/)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from lab.lessons import attention as lesson  # noqa: E402
from lab.lessons.figure_check import problems  # noqa: E402
from lab.lessons.mode import Mode  # noqa: E402
from lab.lessons.plots import attention as figures  # noqa: E402

PROVENANCE = {"device": "SYNTHETIC TEST DATA (not a measurement)", "arch": "sm_90", "sm_count": 132,
              "l2_bytes": 50 * 2**20, "driver_cuda": "13.0", "runtime_cuda": "13.0", "cupy": "0", "numpy": "0",
              "nvrtc": "13.0", "lab": "0", "commit": "synthetic", "date": "2000-01-01T00:00:00+00:00",
              "host": "pytest", "python": "3"}
# Shares of the synthetic baseline per rung: shapes of bars, not results.
_SHARES = {"01_naive": 0.002, "02_flash_mma": 0.4, "03_flash_pipelined": 0.55}


def synthetic_attention_records(rng: random.Random) -> list[dict]:
    from lab.families import get_family

    fam = get_family("attention")
    jobs = [("headline", p) for p in fam.headline_params()] + [("sweep", p) for p in fam.sweep_params()]
    jobs += [("tail", p) for p in fam.tail_params()]
    out = []
    for kind, params in jobs:
        params = {"H_kv": params["H"]} | params  # as the records store them (make_problem's params)
        flops, moved = fam.flops(params), fam.min_dram_bytes(params)
        base = 500.0 * params["S_k"] / (params["S_k"] + 1024) if params["S_q"] > 1 else 10.0
        for rung in (*(r.key for r in fam.rungs_for(kind, params)), fam.ceiling_name):
            value = base * (1.0 if rung == fam.ceiling_name else _SHARES.get(rung, 0.3) * rng.uniform(0.97, 1.0))
            if kind == "tail" and params["S_k"] % 64 and rung != fam.ceiling_name:
                value *= 0.95  # a step for the tail figure to show
            ms = flops / (value * 1e12) * 1e3
            out.append({"family": "attention", "rung": rung, "kind": kind, "params": params, "bytes_moved": moved,
                        "l2": "cold", "median_ms": ms, "p10_ms": ms * 0.99, "p90_ms": ms * 1.02, "reps": 20,
                        "metric": "TFLOP/s", "value": value, "ceiling": fam.ceiling_name, "ceiling_value": base,
                        "extra": {}})
    return out


def synthetic_study(provenance: dict) -> dict:
    """attention_study.json's synthetic twin: its summary rows (shape, method, TFLOP/s, ratios), made-up values."""
    methods = {"sdpa_cudnn": 600.0, "sdpa_flash": 340.0, "sdpa_efficient": 170.0, "02_flash_mma": 220.0,
               "03_flash_pipelined": 250.0, "03 BLOCK_M=64": 240.0}
    summary = []
    for causal in (0, 1):
        shape = {"B": 2, "H": 16, "S": 4096, "D": 128, "causal": causal, "dtype": "float16"}
        for method, rate in methods.items():
            summary.append({"shape": shape, "method": method, "TFLOP/s": rate * (0.8 if causal else 1.0),
                            "spread": 0.01, "x_sdpa_cudnn": rate / methods["sdpa_cudnn"],
                            "x_sdpa_flash": rate / methods["sdpa_flash"]})
    return {"provenance": provenance, "about": "synthetic", "rounds": 1, "rows": [], "summary": summary,
            "failed": [], "refused": []}


def write_synthetic_attention(directory: Path, provenance: dict = PROVENANCE) -> list[str]:
    """results/h200/attention.json's synthetic twin (every kind) and attention_study.json's in `directory`; returns
    the stems written."""
    payload = {"schema": 1, "provenance": provenance, "records": synthetic_attention_records(random.Random(9))}
    (Path(directory) / "attention.json").write_text(json.dumps(payload))
    (Path(directory) / f"{lesson.STUDY}.json").write_text(json.dumps(synthetic_study(provenance)))
    (Path(directory) / f"{lesson.VARLEN_STUDY}.json").write_text(json.dumps(synthetic_varlen_study(provenance)))
    return ["attention", lesson.STUDY, lesson.VARLEN_STUDY]


def synthetic_varlen_study(provenance: dict) -> dict:
    """varlen_attention_study.json's twin: one serving batch, the packed kernel and three padded peers (test data)."""
    batch = {"mix": "serving", "B": 16, "dtype": "float16"}
    times = {"lab_varlen": 1.0, "lab_dense_padded": 10.0, "sdpa_padded": 9.0, "torch_varlen": 1.6}
    summary = [{"batch": batch, "method": m, "TFLOP/s": 500.0 / t, "spread": 0.01, "time_x_lab_varlen": t,
                "time_x_lab_varlen_min": t * 0.98} for m, t in times.items()]
    return {"provenance": provenance, "rounds": 3, "batches": [{"batch": batch, "real_share_of_padded_work": 0.084}],
            "rows": [], "summary": summary, "refused": []}


@pytest.fixture
def replay_dir(tmp_path, monkeypatch):
    write_synthetic_attention(tmp_path)
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


@pytest.fixture
def empty_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


REPLAY = Mode(False, "a test")


# --- the recurrence ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, block", [(1, 8), (17, 8), (37, 8), (64, 16), (97, 32), (255, 64)])
def test_the_tiled_recurrence_equals_the_softmax_of_the_whole_row(n, block):
    rng = np.random.default_rng(n)
    s = rng.standard_normal(n) * 4 + np.linspace(-3, 9, n)   # the max moves across tiles
    v = rng.standard_normal((n, 5))
    o, factors = lesson.online_attention(s, v, block)
    e = np.exp(s - s.max())
    np.testing.assert_allclose(o, (e / e.sum()) @ v, rtol=1e-12, atol=1e-14)
    assert len(factors) == -(-n // block) and all(0.0 <= f <= 1.0 for f in factors)


def test_a_factor_is_exactly_one_when_the_max_does_not_move():
    s = np.array([5.0, 1.0, 0.5, -1.0, 2.0, 0.0, 4.9, 3.0])
    _, factors = lesson.online_attention(s, np.ones((8, 2)), 2)
    assert factors[1:] == [1.0, 1.0, 1.0]


def test_masked_keys_and_rows_with_no_visible_key():
    s = np.array([0.3, -np.inf, 1.2, -np.inf, -np.inf, 0.7])
    v = np.arange(12.0).reshape(6, 2)
    o, _ = lesson.online_attention(s, v, 4)
    keep = np.isfinite(s)
    e = np.exp(s[keep] - s[keep].max())
    np.testing.assert_allclose(o, (e / e.sum()) @ v[keep], rtol=1e-12)
    empty, _ = lesson.online_attention(np.full(10, -np.inf), v[:1].repeat(10, 0), 4)
    assert np.array_equal(empty, np.zeros(2)) and not np.signbit(empty).any()
    text = lesson.empty_row_text()
    assert "nan" in text and "[0. 0. 0. 0.]" in text


def test_the_recurrence_demo_moves_its_max_and_matches():
    demo = lesson.recurrence_demo()
    assert demo["error"] < 1e-12 and demo["n"] % demo["block"]
    assert any(f != 1.0 for f in demo["factors"][1:]) and 1.0 in demo["factors"][1:]
    assert "largest |online - softmax(s) v|" in lesson.recurrence_text(demo)
    assert "lab.lessons.attention.online_attention" in lesson.show_function(lesson.online_attention).text


# --- the count -----------------------------------------------------------------------------------------------

def test_the_count():
    c = lesson.count(4096, 128)
    assert c["flops"] == 4 * 4096**2 * 128 and c["qkvo_bytes"] == 4 * 4096 * 128 * 2
    assert c["flash_intensity"] == 4096 / 2 and c["naive_intensity"] < c["flash_intensity"] / 10


def test_count_text_without_records_says_what_it_needs(empty_dir):
    text = lesson.count_text(None)
    assert "FLOP per byte" in text and "absent here" in text


# --- missing records ----------------------------------------------------------------------------------------

def test_missing_records_are_one_sentence_each_with_the_command(empty_dir):
    sets = lesson.replayed_all()
    assert sets == {"headline": None, "sweep": None, "tail": None}
    for kind in lesson.KINDS:
        sentence = lesson.missing(kind)
        assert sentence.startswith(f"NO RECORDS for attention {kind}:")
        assert f"lab bench attention --kinds {kind} --json" in sentence
    banner = lesson.banner(REPLAY, sets)
    assert "REPLAY MODE" in banner and banner.count("NO RECORDED RESULTS") == 3
    for text in (lesson.ladder_table(None).text, lesson.best_share(None), lesson.causal_text(None),
                 lesson.head_dim_text(None), lesson.decode_text(None)):
        assert text.startswith("NO RECORDS for attention headline:")
    assert lesson.sweep_text(None).startswith("NO RECORDS for attention sweep:")
    assert lesson.tail_text(None).startswith("NO RECORDS for attention tail:")


def test_show_prints_the_sentence_and_draws_nothing(empty_dir, capsys):
    lesson.show(figures.sequence_sweep, None, "sweep")
    assert capsys.readouterr().out.startswith("NO RECORDS for attention sweep:")


def test_a_kind_file_wins_over_the_full_file(replay_dir):
    rs = json.loads((replay_dir / "attention.json").read_text())
    heads = [r for r in rs["records"] if r["kind"] == "headline"][:3]
    (replay_dir / "attention_headline.json").write_text(json.dumps(rs | {"records": heads}))
    assert len(lesson.replayed("headline").records) == 3
    assert lesson.replayed("headline").provenance["file"].endswith("attention_headline.json")
    assert lesson.replayed("sweep").provenance["file"].endswith("attention.json")


# --- records: tables and figures --------------------------------------------------------------------------

def test_tables_on_synthetic_records(replay_dir):
    sets = lesson.replayed_all()
    assert all(sets[k] is not None for k in lesson.KINDS)
    assert "REPLAYED from SYNTHETIC TEST DATA" in lesson.banner(REPLAY, sets)
    table = lesson.ladder_table(sets["headline"]).text
    assert "| problem |" in table and "torch_sdpa |" in table and "S_q=1 " not in table
    assert "of torch_sdpa" in lesson.best_share(sets["headline"])
    assert "causal time / full time" in lesson.causal_text(sets["headline"])
    assert "D=64" in lesson.head_dim_text(sets["headline"])
    assert "GB/s" in lesson.decode_text(sets["headline"]) and "S_q=1" in lesson.decode_text(sets["headline"])
    assert "S=256" in lesson.sweep_text(sets["sweep"]) and "from" in lesson.tail_text(sets["tail"])


@pytest.mark.parametrize("name, kind", [("ladder_vs_sdpa", "headline"), ("head_dims", "headline"),
                                        ("decode_times", "headline"), ("sequence_sweep", "sweep"), ("tail", "tail")])
def test_figures_on_synthetic_records_are_legible(replay_dir, name, kind):
    import matplotlib.pyplot as plt

    fig = getattr(figures, name)(lesson.replayed(kind))
    assert fig is not None
    assert problems(fig) == [], problems(fig)
    plt.close(fig)


def test_figures_with_nothing_to_draw_return_none(replay_dir):
    from lab.measure.records import RecordSet

    sweep = lesson.replayed("sweep")
    assert figures.decode_times(sweep) is None and figures.head_dims(sweep) is None
    assert figures.sequence_sweep(RecordSet(PROVENANCE, [])) is None


def test_predictions_are_held_against_the_problem_they_name(replay_dir):
    params, where = lesson.predicted_problem("02_flash_mma")
    assert params == {"B": 2, "H": 16, "D": 128, "S_q": 4096, "S_k": 4096, "dtype": "float16", "causal": 0}
    assert "H200" in where
    text = lesson.predictions_check(lesson.replayed("headline"))
    assert text.count("predicted for") == len(lesson.rung_keys())
    assert "predicted 80-200 TFLOP/s: measured" in text and "times rung 01_naive" in text
    assert "(the prediction is for an H200; these records were made on SYNTHETIC" in text
    assert "the range" in text


def test_predictions_without_records(empty_dir):
    assert lesson.predictions_check(None).startswith("NO RECORDS for attention headline:")


def test_the_study_of_sdpas_backends(replay_dir):
    study = lesson.load_study()
    assert study is not None
    table = lesson.study_table(study).text
    assert "| sdpa_flash |" in table and "x cuDNN" in table
    reading = lesson.study_reading(study)
    assert reading.count("03_flash_pipelined at") == 2 and "of the flash backend's speed" in reading
    import matplotlib.pyplot as plt

    fig = figures.sdpa_backends(study)
    assert fig is not None and problems(fig) == [], problems(fig)
    plt.close(fig)


def test_the_persistent_table_reads_which_build_was_the_default_from_the_other_row():
    """A record whose other row is `05 PERSISTENT=1` had the one-block-a-query-block build as rung 05's default, and
    one whose other row is `05 PERSISTENT=0` the persistent one; a shape without either row is left out."""
    prov = {"device": "GPU", "arch": "sm_90", "date": "2026-12-07", "commit": "abc"}
    shape = {"B": 2, "H": 16, "S": 4096, "D": 128, "dtype": "float16"}
    summary = [{"shape": shape, "method": "05_pingpong", "TFLOP/s": 500.0},
               {"shape": shape, "method": "05 PERSISTENT=1", "TFLOP/s": 550.0},
               {"shape": dict(shape, causal=1), "method": "05_pingpong", "TFLOP/s": 440.0},
               {"shape": dict(shape, causal=1), "method": "05 PERSISTENT=0", "TFLOP/s": 400.0},
               {"shape": dict(shape, D=64), "method": "05_pingpong", "TFLOP/s": 300.0}]
    text = lesson.persistent_table({"provenance": prov, "summary": summary}).text
    assert "| B=2 H=16 S=4096 D=128 float16 | 500 | 550 | 1.10x | 0 |" in text
    assert "| B=2 H=16 S=4096 D=128 float16 causal | 400 | 440 | 1.10x | 1 |" in text
    assert "D=64" not in text
    assert lesson.persistent_table(None).text.startswith("NO RECORDS")


def test_the_study_missing_or_malformed(empty_dir):
    assert lesson.load_study() is None
    assert lesson.study_table(None).text.startswith("NO RECORDS for attention_study:")
    assert "python -m lab.studies.attention_study" in lesson.study_missing()
    (empty_dir / "attention_study.json").write_text(json.dumps({"provenance": {}, "summary": [{"method": "x"}]}))
    assert lesson.load_study() is None
    (empty_dir / "attention_study.json").write_text("not json")
    assert lesson.load_study() is None


def test_a_study_kept_from_an_earlier_commit_is_read_and_said_so(empty_dir):
    old, new = (synthetic_study(PROVENANCE | {"commit": c, "date": d}) for c, d in
                (("aaaaaaa", "2000-01-01T00:00:00+00:00"), ("bbbbbbb", "2000-01-02T00:00:00+00:00")))
    (empty_dir / "attention_study_aaaaaaa.json").write_text(json.dumps(old))
    (empty_dir / "attention_study_bbbbbbb.json").write_text(json.dumps(new))
    study = lesson.load_study()
    assert study["file"].endswith("attention_study_bbbbbbb.json")
    assert "was made at commit bbbbbbb" in lesson.study_commit_note(study)
    (empty_dir / "attention_study.json").write_text(json.dumps(synthetic_study(PROVENANCE)))
    assert lesson.load_study()["file"].endswith("attention_study.json")


def test_the_newest_study_of_the_reference_gpu_and_an_h100_is_read(tmp_path, monkeypatch):
    """A study that landed on an H100 (results/h100) is read when it is newer than the reference GPU's, and not
    when it is older; the record names its GPU either way."""
    reference, h100 = tmp_path / "h200", tmp_path / "h100"
    reference.mkdir(), h100.mkdir()
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(reference))
    older, newer = (synthetic_study(PROVENANCE | {"date": d, "device": gpu}) for d, gpu in
                    (("2000-01-01T00:00:00+00:00", "NVIDIA H200"), ("2000-01-02T00:00:00+00:00", "NVIDIA H100")))
    (reference / "attention_study.json").write_text(json.dumps(older))
    (h100 / "attention_study.json").write_text(json.dumps(newer))
    assert "h100" in lesson.load_study()["file"] and "NVIDIA H100" in lesson.study_label(lesson.load_study())
    (reference / "attention_study.json").write_text(json.dumps(newer | {"provenance": newer["provenance"]
                                                                         | {"date": "2000-01-03T00:00:00+00:00"}}))
    assert "h200" in lesson.load_study()["file"]


# --- sources and tiles (NVRTC compiles without a GPU) ----------------------------------------------------------

def test_rungs_predictions_and_tiles():
    keys = lesson.rung_keys()
    assert keys[:2] == ["01_naive", "02_flash_mma"]
    assert all(f"{k}:" in lesson.predictions_text() for k in keys)
    budget = lesson.tile_budget(lesson.tiled_rungs()[0], D=128)
    assert budget["q_tile"] == 64 * (128 + 8) * 2 and budget["kv_stage"] == 2 * 64 * (128 + 8) * 2
    assert budget["registers"] > 0 and budget["smem"] > 0 and budget["occupancy"].blocks_per_sm >= 1
    assert budget["tile_flops"] / budget["tile_bytes"] == budget["block_m"]
    assert "registers a thread" in lesson.tiles_text([budget])


# --- the notebook's live cell, on a GPU -----------------------------------------------------------------------

@pytest.mark.gpu
def test_the_live_problem_passes_on_every_rung_this_gpu_runs():
    """Section 5's launch as the notebook writes it (a guarded, poisoned output, then the float64 check), on every
    rung the notebook may pick (the last tiled one) and the others, so a LIVE run cannot fail its own cell."""
    import cupy as cp

    from lab.families import get_family
    from lab.measure import verify
    from lab.measure.check import GuardedBuffer

    fam = get_family("attention")
    problem = fam.make_problem(seed=3, **lesson.LIVE_PROBLEM)
    ref = fam.reference(problem)
    bound = fam.error_bound(problem, ref)
    ran = []
    for rung in fam.rungs:
        buf = GuardedBuffer(problem.out_shape, problem.dtype)
        if fam.refusal(rung, problem, buf.out):  # a rung this GPU cannot run: the notebook falls back past it too
            assert lesson.runnable(rung, problem, buf.out)[0] is not rung
            continue
        ran.append(rung.key)
        buf.poison()
        fam.launch(rung, problem, buf.out)
        cp.cuda.get_current_stream().synchronize()
        assert buf.problems() == [], (rung.key, buf.problems())
        got = cp.asnumpy(fam.output_values(buf.out)).astype(np.float64)
        assert not np.isnan(got).any(), rung.key
        assert np.max(np.abs(got - ref) / np.where(bound > 0, bound, np.inf)) <= 1.0, rung.key
        assert verify.compare_output(fam, problem, buf.out).passed, rung.key
    assert "02_flash_mma" in ran, ran
