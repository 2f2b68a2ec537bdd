"""Notebook 07's numerics on the CPU (NumPy and the families' own float64 references): the online softmax, fp32
statistics of fp16 data, three ways to a variance, and the special rows' convention."""

from __future__ import annotations

import numpy as np

from lab.lessons.common import Markdown, md
from lab.lessons.fusion.records import ladder, not_in_catalogue

# ----------------------------------------------------------------------------------------------
# Notebook 07: numerics on the CPU (lab's references, NumPy)
# ----------------------------------------------------------------------------------------------

def online_softmax(row: np.ndarray) -> tuple[float, float]:
    """Milakov & Gimelshein's online normalizer, element by element in fp32: the running max m and the sum d of
    exp(x - m), rescaled by exp(m_old - m_new) whenever the max rises. One read of the row."""
    m, d = np.float32(-np.inf), np.float32(0.0)
    for x in row.astype(np.float32):
        new = max(m, x)
        d = d * np.exp(m - new, dtype=np.float32) + np.exp(x - new, dtype=np.float32) if new > -np.inf else d
        m = new
    return float(m), float(d)


def online_softmax_demo(n: int = 4096, seed: int = 0) -> str:
    """One row: the online (m, d) against the two-pass max and sum, and what the naive exp(x) without the shift
    gives on the same row raised by a large offset (overflow to inf, then inf / inf = NaN)."""
    rng = np.random.default_rng(seed)
    row = (rng.standard_normal(n) * 3).astype(np.float32)
    m, d = online_softmax(row)
    m2 = float(row.max())
    d2 = float(np.sum(np.exp(row.astype(np.float64) - m2)))
    shifted = row + np.float32(100.0)
    with np.errstate(over="ignore", invalid="ignore"):
        exps = np.exp(shifted)
        naive = exps / np.sum(exps)
    return "\n".join([
        f"a row of {n} fp32 values, N(0, 9):",
        f"  online, one read : max {m:.6f}, sum of exp(x - max) {d:.6f}",
        f"  two reads (fp64): max {m2:.6f}, sum of exp(x - max) {d2:.6f}  -> relative difference "
        f"{abs(d - d2) / d2:.2e}",
        f"  the same row + 100, exp(x) without the shift in fp32: {np.count_nonzero(np.isnan(naive))} of {n} "
        f"outputs NaN, {np.count_nonzero(np.isinf(exps))} exponentials overflowed to inf"])


def fp16_statistics_demo(n: int = 4096, scale: float = 8.0, seed: int = 0) -> str:
    """Why the statistics are fp32 when the data is fp16: the sum of squares of one fp16 row accumulated in fp16
    (overflow past 65504, then lost low bits) against fp32 and float64."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * scale).astype(np.float16)
    exact = float(np.sum(x.astype(np.float64) ** 2))
    with np.errstate(over="ignore"):
        in_fp16 = np.cumsum(x * x, dtype=np.float16)[-1]  # sequential, as one thread would add
    in_fp32 = np.cumsum(x.astype(np.float32) ** 2, dtype=np.float32)[-1]
    return "\n".join([
        f"sum of x^2 over one fp16 row of {n} values, N(0, {scale ** 2:g}) (RMSNorm's statistic):",
        f"  float64 : {exact:.6g}",
        f"  fp32    : {float(in_fp32):.6g} (relative error {abs(float(in_fp32) - exact) / exact:.1e})",
        f"  fp16    : {float(in_fp16):.6g} (fp16's largest finite value is {float(np.finfo(np.float16).max):g})"])


def variance_demo(n: int = 4096, mean: float = 300.0, seed: int = 0) -> str:
    """LayerNorm's variance in fp32 three ways on a row whose mean is large against its spread: E[x^2] - E[x]^2
    (cancellation), the two-pass centered sum (rungs 02-03), Welford's running update (rung 01); float64 as the
    reference."""
    rng = np.random.default_rng(seed)
    x = (mean + rng.standard_normal(n)).astype(np.float32)
    exact = float(np.var(x.astype(np.float64)))
    s, s2 = np.cumsum(x, dtype=np.float32)[-1], np.cumsum(x * x, dtype=np.float32)[-1]
    naive = float(s2 / np.float32(n) - (s / np.float32(n)) ** 2)
    mu = np.cumsum(x, dtype=np.float32)[-1] / np.float32(n)
    two_pass = float(np.cumsum((x - mu) ** 2, dtype=np.float32)[-1] / np.float32(n))
    w_mean, w_m2 = np.float32(0.0), np.float32(0.0)
    for k, v in enumerate(x, start=1):
        delta = v - w_mean
        w_mean = w_mean + delta / np.float32(k)
        w_m2 = w_m2 + delta * (v - w_mean)
    welford = float(w_m2 / np.float32(n))

    def err(v: float) -> str:
        return f"{v:.6g} (relative error {abs(v - exact) / exact:.1e})"

    return "\n".join([f"variance of one row of {n} fp32 values, mean {mean:g}, std 1: float64 {exact:.6g}",
                      f"  E[x^2] - E[x]^2 in fp32 : {err(naive)}",
                      f"  two passes (centered)   : {err(two_pass)}",
                      f"  Welford, one pass       : {err(welford)}"])


def special_rows_demo(n: int = 8) -> Markdown:
    """The softmax family's special rows (lab.families.softmax.SPECIAL_KINDS) on the CPU: the family's float64
    reference (its definitions: an all -inf row gives zeros) beside a naive softmax (x - max, exp, divide)."""
    fam = ladder("softmax")
    if fam is None:
        return md(not_in_catalogue("softmax"))
    from lab.families.softmax import SPECIAL_KINDS

    fam.array_module = np  # the family's own problem maker and reference, on the host
    problem = fam.make_problem(rows=len(SPECIAL_KINDS), n=n, special=1)
    x = problem.inputs["x"][0]
    reference = fam.reference(problem)
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = x.astype(np.float64) - x.max(axis=1, keepdims=True)
        naive = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)

    def shown(row: np.ndarray) -> str:
        if np.all(np.isnan(row)):
            return "all NaN"
        return " ".join("nan" if np.isnan(v) else f"{v:.3g}" for v in row[:4]) + (" ..." if n > 4 else "")

    lines = [f"Rows of {n}: the first four outputs of each.", "", "| row | naive (x - max, exp, divide) | "
             "lab reference |", "|---|---|---|"]
    for kind, a, b in zip(SPECIAL_KINDS, naive, reference, strict=True):
        lines.append(f"| {kind} | {shown(a)} | {shown(b)} |")
    return md("\n".join(lines))
