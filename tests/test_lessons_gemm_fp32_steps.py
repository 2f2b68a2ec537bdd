"""lab.lessons.gemm_fp32_steps on the CPU: a NumPy GEMM 'family' stands in for the GPU one, so the launch, the float64
check and the replayed bound margins are exercised without a GPU (the timing needs CUDA events: GPU only). Also
lab.lessons.knob_tuning's helpers for the notebook's tuning loop."""

import json

import numpy as np

from lab.core.build import KernelSpec
from lab.core.ladder import Family, Problem, Rung
from lab.lessons import gemm_fp32_steps as steps
from lab.lessons import knob_tuning


class ToyGemm(Family):
    name = "toy_gemm"
    array_module = np
    ceiling_title = "numpy"
    metric = "TFLOP/s"

    def __init__(self, error: float = 0.0, skip_last: bool = False):
        self.error, self.skip_last = error, skip_last
        self.rungs = (Rung("toy_gemm", "01_toy", KernelSpec("toy.cu", "toy"), "toy"),)

    def make_problem(self, seed=0, dist="normal", M=4, N=5, K=3, **_):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        return Problem(f"M={M} N={N} K={K}", {"A": [a], "B": [b]}, (M, N), 0, params={"K": K}, flops=2 * M * N * K)

    def reference(self, p):
        return p.inputs["A"][0].astype(np.float64) @ p.inputs["B"][0].astype(np.float64)

    def error_bound(self, p, ref):
        from lab.measure.bounds import matmul_bound

        return matmul_bound(p.inputs["A"][0].astype(np.float64), p.inputs["B"][0].astype(np.float64), ref)

    def launch(self, rung, p, out, set_index=0):
        value = p.inputs["A"][0] @ p.inputs["B"][0]
        out[...] = value * (1 + self.error)
        if self.skip_last:
            out[-1, -1] = np.nan


def test_launch_once_poisons_then_launches_and_the_check_passes():
    problem, out = steps.launch_once(ToyGemm(), "01", seed=1, M=7, N=9, K=5)
    assert out.shape == (7, 9) and not np.isnan(out).any()
    text = steps.float64_check(ToyGemm(), problem, out)
    assert "63 elements, 0 left NaN" in text and text.endswith("PASSED")


def test_the_check_fails_a_wrong_value_and_an_unwritten_element():
    problem, out = steps.launch_once(ToyGemm(error=1e-2), "01", M=7, N=9, K=5)
    assert steps.float64_check(ToyGemm(), problem, out).endswith("FAILED")
    problem, out = steps.launch_once(ToyGemm(skip_last=True), "01", M=7, N=9, K=5)
    text = steps.float64_check(ToyGemm(), problem, out)
    assert "1 left NaN" in text and text.endswith("FAILED")


def test_bound_margin_reads_the_recorded_margins_or_says_they_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert "no recorded bound margins" in steps.bound_margin("gemm_fp32", "03")
    payload = {"provenance": {"device": "TEST", "arch": "sm_90", "date": "2000-01-01"}, "seeds": [1, 2],
               "rungs": [{"rung": "03_smem_tiled", "checks": 10, "failed": [], "worst_ratio": 0.25,
                          "worst_case": "M=5 N=5 K=5", "worst_normwise": 1e-6}]}
    (tmp_path / "gemm_fp32_bounds.json").write_text(json.dumps(payload))
    text = steps.bound_margin("gemm_fp32", "03")
    assert "ran 10 checks" in text and "2 seeds" in text and "0 failed" in text and "0.25 of its bound" in text
    assert "holds no bound margins for 05_register_tile_2d" in steps.bound_margin("gemm_fp32", "05")


def test_with_knobs_derives_threads_from_the_warp_tiles():
    from lab.families import get_family

    base = get_family("gemm_fp32").rung("08")
    wide = knob_tuning.with_knobs(base, BM=128, MINB=2)
    knobs = dict(wide.spec.knobs)
    assert knobs["BM"] == 128 and knobs["THREADS"] == 32 * (128 // knobs["WM"]) * (knobs["BN"] // knobs["WN"])
    assert dict(knob_tuning.with_knobs(base, STAGES=2).spec.knobs)["THREADS"] == dict(base.spec.knobs)["THREADS"]
    assert knob_tuning.changed_knobs(dict(wide.spec.knobs), dict(base.spec.knobs)) == "BM=128 MINB=2"
    assert knob_tuning.changed_knobs(dict(base.spec.knobs), dict(base.spec.knobs)) == "the defaults"


def test_round_table_marks_the_setting_the_loop_kept():
    base = {"BM": 64, "BN": 128, "STAGES": 3, "THREADS": 128}
    row = lambda knobs, r: {"rung": "08_multistage", "knobs": knobs, "compile": {"registers": 128},  # noqa: E731
                            "tflops": {"4096": 50 * r}, "ratio": {"4096": r}}
    payload = {"rounds": [{"round": 1, "provenance": {"commit": "abcdef0"}, "rows": [
        row(base, 0.90), row(dict(base, STAGES=4), 0.93), {"rung": "08_multistage", "knobs": base, "error": "x"}]}]}
    text = knob_tuning.round_table(payload, 1, "08_multistage", base)
    kept = [line for line in text.splitlines() if "<- kept" in line]
    assert len(kept) == 1 and "STAGES=4" in kept[0] and "0.930" in kept[0]
    assert "holds no measured settings" in knob_tuning.round_table(payload, 2, "08_multistage", base)
    assert "no tuning records" in knob_tuning.round_table(None, 1, "08_multistage", base)
