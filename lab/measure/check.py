"""Correctness: float64 references, poisoned outputs with guard zones, and repeat runs for races.

A kernel passes only if, on fresh random inputs (never zeros):
- every output element was written (none still carries the poison bit pattern),
- nothing before or after the output changed (guard zones, compared bit for bit),
- every element matches the float64 reference within its own error bound (lab.measure.bounds; bit-exactly,
  for data movement),
- a second run with a different poison gives bit-identical output (a moving answer is a race).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# Quiet NaNs with payloads no arithmetic produces, so "still poisoned" and "guard touched" are
# unambiguous even for kernels that legitimately output NaN. The 2-byte patterns are NaN both as fp16
# and as bf16 (all exponent bits set in either layout), so a kernel that reads C when beta == 0 gets NaN
# from the poison in both types.
# One-byte outputs (int8, fp8 codes) have no pattern that no value can take: 0x5A and 0xA5 are ordinary
# values there, so for them an unwritten element is caught by the value check and the repeat instead (the
# two runs' poisons differ, and at most one of them can match the reference).
_POISON = {1: (0x5A, 0xA5), 2: (0x7FC1, 0x7FC2), 4: (0x7FC0BAD0, 0x7FC0BAD1),
           8: (0x7FF80000BAD00000, 0x7FF80000BAD00001)}
_GUARD = {1: 0xC3, 2: 0x7FC3, 4: 0x7FC0DEAD, 8: 0x7FF80000DEAD0000}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
DISTRIBUTIONS = ("normal", "uniform", "wide")


def random_array(shape, dtype=np.float32, seed: int = 0, dist: str = "normal", xp=None):
    """Fresh random values on the GPU (or with `xp=numpy`, on the host), never exactly zero.

    normal: N(0, 1); uniform: |x| in [0.5, 2) with random signs; wide: random signs, magnitudes
    spread over 10^-3 .. 10^3 (catches kernels that lose precision or mix up elements of similar size).
    """
    if xp is None:
        import cupy as xp
    rng = xp.random.default_rng(seed)
    if dist == "normal":
        x = rng.standard_normal(shape, dtype=xp.float32 if np.dtype(dtype).itemsize <= 4 else xp.float64)
    elif dist == "uniform":
        x = rng.uniform(0.5, 2.0, shape) * xp.where(rng.random(shape) < 0.5, -1.0, 1.0)
    elif dist == "wide":
        x = 10.0 ** rng.uniform(-3, 3, shape) * xp.where(rng.random(shape) < 0.5, -1.0, 1.0)
    else:
        raise ValueError(f"unknown distribution {dist!r}; use one of {DISTRIBUTIONS}")
    x = x.astype(dtype)
    x[x == 0] = 1  # never zeros: a zero hides an unwritten or mis-indexed output
    return x


class GuardedBuffer:
    """An output array with guard zones before and after it, and a poison pattern inside it.

    `offset` shifts the output's start by that many elements, to test kernels on outputs that
    are not 16-byte aligned. `xp` is the array module (CuPy on the GPU; NumPy lets the checking
    logic itself be tested on a machine without one).
    """

    def __init__(self, shape, dtype=np.float32, guard: int = 4096, offset: int = 0, xp=None):
        if xp is None:
            import cupy as xp
        self.xp = xp
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        if self.dtype.itemsize not in _UINT:
            raise ValueError(f"GuardedBuffer supports 1-, 2-, 4- and 8-byte dtypes, not {self.dtype}")
        self.size = math.prod(self.shape)
        self.start = guard + offset
        self.raw = xp.empty(self.size + self.start + guard, dtype=self.dtype)
        self.bits = self.raw.view(_UINT[self.dtype.itemsize])
        self.out = self.raw[self.start:self.start + self.size].reshape(self.shape)

    def poison(self, variant: int = 0) -> None:
        item = self.dtype.itemsize
        self.bits.fill(_GUARD[item])
        self.bits[self.start:self.start + self.size] = _POISON[item][variant % 2]

    def output_bits(self):
        """The output's bit patterns (a copy), to compare what a launch changed."""
        return self.bits[self.start:self.start + self.size].reshape(self.shape).copy()

    def problems(self, must_write=None, before=None) -> list[str]:
        """What went wrong at the memory level: out-of-bounds writes, unwritten elements.

        With `must_write` (a boolean mask of the output's shape) only those elements must be written,
        and every other element must still hold the bits it had `before` the launch: the padding
        columns of a matrix with a leading dimension larger than its width, say.
        """
        xp = self.xp
        item = self.dtype.itemsize
        found = []
        before_guard = self.bits[:self.start]
        after_guard = self.bits[self.start + self.size:]
        bad_before = int(xp.count_nonzero(before_guard != _GUARD[item]))
        bad_after = int(xp.count_nonzero(after_guard != _GUARD[item]))
        if bad_before:
            found.append(f"wrote {bad_before} element(s) in the guard zone BEFORE the output")
        if bad_after:
            found.append(f"wrote {bad_after} element(s) in the guard zone AFTER the output")
        inside = self.bits[self.start:self.start + self.size].reshape(self.shape)
        poisoned = (inside == _POISON[item][0]) | (inside == _POISON[item][1])
        if item == 1:  # every byte is some value: see _POISON
            poisoned = xp.zeros(self.shape, dtype=bool)
        if must_write is not None:
            mask = xp.asarray(must_write)
            poisoned = poisoned & mask
            touched = (inside != before) & ~mask
            n_touched = int(xp.count_nonzero(touched))
            if n_touched:
                where = np.unravel_index(int(xp.argmax(touched)), self.shape)
                found.append(f"wrote {n_touched} element(s) it must leave alone, outside the result "
                             f"(first at {where}: the padding of the leading dimension?)")
        unwritten = int(xp.count_nonzero(poisoned))
        if unwritten:
            where = np.unravel_index(int(xp.argmax(poisoned)), self.shape)
            total = int(xp.count_nonzero(xp.asarray(must_write))) if must_write is not None else self.size
            found.append(f"left {unwritten} of {total} output element(s) unwritten (first at {where})")
        return found


def to_numpy(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


@dataclass
class Comparison:
    passed: bool
    max_abs_error: float
    max_rel_error: float  # normwise ||out - ref|| / ||ref||: a reported statistic, never the pass criterion
    worst_index: tuple  # the element with the largest error relative to its bound (or the first non-finite one)
    nonfinite: int
    worst_ratio: float = 0.0  # |out - ref| / bound at worst_index: <= 1 passes; inf where the bound is 0
    worst_value: float = 0.0
    worst_reference: float = 0.0
    worst_bound: float = 0.0

    def describe(self) -> str:
        at = f"element {self.worst_index}: got {self.worst_value:.9g}, reference {self.worst_reference:.9g}"
        if self.nonfinite:
            return (f"{self.nonfinite} element(s) where the output and the reference disagree on NaN/Inf "
                    f"(first at {at})")
        if self.worst_bound == 0:
            return f"{at} (must be bit-exact); max |err| {self.max_abs_error:.3g}"
        return (f"{at}, |error| {abs(self.worst_value - self.worst_reference):.3g} "
                f"{'exceeds' if self.worst_ratio > 1 else 'within'} its bound {self.worst_bound:.3g} "
                f"(error/bound {self.worst_ratio:.3g}; normwise rel err {self.max_rel_error:.3g})")


def compare(out, ref: np.ndarray, bound=0.0) -> Comparison:
    """Compare an output with a float64 reference, element by element.

    `bound` is each element's allowed absolute error (an array of the reference's shape, or a scalar):
    0 means bit-exact after casting (data movement). Every element must be within its own bound; the
    normwise relative error is reported beside, as a statistic. lab.measure.bounds derives the bounds.
    """
    got = out.get().astype(np.float64) if hasattr(out, "get") else np.asarray(out, dtype=np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference's {ref.shape}")
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), ref.shape)
    finite_ref = np.isfinite(ref)
    # Where the reference is NaN or +-inf the output must be the same: NaN for NaN, the same infinity.
    same_special = (np.isnan(ref) & np.isnan(got)) | (got == ref)
    bad_nonfinite = (~np.isfinite(got) & finite_ref) | (~finite_ref & ~same_special)
    nonfinite = int(np.count_nonzero(bad_nonfinite))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.nan_to_num(np.where(finite_ref, np.abs(got - ref), 0.0), nan=np.inf)
        ratio = np.where(diff == 0, 0.0, diff / np.where(bound > 0, bound, 0.0))
    ratio = np.nan_to_num(ratio, nan=np.inf, posinf=np.inf)
    # Bit-exact means the sign of a zero too: -0.0 where the reference holds +0.0 is a wrong element.
    ratio = np.where((bound == 0) & finite_ref & (diff == 0) & (np.signbit(got) != np.signbit(ref)), np.inf, ratio)
    if nonfinite:
        worst_flat = int(np.argmax(bad_nonfinite))
    elif ratio.size and np.isinf(ratio).any():  # wrong where exactness was due: the largest such error
        worst_flat = int(np.argmax(np.where(np.isinf(ratio), diff, -1.0)))
    elif ratio.size and ratio.max() > 0:
        worst_flat = int(np.argmax(ratio))
    else:
        worst_flat = int(np.argmax(diff)) if diff.size else 0
    worst = np.unravel_index(worst_flat, ref.shape) if ref.size else ()
    max_abs = float(diff.max()) if diff.size else 0.0
    norm_ref = float(np.linalg.norm(ref[finite_ref])) or 1.0
    with np.errstate(over="ignore"):
        rel = float(np.linalg.norm(diff)) / norm_ref
    worst_ratio = float(ratio.flat[worst_flat]) if ref.size else 0.0
    passed = nonfinite == 0 and (not ratio.size or float(ratio.max()) <= 1.0)
    pick = (lambda a: float(a[worst])) if ref.size else (lambda a: 0.0)
    return Comparison(passed, max_abs, rel, tuple(int(i) for i in worst), nonfinite, worst_ratio,
                      pick(got), pick(ref), pick(bound))


@dataclass
class CheckResult:
    family: str
    rung: str
    case: str  # the shape/length and any offsets, as a readable label
    passed: bool
    reasons: list[str] = field(default_factory=list)
    max_rel_error: float = 0.0  # the worst normwise relative error seen (a statistic)
    worst_ratio: float = 0.0  # the largest |error| / bound of any element seen (must stay <= 1)

    def line(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        why = "" if self.passed else ": " + "; ".join(self.reasons)
        return f"{status} {self.family}/{self.rung} [{self.case}]{why}"
