"""lab.ops.attention: O = softmax(Q K^T / sqrt(D)) V on the attention ladder's kernels (lab.families.attention).

    o = ops.attention(q, k, v, causal=True)      # q (B, H, S_q, D), k and v (B, H_kv, S_k, D), fp16 or bf16

(This module is lab.ops.attn, not lab.ops.attention: a submodule of that name would replace the function on the
package the first time anything imported it.)

What a call is, for dispatch (AttentionShape): sizes, type, causal, and whether every operand starts on a 16-byte
boundary. Its class is decode (S_q <= DECODE_MAX_S_Q: one or a few new tokens against a long cache) or prefill. Its
bucket rounds S_q and S_k up to powers of two (the counters and the autotune cache file calls under it).

The path: a decode call goes to the split-KV kernel of lab.families.attention_decode (DECODE_PATH) where it serves
(D 64 or 128, aligned operands): in results/h200/attention.json the flash rungs ran a decode step
(B = 8, 32 query heads on 8, 8192 keys) at about a third of SDPA's rate, the split-KV kernel at about its rate
(results/h200/attention_decode.json). Otherwise, for D in SPECIALIZED_HEAD_DIMS, the fastest flash rung
(FlashAttention's tiling: wgmma on sm_90, mma.sync before) that does not refuse the call, in FLASH_ORDER among the
rungs the family has; otherwise, or when every flash
rung refuses (operands off 16-byte boundaries, say), the generic rung 01, counted as a fallback. An autotuned entry
for the bucket, where the store holds one, comes first (after the decode kernel).
Causal masks are bottom-right aligned as FlashAttention 2 aligns them when S_q != S_k (the family's convention). The
first call on given addresses records the kernel's launch; later calls on the same addresses replay it, as
lab.ops.matmul does.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lab.core.errors import LabError
from lab.ops import api, counters
from lab.ops.dispatch import MAX_RECORDINGS, Decision, Replay, as_address
from lab.ops.shapes import m_bucket

DECODE_MAX_S_Q = 16  # at most this many query rows: a decode step
# Fastest first as measured: `lab bench attention`'s sweep (S_q = S_k = 256 .. 16384, B=2 H=16 D=128 fp16;
# results/h100/attention_sweep.json, an H100 at 40aa909), cold L2: rung 05 (ping-pong, its loop peeled) level with
# rung 04 at 256 and 512 keys (rung 04 0.5% and 0.1% ahead) and ahead of it from 1024 on (1.01-1.08x); both Hopper rungs
# ahead of rungs 02-03 at every length (by 19% at 256 keys), so one order serves every length. (An earlier short-key
# order put rungs 02-03 first up to 256 keys from an H200 sweep of the first rung 05 build, on warm timings bound by
# the family launcher's host path, which lab.ops's replayed launches do not pay.) Rungs 04 and 05 refuse calls off
# sm_90 and pass them on to 03, then 02. Rungs the family lacks are skipped.
FLASH_ORDER = ("05_pingpong", "04_wgmma_ws", "03_flash_pipelined", "02_flash_mma")
GENERIC = "01_naive"
DECODE_FAMILY = "attention_decode"
DECODE_RUNG = "02_split_kv"
DECODE_PATH = f"{DECODE_FAMILY}:{DECODE_RUNG}"  # a Decision's path for the decode kernel
# The head dims lab.ops sends to the flash rungs: 64 and 128 (rungs 02-05), 256 (rung 05's 64-key tiles, sm_90; its GPU
# tests and lab.ops's passed on an H100 at 07cca46). Any other D goes to the generic rung.
SPECIALIZED_HEAD_DIMS = (64, 128, 256)
MAX_HEAD_DIM = 256  # the generic rung's limit
MIN_ARCH = 80
_CHECKED: dict = {}  # call key -> AttentionShape, for calls already validated


@dataclass(frozen=True)
class AttentionShape:
    B: int
    H: int
    H_kv: int
    S_q: int
    S_k: int
    D: int
    dtype: str  # "float16" or "bfloat16"
    causal: int  # 0 or 1
    aligned: bool  # Q, K, V and O start on 16-byte boundaries

    @property
    def params(self) -> dict:
        """The family's problem parameters."""
        return {"B": self.B, "H": self.H, "H_kv": self.H_kv, "S_q": self.S_q, "S_k": self.S_k, "D": self.D,
                "dtype": self.dtype, "causal": self.causal}


def shape_class(shape: AttentionShape) -> str:
    return "decode" if shape.S_q <= DECODE_MAX_S_Q else "prefill"


def family_label(shape: AttentionShape) -> str:
    """What lab.ops.counters.FAMILIES counts a new call shape under: its class and sequence bucket."""
    return f"attention:{shape_class(shape)} S_q<={m_bucket(shape.S_q)} S_k<={m_bucket(shape.S_k)}"


def bucket(shape: AttentionShape) -> str:
    """The autotune cache's key: every S_q and S_k of one power-of-two bucket share an entry."""
    return (f"attention {shape_class(shape)} S_q<={m_bucket(shape.S_q)} S_k<={m_bucket(shape.S_k)} H={shape.H} "
            f"H_kv={shape.H_kv} D={shape.D} {shape.dtype} {'causal' if shape.causal else 'full'} "
            f"{'aligned' if shape.aligned else 'unaligned'}")


# --- deciding (no GPU needed: the family's rungs and a refusal function are handed in) --------------------------

def flash_rungs(rung_keys) -> list[str]:
    """The flash rungs the family has, fastest first (FLASH_ORDER)."""
    return [key for key in FLASH_ORDER if key in rung_keys]


def fallback_reason(shape: AttentionShape, sentence: str | None) -> str:
    """A short, bounded counter key for why the flash rungs did not serve a call (the family's sentence when
    it is neither of the two known reasons)."""
    if shape.D not in SPECIALIZED_HEAD_DIMS:
        return f"attention: D={shape.D} has no flash kernel"
    if not shape.aligned:
        return "attention: operands not 16-byte aligned"
    return f"attention: {sentence or 'no flash rung in the family'}"


def decide(shape: AttentionShape, rung_keys, refusal: Callable[[str], str | None],
           tuned: str | None = None, decode_refusal: Callable[[], str | None] | None = None) -> Decision:
    """The rung for `shape`: for a decode call, the decode kernel where it serves (`decode_refusal()`: why it cannot,
    or None; None for the function: no decode kernel to ask); else the tuned one where it serves, else the fastest
    flash rung that serves a specialized D, else the generic rung (a fallback). `refusal(key)`: why rung `key` of
    the attention family cannot run this call, or None."""
    if shape_class(shape) == "decode" and decode_refusal is not None and decode_refusal() is None:
        return Decision(DECODE_PATH, (), "decode: split-KV")
    if tuned is not None and tuned in rung_keys and refusal(tuned) is None:
        return Decision(tuned, (), "tuned")
    first_refusal = None
    if shape.D in SPECIALIZED_HEAD_DIMS:
        for key in flash_rungs(rung_keys):
            why = refusal(key)
            if why is None:
                return Decision(key, (), f"flash: D={shape.D}")
            first_refusal = first_refusal or why
    why_not_generic = refusal(GENERIC) if GENERIC in rung_keys else "the family has no generic rung"
    if why_not_generic is not None:
        raise LabError(f"lab.ops.attention has no kernel for this call (B={shape.B} H={shape.H}/{shape.H_kv} "
                       f"S_q={shape.S_q} S_k={shape.S_k} D={shape.D}): {why_not_generic.rstrip('.')}; use D 64, "
                       "128 or 256 on 16-byte-aligned operands, or fewer keys per call.")
    return Decision(GENERIC, (), "fallback: " + fallback_reason(shape, first_refusal))


# --- validation ----------------------------------------------------------------------------------------------

def attention_type(q, k, v, input_type: str | None) -> str:
    if input_type not in (None, "float16", "bfloat16"):
        raise LabError(f"input_type is None, \"float16\" or \"bfloat16\"; got {input_type!r}.")
    if not q.dtype == k.dtype == v.dtype:
        raise LabError(f"q, k and v must have one type; got {q.dtype}, {k.dtype} and {v.dtype}: cast with "
                       ".astype().")
    if q.dtype == np.float16 and input_type in (None, "float16"):
        return "float16"
    if q.dtype == np.float16:
        raise LabError("input_type=\"bfloat16\" reads uint16 arrays of bf16 bit patterns, and these are float16: drop "
                       "input_type, or pass the bf16 bits as uint16.")
    if q.dtype == np.uint16:
        if input_type != "bfloat16":
            raise LabError("uint16 arrays are read as bf16 bit patterns only with input_type=\"bfloat16\"; pass it, "
                           "or cast the inputs to cupy.float16.")
        return "bfloat16"
    raise LabError(f"lab.ops.attention takes float16 (or bf16 as uint16 with input_type=\"bfloat16\") inputs; got "
                   f"{q.dtype}: cast with .astype(cupy.float16).")


def check_flag_types(causal, scale) -> None:
    """causal and scale as the call's keys can hold them (hashable, one value each)."""
    if not (isinstance(causal, (bool, np.bool_)) or isinstance(causal, (int, np.integer)) and causal in (0, 1)):
        raise LabError(f"causal is True or False; got {causal!r}.")
    if scale is not None and (isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.number))):
        raise LabError(f"scale is a number (the kernels take 1/sqrt(D)) or None; got {type(scale).__name__}.")


def check_values(q, k, v, causal, scale, out, input_type) -> AttentionShape:
    """What a call's arguments must be whatever array library holds them (NumPy ones too, with no GPU): one
    LabError sentence per misuse, else the call's shape (alignment not yet known: aligned=True)."""
    if not all(hasattr(x, attr) for x in (q, k, v) for attr in ("shape", "dtype", "ndim", "flags")):
        raise LabError("lab.ops.attention takes arrays for q, k and v (CuPy arrays on the GPU); got "
                       f"{type(q).__name__}, {type(k).__name__} and {type(v).__name__}.")
    if not q.ndim == k.ndim == v.ndim == 4:
        raise LabError(f"q, k and v must be 4-dimensional, (B, H, S, D); got shapes {q.shape}, {k.shape} and "
                       f"{v.shape}: add the missing axes with x[None] or x.reshape(B, H, S, D).")
    dtype = attention_type(q, k, v, input_type)
    B, H, S_q, D = q.shape
    if k.shape != v.shape:
        raise LabError(f"k and v must have one shape (B, H_kv, S_k, D); got {k.shape} and {v.shape}.")
    B_k, H_kv, S_k, D_k = k.shape
    if (B_k, D_k) != (B, D):
        raise LabError(f"q is (B={B}, H, S_q, D={D}) but k and v are (B={B_k}, H_kv, S_k, D={D_k}); the batch and "
                       "head dimension must agree.")
    if min(B, H, S_q, D, H_kv, S_k) < 1:
        raise LabError(f"lab.ops.attention needs every dimension >= 1; got q {q.shape} and k, v {k.shape}.")
    if H % H_kv:
        raise LabError(f"q's heads H={H} must be a multiple of k and v's H_kv={H_kv} (grouped-query attention: "
                       "each key/value head serves H / H_kv query heads).")
    if D > MAX_HEAD_DIM:
        raise LabError(f"lab.ops.attention takes head dimensions up to {MAX_HEAD_DIM}; got D={D}.")
    if B * H * max(S_q, S_k) * D >= 2**31 or max(B, H) >= 2**16:
        raise LabError(f"lab.ops.attention takes B * H * S * D below 2^31 and B, H below 2^16; got B={B} H={H} "
                       f"S_q={S_q} S_k={S_k} D={D}: split the batch into several calls.")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not x.flags.c_contiguous:
            raise LabError(f"{name} must be C-contiguous (B, H, S, D); pass cupy.ascontiguousarray({name}).")
    check_flag_types(causal, scale)
    causal = int(causal)
    if scale is not None:
        default = 1.0 / math.sqrt(D)
        if not math.isclose(float(scale), default, rel_tol=1e-6):
            raise LabError(f"lab.ops.attention's kernels use the scale 1/sqrt(D) = {default:.6g} only; got "
                           f"{scale!r}: leave scale out and multiply q by scale * sqrt(D) beforehand instead.")
    if out is not None and (getattr(out, "shape", None) != q.shape or getattr(out, "dtype", None) != q.dtype
                            or not out.flags.c_contiguous):
        raise LabError(f"out must be a C-contiguous {q.dtype} array of q's shape {q.shape}; got "
                       f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}.")
    return AttentionShape(B, H, H_kv, S_q, S_k, D, dtype, causal, True)


def _check_call(q, k, v, causal, scale, out, input_type) -> AttentionShape:
    """The shape of a call on CuPy arrays never seen before, or one LabError sentence."""
    import dataclasses

    import cupy as cp

    from lab.core import device

    current = cp.cuda.Device().id
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
        if x is not None and (not isinstance(x, cp.ndarray) or x.data.device_id != current):
            raise LabError(f"{name} must be a CuPy array on the current GPU ({current}); move it with "
                           f"cupy.asarray under cupy.cuda.Device({current}).")
    shape = check_values(q, k, v, causal, scale, out, input_type)
    arch = device.current().arch
    if arch < MIN_ARCH:
        raise LabError(f"lab.ops.attention's kernels need sm_{MIN_ARCH} or newer (bf16 conversions, mma.sync); this "
                       f"GPU is sm_{arch}.")
    aligned = all(x.data.ptr % 16 == 0 for x in (q, k, v, out) if x is not None)
    return dataclasses.replace(shape, aligned=aligned)


def not_on_gpu() -> LabError:
    """The sentence for arrays that are not CuPy arrays, once their values passed (lab.ops.matmul's wording): on a
    machine without a GPU, that lab.ops needs one; on a machine with one, how to move them there."""
    from lab.core import device

    if not device.gpu_available():
        return LabError(f"lab.ops.attention runs on a CUDA GPU, and this machine has none ({device.why_no_gpu()}); "
                        "the arguments are otherwise valid, so the same call with CuPy arrays works on a machine with "
                        "one.")
    return LabError("lab.ops.attention takes CuPy arrays on the GPU (q, k, v, and out when given); convert with "
                    "cupy.asarray(x).")


def _check_no_overlap(out, inputs) -> None:
    lo, hi = out.data.ptr, out.data.ptr + out.nbytes
    for x in inputs:
        if x.data.ptr < hi and lo < x.data.ptr + x.nbytes:
            raise LabError("out overlaps q, k or v; pass a separate output array (the kernels read the inputs "
                           "while they write out).")


# --- the call ------------------------------------------------------------------------------------------------

def attention(q, k, v, *, causal: bool = False, scale: float | None = None, out=None,
              input_type: str | None = None, runtime=None):
    """softmax(q k^T / sqrt(D)) v per (batch, head): q (B, H, S_q, D), k and v (B, H_kv, S_k, D) with H a multiple
    of H_kv (query head h reads key/value head h // (H // H_kv)), all C-contiguous, fp16 (or bf16 as uint16 with
    input_type="bfloat16"). causal: query row i sees keys j <= i + S_k - S_q (bottom-right aligned; rows that see no
    key are 0). scale: 1/sqrt(D), the only one the kernels take (None means it). Returns out (allocated when None)."""
    rt = runtime or api.default_runtime()
    if type(causal) is not bool or scale is not None:
        check_flag_types(causal, scale)  # before they go into a key (an array there would not hash)
    if out is not None:
        try:  # the fast path: one flat key of addresses, shapes and strides, one lookup, the recorded launch
            # The devices too: the current one (the launch goes there) and each array's, so that a call under another
            # cupy.cuda.Device, or on arrays of another GPU at the same addresses, is checked anew.
            fkey = ("attention", q.data.ptr, k.data.ptr, v.data.ptr, out.data.ptr, q.shape, q.strides, k.shape,
                    k.strides, v.shape, v.strides, out.shape, out.strides, q.dtype.char, k.dtype.char, v.dtype.char,
                    out.dtype.char, causal, scale, input_type, _current_device(), q.data.device_id,
                    k.data.device_id, v.data.device_id, out.data.device_id)
        except AttributeError:
            fkey = None
        replay = rt.fast.get(fkey)
        if replay is not None:
            counters.COUNTS["calls"] += 1
            replay.calls += 1  # folded into the counters when they are read
            for raw, grid, block, args, smem in replay.launches:
                raw(grid, block, args, shared_mem=smem)
            rt.last_decision = replay.decision
            return out
    else:
        fkey = None
    try:
        key = ("attention", q.shape, q.strides, q.dtype.char, k.shape, k.strides, k.dtype.char, v.shape, v.strides,
               v.dtype.char, None if out is None else (out.shape, out.strides, out.dtype.char), causal, scale,
               input_type, q.data.ptr & 15, k.data.ptr & 15, v.data.ptr & 15,
               0 if out is None else out.data.ptr & 15, _current_device(), q.data.device_id, k.data.device_id,
               v.data.device_id, None if out is None else out.data.device_id)
    except (AttributeError, TypeError):
        check_values(q, k, v, causal, scale, out, input_type)
        raise not_on_gpu() from None
    counters.COUNTS["calls"] += 1
    return _attention_slow(rt, key, q, k, v, causal, scale, out, input_type, fkey)


def _current_device() -> int:
    from cupy.cuda import runtime

    return runtime.getDevice()


def _attention_slow(rt, key, q, k, v, causal, scale, out, input_type, fkey):
    import cupy as cp

    shape = _CHECKED.get(key)
    if shape is None:
        shape = _check_call(q, k, v, causal, scale, out, input_type)
        if len(_CHECKED) > 65536:
            _CHECKED.clear()
        _CHECKED[key] = shape
    if out is None:
        out = cp.empty(q.shape, dtype=q.dtype)
    else:
        _check_no_overlap(out, (q, k, v))
    fam, problem = _problem(shape, q, k, v)
    decision = rt.decisions.get(key)
    if decision is None:
        counters.COUNTS["decision_misses"] += 1
        counters.FAMILIES[family_label(shape)] += 1  # once per decision key, as lab.ops.matmul counts
        decision = _decide_on_gpu(rt, shape, fam, problem, out)
        if decision.source.startswith("fallback"):
            counters.FALLBACKS[decision.source[10:]] += 1
        rt.decisions[key] = decision
    replay_key = (key, q.data.ptr, k.data.ptr, v.data.ptr, out.data.ptr)
    replay = rt.recordings.get(replay_key)
    if replay is None:  # the first call on these addresses: run the rung and keep its launch
        replay = _record(rt, key, shape, decision, fam, problem, out, replay_key)
    else:
        counters.COUNTS["replays"] += 1
        for raw, grid, block, args, smem in replay.launches:
            raw(grid, block, args, shared_mem=smem)
    counters.PATHS[replay.path_key] += 1
    rt.last_decision = replay.decision
    if fkey is not None:
        rt.remember_fast(fkey, replay_key)
    return out


def _problem(shape: AttentionShape, q, k, v):
    """The family (one instance per process) and a Problem over the caller's own arrays."""
    from lab.core.ladder import Problem
    from lab.families.gemm_tc import STORAGE
    from lab.ops.paths import family

    fam = family("attention")
    problem = Problem(f"ops attention {tuple(q.shape)} {tuple(k.shape)}", {"Q": [q], "K": [k], "V": [v]}, q.shape,
                      0, params=shape.params, dtype=STORAGE[shape.dtype])
    return fam, problem


def specialized_refusal(shape: AttentionShape, key: str) -> str | None:
    """Why lab.ops keeps rung `key` off a call whose head dim it does not specialize, though the family may build it:
    dispatch, tuning and the tuned entry all ask this first."""
    if key != GENERIC and shape.D not in SPECIALIZED_HEAD_DIMS:
        return f"lab.ops.attention serves D={shape.D} with the generic rung"
    return None


def _decide_on_gpu(rt, shape: AttentionShape, fam, problem, out) -> Decision:
    keys = [r.key for r in fam.rungs]

    def refusal(key: str) -> str | None:
        return specialized_refusal(shape, key) or fam.refusal(fam.rung(key), problem, out)

    def decode_refusal() -> str | None:
        dfam, dproblem = _decode_problem(shape, problem)
        return dfam.refusal(dfam.rung(DECODE_RUNG), dproblem, out)

    if shape_class(shape) == "decode" and decode_refusal() is None:
        return decide(shape, keys, refusal, decode_refusal=decode_refusal)
    tuned = None
    if rt.store is not None:
        entry = rt.store.get(rt.env, bucket(shape))
        if entry is None and rt.autotune and len([key for key in keys if refusal(key) is None]) > 1:
            entry = tune_bucket(rt, shape)
        tuned = entry.get("path") if entry is not None else None
    return decide(shape, keys, refusal, tuned)


def _decode_problem(shape: AttentionShape, problem):
    """The decode family (one instance per process) and a Problem of it over the same arrays: a contiguous cache of
    one length."""
    from lab.core.ladder import Problem
    from lab.ops.paths import family

    dfam = family(DECODE_FAMILY)
    params = problem.params | {"page_size": 0, "varlen": 0}
    return dfam, Problem(problem.label, problem.inputs, problem.out_shape, 0, params=params, dtype=problem.dtype)


def _launch_decided(path: str, shape: AttentionShape, fam, problem, out) -> None:
    if path == DECODE_PATH:
        dfam, dproblem = _decode_problem(shape, problem)
        dfam.launch(dfam.rung(DECODE_RUNG), dproblem, out)
    else:
        fam.launch(fam.rung(path), problem, out)


def _record(rt, key, shape: AttentionShape, decision: Decision, fam, problem, out, replay_key) -> Replay:
    """Run the decided rung once under lab.core.build.recording() and keep its launch (the caller's arrays as bare
    addresses; the decode kernel's workspace, the family's, as the arrays themselves, so the recording keeps them
    alive); a flash rung the GPU refuses after all (a build error) falls back to the generic rung."""
    from lab.core.build import COMPILES, recording

    counters.COUNTS["recordings"] += 1
    arrays = [problem.inputs[n][0] for n in ("Q", "K", "V")] + [out]
    spans = [(x.data.ptr, x.data.ptr + max(x.nbytes, 1)) for x in arrays]
    compiled, from_disk = COMPILES["compiled"], COMPILES["cache_hits"]
    try:
        with recording() as launches:
            _launch_decided(decision.path, shape, fam, problem, out)
    except LabError as exc:
        if decision.path == GENERIC:
            raise
        reason = f"attention: {decision.path} failed: {exc}"
        if counters.FALLBACKS[reason] == 0:
            warnings.warn(f"lab.ops: {reason} Falling back to the generic attention kernel for this shape.",
                          stacklevel=4)
        counters.FALLBACKS[reason] += 1
        decision = Decision(GENERIC, (), "fallback: " + reason)
        rt.decisions[key] = decision
        with recording() as launches:
            fam.launch(fam.rung(GENERIC), problem, out)
    _keep_smem_opt_in(launches)
    path_key = "attention:" + decision.path
    counters.COMPILES_BY_PATH[path_key + " compiled"] += COMPILES["compiled"] - compiled
    counters.COMPILES_BY_PATH[path_key + " from_disk"] += COMPILES["cache_hits"] - from_disk
    replay = Replay([(raw, grid, block, tuple(as_address(arg, spans) for arg in args), smem)
                     for raw, grid, block, args, smem in launches], decision, True, True, path_key)
    rt.recordings[replay_key] = replay
    if len(rt.recordings) > MAX_RECORDINGS:
        dropped = rt.recordings.popitem(last=False)[1]
        if isinstance(dropped, Replay):
            counters.fold_replay(dropped)
        rt.fast.clear()  # it may point at the dropped replay
    return replay


def _keep_smem_opt_in(launches) -> None:
    """Rung 01's launcher opts its kernel in to exactly the dynamic shared memory of the call it launches (a
    function attribute); a recording of a larger S_k replayed after a smaller one was recorded would then ask for
    more than the attribute allows. Raised to the most the family ever launches with (its refusal keeps 2 KiB
    under the GPU's opt-in limit), every recording's replay stays valid."""
    from lab.core import device
    from lab.families.attention import DEFAULT_SMEM_LIMIT

    if any(smem > DEFAULT_SMEM_LIMIT for *_, smem in launches):
        optin = device.current().smem_per_block_optin
        for raw, *_, smem in launches:
            limit = max(smem, optin - max(2048, raw.shared_size_bytes))
            if smem > DEFAULT_SMEM_LIMIT and raw.max_dynamic_shared_size_bytes < limit:
                raw.max_dynamic_shared_size_bytes = limit


# --- autotune ----------------------------------------------------------------------------------------------

TUNE_CHECK_MAX_S = (256, 1024)  # (S_q, S_k) the correctness check runs at: the kernel variant is the same
TIMING_MS = 10.0


def tune_bucket(rt, shape: AttentionShape, seed: int = 20261202) -> dict:
    """Every rung that serves the bucket's largest shape is checked (one key/value head's group, fresh inputs,
    float64 reference, NaN-poisoned and guarded output: lab.measure.verify.check_case) and only then timed (cold
    L2, median); the fastest is stored under the bucket. Returns the entry."""
    import dataclasses
    import datetime
    import time

    from lab.core.build import recording
    from lab.measure.timing import measure
    from lab.measure.verify import check_case
    from lab.ops.paths import family

    started = time.perf_counter()
    fam = family("attention")
    top = dataclasses.replace(shape, S_q=m_bucket(shape.S_q), S_k=m_bucket(shape.S_k), aligned=True)
    try:
        problem = fam.make_problem(seed, **top.params)
    except LabError:  # the bucket's top is past the family's size limits: tune at the call's own sizes
        top = dataclasses.replace(shape, aligned=True)
        problem = fam.make_problem(seed, **top.params)
    out = _empty_like_problem(problem)
    check = {**top.params, "B": 1, "H": top.H // top.H_kv, "H_kv": 1, "S_q": min(top.S_q, TUNE_CHECK_MAX_S[0]),
             "S_k": min(top.S_k, TUNE_CHECK_MAX_S[1])}
    rows = []
    for rung in fam.rungs:
        if specialized_refusal(shape, rung.key) or fam.refusal(rung, problem, out) is not None:
            continue
        row: dict = {"path": rung.key, "config": {}}
        result = check_case(fam, rung, check, seed=seed, repeats=1)
        if not result.passed:
            row["rejected"] = "; ".join(result.reasons)[:300]
        else:
            with recording() as launches:
                fam.launch(rung, problem, out)

            def launch(_index: int, launches=launches) -> None:
                for raw, grid, block, args, smem in launches:
                    raw(grid, block, args, shared_mem=smem)

            row["us"] = round(1e3 * measure(launch, l2="cold", min_time_ms=TIMING_MS).median_ms, 3)
        rows.append(row)
    timed = [r for r in rows if "us" in r]
    if not timed:
        raise LabError(f"No attention kernel passed its check for {bucket(shape)}; see the rejections: {rows}.")
    best = min(timed, key=lambda r: r["us"])
    entry = {"path": best["path"], "config": {}, "us": best["us"], "tuned_S_q": top.S_q, "tuned_S_k": top.S_k,
             "candidates": rows, "seconds": round(time.perf_counter() - started, 2),
             "tuned_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if rt.store is not None:
        rt.store.put(rt.env, bucket(shape), entry)
    counters.COUNTS["tuned"] += 1
    return entry


def _empty_like_problem(problem):
    import cupy as cp

    return cp.empty(problem.out_shape, dtype=problem.dtype)
