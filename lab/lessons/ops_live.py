"""Notebook 08's live-only helpers (lab.lessons.ops): section 1's operands on the GPU and the report of what lab.ops
did with them (the decision, the counters). Everything here needs a GPU; the notebook's replay path prints where the
replayed numbers for the same shapes are shown instead."""

from __future__ import annotations

from lab.lessons.ops_records import candidate_label

USAGE_SHAPE = {"M": 8, "N": 4096, "K": 4096}  # section 1's live example: a decode-sized GEMM with a residual


# ----------------------------------------------------------------------------------------------
# 1. lab.ops in six lines (LIVE only)
# ----------------------------------------------------------------------------------------------

def usage_inputs(seed: int = 0):
    """Section 1's operands on the GPU: x (M x K), a linear layer's weight w (N x K) and a residual h (M x N), fp16,
    random normal (never zeros), the weight scaled by 1/sqrt(K) so the outputs stay of order one."""
    import cupy as cp
    import numpy as np

    from lab.measure.check import random_array

    m, n, k = USAGE_SHAPE["M"], USAGE_SHAPE["N"], USAGE_SHAPE["K"]

    def draw(shape, s, scale=1.0):
        return (random_array(shape, np.float32, seed + s, "normal", xp=cp) * np.float32(scale)).astype(cp.float16)

    return draw((m, k), 0), draw((n, k), 1, k ** -0.5), draw((m, n), 2)


def usage_report(x, w, h, y, stats: dict) -> str:
    """What section 1's call did: the largest difference from x @ w.T + h in fp32, the decision lab.ops made for the
    shape, and the counters it kept."""
    import cupy as cp
    import numpy as np

    from lab.ops import api

    ref = x.astype(cp.float32) @ w.astype(cp.float32).T + h.astype(cp.float32)
    err = float(cp.abs(y.astype(cp.float32) - ref).max())
    scale = float(cp.abs(ref).max())
    roundoff = float(np.finfo(np.float16).eps) / 2
    lines = [f"y: {y.shape} {y.dtype}; largest |y - (x @ w.T + h)| against fp32 = {err:.3g} (outputs up to "
             f"{scale:.3g}; fp16's unit roundoff is {roundoff:.2g} of a value)"]
    rt = api.default_runtime()
    decision = getattr(rt, "last_decision", None) or next(
        (d for key, d in rt.decisions.items() if key[0] == x.shape and key[3] == w.shape), None)
    if decision is not None:
        lines.append(f"decision for this shape: {candidate_label(decision.path, decision.settings)} "
                     f"(from: {decision.source})")
    lines.append(stats_text(stats))
    return "\n".join(lines)


def stats_text(stats: dict) -> str:
    """lab.ops.stats() as lines: its counts, paths, fallbacks, shape families and compiles ('(none)' for empty)."""
    lines = ["lab.ops.stats():"]
    for section in ("counts", "paths", "fallbacks", "families", "compiles"):
        items = stats.get(section) or {}
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(items.items())) or "(none)"
        lines.append(f"  {section:10s} {shown}")
    return "\n".join(lines)
