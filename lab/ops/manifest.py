"""Warm-up manifests: the hot shapes a service declares, compiled and prepared before its first request, so that
no request pays for NVRTC. A manifest is JSON:

    {"shapes": [{"M": 1, "N": 4096, "K": 4096, "dtype": "float16", "layout": "TN", "epilogue": "none"},
                {"op": "rmsnorm", "rows": 1, "n": 4096},
                {"op": "attention", "H": 32, "H_kv": 8, "S_q": 1, "S_k": 8192, "D": 128, "causal": 1}, ...]}

An attention entry gives H, S_q, S_k and D, and optionally B (1), H_kv (H), dtype ("float16") and causal (0): the
kernel a decode or prefill step of that head dimension, type and mask needs is compiled (it does not depend on the
sequence lengths, so one entry per head dimension and class covers every length).

`warm` runs each shape once on scratch operands through a runtime: the decision is made, every kernel the path
needs is compiled or loaded from the build cache, the libraries it calls are initialized (cuBLAS's handle, CuPy's
elementwise kernels), and the counts say what was compiled and what came from disk.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lab.core.errors import LabError

FIELDS = {"M", "N", "K", "dtype", "layout", "epilogue"}
ROW_OPS = ("rmsnorm", "layernorm", "softmax")
ATTENTION_REQUIRED = {"op", "H", "S_q", "S_k", "D"}
ATTENTION_FIELDS = ATTENTION_REQUIRED | {"B", "H_kv", "dtype", "causal"}


def load(path: str | Path) -> list[dict]:
    try:
        payload = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LabError(f"Cannot read the warm-up manifest {path}: {exc}.") from None
    shapes = payload.get("shapes") if isinstance(payload, dict) else None
    if not isinstance(shapes, list):
        raise LabError(f"{path} must be a JSON object with a list under \"shapes\".")
    for i, s in enumerate(shapes, 1):
        if isinstance(s, dict) and s.get("op") in ROW_OPS:
            if set(s) != {"op", "rows", "n"}:
                raise LabError(f"{path}, shape {i}: a row operation gives op, rows and n; got {s!r}.")
        elif isinstance(s, dict) and s.get("op") == "attention":
            _check_attention_entry(s, f"{path}, shape {i}")
        elif not isinstance(s, dict) or not {"M", "N", "K"} <= set(s) or set(s) - FIELDS:
            raise LabError(f"{path}, shape {i}: give M, N, K and optionally dtype, layout, epilogue (or op, rows and "
                           f"n for {', '.join(ROW_OPS)}; or op \"attention\", H, S_q, S_k, D); got {s!r}.")
    return shapes


def _check_attention_entry(s: dict, where: str) -> None:
    if not ATTENTION_REQUIRED <= set(s) or set(s) - ATTENTION_FIELDS:
        raise LabError(f"{where}: an attention entry gives op, H, S_q, S_k, D and optionally B, H_kv, dtype, causal; "
                       f"got {s!r}.")
    sizes = {k: s[k] for k in ("B", "H", "H_kv", "S_q", "S_k", "D") if k in s}
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes.values()):
        raise LabError(f"{where}: B, H, H_kv, S_q, S_k and D are whole numbers >= 1; got {sizes}.")
    if s.get("dtype", "float16") not in ("float16", "bfloat16"):
        raise LabError(f"{where}: an attention entry's dtype is \"float16\" or \"bfloat16\"; got {s['dtype']!r}.")
    if s.get("causal", 0) not in (0, 1):
        raise LabError(f"{where}: causal is 0 or 1 (or true or false); got {s['causal']!r}.")


def warmup(manifest: list[dict], runtime=None) -> dict:
    """Compile and prepare every shape of a warm-up manifest before the first request: a list of
    {"M", "N", "K", "dtype", "layout", "epilogue"} entries (row operations and attention as the module says; `load`
    reads one from JSON), on `runtime` (lab.ops's default runtime when None). Returns {"shapes": n, "seconds": s,
    "compiled": kernels built by NVRTC, "from_disk": cubins found in the cache}. (lab.ops.warmup is this function.)"""
    from lab.ops.api import default_runtime

    return warm(manifest, runtime or default_runtime())


def warm(shapes: list[dict], runtime) -> dict:
    import cupy as cp

    from lab.core.build import COMPILES
    from lab.ops.api import matmul
    from lab.ops.shapes import GemmShape
    from lab.ops.tune import make_inputs

    before = dict(COMPILES)
    started = time.perf_counter()
    for s in shapes:
        if s.get("op") in ROW_OPS:
            _warm_row_op(s["op"], int(s["rows"]), int(s["n"]))
            continue
        if s.get("op") == "attention":
            _warm_attention(s, runtime)
            continue
        shape = GemmShape(int(s["M"]), int(s["N"]), int(s["K"]), s.get("dtype", "float16"), s.get("layout", "TN"),
                          True, s.get("epilogue", "none"))
        a, b, bias, activation, residual = make_inputs(shape, seed=1)
        matmul(a, b, bias=bias, activation=activation, residual=residual, layout=shape.layout,
               input_type="bfloat16" if shape.dtype == "bfloat16" else None, runtime=runtime)
    cp.cuda.get_current_stream().synchronize()
    return {"shapes": len(shapes), "seconds": round(time.perf_counter() - started, 3),
            "compiled": COMPILES["compiled"] - before.get("compiled", 0),
            "from_disk": COMPILES["cache_hits"] - before.get("cache_hits", 0)}


def _warm_row_op(op: str, rows: int, n: int) -> None:
    import cupy as cp

    from lab.ops import api

    x = cp.ones((rows, n), cp.float16)
    w = cp.ones(n, cp.float16)
    if op == "softmax":
        api.softmax(x)
    elif op == "rmsnorm":
        api.rmsnorm(x, w)
    else:
        api.layernorm(x, w, w)


def _warm_attention(s: dict, runtime) -> None:
    """One call on scratch operands of the entry's shape: the decision, the kernel's build, the recording."""
    from lab.ops.attn import attention
    from lab.ops.paths import family

    dtype = s.get("dtype", "float16")
    problem = family("attention").make_problem(1, B=s.get("B", 1), H=s["H"], H_kv=s.get("H_kv", s["H"]),
                                               S_q=s["S_q"], S_k=s["S_k"], D=s["D"], dtype=dtype,
                                               causal=int(s.get("causal", 0)))
    q, k, v = (problem.inputs[n][0] for n in ("Q", "K", "V"))
    attention(q, k, v, causal=bool(s.get("causal", 0)), input_type="bfloat16" if dtype == "bfloat16" else None,
              runtime=runtime)
