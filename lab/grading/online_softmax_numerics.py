"""Exercise 10's step on chosen rows: every quantity lab_online_softmax_step returns, judged exactly.

Attention's output cannot see all of the step. A row that has seen no key ends with l = 0, and the kernel stores
+0 for it whatever its accumulator holds: a step that shifts such a row by -inf (2^(-inf - -inf) is NaN) loses
nothing in the output checks. Here the step runs through kernels/exercises/10_online_softmax_harness.cu, one
thread per chosen row, and m, l, o and every p are compared with no bound: the rows use scores and scales that
make every exponent an integer, so every weight and factor is a power of two and every sum is exact in fp32
(and every weight exact in fp16 and bf16, or below fp16's range and 0 there), whatever the order of the additions.
m and every p must be exactly right; l and o, which carry the rescale factor (an ex2 of an integer), within a few
fp32 ulps.

`check_step_numerics(plugin_path, shown, headers)` builds the harness with the student's file as the plugin, for
fp16 and bf16, runs it with its outputs poisoned, and says in one sentence what is wrong, if anything.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from lab.core.errors import LabError

HARNESS_SOURCE = "exercises/10_online_softmax_harness.cu"
HARNESS_ENTRY = "lab_online_softmax_step_harness"
KEYS, COLS = 4, 2  # the harness's STEP_KEYS and STEP_COLS
THREADS = 64
POISON_P = 0x7E7E  # what p_out holds before the launch (a NaN in fp16 and bf16): never an expected weight
INF = math.inf
# How far l and o may sit from their exact values, relative: a few ulps of fp32, for an ex2 that is not exact on
# integers (the p are exact either way: rounded to 16 bits, a power of two within a few fp32 ulps is that power).
FACTOR_SLACK = 2.0 ** -20


@dataclasses.dataclass(frozen=True)
class Row:
    """One row's state before the step, its tile, and what it tests (`what`) and how to get it right (`hint`)."""

    what: str
    hint: str
    m: float
    l: float
    o: tuple[float, ...]
    s: tuple[float, ...]
    tile_max: float
    c: float

    def inputs(self) -> list[float]:
        return [self.m, self.l, *self.o, *self.s, self.tile_max, self.c]

    def expected(self, bf16: int) -> tuple[list[float], list[int]]:
        """([m, l, o...] after the step, the p bit patterns): the README's step in exact arithmetic (every value
        here is a power of two, a sum of a few, or 0, so fp32 and the 16-bit type hold them exactly)."""
        m_new = max(self.m, self.tile_max * self.c)
        shift = 0.0 if m_new == -INF else m_new
        alpha = 1.0 if m_new == self.m else 2.0 ** (self.m - shift)  # 2^-inf = 0
        weights = [0.0 if s == -INF else 2.0 ** (s * self.c - shift) for s in self.s]
        bits = [_bits(w, bf16) for w in weights]
        rounded = [_value(b, bf16) for b in bits]
        # the sum rounded to fp32 once: with these weights every order of fp32 additions gives that value
        l_new = float(np.float32(alpha * self.l + sum(rounded)))
        return [m_new, l_new, *(alpha * v for v in self.o)], bits


def _bits(value: float, bf16: int) -> int:
    if bf16:  # exact for the powers of two used here: bf16 is fp32's top half
        return int(np.float32(value).view(np.uint32) >> 16)
    return int(np.float16(value).view(np.uint16))


def _value(bits: int, bf16: int) -> float:
    if bf16:
        return float(np.uint32(bits << 16).view(np.float32))
    return float(np.uint16(bits).view(np.float16))


_SHIFT = "m_new = max(m, tile_max * c), then p = 2^(s c - m_new)"
ROWS = (
    Row("a row that has seen no key, on a tile whose keys are all masked (m = -inf, every score -inf)",
        "while m_new is -inf shift by 0, not by m_new (2^(-inf - -inf) is NaN), and keep alpha at 1: m stays -inf, "
        "l and every p 0", -INF, 0.0, (0.0, 0.0), (-INF,) * KEYS, -INF, 0.5),
    Row("a row's first visible tile (m = -inf before it; the tile's max is held by another lane)",
        f"{_SHIFT} rounded to the input type, l = alpha l + the sum of the rounded p, alpha = 2^(m - m_new), here 0",
        -INF, 0.0, (0.0, 0.0), (2.0, 4.0, -INF, 6.0), 8.0, 0.5),
    Row("a tile that raises the row's max (m = 1, tile_max * c = 3)",
        "alpha = 2^(m - m_new) scales l and every o before the tile's sum is added", 1.0, 3.0, (4.0, -8.0),
        (2.0, 6.0, 0.0, -INF), 6.0, 0.5),
    Row("a tile under the row's max (m = 3, tile_max * c = 2)",
        "the max stays m, alpha is 1, and the tile's p are 2^(s c - m)", 3.0, 2.0, (3.0, -5.0),
        (2.0, 4.0, -INF, 0.0), 4.0, 0.5),
    Row("a tile whose max equals the row's (m = 2, tile_max * c = 2)",
        "the max stays m, alpha is 1, and the tile's p are 2^(s c - m)", 2.0, 1.0, (7.0, 0.5),
        (4.0, 2.0, 0.0, -2.0), 4.0, 0.5),
    Row("a fully masked tile after visible keys (m = 3, every score -inf)",
        "nothing changes: the max stays, alpha is 1, every p is 2^-inf = 0", 3.0, 2.0, (3.0, -5.0),
        (-INF,) * KEYS, -INF, 0.5),
    Row("a first tile of large logits (scores up to 200, c = 0.5)",
        f"{_SHIFT}: the max is subtracted before the exp, so the largest weight is 1", -INF, 0.0, (0.0, 0.0),
        (200.0, 180.0, 100.0, -INF), 200.0, 0.5),
    Row("a first tile whose scores are all negative (max -2, c = 1)",
        f"{_SHIFT}: the shift is the max itself whatever its sign", -INF, 0.0, (0.0, 0.0),
        (-2.0, -4.0, -6.0, -INF), -2.0, 1.0),
)
NAMES = ["m", "l", *(f"o[{j}]" for j in range(COLS))]


def harness_spec(plugin_path: Path, shown: str, bf16: int = 0, headers: tuple[str, ...] | None = None):
    """The harness built with `plugin_path` as the plugin header, at the arch of attention rung 02."""
    from lab.core.build import KernelSpec
    from lab.families import get_family

    rung = get_family("attention").rung("02").spec
    return KernelSpec(HARNESS_SOURCE, HARNESS_ENTRY, (("BF16", int(bf16)),), min_arch=rung.min_arch,
                      plugin=str(Path(plugin_path).resolve()), label=shown, headers=headers)


def _run(spec) -> tuple[np.ndarray, np.ndarray]:
    """One launch over ROWS: ([m, l, o...] per row as float32, the p patterns per row), outputs poisoned first."""
    import cupy as cp

    from lab.core.build import get_kernel

    n = len(ROWS)
    x = cp.asarray(np.array([r.inputs() for r in ROWS], dtype=np.float32))
    out = cp.full((n, 2 + COLS), np.nan, dtype=cp.float32)
    p_out = cp.full((n, KEYS), POISON_P, dtype=cp.uint16)
    get_kernel(spec)(((n + THREADS - 1) // THREADS,), (THREADS,), (x, out, p_out, np.int32(n)))
    cp.cuda.get_current_stream().synchronize()
    return out.get(), p_out.get()


def _shown(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.9g}"


def first_wrong(values: np.ndarray, patterns: np.ndarray, bf16: int) -> str | None:
    """The first quantity of the harness's output that is not exactly the expected one, as one sentence (None: all
    exact). `values` and `patterns` are _run's."""
    built = " (built with BF16=1)" if bf16 else ""
    for i, row in enumerate(ROWS):
        want, want_bits = row.expected(bf16)
        for name, got, w in zip(NAMES, values[i].tolist(), want, strict=True):
            slack = 0.0 if name == "m" else FACTOR_SLACK * abs(w)  # alpha is an ex2 of an integer: exact, or nearly
            if not abs(got - w) <= slack and got != w:  # -inf equals -inf; NaN equals nothing
                return (f"lab_online_softmax_step{built} on {row.what}: {name} became {_shown(got)}, must be "
                        f"{_shown(w)}; {row.hint}.")
        for k, (got, w) in enumerate(zip(patterns[i].tolist(), want_bits, strict=True)):
            if got != w:
                unwritten = " (left unwritten)" if got == POISON_P else ""
                return (f"lab_online_softmax_step{built} on {row.what}: p[{k}] became {_shown(_value(got, bf16))}"
                        f"{unwritten}, must be {_shown(_value(w, bf16))}; {row.hint}.")
    return None


def check_step_numerics(plugin_path: Path, shown: str, headers: tuple[str, ...] | None = None) -> tuple[bool, str]:
    """Run the step in `plugin_path` (named `shown` in messages) on ROWS, built for fp16 and bf16, with the lab
    `headers` a submission is given (None: all). (True, a summary) when every quantity is exact, else (False, one
    sentence naming the first wrong one, or the compile error). A CUDA error is raised: the grader records it."""
    for bf16 in (0, 1):
        try:
            values, patterns = _run(harness_spec(plugin_path, shown, bf16, headers))
        except LabError as exc:
            return False, str(exc)
        why = first_wrong(values, patterns, bf16)
        if why:
            return False, why
    return True, f"the step on {len(ROWS)} chosen rows (no key yet, first tile, max moving and not): all exact"
