"""CPU: the RMSNorm and LayerNorm families (lab.families.norms). Their references on cases worked by hand; the
per-element bound against fp32 NumPy models of the kernels' arithmetic (it passes the two-pass and Welford
statistics the rungs use, and fails a perturbed element, a wrong weight index, a missing eps or bias, and
E[x^2] - E[x]^2); the checks end to end on NumPy stand-ins; headers against knobs; every rung variant compiled
for sm_80 and sm_90 with no spills; the launcher's choices by n; and the shape families."""

import dataclasses

import numpy as np
import pytest

from lab.core import build, headers
from lab.core.errors import LabError
from lab.families import families, get_family
from lab.families.gemm_tc import BFLOAT16, to_float32, to_storage
from lab.families.norms import (
    DEFAULT_EPS,
    REQUIRED_N,
    LayerNormFamily,
    NormFamily,
    RMSNormFamily,
    cluster_shape,
    norm_error_bound,
    norm_fp32_error_bound,
    norm_reference,
)
from lab.measure.bounds import SAFETY
from lab.measure.check import compare
from lab.measure.verify import check_case

FAMILIES = (RMSNormFamily, LayerNormFamily)
ARCHS = (80, 90)
THREADS = 256  # the models' threads per row: rung 01's and 02's block


# --- fp32 NumPy models of the kernels' arithmetic --------------------------------------------------

def _thread_sums(terms: np.ndarray, threads: int) -> np.ndarray:
    """Row sums as the kernels form them: thread t adds terms t, t + threads, ... one at a time in fp32 (fused
    multiply-adds of already exact terms round the same), then a butterfly over the threads."""
    rows, n = terms.shape
    k = -(-n // threads)
    padded = np.zeros((rows, k * threads), np.float32)
    padded[:, :n] = terms
    acc = np.zeros((rows, threads), np.float32)
    for j in range(k):
        acc = acc + padded[:, j * threads:(j + 1) * threads]
    while acc.shape[1] > 1:
        half = acc.shape[1] // 2
        acc = acc[:, :half] + acc[:, half:]
    return acc[:, 0]


def _welford(x: np.ndarray, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Rung 01's statistics: per-thread Welford in fp32, combined through sum_t M2_t + n_t (mean_t - mean)^2."""
    rows, n = x.shape
    k = -(-n // threads)
    count = np.zeros((rows, threads), np.float32)
    mean = np.zeros((rows, threads), np.float32)
    m2 = np.zeros((rows, threads), np.float32)
    for j in range(k):
        cols = np.arange(j * threads, min((j + 1) * threads, n))
        live = slice(0, cols.size)
        v = x[:, cols]
        c = count[:, live] + np.float32(1)
        d = v - mean[:, live]
        new_mean = mean[:, live] + d / c
        m2[:, live] = m2[:, live] + d * (v - new_mean)
        mean[:, live], count[:, live] = new_mean, c
    row_mean = _thread_sums(count * mean, threads) / np.float32(n)
    spread = m2 + count * np.square(mean - row_mean[:, None])
    return row_mean, _thread_sums(spread, threads) / np.float32(n)


def model(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, eps: float, centered: bool, how: str = "two_pass",
          threads: int = THREADS) -> np.ndarray:
    """The fp32 result (before rounding to 16 bits) of a norm computed the way `how` says: "two_pass" (rungs 02
    and 03: the mean, then the centered sum), "welford" (rung 01 and the two-read fallback), "naive"
    (E[x^2] - E[x]^2, which no rung uses), "no_eps", "no_bias", "wrong_weight" (w shifted by one)."""
    n = x.shape[1]
    if centered and how == "welford":
        mean, var = _welford(x, threads)
    elif centered and how == "naive":
        mean = _thread_sums(x, threads) / np.float32(n)
        var = _thread_sums(x * x, threads) / np.float32(n) - mean * mean
    else:
        mean = _thread_sums(x, threads) / np.float32(n) if centered else np.zeros(x.shape[0], np.float32)
        d = x - mean[:, None]
        var = _thread_sums(d * d, threads) / np.float32(n)
    r = var + (np.float32(0) if how == "no_eps" else np.float32(eps))
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (1 / np.sqrt(r.astype(np.float64))).astype(np.float32)
    ww = np.roll(w, 1) if how == "wrong_weight" else w
    y = (x - mean[:, None]) * rho[:, None] * ww[None, :]
    if centered and how != "no_bias":
        y = y + b[None, :]
    return y.astype(np.float32)


def _case(fam: NormFamily, seed: int = 3, dist: str = "normal", **params):
    """A problem on NumPy, its stored values as float32 and float64, the reference and the bound."""
    np_fam = type(fam)()
    np_fam.array_module = np
    p = np_fam.make_problem(seed=seed, dist=dist, **params)
    dtype = p.params["dtype"]
    x32 = to_float32(p.inputs["x"][0], dtype)
    w32 = to_float32(p.inputs["w"], dtype)
    b32 = to_float32(p.inputs["b"], dtype) if fam.centered else None
    ref = np_fam.reference(p)
    return np_fam, p, (x32, w32, b32), ref, np_fam.error_bound(p, ref)


def _rounded(y32: np.ndarray, dtype: str) -> np.ndarray:
    """The fp32 result rounded to the output type and widened back (what the checks compare)."""
    return to_float32(to_storage(y32, dtype), dtype)


# --- references on hand cases ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
def test_layernorm_of_a_constant_row_is_the_bias_and_rmsnorm_its_sign_times_w(dtype):
    for fam_cls in FAMILIES:
        fam, p, (x, w, b), ref, bound = _case(fam_cls(), rows=4, n=33, dtype=dtype, values="constant")
        assert np.all(x == x[:, :1])  # every row one value
        if fam_cls.centered:
            assert np.array_equal(ref, np.broadcast_to(b.astype(np.float64), ref.shape))
        else:
            c = x[:, :1].astype(np.float64)
            assert np.allclose(ref, c / np.sqrt(c * c + np.float32(DEFAULT_EPS)) * w, rtol=1e-12, atol=0)


def test_references_of_one_value_rows_and_a_hand_computed_row():
    x = np.array([[3.0], [-0.5]])
    w, b = np.array([2.0]), np.array([0.25])
    eps = 1e-5
    assert np.allclose(norm_reference(x, w, None, eps, False)[:, 0], [3 / np.sqrt(9 + eps) * 2,
                                                                      -0.5 / np.sqrt(0.25 + eps) * 2])
    assert np.array_equal(norm_reference(x, w, b, eps, True), np.full((2, 1), 0.25))  # x - mean = 0
    row = np.array([[1.0, 2.0, 3.0, 6.0]])  # mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5
    w4, b4 = np.array([1.0, -1.0, 2.0, 0.5]), np.array([0.0, 1.0, 0.0, -1.0])
    expect = (row - 3) / np.sqrt(3.5 + eps) * w4 + b4
    assert np.allclose(norm_reference(row, w4, b4, eps, True), expect, rtol=1e-15)
    expect_rms = row / np.sqrt((1 + 4 + 9 + 36) / 4 + eps) * w4
    assert np.allclose(norm_reference(row, w4, None, eps, False), expect_rms, rtol=1e-15)


def test_eps_reaches_the_reference_as_the_kernel_sees_it():
    fam, p, (x, w, b), ref, _ = _case(RMSNormFamily(), rows=2, n=5, eps=0.1)
    eps32 = float(np.float32(0.1))
    assert eps32 != 0.1
    assert np.array_equal(ref, norm_reference(x.astype(np.float64), w.astype(np.float64), None, eps32, False))


# --- the bound against models of the arithmetic ----------------------------------------------------

BOUND_CASES = [dict(rows=r, n=n, values=v) for r, n, v in (
    (3, 1, "random"), (4, 7, "random"), (3, 129, "random"), (2, 1000, "random"), (2, 4097, "random"),
    (1, 32769, "random"), (3, 64, "constant"), (2, 2048, "constant"), (3, 100, "large"), (2, 8192, "large"),
    (3, 257, "tiny"), (2, 4096, "tiny"), (3, 300, "offset"), (2, 4096, "offset"))]


@pytest.mark.parametrize("fam_cls", FAMILIES, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
@pytest.mark.parametrize("how", ["two_pass", "welford"])
@pytest.mark.parametrize("threads", [32, THREADS, 1024])
def test_the_rungs_arithmetic_passes_the_bound_with_half_the_statistics_allowance(fam_cls, dtype, how, threads):
    """The rungs' statistics (runs of n / threads values per thread, then a tree: a warp's, rung 01's and 02's
    block, rung 03's largest block), on every kind of row: the rounded result within the bound, and the fp32 result
    before rounding within A computed with half the safety factor (the rounding terms have no margin to give: a
    single rounding can use its whole allowance)."""
    worst = 0.0
    for case in BOUND_CASES:
        for dist in ("normal", "uniform", "wide"):
            fam, p, (x, w, b), ref, bound = _case(fam_cls(), dist=dist, dtype=dtype, **case)
            y32 = model(x, w, b, DEFAULT_EPS, fam.centered, how, threads)
            cmp = compare(_rounded(y32, dtype), ref, bound)
            assert cmp.passed, f"{p.label} {dist}: {cmp.describe()}"
            half = norm_fp32_error_bound(x.astype(np.float64), w.astype(np.float64),
                                         None if b is None else b.astype(np.float64),
                                         float(np.float32(DEFAULT_EPS)), fam.centered, safety=SAFETY / 2)
            ratio = float(np.max(np.abs(y32.astype(np.float64) - ref) / half))
            assert ratio <= 1, f"{p.label} {dist}: the fp32 result uses {ratio:.3g} of half the allowance"
            worst = max(worst, cmp.worst_ratio)
    assert 0 < worst <= 1


@pytest.mark.parametrize("fam_cls", FAMILIES, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
def test_one_element_two_ulps_off_fails(fam_cls, dtype):
    fam, p, (x, w, b), ref, bound = _case(fam_cls(), rows=3, n=1000, dtype=dtype)
    stored = to_storage(model(x, w, b, DEFAULT_EPS, fam.centered), dtype)
    assert compare(to_float32(stored, dtype), ref, bound).passed
    stored.view(np.uint16)[1, 517] += 2  # two units in the last place, same sign
    cmp = compare(to_float32(stored, dtype), ref, bound)
    assert not cmp.passed and cmp.worst_index == (1, 517), cmp.describe()


@pytest.mark.parametrize("fam_cls", FAMILIES, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
@pytest.mark.parametrize("how, case", [
    ("wrong_weight", {"rows": 3, "n": 1024}),
    ("no_eps", {"rows": 3, "n": 257, "values": "tiny"}),
    ("no_eps", {"rows": 3, "n": 1000, "eps": 0.5}),
])
def test_a_wrong_weight_index_or_a_missing_eps_fails(fam_cls, dtype, how, case):
    fam, p, (x, w, b), ref, bound = _case(fam_cls(), dtype=dtype, **case)
    eps = float(np.float32(p.params.get("eps", DEFAULT_EPS)))
    assert compare(_rounded(model(x, w, b, eps, fam.centered), dtype), ref, bound).passed
    assert not compare(_rounded(model(x, w, b, eps, fam.centered, how), dtype), ref, bound).passed


@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
def test_layernorm_without_eps_on_a_constant_row_is_nan_and_fails(dtype):
    fam, p, (x, w, b), ref, bound = _case(LayerNormFamily(), rows=2, n=64, dtype=dtype, values="constant")
    with np.errstate(invalid="ignore"):
        got = _rounded(model(x, w, b, DEFAULT_EPS, True, "no_eps"), dtype)
    cmp = compare(got, ref, bound)
    assert not cmp.passed and cmp.nonfinite > 0


@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
def test_a_missing_bias_fails(dtype):
    fam, p, (x, w, b), ref, bound = _case(LayerNormFamily(), rows=3, n=300, dtype=dtype)
    assert not compare(_rounded(model(x, w, b, DEFAULT_EPS, True, "no_bias"), dtype), ref, bound).passed


@pytest.mark.parametrize("dtype, n", [("float16", 300), ("float16", 4096), (BFLOAT16, 4096)])
def test_the_naive_variance_fails_on_rows_whose_mean_dwarfs_their_spread(dtype, n):
    """E[x^2] - E[x]^2 in fp32 is why the rungs never use it: summed in sequence, as a plain loop does, the bound
    rejects it on "offset" rows (|mean| / std ~ 300), where the two-pass and Welford statistics pass in the same
    order. (Summed in a tree its error is smaller, but it still grows with (mean / std)^2, the bound with
    mean / std. bf16 at n = 300 is left out: its offset rows are even integers, whose squares and sums fp32 holds
    exactly.)"""
    fam, p, (x, w, b), ref, bound = _case(LayerNormFamily(), rows=3, n=n, dtype=dtype, values="offset")
    for how in ("two_pass", "welford"):
        assert compare(_rounded(model(x, w, b, DEFAULT_EPS, True, how, threads=1), dtype), ref, bound).passed
    with np.errstate(invalid="ignore"):
        naive = _rounded(model(x, w, b, DEFAULT_EPS, True, "naive", threads=1), dtype)
    cmp = compare(naive, ref, bound)
    assert not cmp.passed and cmp.worst_ratio > 3, cmp.describe()


def test_the_bound_is_about_half_an_output_ulp_on_ordinary_rows():
    for dtype, u_out in (("float16", 2.0**-11), (BFLOAT16, 2.0**-8)):
        fam, p, _, ref, bound = _case(LayerNormFamily(), rows=4, n=4096, dtype=dtype)
        rel = bound / np.abs(ref)
        assert np.median(rel) < 1.05 * u_out, np.median(rel)


def test_the_bound_function_takes_the_problem_s_values():
    fam, p, (x, w, b), ref, bound = _case(LayerNormFamily(), rows=2, n=10, dtype=BFLOAT16)
    direct = norm_error_bound(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                              float(np.float32(DEFAULT_EPS)), ref, BFLOAT16, True)
    assert np.array_equal(bound, direct) and bound.shape == ref.shape


# --- the checks end to end on NumPy stand-ins -------------------------------------------------------

def _stand_in(fam_cls, behaviour: str = "two_pass"):
    class StandIn(fam_cls):
        """The family on NumPy arrays, the kernel replaced by a model of its arithmetic (or of a mistake)."""

        array_module = np

        def launch(self, rung, problem, out, set_index=0):
            dtype = problem.params["dtype"]
            x = to_float32(problem.inputs["x"][set_index % len(problem.inputs["x"])], dtype)
            w = to_float32(problem.inputs["w"], dtype)
            b = to_float32(problem.inputs["b"], dtype) if self.centered else None
            eps = float(np.float32(problem.params.get("eps", DEFAULT_EPS)))
            how = "two_pass" if behaviour in ("skips_last_row", "writes_past_the_end") else behaviour
            y = to_storage(model(x, w, b, eps, self.centered, how), dtype)
            if behaviour == "skips_last_row":
                out[:-1] = y[:-1]
                return
            out[...] = y
            if behaviour == "writes_past_the_end":
                full = out.base if out.base is not None else out
                while full.base is not None:
                    full = full.base
                start = (out.__array_interface__["data"][0] - full.__array_interface__["data"][0]) // 2
                full[start + out.size] = full[start]

    return StandIn()


@pytest.mark.parametrize("fam_cls", FAMILIES, ids=lambda c: c.name)
@pytest.mark.parametrize("case", [
    {"rows": 3, "n": 33, "dtype": "float16"}, {"rows": 2, "n": 1025, "dtype": BFLOAT16},
    {"rows": 5, "n": 1, "dtype": BFLOAT16, "values": "constant"}, {"rows": 2, "n": 640, "dtype": "float16",
                                                                    "values": "large"},
    {"rows": 3, "n": 64, "dtype": "float16", "out_offset": 1, "x_offset": 3},
])
def test_a_correct_stand_in_passes_every_check(fam_cls, case):
    fam = _stand_in(fam_cls)
    result = check_case(fam, fam.rungs[0], case, seed=5)
    assert result.passed, result.reasons
    assert result.worst_ratio <= 1  # 0 where the model is exact (a one-value row: y = b)


@pytest.mark.parametrize("fam_cls", FAMILIES, ids=lambda c: c.name)
@pytest.mark.parametrize("behaviour, why", [
    ("wrong_weight", "wrong result"), ("skips_last_row", "unwritten"), ("writes_past_the_end", "AFTER"),
])
def test_a_wrong_stand_in_fails(fam_cls, behaviour, why):
    fam = _stand_in(fam_cls, behaviour)
    result = check_case(fam, fam.rungs[0], {"rows": 4, "n": 96, "dtype": "float16"}, seed=6)
    assert not result.passed and any(why in r for r in result.reasons), result.reasons


# --- problems ---------------------------------------------------------------------------------------

def test_problems_hold_rounded_values_weights_that_are_not_ones_and_a_bias_for_layernorm():
    for fam_cls in FAMILIES:
        fam, p, (x, w, b), ref, _ = _case(fam_cls(), rows=3, n=200, dtype=BFLOAT16, sets=2)
        assert p.dtype == np.uint16 and p.inputs["x"][0].dtype == np.uint16 and len(p.inputs["x"]) == 2
        assert not np.array_equal(p.inputs["x"][0], p.inputs["x"][1])
        assert np.all(np.abs(w) >= 0.5) and np.all(np.abs(w) <= 2) and len(np.unique(w)) > 50
        assert (b is not None) == fam_cls.centered and ("b" in p.inputs) == fam_cls.centered
        assert p.bytes_moved == 4 * 3 * 200 and p.out_shape == (3, 200)
    fam, p, (x, *_), _, _ = _case(RMSNormFamily(), rows=2, n=100, values="large")
    assert 1.4e4 < np.abs(x).min() and np.abs(x).max() < 65504 and np.isfinite(x).all()
    with np.errstate(over="ignore"):
        assert np.isinf(np.square(x.astype(np.float16))).any()  # x^2 overflows fp16, not the fp32 statistics


def test_offsets_shift_x_and_the_output():
    fam, p, *_ = _case(RMSNormFamily(), rows=2, n=8, x_offset=3, out_offset=1)
    x = p.inputs["x"][0]
    assert x.shape == (2, 8) and x.flags.c_contiguous and p.out_offset == 1
    assert x.__array_interface__["data"][0] % 8 == 6  # 3 elements past an aligned start
    assert p.params == {"rows": 2, "n": 8, "dtype": "float16", "x_offset": 3, "out_offset": 1}


@pytest.mark.parametrize("bad, match", [
    ({"n": 0}, "n < 2"), ({"rows": 0}, "rows"), ({"dtype": "float32"}, "dtype"), ({"eps": 0.0}, "eps > 0"),
    ({"values": "zeros"}, "values"), ({"x_offset": -1}, "offsets"),
])
def test_bad_parameters_get_one_clear_sentence(bad, match):
    fam = RMSNormFamily()
    fam.array_module = np
    with pytest.raises(LabError, match=match):
        fam.make_problem(**({"rows": 2, "n": 8} | bad))


def test_bf16_outputs_are_compared_as_values():
    fam = LayerNormFamily()
    bits = to_storage(np.array([1.5, -2.0], np.float32), BFLOAT16)
    assert np.array_equal(fam.output_values(bits), [1.5, -2.0])
    halves = np.array([1.5], np.float16)
    assert fam.output_values(halves) is halves


# --- rung headers, compiles, the launcher's choices ----------------------------------------------

def test_both_families_are_in_the_catalogue_and_share_their_rungs_sources():
    cat = families()
    assert isinstance(cat["rmsnorm"], RMSNormFamily) and isinstance(cat["layernorm"], LayerNormFamily)
    names = list(cat)
    assert names.index("rmsnorm") > names.index("gemm_tc") and names.index("layernorm") == names.index("rmsnorm") + 1
    rms, layer = get_family("rmsnorm"), get_family("layernorm")
    assert [r.key for r in rms.rungs] == [r.key for r in layer.rungs] == ["01_two_read", "02_single_read",
                                                                        "03_specialized", "04_cluster"]
    for a, b in zip(rms.rungs, layer.rungs, strict=True):
        assert a.spec.source == b.spec.source == f"norms/{a.key}.cu"
        # LayerNorm's rung 04 alone has STATS (how many exchanges its two statistics take); the rest is shared.
        extra = {"STATS": 2} if a.key == "04_cluster" else {}
        assert dict(b.spec.knobs) == dict(a.spec.knobs) | extra
        assert a.spec.entry == f"rmsnorm_{a.key[3:]}" and b.spec.entry == f"layernorm_{a.key[3:]}"
        assert a.spec.min_arch == (90 if a.key == "04_cluster" else 80)  # clusters are sm_90's


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm"])
def test_headers_and_defines_state_the_knobs_the_family_runs(name):
    problems = headers.knob_mismatches(get_family(name))
    assert not problems, "\n".join(problems)


def test_every_rung_header_states_a_numeric_prediction():
    from lab.lessons.predictions import claims, prediction

    for rung in RMSNormFamily().rungs:
        text = prediction(RMSNormFamily(), rung.key)
        assert any(c.against == "ceiling" for c in claims(text)), (rung.key, text)
        assert "Requires:" not in text and "Tails" not in text


# Row lengths whose rung-04 shapes (cluster_shape) cover every cluster size, slices short and long, and the streamed
# slices past the registers.
CLUSTER_SHAPE_N = (1, 4096, 8192, 16384, 32768, 65536, 65544, 131072, 262144, 300008)


def _cluster_shapes(vec: int) -> list[dict]:
    k = dict(RMSNormFamily().rung("04").spec.knobs)
    shapes = {cluster_shape(n - n % vec or vec, vec, k["ELEMS"], k["BLOCK"]) for n in CLUSTER_SHAPE_N}
    return [{"CLUSTER": c, "THREADS": t} for c, t in sorted(shapes)]


def _variants():
    """Every rung as the launcher can build it (both types, every VEC, both row shapes of rung 03, rung 04's
    cluster shapes), once per source: the RMSNorm entry's compile carries the LayerNorm entry too (one file, two
    extern "C" kernels)."""
    out = []
    for rung in RMSNormFamily.rungs:
        k = dict(rung.spec.knobs)
        vecs = (8, 4, 2, 1) if "VEC" in k else (None,)
        for bf16 in (0, 1):
            for vec in vecs:
                shapes = [{"WARP_ROW": 0}, {"WARP_ROW": 1}] if "WARP_ROW" in k else \
                    _cluster_shapes(vec) if "CLUSTER" in k else [{}]
                for shape in shapes:
                    knobs = {"BF16": bf16} | ({"VEC": vec} if vec else {}) | shape
                    out.append(dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs)))
    return out


VARIANTS = _variants()


@pytest.mark.parametrize("built, arch", [(b, a) for b in VARIANTS for a in ARCHS if a >= b.spec.min_arch],
                         ids=lambda v: f"sm_{v}" if isinstance(v, int) else
                         f"{v.key}-{'-'.join(f'{k}{n}' for k, n in v.spec.knobs)}")
def test_every_rung_variant_compiles_without_spills(built, arch):
    compiled = build.compile_cubin(built.spec, arch)
    k = dict(built.spec.knobs)
    threads = 32 * k["WARPS"] if k.get("WARP_ROW") else 1024 if "WARP_ROW" in k else k["THREADS"]
    # The 32-float reduction scratch; rung 04 adds its exchange: 2 rounds of CLUSTER floats and 2 mbarriers.
    smem = 128 + (8 * k["CLUSTER"] + 16 if "CLUSTER" in k else 0)
    for entry in (built.spec.entry, built.spec.entry.replace("rmsnorm_", "layernorm_")):
        usage = build.parse_ptxas_log(compiled.log, entry)
        assert usage is not None, f"ptxas printed no resource report for {entry}"
        assert usage["registers"] > 0 and usage["spill_store_bytes"] == 0 and usage["spill_load_bytes"] == 0, usage
        assert usage["stack_frame_bytes"] == 0, (entry, usage)
        assert usage["smem_static_bytes"] <= smem, (entry, usage)
        assert usage["registers"] * threads <= 65536, f"{entry}: the largest block would not fit one SM's registers"


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed")
@pytest.mark.parametrize("key", ["02_single_read", "03_specialized", "04_cluster"])
def test_vec8_rungs_move_16_bytes_per_access_and_rung_01_two(key):
    for fam in (RMSNormFamily(), LayerNormFamily()):
        for wr in ((0, 1) if key == "03_specialized" else (None,)):
            spec = fam.rung(key).spec.with_knobs(**({"WARP_ROW": wr} if wr is not None else {}))
            spec = spec.with_knobs(CLUSTER=4) if key == "04_cluster" else spec
            mix = build.compile_report(spec, 90).instructions
            assert mix.get("LDG.128", 0) > 0 and mix.get("STG.128", 0) > 0, mix
            if wr == 1:
                assert not any(op.startswith("BAR") for op in mix), mix  # warp rows: no block barrier
    mix = build.compile_report(RMSNormFamily().rung("01").spec, 90).instructions
    assert "LDG.128" not in mix and "STG.128" not in mix and mix.get("LDG.U16", 0) > 0, mix


def _built(fam, key, **params):
    np_fam = type(fam)()
    np_fam.array_module = np
    p = np_fam.make_problem(**({"rows": 2} | params))
    return np_fam, p, np_fam.variant(np_fam.rung(key), p)


@pytest.mark.parametrize("n, warp_row, vec, threads", [
    (1, 1, 1, 128), (512, 1, 8, 128), (1000, 1, 8, 128), (1023, 1, 1, 128), (1024, 1, 8, 128), (1025, 0, 1, 64),
    (1026, 0, 2, 64), (1028, 0, 4, 64), (4096, 0, 8, 128), (8192, 0, 8, 256), (32768, 0, 8, 1024),
    (32769, 0, 1, 1024),
])
def test_rung_03_picks_a_warp_or_a_block_per_row_by_n_and_says_so(n, warp_row, vec, threads):
    for fam_cls in FAMILIES:
        fam, p, built = _built(fam_cls(), "03", n=n)
        k = dict(built.spec.knobs)
        assert (k["WARP_ROW"], k["VEC"], k["BF16"]) == (warp_row, vec, 0)
        assert fam.threads(built, n) == threads
        notes = fam.launch_notes(fam.rung("03"), p, None)
        assert notes["path"].startswith("warp per row" if warp_row else "block per row"), notes
        assert ("two reads" in notes["path"]) == (n > 32768) and notes["vec"] == vec and notes["threads"] == threads


@pytest.mark.parametrize("n, vec, cluster, threads, reads", [
    (1, 1, 1, 32, "one read"), (4096, 8, 1, 128, "one read"), (8192, 8, 1, 256, "one read"),
    (8193, 1, 2, 160, "one read"), (16384, 8, 2, 256, "one read"), (32768, 8, 4, 256, "one read"),
    (65536, 8, 8, 256, "one read"), (65544, 8, 8, 288, "one read"), (131072, 8, 8, 512, "one read"),
    (262144, 8, 8, 1024, "one read"), (262152, 8, 8, 1024, None),
])
def test_rung_04_splits_a_row_over_the_fewest_cluster_blocks_that_hold_it(n, vec, cluster, threads, reads):
    for fam_cls in FAMILIES:
        fam, p, built = _built(fam_cls(), "04", n=n, rows=1)
        k = dict(built.spec.knobs)
        assert (k["VEC"], k["CLUSTER"], k["THREADS"]) == (vec, cluster, threads)
        assert fam.geometry(built, 3, n) == ((3 * cluster,), (threads,))
        notes = fam.launch_notes(fam.rung("04"), p, None)
        expected = reads or ("3 reads" if fam.centered else "2 reads")  # streamed: one read per sum, one for y
        shape = f"cluster of {cluster} blocks per row" if cluster > 1 else "block per row"
        assert notes["path"] == f"{shape}, {expected}, {2 * vec}-byte accesses" and notes["cluster"] == cluster


def test_rung_04_refuses_a_grid_past_two_to_the_31_blocks_in_one_sentence():
    fam, p, built = _built(RMSNormFamily(), "04", n=65536, rows=1)
    with pytest.raises(LabError, match="split the rows"):
        fam.geometry(built, 2**28, 65536)


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed")
def test_rung_04_exchanges_through_an_mbarrier_without_a_fence_or_through_a_cluster_barrier():
    """EXCHANGE = 1 (the default): st.async counted on an mbarrier (SYNCS), no memory barrier and no L1
    invalidation; EXCHANGE = 0: the cluster barrier's arrive and wait (UCGABAR), with the fence before it."""
    spec = RMSNormFamily().rung("04").spec.with_knobs(CLUSTER=4)
    mbarrier = build.compile_report(spec, 90).instructions
    assert any(op.startswith("SYNCS") for op in mbarrier) and not any(op.startswith("MEMBAR") for op in mbarrier)
    barrier = build.compile_report(spec.with_knobs(EXCHANGE=0), 90).instructions
    assert not any(op.startswith("SYNCS") for op in barrier)


def test_rung_02_reads_twice_past_its_registers_and_rung_01_always():
    fam, p, built = _built(RMSNormFamily(), "02", n=8192)
    assert "one read" in fam.launch_notes(fam.rung("02"), p, None)["path"]
    fam, p, built = _built(RMSNormFamily(), "02", n=8193)
    assert "two reads, 2-byte" in fam.launch_notes(fam.rung("02"), p, None)["path"]
    fam, p, built = _built(LayerNormFamily(), "01", n=64, dtype=BFLOAT16)
    assert dict(built.spec.knobs) == {"BF16": 1, "THREADS": 256}
    assert fam.launch_notes(fam.rung("01"), p, None)["path"] == "block per row, two reads, 2-byte accesses"


def test_misaligned_pointers_narrow_the_vectors():
    fam, p, built = _built(LayerNormFamily(), "02", n=1024, x_offset=4)
    assert dict(built.spec.knobs)["VEC"] == 4  # x 8 bytes past a 16-byte boundary
    fam, p, built = _built(LayerNormFamily(), "02", n=1024, x_offset=1)
    assert dict(built.spec.knobs)["VEC"] == 1
    fam, p, _ = _built(LayerNormFamily(), "02", n=1024)
    out = np.empty(2 * 1024 + 8, np.float16)[1:2049].reshape(2, 1024)  # the output 2 bytes off
    assert fam.vector_width(p, out) == 1 and fam.vector_width(p) == 8


# --- shape families ----------------------------------------------------------------------------------

def test_check_cases_cover_the_required_shapes_kinds_and_types():
    for fam_cls in FAMILIES:
        cases = fam_cls().check_cases()
        for n in REQUIRED_N:
            for dtype in ("float16", BFLOAT16):
                rows = {c["rows"] for c in cases if c["n"] == n and c["dtype"] == dtype and len(c) == 3}
                assert len(rows) >= 2 and 1 in rows, (n, dtype, rows)
        kinds = {(c.get("values", "random"), c["dtype"]) for c in cases}
        assert kinds == {(v, d) for v in ("random", "constant", "large", "tiny", "offset")
                         for d in ("float16", BFLOAT16)}
        assert any(c.get("eps", DEFAULT_EPS) >= 0.1 for c in cases)
        assert any(c.get("out_offset") for c in cases) and any(c.get("x_offset") for c in cases)
        assert any(c["rows"] > 132 * 16 * 4 and c["n"] <= 1024 for c in cases)  # more warp rows than an H200 holds
        assert max(c["n"] for c in cases) > 32768  # past rung 03's registers


def test_headline_tail_and_sweep_sizes():
    for fam_cls in FAMILIES:
        fam = fam_cls()
        head = fam.headline_params()
        assert {(p["n"], p["dtype"]) for p in head} == {(n, d) for n in (512, 1024, 4096, 8192, 16384, 32768, 65536)
                                                        for d in ("float16", BFLOAT16)}
        assert all(2 * p["rows"] * p["n"] == 256 << 20 for p in head)  # each array 256 MiB
        tail = fam.tail_params()
        ns = [p["n"] for p in tail]
        for base in (1024, 2048, 4096):
            assert set(range(base - 8, base + 9)) <= set(ns)
        assert all(abs(4 * p["rows"] * p["n"] - (256 << 20)) < 4 * p["n"] for p in tail)
        sweep = fam.sweep_params(1 << 30)
        assert sweep[0]["rows"] == 1 and 4 * sweep[-1]["rows"] * 4096 == 1 << 30
        assert len({p["rows"] for p in sweep}) == len(sweep)


def test_min_dram_bytes_count_weights_and_bias_once():
    params = {"rows": 10, "n": 64}
    assert RMSNormFamily().min_dram_bytes(params) == 2 * (2 * 640 + 64)
    assert LayerNormFamily().min_dram_bytes(params) == 2 * (2 * 640 + 128)
