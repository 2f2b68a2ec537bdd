"""lab.lessons.fusion (a package: notebooks 06 and 07) and its figures (lab.lessons.plots.fusion), on synthetic records.
CPU only.

The writers below (write_synthetic_fusion) also feed tests/test_notebooks.py's synthetic replay: made-up values with
the shape of real records (lab bench FAMILY --json, lab study checklist), never written under results/.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from lab.core.build import REPO_ROOT
from lab.families import epilogue
from lab.lessons import Mode, plots
from lab.lessons import fusion as lesson
from lab.measure.records import Record, RecordSet

PROVENANCE = {"device": "SYNTHETIC TEST DATA (not a measurement)", "arch": "sm_90", "sm_count": 132,
              "l2_bytes": 50 * 2**20, "date": "2000-01-01T00:00:00+00:00", "commit": "synthetic"}
REPLAY = Mode(False, "no GPU here (test)")

# Time of each target over the plain GEMM's, and each row ladder's fraction of the device copy by rung number:
# shapes of results, not results.
EPILOGUE_TIMES = {"plain_gemm": 1.0, "06_persistent": 1.03, "08_multistage": 1.02, "cupy_fused": 1.25,
                  "cupy_ops": 1.6}
ROW_FRACTIONS = (0.4, 0.45, 0.7, 0.86, 0.93)  # the last rungs of a shorter ladder take the last ones


# ----------------------------------------------------------------------------------------------
# Synthetic records
# ----------------------------------------------------------------------------------------------

def _gemm_params(name: str, shape: dict) -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]
    params = {"M": M, "N": N, "K": K, "alpha": 1.0, "beta": 0.0, "pad": 0, "lda": K}
    if name == "gemm_tc_epilogue":
        params |= {"ldb": K if shape.get("layout", "TN") == "TN" else N, "ldc": N, "layout": shape["layout"],
                   "dtype": shape["dtype"]}
    else:
        params |= {"ldb": N, "ldc": N}
    return params | {"epilogue": shape["epilogue"], "out": shape.get("out", "same"),
                     "q_per_row": shape.get("q_per_row", False), "clamp": [-2.0, 3.0]}


def synthetic_epilogue_records(name: str, rng: random.Random, times: dict | None = None) -> list[dict]:
    """Headline and sweep records of an epilogue family: the plain rung (the ceiling), the fused rung and, for the
    tensor-core family, the two library paths, each `times[target]` times the plain GEMM's time."""
    from lab.families import get_family

    fam = get_family(name)
    times = times or EPILOGUE_TIMES
    targets = [fam.ceiling_name, fam.rungs[0].key] + list(fam.baselines())
    jobs = [("headline", p, "cold") for p in fam.headline_params()]
    jobs += [("sweep", p, l2) for p in fam.sweep_params() for l2 in ("cold", "warm")]
    out = []
    for kind, shape, l2 in jobs:
        params = _gemm_params(name, shape)
        flops = 2 * params["M"] * params["N"] * params["K"]
        side = (flops / 2) ** (1 / 3)
        peak = 600.0 if name == "gemm_tc_epilogue" else 40.0
        plain_ms = flops / (peak * side ** 3 / (side ** 3 + 1024 ** 3) * 1e12) * 1e3
        ceiling = flops / (plain_ms * 1e-3) / 1e12
        for target in targets:
            ms = plain_ms * times[target] * (1.0 if target == fam.ceiling_name else rng.uniform(0.995, 1.005))
            value = flops / (ms * 1e-3) / 1e12
            out.append({"family": name, "rung": target, "kind": kind, "params": params,
                        "bytes_moved": fam.min_dram_bytes(params), "l2": l2, "median_ms": ms, "p10_ms": ms * 0.99,
                        "p90_ms": ms * 1.02, "reps": 20, "metric": "TFLOP/s", "value": value,
                        "ceiling": fam.ceiling_name, "ceiling_value": ceiling, "extra": {}})
    return out


def synthetic_row_records(name: str, rng: random.Random) -> list[dict]:
    """Headline and tail records of a row ladder: the device copy, the composed baseline and every rung, a fixed
    fraction of the copy per rung (lower at n < 1024, a sawtooth at n off a multiple of 8 on the tail)."""
    from lab.families import get_family

    fam = get_family(name)
    jobs = [("headline", p, "cold") for p in fam.headline_params()] + [("tail", p, "warm") for p in fam.tail_params()]
    out = []
    for kind, params, l2 in jobs:
        item = 4 if params["dtype"] == "float32" else 2
        bytes_moved = 2 * params["rows"] * params["n"] * item
        ceiling = 4000.0 * rng.uniform(0.99, 1.01)
        targets = [(fam.ceiling_name, 1.0, {}), (lesson.COMPOSED, 0.4, {})]
        for i, r in enumerate(fam.rungs):
            fraction = ROW_FRACTIONS[min(i, len(ROW_FRACTIONS) - 1) + len(ROW_FRACTIONS) - len(fam.rungs)]
            fraction *= 0.8 if params["n"] < 1024 else 1.0
            fraction *= 0.9 if kind == "tail" and params["n"] % 8 else 1.0
            targets.append((r.key, fraction, {"path": "warp per row" if params["n"] <= 1024 else "block per row"}))
        for target, fraction, extra in targets:
            value = ceiling * fraction * (1.0 if target == fam.ceiling_name else rng.uniform(0.99, 1.0))
            ms = bytes_moved / (value * 1e9) * 1e3
            out.append({"family": name, "rung": target, "kind": kind, "params": params, "bytes_moved": bytes_moved,
                        "l2": l2, "median_ms": ms, "p10_ms": ms * 0.99, "p90_ms": ms * 1.02, "reps": 50,
                        "metric": "GB/s", "value": value, "ceiling": fam.ceiling_name, "ceiling_value": ceiling,
                        "extra": extra})
    return out


def _timing(ms: float) -> dict:
    return {"median_ms": ms, "p10_ms": ms * 0.99, "p90_ms": ms * 1.01, "min_ms": ms * 0.98, "reps": 20, "l2": "cold"}


def synthetic_checklist(provenance: dict, lab_x: float = 1.03) -> dict:
    """A checklist record (lab.studies.checklist.measure_levels' layout) at 4096 and 8192: made-up times, kernel counts,
    DRAM bytes and lines of code."""
    from lab.studies import checklist

    def level(x: float, gemm_ms: float, kernels: int, bytes_x: float, minimum: int) -> dict:
        return {"status": "ok", "check": {"passed": True}, "timing": _timing(x * gemm_ms), "x_gemm": x,
                "kernels": {"kernels": kernels}, "details": {}, "dram": {"bytes": bytes_x * minimum}}

    sizes = []
    for n, gemm_ms in ((4096, 0.25), (8192, 1.9)):
        minimum = checklist.min_dram_bytes(n, n, n)
        gemm = {"timing": _timing(gemm_ms), "kernels": {"kernels": 1}, "dram": {"bytes": 1.02 * minimum}}
        sizes.append({"M": n, "N": n, "K": n, "min_dram_bytes": minimum, "gemm": gemm,
                      "levels": {"library": level(2.1, gemm_ms, 11, 4.5, minimum),
                                 "graph_fusion": level(1.3, gemm_ms, 2, 1.7, minimum),
                                 "triton": level(1.15, gemm_ms, 1, 1.05, minimum),
                                 "lab_fused": level(lab_x, gemm_ms, 1, 1.03, minimum)}})

    def source(lines: int) -> dict:
        return {"lines": lines, "complete": True, "pieces": [], "missing": []}

    levels = [{"name": n, "title": n, "status": "ok", "reason": "", "check": {"passed": True}, "source": source(k)}
              for n, k in (("library", 4), ("graph_fusion", 14), ("triton", 60), ("lab_fused", 250))]
    return {"schema": 1, "study": "checklist", "operation": checklist.OPERATION, "provenance": provenance,
            "l2": "cold", "levels": levels, "sizes": sizes}


def write_synthetic_fusion(directory: Path, provenance: dict = PROVENANCE) -> list[str]:
    """Synthetic records of every family notebooks 06 and 07 replay that lab.families has, and checklist.json, in
    `directory` (never results/); returns the names written."""
    from lab.families import families

    directory = Path(directory)
    rng = random.Random(1)
    known = families()
    written = []
    for name in lesson.EPILOGUE_FAMILIES + lesson.ROW_FAMILIES:
        if name not in known:
            continue
        recs = (synthetic_epilogue_records(name, rng) if name in lesson.EPILOGUE_FAMILIES
                else synthetic_row_records(name, rng))
        (directory / f"{name}.json").write_text(json.dumps({"schema": 1, "provenance": provenance, "records": recs}))
        written.append(name)
    (directory / "checklist.json").write_text(json.dumps(synthetic_checklist(provenance)))
    return written + ["checklist"]


@pytest.fixture
def replay_dir(tmp_path, monkeypatch):
    write_synthetic_fusion(tmp_path)
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


@pytest.fixture
def empty_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


def _records(name: str, rng_seed: int = 0, times: dict | None = None) -> RecordSet:
    recs = (synthetic_epilogue_records(name, random.Random(rng_seed), times) if name in lesson.EPILOGUE_FAMILIES
            else synthetic_row_records(name, random.Random(rng_seed)))
    return RecordSet(PROVENANCE, [Record(**r) for r in recs], replayed=True)


# ----------------------------------------------------------------------------------------------
# Loading, provenance, missing records
# ----------------------------------------------------------------------------------------------

def test_records_load_replayed_with_their_provenance(replay_dir):
    rs = lesson.replayed("gemm_tc_epilogue")
    assert rs is not None and rs.replayed
    assert "REPLAYED" in lesson.status(rs, "gemm_tc_epilogue")
    record = lesson.load_checklist()
    assert record["replayed"] and "REPLAYED from SYNTHETIC TEST DATA" in lesson.checklist_status(record)
    text = lesson.banner(REPLAY, lesson.EPILOGUE_FAMILIES, checklist=True)
    assert "REPLAY MODE" in text and text.count("REPLAYED from SYNTHETIC TEST DATA") == 3
    assert "NO RECORDED RESULTS" not in text


def test_missing_records_say_so_and_every_view_copes(empty_dir):
    assert lesson.replayed("gemm_tc_epilogue") is None and lesson.load_checklist() is None
    text = lesson.banner(REPLAY, lesson.EPILOGUE_FAMILIES + ("softmax",), checklist=True)
    assert text.count("NO RECORDED RESULTS") == 4 and "lab bench softmax --json" in text
    assert "lab study checklist" in text
    for out in (lesson.epilogue_table(None, "gemm_tc_epilogue").text, lesson.epilogue_targets(None, None),
                lesson.fused_prediction_check(None, "gemm_tc_epilogue"), lesson.bandwidth_table(None, "softmax").text,
                lesson.copy_targets(None, "softmax"), lesson.tail_summary(None, "softmax"),
                lesson.unfused_cost(None), lesson.sweep_overhead(None, "gemm_tc_epilogue")):
        assert "NO RECORDS for" in out
    for out in (lesson.checklist_table(None).text, lesson.checklist_bytes(None), lesson.checklist_verdicts(None)):
        assert "NO RECORDS for checklist" in out
    assert "NO RECORDS for softmax" in lesson.row_prediction_check(None, "softmax", "04")


def test_unreadable_checklist_is_treated_as_missing(empty_dir):
    (empty_dir / "checklist.json").write_text("{not json")
    assert lesson.load_checklist() is None
    (empty_dir / "checklist.json").write_text(json.dumps({"provenance": {}, "levels": []}))  # no sizes
    assert lesson.load_checklist() is None


def test_a_family_not_in_the_catalogue_is_named_not_failed(monkeypatch, empty_dir):
    import sys

    for name in [n for n in sys.modules if n.startswith("lab.lessons.fusion.")]:  # each module's own binding
        if hasattr(sys.modules[name], "ladder"):
            monkeypatch.setattr(sys.modules[name], "ladder", lambda name: None)
    assert "NOT IN lab.families" in lesson.status(None, "rmsnorm")
    assert "NOT IN lab.families" in lesson.banner(REPLAY, ("rmsnorm",))
    assert "NOT IN lab.families" in lesson.rung_headers("rmsnorm").text
    assert "NOT IN lab.families" in lesson.copy_targets(None, "rmsnorm")


def test_live_notes_in_replay_measure_nothing():
    assert lesson.live_records(REPLAY, "softmax") is None
    assert lesson.live_refusal(REPLAY, "gemm_tc_epilogue") is None
    assert "REPLAY: nothing is measured here" in lesson.live_note(None, REPLAY, "softmax")
    plan = lesson.live_plan_text(lesson.EPILOGUE_FAMILIES + ("softmax",))
    assert "1 headline problem(s)" in plan and "tail lengths" in plan and "checklist: NOT measured live" in plan


# ----------------------------------------------------------------------------------------------
# Targets: the sentences follow the numbers
# ----------------------------------------------------------------------------------------------

def test_meets_flips_with_the_value():
    assert lesson.meets(1.4, 1.35).endswith(": met") and "NOT met" in lesson.meets(1.3, 1.35)
    assert lesson.meets(1.04, 1.05, at_most=True).endswith(": met")
    assert "NOT met" in lesson.meets(1.06, 1.05, at_most=True)


def test_epilogue_targets_follow_the_records():
    good = lesson.epilogue_targets(_records("gemm_tc_epilogue"), _records("gemm_fp32_epilogue"))
    assert "NOT met" not in good
    assert good.count("fused / plain = ") == 6  # 4096 and 8192, fp16 and int8 outputs (tc); fp32 at both
    assert "cupy_ops / fused = 1.5" in good and "target >= 1.35: met" in good
    slow = dict(EPILOGUE_TIMES, **{"06_persistent": 1.10, "cupy_ops": 1.3})
    bad = lesson.epilogue_targets(_records("gemm_tc_epilogue", times=slow), None)
    assert "fused / plain = 1.1" in bad and "target <= 1.05: NOT met" in bad and "target >= 1.35: NOT met" in bad
    assert "NO RECORDS for gemm_fp32_epilogue" in bad


def test_targets_without_the_sizes_cannot_be_judged():
    rs = _records("gemm_tc_epilogue")
    rs = RecordSet(rs.provenance, [r for r in rs.records if r.params["M"] != 8192 and r.rung != "cupy_ops"], True)
    text = lesson.epilogue_targets(rs)
    assert "8192^3: no fused and plain records" in text and "the library target cannot be judged" in text


def test_copy_targets_flip_with_the_fraction():
    rs = _records("softmax")
    text = lesson.copy_targets(rs, "softmax")
    last = lesson.ladder("softmax").rungs[-1].key
    mine = [r for r in rs.where(kind="headline", rung=last) if r.params["n"] >= 1024]
    assert f"met at {len(mine)} of {len(mine)} problems" in text and "NOT met" not in text
    assert "the cupy_composed baseline" in text
    lowered = [Record(**(r.as_dict() | {"value": r.value * 0.9})) if r.rung == last else r for r in rs.records]
    text = lesson.copy_targets(RecordSet(rs.provenance, lowered, True), "softmax")
    assert "NOT met" in text and f"met at 0 of {len(mine)} problems" in text


# ----------------------------------------------------------------------------------------------
# Tables from synthetic records
# ----------------------------------------------------------------------------------------------

def test_epilogue_table_rows_and_ratios():
    rs = _records("gemm_tc_epilogue")
    rows = lesson.epilogue_rows(rs)
    assert len(rows) == 4 and all(math.isclose(r.fused_over_plain, 1.03, rel_tol=0.01) for r in rows)
    assert all(math.isclose(r.speedup(r.ops_ms), 1.6 / 1.03, rel_tol=0.02) for r in rows)
    text = lesson.epilogue_table(rs, "gemm_tc_epilogue").text
    assert "4096^3 float16 TN bias+gelu_tanh -> int8/row" in text and text.count("\n| ") == 5
    assert "measured int8 time" not in text
    assert "fused int8 time / fused fp16 time" in lesson.int8_against_fp16(rs)
    sweep = lesson.sweep_overhead(rs, "gemm_tc_epilogue")
    assert "cold L2: 1024^3" in sweep and "warm L2" in sweep


def test_fused_prediction_is_the_headers_and_checked_against_the_records():
    text = lesson.fused_prediction("gemm_tc_epilogue")
    assert text.startswith("kernels/gemm_tc/06_persistent.cu") and "Fused epilogue prediction" in text
    ranges = lesson.side_ranges(text)
    assert [r[2] for r in ranges] == [4096, 8192, 4096]  # the first prediction, then the one after the first run
    check = lesson.fused_prediction_check(_records("gemm_tc_epilogue"), "gemm_tc_epilogue")
    assert check.count("measured 1.0") == 3
    for (lo, hi, side), line in zip(ranges, check.splitlines()[1:], strict=True):
        x = float(line.split("measured ")[1].split("x")[0])
        assert line.startswith(f"  at {side}^3") and ("inside" if lo <= x <= hi else "ABOVE" if x > hi else
                                                       "BELOW") in line
    assert "states no prediction" in lesson.fused_prediction("gemm_fp32_epilogue")


def test_side_ranges_parse_sizes():
    assert lesson.side_ranges("So 1.02-1.05x the plain time at 4096^3, 1.01-1.03x at 8192^3; int8") == [
        (1.02, 1.05, 4096), (1.01, 1.03, 8192)]


@pytest.mark.parametrize(("text", "expected"), [
    ("~0.45-0.65x of copy at n = 1024-4096, ~0.35-0.5x at n = 32768 (a 64-128 KiB row per block).",
     [(0.45, 0.65, "ceiling", ((1024, 4096),)), (0.35, 0.5, "ceiling", ((32768, 32768),))]),
    ("~0.85-0.95x of copy at n = 1024 (warp path) and n = 4096 (block path), both dtypes; ~0.8-0.9x at n = 32768 "
     "(big blocks); n = 128 and 512 lower (~0.6-0.8x: few vectors). Rows past 65536 fp16 read x twice: ~0.6-0.75x.",
     [(0.85, 0.95, "ceiling", ((1024, 1024), (4096, 4096))), (0.8, 0.9, "ceiling", ((32768, 32768),)),
      (0.6, 0.8, "ceiling", ((128, 128), (512, 512))), (0.6, 0.75, "ceiling", ((65537, math.inf),))]),
    ("0.75-0.9x of the device copy for 1024 <= n <= 8192 (1.3-2x rung 01); n = 512 stays low.",
     [(0.75, 0.9, "ceiling", ((1024, 8192),)), (1.3, 2.0, "01", ((1024, 8192),))]),
    ("0.9-0.97x of the device copy for n >= 1024, both norms, 0.8-0.95x at n = 512; +5-30% over rung 02 at "
     "n = 1024 and 1.3-1.8x rung 02 at n = 32768, level with it (within 5%) at n = 4096-8192.",
     [(0.9, 0.97, "ceiling", ((1024, math.inf),)), (0.8, 0.95, "ceiling", ((512, 512),)),
      (1.05, 1.3, "02", ((1024, 1024),)), (1.3, 1.8, "02", ((32768, 32768),))]),
])
def test_row_claims_name_the_row_lengths_each_range_is_about(text, expected):
    got = [(c.lo, c.hi, c.against, c.ns) for c in lesson.row_claims(text)]
    assert len(got) == len(expected)
    for (lo, hi, against, ns), (elo, ehi, eagainst, ens) in zip(got, expected, strict=True):
        assert math.isclose(lo, elo) and math.isclose(hi, ehi) and against == eagainst and ns == ens


def test_row_prediction_check_judges_each_range():
    rs = _records("softmax")
    text = lesson.row_prediction_check(rs, "softmax", "04")
    assert text.startswith("04_specialized: Prediction")
    assert "inside the range" in text or "BELOW the range" in text or "ABOVE the range" in text
    for line in text.splitlines()[1:]:
        if "measured" in line:
            value = float(line.split("measured ")[1].split()[0])
            lo, hi = (float(x) for x in line.split("x of")[0].split()[-1].split("-"))
            verdict = "inside" if lo <= value <= hi else "BELOW" if value < lo else "ABOVE"
            assert verdict in line.split("-> ")[1]
    assert lesson.ladder_predictions(rs, "softmax").count(": Prediction") == len(lesson.ladder("softmax").rungs)
    assert "Definitions" not in lesson.prediction_text("softmax", "01")


def test_bandwidth_table_has_every_rung_and_the_baseline():
    rs = _records("softmax")
    text = lesson.bandwidth_table(rs, "softmax").text
    fam = lesson.ladder("softmax")
    header = next(line for line in text.splitlines() if line.startswith("| problem"))
    assert all(r.key in header for r in fam.rungs) and "cupy_composed" in header
    assert text.count("\n| n=") == len(fam.headline_params())
    assert "warp per row" in text


def test_tail_summary_shows_the_sawtooth_and_paths():
    text = lesson.tail_summary(_records("softmax"), "softmax")
    assert "tail sizes by n mod 8" in text and "launch paths, tail records" in text


def test_checklist_views(replay_dir):
    record = lesson.load_checklist()
    table = lesson.checklist_table(record).text
    assert table.count("\n| 4096x4096x4096 |") == 5 and "lab_fused" in table
    text = lesson.checklist_bytes(record)
    assert "x the minimum" in text and "library / lab_fused:" in text
    verdicts = lesson.checklist_verdicts(record)
    assert verdicts.startswith("- ") and "the library path launched 11 kernels" in verdicts


def test_unfused_cost_needs_copy_records_of_the_same_device(empty_dir):
    rs = _records("gemm_tc_epilogue")
    assert "no copy records made on" in lesson.unfused_cost(rs)
    copy = {"schema": 1, "provenance": PROVENANCE, "records": [
        {"family": "copy", "rung": "cupy_device_copy", "kind": "headline", "params": {"n": 1 << 28},
         "bytes_moved": 8 << 28, "l2": "cold", "median_ms": 0.5, "p10_ms": 0.5, "p90_ms": 0.5, "reps": 10,
         "metric": "GB/s", "value": 4000.0, "ceiling": "cupy_device_copy", "ceiling_value": 4000.0, "extra": {}}]}
    (empty_dir / "copy.json").write_text(json.dumps(copy))
    text = lesson.unfused_cost(rs)
    assert "one extra pass over C" in text and text.count("x the plain time, at best") == 2


# ----------------------------------------------------------------------------------------------
# Sources, compile reports, CPU demonstrations
# ----------------------------------------------------------------------------------------------

def test_ops_table_agrees_with_lab_epilogue():
    text = lesson.ops_table().text
    assert "disagrees" not in text
    assert all(f"`{op}`" in text for op in epilogue.OPS) and all(f"`{out}`" in text for out in epilogue.OUTS)


def test_op_and_function_sources_come_from_the_header():
    assert "lab_tanh_approx" in lesson.op_source("gelu_tanh").text
    assert "v + e.bias" in lesson.op_source("bias").text
    assert "no op" in lesson.op_source("nothing").text
    chain = lesson.function_source("lab_epi_chain").text
    assert chain.count("lab_epi_op<OP") == 4 and "template <int OP1" in chain
    assert "cvt.rni.sat.s8.f32" in lesson.function_source("lab_quantize_int8").text
    assert lesson.header_behaviour().startswith("Defined behaviour")


def test_quantizer_demo_is_lab_epilogues_arithmetic():
    text = lesson.quantizer_demo().text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["2.5"].split(" | ")[1] == "2" and rows["127.5"].split(" | ")[1] == "127"
    assert rows["nan"].split(" | ")[1:3] == ["0", "0x7F"]
    assert rows["inf"].split(" | ")[3] == str(int(epilogue.E4M3_MAX))


def test_check_coverage_and_bounds_doc_are_computed():
    text = lesson.check_coverage("gemm_tc_epilogue")
    cases = lesson.ladder("gemm_tc_epilogue").check_cases()
    assert text.startswith(f"gemm_tc_epilogue: {len(cases)} check cases") and "int8/row" in text
    assert lesson.bounds_doc().startswith("Bounds.")


def test_traffic_model_is_the_family_minimum_plus_one_pass():
    text = lesson.traffic_model((4096,))
    fam = lesson.ladder("gemm_tc_epilogue")
    fused = fam.min_dram_bytes({"M": 4096, "N": 4096, "K": 4096, "epilogue": "bias+gelu_tanh"})
    assert f"{(fused + 4 * 4096 ** 2) / fused:.2f}" in text


@pytest.mark.slow
def test_compile_builds_of_the_plain_and_fused_rung():
    builds = lesson.compile_builds("gemm_tc_epilogue", 90, [("bias+gelu_tanh", "same", False)])
    assert [b.label for b in builds] == ["plain (no epilogue)", "fused: bias+gelu_tanh"]
    assert "fused: bias+gelu_tanh" in lesson.compile_table(builds).text
    delta = lesson.compile_delta(builds)
    assert delta.startswith("fused: bias+gelu_tanh: registers")


def test_numerics_demos():
    assert "relative difference" in lesson.online_softmax_demo(n=256)
    m, d = lesson.online_softmax(np.array([1.0, 3.0, 2.0], np.float32))
    assert m == 3.0 and math.isclose(d, 1 + math.exp(-2) + math.exp(-1), rel_tol=1e-6)
    assert "fp16's largest finite value" in lesson.fp16_statistics_demo(n=512)
    text = lesson.variance_demo()
    errors = [float(line.split("relative error ")[1].rstrip(")")) for line in text.splitlines()[1:]]
    assert errors[0] > 10 * max(errors[1:])  # E[x^2] - E[x]^2 loses the variance; the other two keep it
    rows = lesson.special_rows_demo().text
    line = next(r for r in rows.splitlines() if r.startswith("| all -inf |"))
    assert line.split(" | ")[1] == "all NaN" and line.split(" | ")[2].startswith("0 0 0 0")


def test_exercise_pointer_follows_the_folders():
    root = Path(REPO_ROOT) / "exercises"
    text = lesson.exercise_pointer("08", lesson.EPILOGUE_FAMILIES)
    assert ("is coming" in text) == (not any(root.glob("08_*")))
    assert "exercises/06_tile_order" in lesson.exercise_pointer(None, ("gemm_tc",))
    assert lesson.exercise_pointer(None, ("no_such_family",)).startswith("No exercise on")


# ----------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------

def test_fusion_figures_draw_from_records_and_decline_without_them(replay_dir):
    import matplotlib.pyplot as plt

    rs = _records("gemm_tc_epilogue")
    for fig in (plots.epilogue_times(rs, "gemm_tc_epilogue", target=1.05),
                plots.checklist_levels(lesson.load_checklist()),
                plots.row_ladder(_records("softmax"), "softmax", target=0.9, min_n=1024),
                plots.tail_by_base(_records("softmax"), "softmax")):
        assert fig is not None
        plt.close(fig)
    empty = RecordSet(PROVENANCE, [], True)
    assert plots.epilogue_times(empty, "gemm_tc_epilogue") is None
    assert plots.row_ladder(empty, "softmax") is None and plots.tail_by_base(empty, "softmax") is None
    assert plots.checklist_levels({"sizes": []}) is None


def test_tail_panels_split_at_the_gaps():
    assert plots.fusion._clusters([1016, 1017, 1018, 2040, 2041, 4090]) == [[1016, 1017, 1018], [2040, 2041], [4090]]


def test_check_status_is_the_family_modules_own_line():
    text = lesson.check_status("softmax")
    assert "tests/test_gpu_softmax.py passed" in text and "\n" not in text and "STATUS" not in text
    assert "NOT IN lab.families" in lesson.check_status("no_such_family")
