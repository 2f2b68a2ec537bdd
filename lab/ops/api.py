"""lab.ops's public calls: matmul, softmax, rmsnorm, layernorm (warmup is lab.ops.manifest's).

Each call validates its arguments the first time it sees their shapes, strides and types (one sentence per
misuse, raised as LabError), then runs through the process's Runtime (lab.ops.dispatch). Types: fp16 as
cupy.float16, bf16 as uint16 arrays of bf16 bit patterns with input_type="bfloat16" (CuPy has no bf16 type).
Other float types go to CuPy's own operations (counted as a fallback), as do empty arrays.
"""

from __future__ import annotations

import os

import numpy as np

from lab.core.errors import LabError
from lab.ops import counters, rules
from lab.ops.dispatch import Runtime
from lab.ops.paths import Call
from lab.ops.shapes import GemmShape

ACTIVATIONS = {"relu": "relu", "gelu": "gelu_erf", "gelu_erf": "gelu_erf", "gelu_tanh": "gelu_tanh", "silu": "silu"}
LAYOUTS = ("NN", "TN")
_RUNTIME: Runtime | None = None
_CHECKED: dict = {}  # call key -> (kind, GemmShape, lda, ldb) for calls already validated


def default_runtime() -> Runtime:
    """The process's runtime: the built-in table and the on-disk autotune cache (LAB_OPS_TUNE_FILE names another
    file than the build cache's ops/tune.json; LAB_OPS_AUTOTUNE=1 tunes buckets it does not hold, on their first
    call; LAB_OPS_RULES=path.json loads another table)."""
    global _RUNTIME
    if _RUNTIME is None:
        from lab.ops.store import TuneStore

        table = rules.load(os.environ["LAB_OPS_RULES"]) if os.environ.get("LAB_OPS_RULES") else None
        store = TuneStore(os.environ.get("LAB_OPS_TUNE_FILE") or None)
        _RUNTIME = Runtime(table, store, autotune=os.environ.get("LAB_OPS_AUTOTUNE") == "1")
    return _RUNTIME


def set_rules(table: rules.Table | str | None, runtime: Runtime | None = None) -> None:
    """Use another dispatch table (a Table, a JSON file's path, or None for the built-in one)."""
    rt = runtime or default_runtime()
    rt.table = rules.load(table) if isinstance(table, (str, os.PathLike)) else (table or rules.DEFAULT)
    rt.forget()


# --- matmul ------------------------------------------------------------------------------------------

def matmul(a, b, *, bias=None, activation: str | None = None, residual=None, out=None, out_dtype=None,
           layout: str = "NN", input_type: str | None = None, runtime: Runtime | None = None):
    """activation(a @ B + bias) + residual, with B = b (K x N) for layout "NN" or b.T for "TN" (b is N x K, a
    linear layer's weight). a is M x K (or ... x K: the leading dimensions are flattened), fp16 or bf16 (uint16
    with input_type="bfloat16"); bias float32 (N,); residual like the output, (..., N); activation relu, gelu
    (erf), gelu_tanh or silu. Returns out (allocated when None), in the inputs' type.

    The first call with given shapes, strides and types validates them; the first call on given addresses records
    its launches; every later call on the same addresses replays them (the fast path below)."""
    rt = runtime or _RUNTIME or default_runtime()
    if out is not None:
        try:  # the fast path: one flat key of addresses, shapes and strides, one lookup, the recorded launches
            fkey = (a.data.ptr, b.data.ptr, out.data.ptr, 0 if bias is None else bias.data.ptr,
                    0 if residual is None else residual.data.ptr, a.shape, a.strides, b.shape, b.strides, out.shape,
                    out.strides, a.dtype.char, out.dtype.char, layout, activation, input_type, out_dtype,
                    None if bias is None else (bias.shape, bias.strides, bias.dtype.char),
                    None if residual is None else (residual.shape, residual.strides, residual.dtype.char))
        except AttributeError:
            fkey = None
        replay = rt.fast.get(fkey)
        if replay is not None:
            counters.COUNTS["calls"] += 1
            replay.calls += 1  # folded into the counters when they are read (lab.ops.counters.fold)
            for raw, grid, block, args, smem in replay.launches:
                raw(grid, block, args, shared_mem=smem)
            rt.last_decision = replay.decision
            rt.last_fused, rt.last_exact = replay.fused, replay.exact
            return out
    else:
        fkey = None
    try:
        key = (a.shape, a.strides, a.dtype.char, b.shape, b.strides, b.dtype.char, layout, input_type, activation,
               out_dtype, None if bias is None else (bias.shape, bias.strides, bias.dtype.char),
               None if residual is None else (residual.shape, residual.strides, residual.dtype.char),
               None if out is None else (out.shape, out.strides, out.dtype.char),
               a.data.ptr & 15, b.data.ptr & 15, a.data.device_id)
    except AttributeError:
        _check_matmul_values(a, b, bias, activation, residual, out, out_dtype, layout, input_type)
        raise _not_on_gpu("matmul", "a, b, and bias, residual and out when given") from None
    counters.COUNTS["calls"] += 1
    return _matmul_slow(rt, key, a, b, bias, activation, residual, out, out_dtype, layout, input_type, fkey)


def _matmul_slow(rt: Runtime, key, a, b, bias, activation, residual, out, out_dtype, layout, input_type, fkey=None):
    """A call the fast path cannot replay: validated once per key, then run (and recorded) by the runtime."""
    import cupy as cp

    checked = _CHECKED.get(key)
    if checked is None:
        checked = _check_matmul(a, b, bias, activation, residual, out, out_dtype, layout, input_type)
        if len(_CHECKED) > 65536:
            _CHECKED.clear()
        _CHECKED[key] = checked
    kind, shape, lda, ldb = checked
    if kind != "kernel":
        counters.FALLBACKS[kind] += 1
        return _cupy_matmul(a, b, bias, activation, residual, out, layout)
    lead = a.shape[:-1]
    if out is None:
        out = cp.empty((*lead, shape.N), dtype=a.dtype)
    else:
        _check_no_overlap(out, (a, b, bias, residual))
    a2 = a.reshape(shape.M, lda)[:, :shape.K] if a.ndim != 2 else a
    out2 = out.reshape(shape.M, shape.N) if out.ndim != 2 else out
    res2 = residual.reshape(shape.M, shape.N) if residual is not None and residual.ndim != 2 else residual
    b2 = _stored(b)  # a transposed view is read in place, as the other layout (the shape says which)
    call = Call(a2, b2, out2, shape, lda, ldb, shape.N, bias, ACTIVATIONS.get(activation), res2)
    replay_key = (key[:12] + ((out.shape, out.strides, out.dtype.char),) + key[13:], a.data.ptr, b.data.ptr,
                  out.data.ptr, 0 if bias is None else bias.data.ptr, 0 if residual is None else residual.data.ptr)
    rt.run(key, call, replay_key)
    if fkey is not None:
        rt.remember_fast(fkey, replay_key)
    return out


def _gemm_type(a, b, input_type: str | None) -> str:
    if input_type not in (None, "float16", "bfloat16"):
        raise LabError(f"input_type is None, \"float16\" or \"bfloat16\"; got {input_type!r}.")
    if a.dtype != b.dtype:
        raise LabError(f"a and b must have one type; got {a.dtype} and {b.dtype}: cast one with .astype().")
    if a.dtype == np.float16 and input_type in (None, "float16"):
        return "float16"
    if a.dtype == np.uint16:
        if input_type != "bfloat16":
            raise LabError("uint16 arrays are read as bf16 bit patterns only with input_type=\"bfloat16\"; pass it, "
                           "or cast the inputs to cupy.float16.")
        return "bfloat16"
    if a.dtype.kind == "f":
        return "cupy"  # float32 / float64: CuPy's own matmul
    raise LabError(f"lab.ops.matmul takes float16 (or bf16 as uint16) inputs; got {a.dtype}: cast with "
                   ".astype(cupy.float16).")


def _not_on_gpu(op: str, which: str) -> LabError:
    """The sentence for arrays that are not CuPy arrays (NumPy ones, say), checked as far as they can be without a
    GPU: on a machine without one, that lab.ops needs one; on a machine with one, how to move them there."""
    from lab.core import device

    if not device.gpu_available():
        return LabError(f"lab.ops.{op} runs on a CUDA GPU, and this machine has none ({device.why_no_gpu()}); the "
                        "arguments are otherwise valid, so the same call with CuPy arrays works on a machine with one.")
    return LabError(f"lab.ops.{op} takes CuPy arrays on the GPU ({which}); convert with cupy.asarray(x).")


def _check_matmul_values(a, b, bias, activation, residual, out, out_dtype, layout, input_type) -> None:
    """What a call's arguments must be whatever array library holds them (NumPy ones too, with no GPU): layout,
    dimensions, types, K, the activation and the shapes of bias, residual and out; one LabError sentence."""
    if layout not in LAYOUTS:
        raise LabError(f"layout is \"NN\" (b is K x N) or \"TN\" (b is N x K, a linear layer's weight); got "
                       f"{layout!r}.")
    if not all(hasattr(x, attr) for x in (a, b) for attr in ("shape", "dtype", "ndim")):
        raise LabError("lab.ops.matmul takes arrays for a and b (CuPy arrays on the GPU); got "
                       f"{type(a).__name__} and {type(b).__name__}.")
    if a.ndim < 2 or b.ndim != 2:
        raise LabError(f"matmul needs a of 2 or more dimensions (... x K) and b of 2; got {a.shape} and {b.shape}.")
    _gemm_type(a, b, input_type)
    K = a.shape[-1]
    k_b, N = (b.shape[0], b.shape[1]) if layout == "NN" else (b.shape[1], b.shape[0])
    if k_b != K:
        raise LabError(f"a is ... x {K} but b gives K = {k_b} (layout {layout}: b is "
                       f"{'K x N' if layout == 'NN' else 'N x K'}); check the layout or transpose b.")
    if out_dtype is not None and np.dtype(out_dtype) != a.dtype:
        raise LabError(f"out_dtype must be the inputs' type ({a.dtype}); quantized outputs are in "
                       "lab.families.gemm_epilogue.")
    if activation is not None and activation not in ACTIVATIONS:
        raise LabError(f"activation is one of {', '.join(ACTIVATIONS)} or None; got {activation!r}.")
    if bias is not None and (bias.dtype != np.float32 or bias.shape != (N,)):
        raise LabError(f"bias must be float32 of shape ({N},); got {bias.dtype} {bias.shape}: make it once with "
                       "bias.astype(cupy.float32) and reuse it.")
    if residual is not None and (residual.dtype != a.dtype or residual.shape != (*a.shape[:-1], N)
                                 or not residual.flags.c_contiguous):
        raise LabError(f"residual must be a C-contiguous {a.dtype} array of shape {(*a.shape[:-1], N)}; got "
                       f"{residual.dtype} {residual.shape}.")
    if out is not None:
        _check_out(out, a.shape[:-1], N, a.dtype)


def _check_matmul(a, b, bias, activation, residual, out, out_dtype, layout, input_type):
    """(kind, shape, lda, ldb) for a call never seen before, or one LabError sentence."""
    import cupy as cp

    from lab.core import device, tma

    current = cp.cuda.Device().id
    for name, x in (("a", a), ("b", b), ("bias", bias), ("residual", residual), ("out", out)):
        if x is not None and (not isinstance(x, cp.ndarray) or x.data.device_id != current):
            raise LabError(f"{name} must be a CuPy array on the current GPU ({current}); move it with "
                           f"cupy.asarray under cupy.cuda.Device({current}).")
    _check_matmul_values(a, b, bias, activation, residual, out, out_dtype, layout, input_type)
    dtype = _gemm_type(a, b, input_type)
    K = a.shape[-1]
    N = b.shape[1] if layout == "NN" else b.shape[0]
    M = int(np.prod(a.shape[:-1]))
    if dtype == "cupy" or min(M, N, K) == 0:
        return ("dtype" if dtype == "cupy" else "empty"), None, 0, 0
    lda = _rows_stride(a, "a")
    layout, ldb = _b_layout(b, layout)
    if max(M, N, K, lda, ldb) >= 2 ** 31:
        raise LabError(f"lab.ops.matmul takes sizes and row strides below 2^31; got M={M} N={N} K={K}.")
    if device.current().arch < 80:
        return "arch", None, 0, 0
    stored_b = _stored(b)
    aligned = tma.refusal(a.data.ptr, lda) is None and tma.refusal(stored_b.data.ptr, ldb) is None
    epi = "+".join(op for op in (("bias" if bias is not None else None), ACTIVATIONS.get(activation),
                                 ("residual" if residual is not None else None)) if op) or "none"
    shape = GemmShape(M, N, K, dtype, layout, aligned, epi, device.current().sm_count)
    return "kernel", shape, lda, ldb


def _rows_stride(a, name: str) -> int:
    """a's row stride in elements, for a (... x K) array whose rows are contiguous and evenly spaced."""
    item = a.itemsize
    if a.strides[-1] != item:
        raise LabError(f"{name}'s last dimension must be contiguous (stride {item} bytes); got strides {a.strides}: "
                       "pass cupy.ascontiguousarray(x).")
    if a.ndim == 2:
        ld = a.strides[0] // item
        if a.strides[0] % item or ld < a.shape[1] and a.shape[0] > 1:
            raise LabError(f"{name}'s rows overlap or are misaligned (strides {a.strides}); pass "
                           "cupy.ascontiguousarray(x).")
        return max(ld, a.shape[1])
    if not a.flags.c_contiguous:
        raise LabError(f"{name} of {a.ndim} dimensions must be C-contiguous; pass cupy.ascontiguousarray(x).")
    return a.shape[-1]


def _stored(b):
    """b as it lies in memory, rows contiguous: b itself, or for a transposed view (unit stride along axis 0) b.T."""
    return b if b.strides[1] == b.itemsize or b.shape[1] == 1 else b.T


def _b_layout(b, layout: str) -> tuple[str, int]:
    """(layout as stored, leading dimension): a transposed view of B is read in place, as the other layout (a
    K x N view of an N x K weight is the TN layout, and the reverse)."""
    if b.strides[1] == b.itemsize or b.shape[1] == 1:
        return layout, _rows_stride(b, "b")
    if b.strides[0] == b.itemsize:
        return ("TN" if layout == "NN" else "NN"), _rows_stride(b.T, "b")
    raise LabError(f"b must have contiguous rows or columns (strides {b.strides}); pass cupy.ascontiguousarray(b).")


def _check_out(out, lead, N, dtype) -> None:
    if out.shape != (*lead, N) or out.dtype != dtype or not out.flags.c_contiguous:
        raise LabError(f"out must be a C-contiguous {dtype} array of shape {(*lead, N)}; got {out.dtype} "
                       f"{out.shape}.")


def _check_no_overlap(out, inputs) -> None:
    lo, hi = out.data.ptr, out.data.ptr + out.nbytes
    for x in inputs:
        if x is not None and x.data.ptr < hi and lo < x.data.ptr + x.nbytes:
            raise LabError("out overlaps an input; pass a separate output array (the kernels read inputs while "
                           "they write out).")


def _cupy_matmul(a, b, bias, activation, residual, out, layout):
    """CuPy's own operations, for types and shapes no kernel serves (float32/float64, empty arrays)."""
    import cupy as cp

    y = cp.matmul(a, b if layout == "NN" else b.T).astype(cp.float32 if a.dtype.itemsize <= 4 else a.dtype)
    if bias is not None:
        y += bias
    act = ACTIVATIONS.get(activation)
    if act == "relu":
        y = cp.maximum(y, 0)
    elif act == "silu":
        y = y / (1 + cp.exp(-y))
    elif act == "gelu_tanh":
        y = 0.5 * y * (1 + cp.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
    elif act == "gelu_erf":
        from cupyx.scipy.special import erf

        y = 0.5 * y * (1 + erf(y * 0.7071067812))
    if residual is not None:
        y += residual
    if out is None:
        return y.astype(a.dtype)
    out[...] = y
    return out


# --- row operations: softmax, rmsnorm, layernorm ----------------------------------------------------------

ROW_FAMILIES = {"softmax": ("softmax", "04_specialized", ("float32", "float16")),
                 "rmsnorm": ("rmsnorm", "03_specialized", ("float16", "bfloat16")),
                 "layernorm": ("layernorm", "03_specialized", ("float16", "bfloat16"))}
# Long rows go to the rung that splits a row over a thread-block cluster, where the GPU has clusters (sm_90 on): from
# this many values a row on, the shortest length at which it measured at least as fast as the one-block rung above in
# every type (lab.studies.cluster_rows_study; its record: cluster_rows_study.record_path()). Below it the one-block
# rung was level or ahead (RMSNorm bf16 and LayerNorm at 32768; softmax was level at 16384).
LONG_ROW_RUNGS = {"softmax": ("05_cluster", 16384), "rmsnorm": ("04_cluster", 65536),
                  "layernorm": ("04_cluster", 65536)}


def row_rung(op: str, n: int, arch: int) -> str:
    """The rung lab.ops runs `op` with on rows of n values on a GPU of `arch` (compute capability x 10)."""
    from lab.core.build import arch_refusal
    from lab.ops.paths import family

    fam_name, rung_key, _ = ROW_FAMILIES[op]
    long_key, from_n = LONG_ROW_RUNGS.get(op, (None, 0))
    if long_key is None or n < from_n:
        return rung_key
    rungs = {r.key: r for r in family(fam_name).rungs}
    if long_key in rungs and arch_refusal(rungs[long_key].spec, arch) is None:
        return long_key
    return rung_key


def softmax(x, *, out=None, input_type: str | None = None):
    """softmax over the last axis of x (fp32 or fp16; ... x n, C-contiguous). Returns out."""
    return _row_op("softmax", x, (), out, input_type)


def rmsnorm(x, weight, *, eps: float = 1e-5, out=None, input_type: str | None = None):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis (fp16, or bf16 as uint16 with input_type)."""
    return _row_op("rmsnorm", x, (weight,), out, input_type, eps)


def layernorm(x, weight, bias, *, eps: float = 1e-5, out=None, input_type: str | None = None):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis (fp16, or bf16 as uint16)."""
    return _row_op("layernorm", x, (weight, bias), out, input_type, eps)


def _row_type(op: str, x, input_type: str | None) -> str:
    if x.dtype == np.uint16 and input_type == "bfloat16":
        dtype = "bfloat16"
    elif x.dtype == np.uint16:
        raise LabError("uint16 arrays are read as bf16 bit patterns only with input_type=\"bfloat16\".")
    else:
        dtype = str(x.dtype)
    if dtype not in ROW_FAMILIES[op][2]:
        return "cupy"
    return dtype


def _row_op(op: str, x, params: tuple, out, input_type, eps: float | None = None):
    rt = _RUNTIME or default_runtime()
    fkey = None
    if out is not None:
        try:  # the fast path: a call seen before on the same addresses replays its recorded launch
            fkey = (op, x.data.ptr, out.data.ptr, x.shape, x.strides, out.shape, out.strides, x.dtype.char,
                    out.dtype.char, eps, input_type, *((p.data.ptr, p.shape, p.strides, p.dtype.char) for p in params))
        except AttributeError:
            fkey = None
        launches = rt.fast.get(fkey)
        if launches is not None:
            counters.COUNTS["calls"] += 1
            counters.COUNTS["replays"] += 1
            counters.PATHS[f"{op}:kernel"] += 1
            for raw, grid, block, args, smem in launches:
                raw(grid, block, args, shared_mem=smem)
            return out
    return _row_op_slow(rt, fkey, op, x, params, out, input_type, eps)


def _row_op_slow(rt, fkey, op: str, x, params: tuple, out, input_type, eps: float | None = None):
    import cupy as cp

    if not all(hasattr(v, attr) for v in (x, *params) for attr in ("shape", "dtype", "flags")):
        raise LabError(f"lab.ops.{op} takes arrays (CuPy arrays on the GPU); got {type(x).__name__}.")
    on_gpu = isinstance(x, cp.ndarray) and all(isinstance(p, cp.ndarray) for p in params)
    if on_gpu:
        counters.COUNTS["calls"] += 1
    if x.ndim < 1 or x.size == 0:
        raise LabError(f"lab.ops.{op} needs a non-empty array of at least one dimension; got shape {x.shape}.")
    if not x.flags.c_contiguous:
        raise LabError(f"lab.ops.{op} needs a C-contiguous x; pass cupy.ascontiguousarray(x).")
    n = x.shape[-1]
    for p in params:
        if p.shape != (n,) or p.dtype != x.dtype:
            raise LabError(f"lab.ops.{op}'s weight and bias must be {x.dtype} of shape ({n},); got {p.dtype} "
                           f"{p.shape}.")
    if eps is not None and not eps > 0:
        raise LabError(f"eps must be > 0; got {eps!r}.")
    dtype = _row_type(op, x, input_type)
    if not on_gpu:  # checked as far as arrays off the GPU can be
        raise _not_on_gpu(op, "x and its weight and bias")
    if out is None:
        out = cp.empty_like(x)
    elif out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise LabError(f"out must be a C-contiguous {x.dtype} array of shape {x.shape}.")
    if dtype == "cupy":
        counters.FALLBACKS[f"{op}: {x.dtype}"] += 1
        out[...] = _cupy_row_op(op, x, params, eps)
        return out
    rows = x.size // n
    addresses = (x.data.ptr, out.data.ptr, *(p.data.ptr for p in params))
    rkey = ((op, rows, n, dtype, eps), None, addresses)
    launches = rt.recordings.get(rkey)
    counters.PATHS[f"{op}:kernel"] += 1
    if launches is not None:
        counters.COUNTS["replays"] += 1
        for raw, grid, block, args, smem in launches:
            raw(grid, block, args, shared_mem=smem)
    else:
        counters.COUNTS["recordings"] += 1
        launches = _record_row_op(op, x.reshape(rows, n), params, out.reshape(rows, n), dtype, eps)
        rt.recordings[rkey] = launches
    if fkey is not None:
        if len(rt.fast) >= 4096:
            rt.fast.clear()
        rt.fast[fkey] = launches
    return out


def _record_row_op(op: str, x2, params, out2, dtype: str, eps):
    from lab.core import device
    from lab.core.build import recording
    from lab.core.ladder import Problem
    from lab.ops.dispatch import as_address
    from lab.ops.paths import family

    fam = family(ROW_FAMILIES[op][0])
    rows, n = x2.shape
    rung_key = row_rung(op, n, device.current().arch)
    run_params = {"rows": rows, "n": n, "dtype": dtype} | ({"eps": eps} if eps is not None else {})
    inputs = {"x": [x2]} | dict(zip(("w", "b"), params, strict=False))
    problem = Problem(f"ops {op}", inputs, (rows, n), 0, params=run_params, dtype=x2.dtype)
    spans = [(a.data.ptr, a.data.ptr + a.nbytes) for a in (x2, out2, *params)]
    with recording() as launches:
        fam.launch(fam.rung(rung_key), problem, out2)
    return [(raw, grid, block, tuple(as_address(arg, spans) for arg in args), smem)
            for raw, grid, block, args, smem in launches]


def _cupy_row_op(op: str, x, params, eps):
    import cupy as cp

    y = x.astype(cp.float32) if x.dtype.itemsize < 4 else x
    if op == "softmax":
        e = cp.exp(y - y.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if op == "rmsnorm":
        return y / cp.sqrt((y * y).mean(axis=-1, keepdims=True) + eps) * params[0]
    d = y - y.mean(axis=-1, keepdims=True)
    return d / cp.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * params[0] + params[1]

