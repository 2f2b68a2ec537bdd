"""CPU: the epilogue chain's Python side (lab/families/epilogue.py) against its header, its reference quantizers on
chosen
values, its bounds, and every fused variant compiling without spills or ptxas serialization."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lab.core.build import KERNELS_DIR, KernelSpec, compile_cubin, compile_report
from lab.core.errors import LabError
from lab.families import epilogue as E
from lab.families import get_family

HEADER = (KERNELS_DIR / "common" / "lab_epilogue.cuh").read_text()


def test_op_and_output_codes_match_the_header():
    defined = {name.lower(): int(code) for name, code in re.findall(r"#define LAB_EPI_(\w+) (\d+)", HEADER)}
    for op, code in E.OPS.items():
        assert defined[op] == code, op
    assert {out: defined[f"out_{out}"] for out in ("int8", "e4m3")} == {"int8": 1, "e4m3": 2}
    assert defined["out_same"] == E.OUTS["same"]


def test_params_layout_matches_the_struct():
    fields = re.search(r"struct LabEpilogue \{(.*?)\};", HEADER, re.S).group(1)
    names = re.findall(r"(\w+)(?:,\s*(\w+))?;", fields)
    flat = [n for pair in names for n in pair if n]
    assert flat == list(E.PARAMS_DTYPE.names)
    assert E.PARAMS_DTYPE.itemsize == 72


def test_parse_knobs_and_names():
    epi = E.Epilogue.parse("bias+gelu_tanh", "int8", True)
    assert epi.ops == ("bias", "gelu_tanh") and epi.name == "bias+gelu_tanh->int8/row"
    assert epi.knobs() == {"EPI_OP1": 1, "EPI_OP2": 5, "EPI_OP3": 0, "EPI_OP4": 0, "EPI_OUT": 1, "EPI_QROW": 1}
    assert E.Epilogue.parse("none").knobs() == {f"EPI_OP{i}": 0 for i in range(1, 5)}
    assert not E.Epilogue.parse("none").fused
    assert epi.needs() == {"bias", "q_scale"}


@pytest.mark.parametrize("bad, why", [(("bias", "gelu"), "Unknown epilogue op 'gelu'"),
                                      (("bias",) * 5, "at most 4 ops")])
def test_bad_chains_are_one_sentence(bad, why):
    with pytest.raises(LabError, match=why):
        E.Epilogue(bad)


def test_per_row_scale_needs_a_quantized_output():
    with pytest.raises(LabError, match="quantized output"):
        E.Epilogue(("bias",), "same", True)


def test_int8_quantizer_ties_saturation_and_specials():
    v = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 126.5, 127.5, 200.0, -128.5, -129.0, np.nan, np.inf, -np.inf, 1e30],
                 dtype=np.float32)
    q = E.quantize_int8(v, np.float32(1.0))
    assert q.tolist() == [0, 2, 2, 0, -2, 126, 127, 127, -128, -128, 0, 127, -128, 127]
    # The scale is one fp32 multiply: 0.1 * 25 rounds to 2.5 in fp32, a tie, to 2.
    assert E.quantize_int8(np.float32(0.1), np.float32(25.0)).item() == 2


def test_e4m3_table_and_quantizer():
    assert E.E4M3_MAX == 448.0 and E.E4M3_VALUES[1] == 2.0 ** -9 and E.E4M3_VALUES[8] == 2.0 ** -6
    v = np.array([1.0, 1.0625, 1.1875, 448.0, 464.0, 1e6, np.inf, -np.inf, np.nan, 2.0 ** -10, 3 * 2.0 ** -10,
                  -0.0, -2.5], dtype=np.float32)
    codes = E.quantize_e4m3(v, np.float32(1.0))
    # 1.0625 is halfway between 1.0 (0x38, even) and 1.125 (0x39): to the even code; 1.1875 between 0x39 and 0x3A.
    assert codes.tolist() == [0x38, 0x38, 0x3A, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F, 0x00, 0x02, 0x80, 0xC2]
    decoded = E.decode_e4m3(codes)
    assert decoded[3] == 448 and decoded[7] == -448 and np.isnan(decoded[8]) and decoded[12] == -2.5


def test_e4m3_round_trips_every_code():
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8)
    values = E.decode_e4m3(codes).astype(np.float32)
    assert np.array_equal(E.quantize_e4m3(values, np.float32(1.0)), codes)


def _chain_inputs(M, N, seed=0):
    rng = np.random.default_rng(seed)
    return E.ChainInputs(bias=rng.normal(size=N), row_scale=rng.uniform(0.5, 2, M), col_scale=rng.uniform(0.5, 2, N),
                         residual=rng.normal(size=(M, N)), q_scale=np.array([20.0]), clamp=(-2.0, 3.0))


def test_reference_ops_follow_their_definitions():
    x = _chain_inputs(2, 3)
    v = np.array([[-1.0, 0.0, 2.0], [np.nan, 5.0, -7.0]])
    b = np.zeros_like(v)
    relu, _ = E.apply_op("relu", v, b, x)
    assert np.isnan(relu[1, 0]) and relu[0, 0] == 0 and relu[0, 2] == 2  # NaN propagates, as in torch
    clamp, _ = E.apply_op("clamp", v, b, x)
    assert clamp[1, 1] == 3 and clamp[1, 2] == -2 and np.isnan(clamp[1, 0])
    gelu, bound = E.apply_op("gelu_tanh", np.array([[1.0]]), np.array([[0.0]]), x)
    assert abs(gelu[0, 0] - 0.8411919906) < 1e-9 and 0 < bound[0, 0] < 1e-3
    erf_gelu, _ = E.apply_op("gelu_erf", np.array([[1.0]]), np.array([[0.0]]), x)
    assert abs(erf_gelu[0, 0] - 0.8413447461) < 1e-9


def test_bounds_grow_with_the_chain_and_the_slope():
    x = _chain_inputs(4, 4)
    v, b = np.full((4, 4), 1.5), np.full((4, 4), 1e-3)
    _, after = E.apply_chain(E.Epilogue(("bias", "gelu_tanh")), v, b, x)
    assert np.all(after > 1.13 * 1e-3 * 0.999)
    _, scaled = E.apply_op("row_scale", v, b, x)
    assert np.allclose(scaled, x.row_scale[:, None] * 1e-3, rtol=1e-4)


def test_quantized_bound_allows_a_neighbour_only_near_a_boundary():
    epi = E.Epilogue((), "int8")
    qs = np.array([1.0])
    v = np.array([[10.2, 10.5, -3.0]])
    ref, bound = E.quantized_reference(epi, v, np.full_like(v, 0.05), qs)
    # 10.5 +- 0.05 straddles the tie: 10 or 11 pass (the middle, 10.5, and half a step); the others are exact
    assert ref.tolist() == [[10, 10.5, -3]]
    assert bound.tolist() == [[0, 0.5, 0]]


def _accepted(epi, v, b, q_scale, candidates):
    """The candidate outputs (int8 codes, or e4m3 values) that compare accepts for one value v with error b."""
    from lab.measure.check import compare

    ref, bound = E.quantized_reference(epi, np.array([[v]]), np.array([[b]]), np.array([q_scale]))
    return [c for c in candidates if compare(np.array([[c]], dtype=np.float64), ref, bound).passed]


@pytest.mark.parametrize("q_scale, code", [(1.0, 10), (-1.0, -10)])
def test_quantized_interval_is_the_codes_of_v_minus_b_to_v_plus_b_and_no_more(q_scale, code):
    # code(v - b) = code(v) = 10 and code(v + b) = 11 (or -10 and -11 with a negative scale): the interval is one
    # sided, so 9 (-9) fails although it is as close to the code of v as 11 is.
    epi = E.Epilogue((), "int8")
    step = 1 if q_scale > 0 else -1
    assert _accepted(epi, 10.48, 0.05, q_scale, range(-128, 128)) == sorted([code, code + step])
    assert _accepted(epi, 10.2, 0.05, q_scale, range(-128, 128)) == [code]  # far from a boundary: exact
    assert _accepted(epi, 10.52, 0.05, q_scale, range(-128, 128)) == sorted([code, code + step])


def test_quantized_interval_of_nan_and_saturated_values_is_one_code():
    epi = E.Epilogue((), "int8")
    assert _accepted(epi, np.nan, 0.05, 1.0, range(-128, 128)) == [0]
    assert _accepted(epi, np.nan, 0.05, -1.0, range(-128, 128)) == [0]
    assert _accepted(epi, np.inf, 1.0, 1.0, range(-128, 128)) == [127]
    assert _accepted(epi, -np.inf, 1.0, 1.0, range(-128, 128)) == [-128]
    assert _accepted(epi, 300.0, 1.0, 1.0, range(-128, 128)) == [127]
    assert _accepted(epi, 127.0, 0.6, 1.0, range(-128, 128)) == [126, 127]  # 126.4 .. 127.6: 126 and 127 only


def test_quantized_interval_on_the_e4m3_grid():
    epi = E.Epilogue((), "e4m3")
    values = E.decode_e4m3(np.arange(256, dtype=np.uint8))
    grid = [float(x) for x in values[np.isfinite(values)]]
    # 1.06 +- 0.005: 1.055 rounds to 1.0, 1.065 to 1.125 (past the tie at 1.0625)
    assert sorted(set(_accepted(epi, 1.06, 0.005, 1.0, grid))) == [1.0, 1.125]
    assert sorted(set(_accepted(epi, 1.01, 0.005, 1.0, grid))) == [1.0]
    # 0 +- 1e-4: both ends round to a zero, of either sign; both zeros pass, the smallest subnormal does not
    zeros = _accepted(epi, 0.0, 1e-4, 1.0, [0.0, -0.0, 2.0 ** -9, -(2.0 ** -9)])
    assert len(zeros) == 2 and all(z == 0 for z in zeros)
    nan_ref, nan_bound = E.quantized_reference(epi, np.array([[np.nan]]), np.array([[0.1]]), np.array([1.0]))
    assert np.isnan(nan_ref).all() and nan_bound.tolist() == [[0.0]]


def test_half_output_bound_adds_one_rounding():
    epi = E.Epilogue(("bias",))
    x = _chain_inputs(1, 2)
    v = np.array([[1.0, 1000.0]])
    _, bound = E.output_reference(epi, v, np.zeros_like(v), x, np.float16)
    assert bound[0, 1] > bound[0, 0] and bound[0, 1] < 1000 * 2 ** -10


def _assert_no_spills(report):
    assert report.registers > 0
    assert not report.spills and report.stack_frame_bytes == 0, report


@pytest.mark.parametrize("chain, out, qrow", [("bias+gelu_tanh", "same", False), ("bias+gelu_tanh", "int8", True),
                                              ("row_scale+col_scale+gelu_erf+residual", "e4m3", False),
                                              ("silu+clamp+relu", "same", False)])
@pytest.mark.parametrize("bf16", [0, 1])
@pytest.mark.parametrize("key", ["06_persistent", "10_tma_store"])
def test_fused_rungs_compile_without_spills_or_serialization(chain, out, qrow, bf16, key):
    """Rung 06 and the candidate rung 10 (its chain before the TMA store) with each chain: no spills, and no wgmma
    serialized by ptxas ("Performance Loss")."""
    fam = get_family("gemm_tc_epilogue")
    epi = E.Epilogue.parse(chain, out, qrow)
    spec = fam.rung(key).spec.with_knobs(BF16=bf16, TN=1, **epi.knobs())
    assert "Performance Loss" not in compile_cubin(spec, 90).log
    _assert_no_spills(compile_report(spec, 90))


def test_rung_10_at_its_defaults_is_the_plain_gemm_and_takes_no_chain_argument():
    """The chain's code is all behind FUSED_EPILOGUE: rung 10's default build is gemm_tc's rung 10, one kernel for
    both families, and its extra argument exists only when a chain is set."""
    source = (KERNELS_DIR / "gemm_tc/10_tma_store.cu").read_text()
    assert "#if FUSED_EPILOGUE\n                  , const __grid_constant__ LabEpilogue ep\n#endif" in source
    assert get_family("gemm_tc_epilogue").rung("10").spec == get_family("gemm_tc").rung("10").spec


@pytest.mark.parametrize("arch", [75, 80, 90])
def test_fused_rung_08_compiles_without_spills(arch):
    fam = get_family("gemm_fp32_epilogue")
    spec = fam.rungs[0].spec.with_knobs(VEC=4, **E.Epilogue.parse("bias+gelu_tanh+residual").knobs())
    _assert_no_spills(compile_report(spec, arch))


@pytest.mark.parametrize("out, arch", [("int8", 80), ("e4m3", 90), ("same", 80)])
def test_apply_kernel_compiles(out, arch):
    spec = KernelSpec("epilogue/apply.cu", "lab_epilogue_apply", tuple(sorted(E.Epilogue.parse("bias", out).knobs()
                                                                              .items())), min_arch=80)
    _assert_no_spills(compile_report(spec, arch))


def test_tc_family_checks_cover_every_op_output_and_tail():
    cases = get_family("gemm_tc_epilogue").check_cases()
    ops = {op for c in cases for op in c["epilogue"].split("+")}
    assert set(E.OPS) <= ops
    assert {c.get("out", "same") for c in cases} == set(E.OUTS)
    assert any(c["N"] % 2 for c in cases) and any(c["N"] % 4 and c.get("out") == "int8" for c in cases)
    assert any(c["M"] == 1 for c in cases) and any(c.get("q_per_row") for c in cases)
    assert {c["dtype"] for c in cases} == {"float16", "bfloat16"} and {c["layout"] for c in cases} == {"TN", "NN"}


def test_quantized_output_with_beta_is_refused():
    with pytest.raises(LabError, match="beta must be 0"):
        get_family("gemm_tc_epilogue").make_problem(M=8, N=8, K=8, beta=1.0, out="int8")


def test_headline_shapes_are_the_issue_targets():
    heads = get_family("gemm_tc_epilogue").headline_params()
    assert {(h["M"], h.get("out", "same")) for h in heads} == {(4096, "same"), (8192, "same"), (4096, "int8"),
                                                                (8192, "int8")}


# --- the fused family's checks, on a NumPy model of the kernel --------------------------------------------------

def _numpy_family(name):
    fam = get_family(name)
    fam.array_module = np
    return fam


def _model_output(fam, problem, flip: bool = False):
    """What a correct fused kernel stores: the fp32 product, the chain in fp32, one conversion (flip: one element
    off by one code, or by 1% on a half output)."""
    from lab.families.gemm_tc import to_storage

    p = problem.params
    a, b, c0 = fam._operands(problem)
    v = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)
    x = fam._host_chain_inputs(problem)
    v, _ = E.apply_chain(E.Epilogue.parse(p["epilogue"], p["out"], p["q_per_row"]), v, np.zeros_like(v), x)
    qs = None if x.q_scale is None else (x.q_scale.reshape(-1, 1) if p["q_per_row"] else x.q_scale.reshape(1, 1))
    if p["out"] == "int8":
        out = E.quantize_int8(v.astype(np.float32), qs.astype(np.float32))
        if flip:
            out[0, 0] = out[0, 0] + (1 if out[0, 0] < 127 else -1)
        return out.astype(np.float64)
    if p["out"] == "e4m3":
        out = E.quantize_e4m3(v.astype(np.float32), qs.astype(np.float32))
        if flip:
            out[0, 0] ^= 1
        return E.decode_e4m3(out)
    if flip:
        v[0, 0] *= 1.01
    return fam.output_values(to_storage(v.astype(np.float32), p["dtype"])).astype(np.float64)


@pytest.mark.parametrize("case", [{"epilogue": "bias+gelu_tanh"}, {"epilogue": "bias+gelu_tanh", "out": "int8"},
                                  {"epilogue": "row_scale+silu", "out": "e4m3", "q_per_row": True},
                                  {"epilogue": "bias+relu+residual", "dtype": "bfloat16"}])
def test_a_correct_model_passes_and_one_wrong_element_fails(case):
    from lab.measure.check import compare

    fam = _numpy_family("gemm_tc_epilogue")
    problem = fam.make_problem(seed=3, M=33, N=47, K=200, **case)
    ref = fam.reference(problem)[:, :47]
    bound = fam.error_bound(problem, ref)[:, :47]
    assert compare(_model_output(fam, problem), ref, bound).passed
    assert not compare(_model_output(fam, problem, flip=True), ref, bound).passed


def test_quantization_scale_uses_the_grid_and_saturates_a_few():
    fam = _numpy_family("gemm_tc_epilogue")
    problem = fam.make_problem(seed=5, M=128, N=128, K=512, epilogue="bias", out="int8")
    codes = fam.reference(problem)
    assert codes.max() == 127 and codes.min() == -128
    assert np.mean(np.abs(codes) == 127) < 0.1 and np.mean(np.abs(codes) > 30) > 0.2
