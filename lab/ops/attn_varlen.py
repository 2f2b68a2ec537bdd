"""lab.ops.attention_varlen: attention over a batch of sequences of different lengths, packed end to end.

    o = ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=True)
    # q (T_q, H, D), k and v (T_k, H_kv, D): every sequence's tokens one after another; cu_seqlens_q and
    # cu_seqlens_k: int32 offsets (B + 1, from 0 to T), sequence b's queries are rows cu_seqlens_q[b] .. [b + 1] - 1

Each sequence is its own attention problem (lab.ops.attention's conventions: scale 1/sqrt(D), GQA, causal masks
bottom-right aligned per sequence, rows that see no key exactly 0). The path: on sm_90, for D in (64, 128) and
16-byte-aligned arrays, the packed kernel of lab.families.attention_varlen (one launch for the batch); otherwise
each sequence through lab.ops.attention on a contiguous copy of its rows (counted as a fallback, with its reason).

The offsets are read to the host on every call (B + 1 integers: one device-to-host copy, which waits for the work
queued before it): they are checked (from 0, never decreasing, ending at T) before any kernel indexes memory by
them, and they give each sequence's length. A serving loop that captures CUDA graphs needs offsets fixed at capture;
this function does not capture.
"""

from __future__ import annotations

import math

import numpy as np

from lab.core.errors import LabError
from lab.ops import api, counters
from lab.ops.attn import MAX_HEAD_DIM, MIN_ARCH, attention_type, check_flag_types
from lab.ops.dispatch import Decision

FAMILY = "attention_varlen"
PATH = "attention_varlen:05_pingpong"
FALLBACK_PATH = "attention_varlen:per_sequence"


def check_shapes(q, k, v, causal, scale, out, input_type) -> tuple[str, int]:
    """One LabError sentence per misuse of the arrays (any array library), else (input type, causal)."""
    if not all(hasattr(x, attr) for x in (q, k, v) for attr in ("shape", "dtype", "ndim", "flags")):
        raise LabError("lab.ops.attention_varlen takes arrays for q, k and v (CuPy arrays on the GPU); got "
                       f"{type(q).__name__}, {type(k).__name__} and {type(v).__name__}.")
    if not q.ndim == k.ndim == v.ndim == 3:
        raise LabError(f"q, k and v must be 3-dimensional, packed (T, H, D); got shapes {q.shape}, {k.shape} and "
                       f"{v.shape}: for (B, H, S, D) arrays of one length use lab.ops.attention.")
    dtype = attention_type(q, k, v, input_type)
    T_q, H, D = q.shape
    if k.shape != v.shape:
        raise LabError(f"k and v must have one shape (T_k, H_kv, D); got {k.shape} and {v.shape}.")
    T_k, H_kv, D_k = k.shape
    if D_k != D:
        raise LabError(f"q's head dimension D={D} and k and v's D={D_k} must agree.")
    if min(T_q, H, D, T_k, H_kv) < 1:
        raise LabError(f"lab.ops.attention_varlen needs at least one query and one key token and every other "
                       f"dimension >= 1; got q {q.shape} and k, v {k.shape}.")
    if H % H_kv:
        raise LabError(f"q's heads H={H} must be a multiple of k and v's H_kv={H_kv} (grouped-query attention).")
    if D > MAX_HEAD_DIM:
        raise LabError(f"lab.ops.attention_varlen takes head dimensions up to {MAX_HEAD_DIM}; got D={D}.")
    if H >= 2**16 or max(T_q * H, T_k * H_kv) * D >= 2**31:
        raise LabError(f"lab.ops.attention_varlen takes H below 2^16 and packed arrays below 2^31 elements; got q "
                       f"{q.shape} and k, v {k.shape}: split the batch into several calls.")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not x.flags.c_contiguous:
            raise LabError(f"{name} must be C-contiguous (T, H, D); pass cupy.ascontiguousarray({name}).")
    check_flag_types(causal, scale)
    if scale is not None and not math.isclose(float(scale), 1.0 / math.sqrt(D), rel_tol=1e-6):
        raise LabError(f"lab.ops.attention_varlen's kernels use the scale 1/sqrt(D) = {1 / math.sqrt(D):.6g} only; "
                       f"got {scale!r}: leave scale out and multiply q by scale * sqrt(D) beforehand instead.")
    if out is not None and (getattr(out, "shape", None) != q.shape or getattr(out, "dtype", None) != q.dtype
                            or not out.flags.c_contiguous):
        raise LabError(f"out must be a C-contiguous {q.dtype} array of q's shape {q.shape}; got "
                       f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}.")
    return dtype, int(causal)


def check_offsets(name: str, offsets: np.ndarray, total: int, batch: int | None = None) -> list[int]:
    """The lengths the offsets hold, or one LabError sentence: int32, B + 1 entries from 0, never decreasing,
    ending at `total` (the packed array's rows), B the other offsets' where given."""
    if offsets.dtype != np.int32 or offsets.ndim != 1 or not 2 <= offsets.size <= 2**16:
        raise LabError(f"{name} must be a 1-D int32 array of B + 1 offsets (1 <= B < 2^16); got {offsets.dtype} of "
                       f"shape {offsets.shape}: build it with cumsum over the lengths, a 0 in front, .astype(int32).")
    if batch is not None and offsets.size - 1 != batch:
        raise LabError(f"cu_seqlens_q and cu_seqlens_k must describe as many sequences; got {batch} and "
                       f"{offsets.size - 1}.")
    lengths = np.diff(offsets.astype(np.int64))
    if offsets[0] != 0 or (lengths < 0).any() or offsets[-1] != total:
        raise LabError(f"{name} must start at 0, never decrease and end at the packed array's {total} rows; got "
                       f"{offsets[:4].tolist()}{' ...' if offsets.size > 4 else ''} ending at {int(offsets[-1])}.")
    return [int(n) for n in lengths]


def _host(offsets) -> np.ndarray:
    return offsets.get() if hasattr(offsets, "get") else np.asarray(offsets)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal: bool = False, scale: float | None = None,
                     out=None, input_type: str | None = None, runtime=None):
    """softmax(q k^T / sqrt(D)) v for each packed sequence: q (T_q, H, D), k and v (T_k, H_kv, D), C-contiguous,
    fp16 (or bf16 as uint16 with input_type="bfloat16"); cu_seqlens_q and cu_seqlens_k int32 (B + 1) offsets (CuPy
    or NumPy). causal: query row i of a sequence sees its keys j <= i + L_k - L_q. Returns out (allocated when
    None)."""
    rt = runtime or api.default_runtime()
    dtype, causal = check_shapes(q, k, v, causal, scale, out, input_type)
    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is None or not all(isinstance(x, cp.ndarray) for x in (q, k, v)):
        from lab.ops.attn import not_on_gpu

        raise not_on_gpu()
    host_q, host_k = _host(cu_seqlens_q), _host(cu_seqlens_k)
    lens_q = check_offsets("cu_seqlens_q", host_q, q.shape[0])
    lens_k = check_offsets("cu_seqlens_k", host_k, k.shape[0], len(lens_q))
    if out is None:
        out = cp.empty(q.shape, dtype=q.dtype)
    counters.COUNTS["calls"] += 1
    # The kernel reads the values just checked, uploaded again: the caller's array may be a strided view whose
    # memory holds other values, or may change after the check.
    fam, problem = _problem(q, k, v, host_q, host_k, lens_q, lens_k, dtype, causal)
    why = _refusal(fam, problem, out)
    if why is None:
        fam.launch(fam.rungs[0], problem, out)
        counters.PATHS[PATH] += 1
        rt.last_decision = Decision(PATH, (), "varlen: packed")
        return out
    reason = f"attention_varlen: {why}"
    counters.FALLBACKS[reason] += 1
    counters.PATHS[FALLBACK_PATH] += 1
    _per_sequence(q, k, v, lens_q, lens_k, causal, out, input_type, rt)
    rt.last_decision = Decision(FALLBACK_PATH, (), "fallback: " + reason)
    return out


def _problem(q, k, v, cu_q, cu_k, lens_q, lens_k, dtype, causal):
    """The varlen family (one instance per process) and a Problem over the caller's arrays."""
    import cupy as cp

    from lab.core.ladder import Problem
    from lab.families.gemm_tc import STORAGE
    from lab.ops.paths import family

    fam = family(FAMILY)
    H, D, H_kv = q.shape[1], q.shape[2], k.shape[1]
    params = {"B": len(lens_q), "H": H, "H_kv": H_kv, "S_q": max(lens_q), "S_k": max(lens_k), "D": D,
              "dtype": dtype, "causal": causal, "seq_lens": lens_q, "seq_lens_k": lens_k}
    offsets = {"cu_seqlens_q": [cp.asarray(np.ascontiguousarray(cu_q))],
               "cu_seqlens_k": [cp.asarray(np.ascontiguousarray(cu_k))]}
    return fam, Problem("ops attention_varlen", {"Q": [q], "K": [k], "V": [v]} | offsets, q.shape, 0, params=params,
                        dtype=STORAGE[dtype])


def _refusal(fam, problem, out) -> str | None:
    """Why the packed kernel cannot serve this call (one short sentence), or None."""
    from lab.core import device

    arch = device.current().arch
    if arch < MIN_ARCH:
        raise LabError(f"lab.ops.attention_varlen's kernels need sm_{MIN_ARCH} or newer; this GPU is sm_{arch}.")
    from lab.families.attention import MMA_HEAD_DIMS

    if problem.params["D"] not in MMA_HEAD_DIMS:
        return f"D={problem.params['D']} has no packed kernel"
    return fam.refusal(fam.rungs[0], problem, out)


def _per_sequence(q, k, v, lens_q, lens_k, causal, out, input_type, rt) -> None:
    """Each sequence through lab.ops.attention on contiguous (1, heads, L, D) copies of its rows."""
    import cupy as cp

    from lab.ops.attn import attention

    start_q = start_k = 0
    for n_q, n_k in zip(lens_q, lens_k, strict=True):
        rows_q, rows_k = slice(start_q, start_q + n_q), slice(start_k, start_k + n_k)
        start_q, start_k = start_q + n_q, start_k + n_k
        if n_q == 0:
            continue
        if n_k == 0:
            out[rows_q] = 0
            continue
        qs, ks, vs = (cp.ascontiguousarray(x[r].transpose(1, 0, 2)[None])
                      for x, r in ((q, rows_q), (k, rows_k), (v, rows_k)))
        o = attention(qs, ks, vs, causal=bool(causal), input_type=input_type, runtime=rt)
        out[rows_q] = o[0].transpose(1, 0, 2)
