"""CPU: the FP32 GEMM ladder's catalogue, compile reports for both VEC variants, and its launch plan."""

import pytest

from lab.core import build
from lab.families import families, get_family
from lab.families.gemm import GemmFp32Family, dynamic_smem_bytes

GEMM = GemmFp32Family()
ARCHS = (75, 80, 86, 89, 90)


def test_gemm_is_in_the_catalogue():
    assert "gemm_fp32" in families()
    assert get_family("gemm_fp32").metric == "TFLOP/s" and "UNVERIFIED" not in get_family("gemm_fp32").title


def test_the_ladder_has_the_eight_rungs_in_order():
    assert [r.number for r in GEMM.rungs] == list(range(1, 9))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("rung", [r for r in GEMM.rungs if r.key in GEMM.VEC_RUNGS], ids=lambda r: r.key)
@pytest.mark.parametrize("vec", [1, 4])
def test_vectorized_rungs_compile_without_spills_for_both_vec_variants(rung, arch, vec):
    report = build.compile_report(rung.spec.with_knobs(VEC=vec), arch)
    assert report.spill_store_bytes == 0 and report.spill_load_bytes == 0 and report.stack_frame_bytes == 0
    if vec == 4 and report.sass_available:
        assert any(k.startswith("LDG.128") or k.startswith("LDGSTS") for k in report.instructions), report.instructions


def test_the_multistage_rung_uses_async_copies_on_ampere_and_later():
    rung = GEMM.rung("08")
    report = build.compile_report(rung.spec.with_knobs(VEC=4), 80)
    if report.sass_available:
        assert "LDGSTS" in report.instructions
    assert dynamic_smem_bytes(rung) > 0


def test_static_shared_memory_stays_under_the_default_limit():
    for rung in GEMM.rungs:
        assert build.compile_report(rung.spec, 90).smem_static_bytes <= 48 * 1024


def test_shape_families_cover_the_issue():
    cases = GEMM.check_cases()
    assert any(1 in (c["M"], c["N"], c["K"]) for c in cases)
    assert any(c.get("pad") for c in cases) and any(c.get("beta") for c in cases)
    assert any(c["K"] > 16 * max(c["M"], c["N"]) for c in cases)
    assert {4095, 4096, 4097, 8192} <= {p["M"] for p in GEMM.headline_params()}
    tail = [p["N"] for p in GEMM.tail_params()]
    assert tail == list(range(tail[0], tail[-1] + 1)) and tail[0] < 4096 < 4224 < tail[-1]


def test_slow_rungs_leave_the_large_sweep_sizes_and_a_quick_plan_drops_them_sooner():
    keys = lambda rungs: [r.number for r in rungs]  # noqa: E731
    big, mid = {"M": 8192, "N": 8192, "K": 8192}, {"M": 3072, "N": 3072, "K": 3072}
    assert keys(GEMM.rungs_for("headline", big)) == list(range(1, 9))  # the ladder bars need every rung
    assert keys(GEMM.rungs_for("sweep", big)) == list(range(4, 9))
    assert keys(GEMM.rungs_for("sweep", mid)) == list(range(1, 9))
    assert keys(GEMM.rungs_for("sweep", mid, quick=True)) == list(range(4, 9))
    assert keys(GEMM.rungs_for("sweep", {"M": 2048, "N": 2048, "K": 2048}, quick=True)) == list(range(1, 9))
    assert keys(GEMM.rungs_for("tail", {"M": 4096, "N": 4097, "K": 4096})) == list(range(4, 9))


def test_bench_plan_steps_override_the_quick_strides():
    from lab.measure import bench

    assert bench.BenchPlan(quick=True).tail_stride() == 8 and bench.BenchPlan().tail_stride() == 1
    assert bench.BenchPlan(quick=True, sweep_step=1).sweep_stride() == 1
    plan = bench.BenchPlan(kinds=("tail",), tail_step=3)
    assert bench.job_count(GEMM, plan) == len(GEMM.tail_params()[::3])

