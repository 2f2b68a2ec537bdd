"""The checking logic itself, on the CPU: a NumPy 'family' whose launches misbehave on purpose.

On the GPU the same code runs with CuPy arrays; here NumPy stands in, so every branch of
lab.measure.verify.check_case and lab.measure.check.GuardedBuffer is exercised in CI."""

import numpy as np
import pytest

from lab.core.ladder import Family, Problem, Rung
from lab.measure.verify import check_case

RUNG = Rung("toy", "01_toy", None, "toy")


class ToyGemv(Family):
    """y[i] = alpha * sum_k A[i, k] + beta * y[i], written into a padded output (ld > n)."""

    name = "toy"
    array_module = np

    def __init__(self, behaviour="ok"):
        self.behaviour = behaviour
        self.calls = 0

    def make_problem(self, seed=0, dist="normal", n=8, k=5, ld=11, beta=0.5, **_):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((n, k)).astype(np.float32) + 3
        mask = np.zeros((1, ld), bool)
        mask[0, :n] = True
        init = None
        if beta:
            init = rng.standard_normal((1, ld)).astype(np.float32)
        return Problem(f"n={n} beta={beta}", {"a": a, "beta": beta}, (1, ld), 0, out_init=init, write_mask=mask)

    def reference(self, p):
        a = p.inputs["a"].astype(np.float64)
        ref = np.zeros(p.out_shape)
        ref[0, :a.shape[0]] = a.sum(axis=1)
        if p.inputs["beta"]:
            ref[0, :a.shape[0]] += p.inputs["beta"] * p.out_init[0, :a.shape[0]].astype(np.float64)
        return ref

    def error_bound(self, p, ref):
        from lab.measure.bounds import matmul_bound

        a = p.inputs["a"].astype(np.float64)
        n, k = a.shape
        beta = p.inputs["beta"]
        c0 = p.out_init[0, :n, None].astype(np.float64) if beta else None
        bound = np.zeros(p.out_shape)
        bound[0, :n] = matmul_bound(a, np.ones((k, 1)), ref[0, :n, None], beta=beta, c0=c0)[:, 0]
        return bound

    def launch(self, rung, p, out, set_index=0):
        self.calls += 1
        a, beta = p.inputs["a"], p.inputs["beta"]
        n = a.shape[0]
        acc = a.astype(np.float32).sum(axis=1)
        row = out[0]
        if self.behaviour == "reads_c_when_beta_is_zero":
            row[:n] = acc + 0.0 * row[:n]  # NaN poison * 0 = NaN
            return
        value = acc + (beta * row[:n] if beta else 0)
        if self.behaviour == "writes_padding":
            row[:n + 1] = np.append(value, 0)
        elif self.behaviour == "skips_last":
            row[:n - 1] = value[:-1]
        elif self.behaviour == "racy":
            row[:n] = value + (self.calls % 2) * 1e-7 * value
        elif self.behaviour == "wrong":
            row[:n] = value * 1.01
        else:
            row[:n] = value


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_a_correct_kernel_passes_with_and_without_beta(beta):
    result = check_case(ToyGemv("ok"), RUNG, {"beta": beta})
    assert result.passed, result.reasons


@pytest.mark.parametrize("behaviour, beta, expected", [
    ("reads_c_when_beta_is_zero", 0.0, "NaN"),
    ("writes_padding", 0.5, "must leave alone"),
    ("writes_padding", 0.0, "must leave alone"),
    ("skips_last", 0.0, "unwritten"),
    ("skips_last", 0.5, "wrong result"),
    ("racy", 0.5, "race"),
    ("wrong", 0.5, "wrong result"),
])
def test_each_fault_is_caught_with_its_reason(behaviour, beta, expected):
    result = check_case(ToyGemv(behaviour), RUNG, {"beta": beta})
    assert not result.passed
    assert any(expected in r for r in result.reasons), result.reasons


# ----------------------------------------------------------------------------------------------
# compare_output: one launch's whole output, as the grader's timed runs check it
# ----------------------------------------------------------------------------------------------

def _launched(beta: float, ld: int = 11):
    family = ToyGemv("ok")
    problem = family.make_problem(beta=beta, ld=ld)
    out = np.full(problem.out_shape, np.nan, dtype=np.float32)  # the padding is never written
    if problem.out_init is not None:
        out[...] = problem.out_init
    family.launch(RUNG, problem, out)
    out[0, problem.write_mask[0].sum():] = np.nan  # whatever the padding holds is not the kernel's output
    return family, problem, out


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_compare_output_looks_only_at_the_written_elements_within_their_bounds(beta):
    from lab.measure.verify import compare_output, expected_output

    family, problem, out = _launched(beta)
    reference, mask, bound = expected_output(family, problem)
    assert reference.shape == bound.shape == (8,) and mask.sum() == 8 and (bound > 0).all()
    assert np.isnan(out[0, 8:]).all() and compare_output(family, problem, out).passed  # NaN padding ignored
    out[0, :8] = np.nextafter(out[0, :8], np.float32(np.inf))  # one ulp of float32 rounding passes
    assert compare_output(family, problem, out).passed
    out[0, 3] *= 1.01
    cmp = compare_output(family, problem, out)
    assert not cmp.passed and cmp.worst_index == (3,) and cmp.worst_ratio > 1


def test_compare_output_of_a_data_movement_family_is_bit_exact():
    from lab.core.ladder import Family
    from lab.measure.verify import compare_output

    family, problem, _ = _launched(0.0)
    problem.write_mask = None
    family.error_bound = lambda p, ref: Family.error_bound(family, p, ref)  # the base class: bit-exact
    exact = np.linspace(-3, 3, 11, dtype=np.float32)[None]
    family.reference = lambda p: exact.astype(np.float64)
    assert compare_output(family, problem, exact.copy()).passed
    nudged = exact.copy()
    nudged[0, 4] = np.nextafter(nudged[0, 4], np.float32(np.inf))
    cmp = compare_output(family, problem, nudged)
    assert not cmp.passed and "bit-exact" in cmp.describe()
