"""CPU: the Hopper GEMM study's arithmetic (same-round ratios, spreads, the time-against-K fit's inputs), the README
lines made from its records, and the cluster helpers' answers where no driver can be asked."""

from __future__ import annotations

import types

from lab.core import cluster
from lab.studies import hopper_gemm_study as study
from lab.studies import report

SHAPE = {"M": 4096, "N": 4096, "K": 4096, "layout": "TN", "dtype": "float16"}


def _row(method: str, rnd: int, ms: float) -> dict:
    return {"shape": SHAPE, "method": method, "round": rnd, "median_ms": ms, "TFLOP/s": 137.4 / ms}


def test_summary_ratios_are_taken_round_by_round_against_the_faster_library_call():
    rows = [_row("torch_mm", 0, 0.20), _row("cublaslt", 0, 0.18), _row("06_persistent", 0, 0.24),
            _row("10_tma_store", 0, 0.20),
            _row("torch_mm", 1, 0.30), _row("cublaslt", 1, 0.40), _row("06_persistent", 1, 0.33),
            _row("10_tma_store", 1, 0.30)]
    by = {s["method"]: s for s in study.summarize(rows)}
    ten = by["10_tma_store"]
    # Round 0: the faster library call is cuBLASLt (0.18 ms); round 1: torch.mm (0.30 ms).
    assert abs(ten["x_library"] - (0.18 / 0.20 + 0.30 / 0.30) / 2) < 1e-12
    assert abs(ten["x_library_min"] - 0.9) < 1e-12
    assert abs(ten["x_06"] - (0.24 / 0.20 + 0.33 / 0.30) / 2) < 1e-12
    assert abs(ten["spread"] - (0.30 / 0.20 - 1)) < 1e-12  # the rates' max over min, less one
    assert by["06_persistent"]["x_06"] == 1.0


def test_the_core_shapes_are_a_subset_with_both_types_and_a_wave_quantized_shape():
    assert all(s in study.SHAPES for s in study.CORE_SHAPES)
    assert {s["dtype"] for s in study.CORE_SHAPES} == {"float16", "bfloat16"}
    assert {s["layout"] for s in study.CORE_SHAPES} == {"TN", "NN"}
    assert any(s["M"] != s["N"] for s in study.CORE_SHAPES)


def test_the_readme_lines_come_from_the_committed_records():
    lines = report.hopper_lines()
    tables = [line for line in lines if line.startswith("| M x N x K |")]
    assert len(tables) == len(report.HOPPER_STUDIES)
    assert any("10_tma_store" in line for line in tables)
    heads = [line for line in lines if line.startswith("`results/h200/")]
    assert [name for name in report.HOPPER_STUDIES if any(f"{name}.json" in h and f"lab.studies.{name}`" in h
                                                          for h in heads)] == list(report.HOPPER_STUDIES)


def test_cluster_questions_without_a_driver_say_none_and_the_grid_falls_back_to_half_the_sms(monkeypatch):
    stand_in = types.SimpleNamespace()  # no .kernel.ptr: what the CPU tests' recording kernels look like
    assert cluster.max_active_clusters(stand_in, 384, 197632) is None
    assert cluster.required_cluster_width(stand_in) is None

    from lab.core import build, device
    from lab.families import gemm_tc as tc
    from lab.families import get_family

    monkeypatch.setattr(device, "current", lambda: types.SimpleNamespace(sm_count=132, arch=90))
    monkeypatch.setattr(build, "get_kernel", lambda spec: types.SimpleNamespace())
    fam = get_family("gemm_tc")
    built = fam.variant(fam.rung("09"), types.SimpleNamespace(params={"dtype": "float16", "layout": "TN"}))
    assert tc.cluster_slots(built) == 132 // tc.CLUSTER
    params = {"M": 4096 + 1, "N": 4096, "K": 64}
    assert fam.grid(built, params) == (tc.CLUSTER * min(16 * 17, 66),)


def test_each_committed_record_summary_is_its_rows_summarized_again():
    """Both interleaved studies share lab.studies.rounds: re-summarizing a record's rows gives its summary."""
    import json
    from pathlib import Path

    from lab.studies import decode_attention_study

    results = Path(__file__).resolve().parent.parent / "results" / "h200"
    for module, name in ((study, "hopper_gemm_study_910e600"), (study, "hopper_gemm_study_4096"),
                         (decode_attention_study, "decode_attention_study")):
        record = json.loads((results / f"{name}.json").read_text())
        assert module.summarize(record["rows"]) == record["summary"], name


def _payload(times: dict[str, tuple[float, ...]]) -> dict:
    rows = [_row(method, rnd, ms) for method, per_round in times.items() for rnd, ms in enumerate(per_round)]
    return {"provenance": {"device": "a GPU", "commit": "abcdef0123", "date": "2026-01-02T00:00:00"}, "rounds": 2,
            "rows": rows, "summary": study.summarize(rows),
            "fixed_cost": [{"rung": "10_tma_store", "K": [512, 4096], "fixed_us": 11.0, "us_per_k_tile": 2.5}]}


def test_the_technique_table_takes_each_ratio_within_a_round_and_checks_the_header_range():
    from lab.families import get_family
    from lab.lessons import hopper_techniques as ht

    payload = _payload({"torch_mm": (0.20, 0.30), "cublaslt": (0.18, 0.40), "09_cluster_multicast": (0.22, 0.33),
                        "10_tma_store": (0.20, 0.30), "11_pingpong": (0.25, 0.25)})
    median, lowest = ht.same_round_ratio(payload, SHAPE, "10_tma_store", ("09_cluster_multicast",))
    assert abs(median - (0.22 / 0.20 + 0.33 / 0.30) / 2) < 1e-12 and abs(lowest - 0.33 / 0.30) < 1e-12
    text = ht.technique_table(payload, get_family("gemm_tc"))
    assert "REPLAYED" in text and "abcdef0" in text and "2026-01-02" in text
    ten = next(line for line in text.splitlines() if line.strip().startswith("10_tma_store"))
    # 1.10x rung 09 against the header's first range for rung 09, 1.02-1.05x: above it.
    assert "1.100x rung 09" in ten and "ABOVE" in ten
    eleven = next(line for line in text.splitlines() if line.strip().startswith("11_pingpong"))
    assert "rung 10" in eleven and "predicted" in eleven  # rung 11's header states its range against rung 10
    assert "11.0 us fixed + 2.500 us per k-tile (K = 4096: 171 us)" in ht.fixed_cost_table(payload)
    assert ht.technique_table(None).startswith("(no study record")


def test_the_technique_figure_has_a_bar_per_rung_and_shape_and_the_library_line():
    import matplotlib

    matplotlib.use("Agg")
    from lab.lessons import hopper_techniques as ht

    payload = _payload({"torch_mm": (0.20, 0.30), "06_persistent": (0.24, 0.33), "11_pingpong": (0.25, 0.25)})
    fig = ht.technique_figure(payload)
    ax = fig.axes[0]
    assert len(ax.patches) == 2  # one shape, two rungs
    assert any(abs(line.get_ydata()[0] - 1.0) < 1e-12 for line in ax.get_lines())
    assert ht.technique_figure(None) is None


def test_a_record_rebuilt_from_the_printed_log_keeps_every_printed_figure():
    log = ("clusters that fit: 66\n"
           "4096x4096x4096 TN float16   torch_mm                735.7 TFLOP/s  spread 0.009  "
           "x library 1.000 (min 0.999)  x 06 1.101\n"
           "4096x4096x4096 TN float16   11_pingpong             650.7 TFLOP/s  spread 0.002  "
           "x library 0.883 (min 0.881)  x 06 0.975\n"
           "2048x2048x2048 TN float16   10 C_PARTS=1 STAGES=3   574.2 TFLOP/s  spread 0.002  x library - (min -)"
           "  x 06 -\n"
           "11_pingpong: time = 9.3 us + 3.158 us per k-tile (M = N = 4096, K = [512, 1024, 2048, 4096])\n"
           "PASS something else\n")
    record = study.record_from_log(log, {"device": "a GPU"}, "the log")
    assert record["cluster_slots"] == 66 and record["rows"] == [] and record["rebuilt_from"] == "the log"
    methods = [(r["shape"]["M"], r["method"]) for r in record["summary"]]
    assert methods == [(4096, "torch_mm"), (4096, "11_pingpong"), (2048, "10 C_PARTS=1 STAGES=3")]
    ping = record["summary"][1]
    assert (ping["TFLOP/s"], ping["x_library"], ping["x_library_min"], ping["x_06"]) == (650.7, 0.883, 0.881, 0.975)
    assert record["summary"][2]["x_library"] is None
    assert record["fixed_cost"] == [{"rung": "11_pingpong", "M": 4096, "N": 4096, "K": [512, 1024, 2048, 4096],
                                     "fixed_us": 9.3, "us_per_k_tile": 3.158}]


def test_every_record_rebuilt_from_a_log_matches_that_log_and_the_lesson_reads_it():
    """A record rebuilt from a run's console log (its JSON lost) holds exactly what the log printed."""
    import json
    from pathlib import Path

    from lab.lessons import hopper_techniques as ht

    root = Path(__file__).resolve().parent.parent
    records = (json.loads(p.read_text()) for p in (root / "results" / "h200").glob("hopper_gemm_study*.json"))
    rebuilt = [r for r in records if r.get("rebuilt_from")]
    for record in rebuilt:
        again = study.record_from_log((root / record["rebuilt_from"]).read_text(), record["provenance"],
                                      record["rebuilt_from"])
        assert again["summary"] == record["summary"] and again["fixed_cost"] == record["fixed_cost"]
        assert "rebuilt from the run's console log" in ht.technique_table(record)
        ratio = ht.same_round_ratio(record, record["summary"][0]["shape"], "10_tma_store", ("09_cluster_multicast",))
        assert ratio is not None and ratio[0] == ratio[1]  # the ratio of the medians, for both ends


def test_the_wave_count_divides_the_tiles_of_each_study_shape_by_the_records_sms():
    from lab.families import get_family
    from lab.lessons import hopper_techniques as ht

    payload = _payload({"torch_mm": (0.2,)})
    payload["provenance"]["sm_count"] = 132
    payload["rows"][0]["shape"] = {"M": 2176, "N": 2176, "K": 4096, "layout": "TN", "dtype": "float16"}
    text = ht.wave_lines(payload, get_family("gemm_tc"))
    assert "128 x 256" in text and "153 tiles =  1.16 waves" in text  # 17 x 9 tiles
    assert ht.wave_lines(None, get_family("gemm_tc")).startswith("(no study record")
