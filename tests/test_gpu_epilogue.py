"""GPU: the fused-epilogue GEMMs on every check case, the quantizers bit for bit on chosen values through the apply
kernel (the very store the GEMMs run), and the library baselines against the same reference."""

from __future__ import annotations

import numpy as np
import pytest

from lab.families import epilogue as E
from lab.families import get_family

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["gemm_tc_epilogue", "gemm_fp32_epilogue"])
def test_fused_rung_correct_on_every_case(name):
    from lab.measure.verify import check_rung

    fam = get_family(name)
    failures = [r.line() for r in check_rung(fam, fam.rungs[0], seed=21) if not r.passed]
    assert not failures, "\n".join(failures)


def test_rung_10_with_the_chain_is_correct_on_every_case():
    """The candidate rung (rung 10, the chain before its TMA store) on every check case of the family: half outputs
    through the TMA store, quantized outputs, beta != 0 and unaligned C through its register stores."""
    from lab.measure.verify import check_rung

    fam = get_family("gemm_tc_epilogue")
    failures = [r.line() for r in check_rung(fam, fam.rung("10_tma_store"), seed=21) if not r.passed]
    assert not failures, "\n".join(failures)


# Shapes whose C the TMA store takes (N a multiple of 8, C 16-byte aligned, beta = 0), with M and K tails, for each
# kind of op: per column, per row, per element (the residual), activations and the clamp.
TMA_CHAINS = ("bias+gelu_tanh", "bias+gelu_tanh+residual", "row_scale+col_scale", "col_scale+silu+clamp", "gelu_erf")
TMA_SHAPES = ({"M": 129, "N": 264, "K": 65, "layout": "TN", "dtype": "float16", "alpha": -1.25},
              {"M": 300, "N": 512, "K": 200, "layout": "NN", "dtype": "bfloat16"})  # alpha != 1: applied once


@pytest.mark.parametrize("chain", TMA_CHAINS)
def test_rung_10_applies_the_chain_before_its_tma_store(chain):
    import cupy as cp

    from lab.measure.verify import check_case

    fam = get_family("gemm_tc_epilogue")
    rung = fam.rung("10_tma_store")
    for shape in TMA_SHAPES:
        case = shape | {"epilogue": chain}
        problem = fam.make_problem(seed=9, **case)
        assert fam.launch_notes(rung, problem, cp.empty(problem.out_shape, problem.dtype))["store"] == "tma"
        result = check_case(fam, rung, case, seed=36)
        assert result.passed, result.line()


SPECIAL = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 128.0, 1e6, -127.5, -128.5, -1e6, np.nan, np.inf,
                    -np.inf, 0.0, -0.0, 1.0625, 1.1875, 448.0, 464.0, 2.0 ** -10, 3 * 2.0 ** -10, 2.0 ** -12, 33.3,
                    -7.77, 0.25], dtype=np.float32)


def _special_matrix(cols: int):
    """Rows of the special values, rotated, so every value lands on an even and an odd column and at a row end."""
    rows = [np.roll(np.resize(SPECIAL, cols), r) for r in range(5)]
    return np.stack(rows).astype(np.float32)


@pytest.mark.parametrize("out", ["int8", "e4m3"])
@pytest.mark.parametrize("cols", [1, 3, 17, 28, 61])
@pytest.mark.parametrize("offset", [0, 1])
def test_quantizers_are_bit_exact(out, cols, offset):
    import cupy as cp

    z = _special_matrix(cols)
    qs = np.float32(1.0)
    buf = cp.full((5, cols + 3 + offset), 0x5A, dtype=np.int8 if out == "int8" else np.uint8)
    target = buf[:, offset:offset + cols]
    E.apply(cp.asarray(z), E.Epilogue((), out), out=target, q_scale=cp.asarray([qs]))
    got = target.get()
    want = E.quantize_int8(z, qs) if out == "int8" else E.quantize_e4m3(z, qs)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (z, got, want)
    rest = np.delete(buf.get(), np.s_[offset:offset + cols], axis=1)
    assert np.all(rest.view(np.uint8) == 0x5A), "wrote outside the output"


def test_per_row_quantization_scale_is_exact():
    import cupy as cp

    rng = np.random.default_rng(0)
    z = rng.normal(0, 40, (37, 45)).astype(np.float32)
    qs = rng.uniform(0.5, 2, 37).astype(np.float32)
    out = cp.empty((37, 45), dtype=cp.int8)
    E.apply(cp.asarray(z), E.Epilogue((), "int8", True), out=out, q_scale=cp.asarray(qs))
    assert np.array_equal(out.get(), E.quantize_int8(z, qs[:, None]))


@pytest.mark.parametrize("bf16", [False, True])
def test_half_output_rounds_once_to_nearest_even(bf16):
    import cupy as cp

    from lab.families.gemm_tc import round_to_bfloat16_bits

    rng = np.random.default_rng(1)
    z = (rng.normal(size=(9, 33)) * 10.0 ** rng.uniform(-6, 5, (9, 33))).astype(np.float32)
    z[0, :4] = [65520.0, 65519.0, np.nan, -np.inf]  # fp16: ties to inf, just below it, NaN, inf
    out = cp.empty((9, 33), dtype=cp.uint16)
    E.apply(cp.asarray(z), E.Epilogue(()), out=out, bf16=bf16)
    want = round_to_bfloat16_bits(z) if bf16 else z.astype(np.float16).view(np.uint16)
    got = out.get()
    nan = np.isnan(z)
    assert np.array_equal(got[~nan], want[~nan])


def test_library_baselines_match_the_reference():
    import cupy as cp

    from lab.measure.check import compare

    fam = get_family("gemm_tc_epilogue")
    for case in ({"epilogue": "bias+gelu_tanh"}, {"epilogue": "bias+gelu_tanh", "out": "int8", "q_per_row": True},
                 {"epilogue": "row_scale+col_scale+silu+residual"}):
        problem = fam.make_problem(seed=4, M=256, N=384, K=512, **case)
        # cuBLAS stores the product in fp16 before the CuPy ops read it: one more rounding than the fused rung.
        ref, bound = fam.expected(problem, rounded_product=True)
        for name, launch in fam.baselines().items():
            out = cp.empty(problem.out_shape, dtype=problem.dtype)
            launch(problem, out)
            cmp = compare(fam.output_values(out), ref, bound)
            assert cmp.passed, f"{name} {case}: {cmp.describe()}"
        assert not compare(fam.output_values(out), ref, 0.0).passed  # the bound is what lets the paths differ


def test_plain_ceiling_serves_a_quantized_problem():
    import cupy as cp

    fam = get_family("gemm_tc_epilogue")
    problem = fam.make_problem(seed=4, M=300, N=200, K=64, out="int8")
    out = cp.empty(problem.out_shape, dtype=problem.dtype)
    fam.launch_ceiling(problem, out)
    plain = problem._plain_scratch.get().astype(np.float64)
    a, b, _ = fam._operands(problem)
    assert np.allclose(plain, a @ b, rtol=2e-2, atol=0.5)


# --- exercise 08's functor on chosen values (kernels/epilogue/plugin_numerics.cu) --------------------------------

_PLUGIN_CVT = 'asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(code) : "f"(scaled));'


def _skip_unless_sm_90a():
    from lab.core import build, device
    from lab.grading.plugin_numerics import harness_spec

    why = build.arch_refusal(harness_spec(build.COMMON_DIR / build.PLUGIN_HEADER, "kernel.cu"), device.current().arch)
    if why:
        pytest.skip(f"the functor's harness {why}")


def _functor(tmp_path, replacement: str | None):
    """The lab's functor (kernels/common/lab_epilogue_plugin.cuh), its int8 conversion replaced where asked."""
    from lab.core.build import COMMON_DIR, PLUGIN_HEADER

    text = (COMMON_DIR / PLUGIN_HEADER).read_text()
    assert _PLUGIN_CVT in text
    path = tmp_path / "kernel.cu"
    path.write_text(text if replacement is None else text.replace(_PLUGIN_CVT, replacement))
    return path


def test_the_lab_s_functor_is_exact_on_the_chosen_values(tmp_path):
    from lab.grading.plugin_numerics import CHOSEN, check_int8_numerics

    _skip_unless_sm_90a()
    ok, message = check_int8_numerics(_functor(tmp_path, None), "kernel.cu")
    assert ok, message
    assert message == f"ties, saturation and NaN: all {len(CHOSEN)} chosen values exact"


@pytest.mark.parametrize("replacement, words", [
    # round half away from zero (roundf), NaN still 0: only the ties tell
    ("code = scaled != scaled ? 0 : (int)fminf(fmaxf(roundf(scaled), -128.0f), 127.0f);",
     ("gave code 11 for acc 10.5 x q_scale 1", "a tie", "gives 10")),
    # ties right, NaN -> 127
    (_PLUGIN_CVT + "\n    if (scaled != scaled) code = 127;", ("gave code 127 for a NaN accumulator", "code 0")),
    # NaN -> -128, what fmaxf / fminf saturation after rintf gives
    ("code = (int)fminf(fmaxf(rintf(scaled), -128.0f), 127.0f);", ("gave code -128 for a NaN accumulator",)),
], ids=["round-half-away", "nan-to-127", "nan-to-minus-128"])
def test_a_wrong_tie_rule_or_nan_code_fails_naming_the_value(tmp_path, replacement, words):
    from lab.grading.plugin_numerics import check_int8_numerics

    _skip_unless_sm_90a()
    ok, message = check_int8_numerics(_functor(tmp_path, replacement), "kernel.cu")
    assert not ok
    assert all(w in message for w in words), message


def test_the_starter_functor_fails_the_chosen_values_as_unwritten():
    from lab.grading import exercises
    from lab.grading.plugin_numerics import check_int8_numerics

    _skip_unless_sm_90a()
    ok, message = check_int8_numerics(exercises.load("08").starter_path, "kernel.cu")
    assert not ok and "unwritten" in message, message
