"""The attention ladder (forward only): O = softmax(scale * Q K^T) V per (batch, head), scale = 1/sqrt(D).

Q and O are (B, H, S_q, D), K and V (B, H_kv, S_k, D), all contiguous, in fp16 or bf16 (H a multiple of H_kv:
grouped-query attention, query head h reads key/value head h // (H // H_kv)). fp32 scores and statistics, O in
the input type. `causal=1` masks bottom-right aligned, as FlashAttention 2 does when S_q != S_k: query row i
sees keys j <= i + S_k - S_q. With S_q <= S_k every row sees at least one key; with S_q > S_k (allowed) the rows
i < S_q - S_k see none, and their output is exactly +0 (not NaN: the kernels shift such a row by 0 instead of
-inf and divide by a zero sum as 0; the float64 reference says the same).

Storage: as gemm_tc (lab/families/gemm_tc.py, whose helpers this module uses): bf16 arrays are uint16 arrays of
bf16 bit patterns, fp16 arrays float16. Inputs are fresh random values (lab.measure.check.random_array) rounded to
the type; `large_logits=1` (or dist="large_logits", normal values) multiplies Q and K by sqrt(15), so the logits
have a standard deviation of 15 on normal inputs and reach +-60 in a case of some thousand rows, past where an
exp without its max subtracted overflows fp16 (e^11) and fp32 (e^88, with the wide distribution).

Rungs 01-03 have one signature:
    attention_<name>(const uint16* Q, const uint16* K, const uint16* V, uint16* O, int H, int H_kv, int S_q,
                     int S_k, [int D,] float scale_log2)
(rung 01 takes D at run time; rungs 02-05 compile it as the knob HEAD_DIM), scale_log2 = fp32(log2(e) / sqrt(D)),
on a grid (ceil(S_q / rows per block), H, B). Rungs 04-05 (sm_90a) take three TMA tensor maps in place of Q, K and V
(`_tensor_maps`). The launcher passes BF16, CAUSAL and (rungs 02-05) HEAD_DIM as knobs. Rung 01 keeps one query
row's scores in dynamic shared memory (S_k * 4 bytes); rungs 02-05 need 16-byte-aligned Q, K, V and O and D in
(64, 128) (rung 05 also 256, with 64-key tiles: `head_dims`, and its check cases by `cases_for`), rungs 04-05 an
sm_90 GPU, and each refuses other problems with one sentence (`refusal`).

Measured against PyTorch's torch.nn.functional.scaled_dot_product_attention on the same memory (DLPack,
zero-copy; `launch_ceiling`): a library baseline, not a hardware ceiling. Error bound: `error_bound`.

Every rung compiles without spills for every arch it runs on (rungs 01-03: sm_80-sm_90; rungs 04-05: sm_90a);
rung 02's fragment index math and online-softmax bookkeeping are desk-checked in a NumPy model of mma.sync and
ldmatrix, and the bound holds that model to half of it and rejects wrong ones (tests/test_attention_family.py).
Rung 03 is rung 02's arithmetic with another copy schedule. On the GPU,
tests/test_gpu_attention.py checks every rung; results/h200/attention*.json hold what the H200 measured. Rung 05
with its loop peeled (PEELED = 1, the default since aa2b89c): the GPU tests of this family and of lab.ops.attention
passed on an H100 at 5b68074 (results/h100/attention_gpu_tests_5b68074.log), rung 05's again at 40aa909 with its
other builds (PEELED = 0, LONGEST_FIRST = 1; results/h100/varlen_run_40aa909.log); compute-sanitizer memcheck and
synccheck clean at 5b68074, racecheck clean at 40aa909 (results/h100/sanitize_attention/);
results/h100/attention_study.json holds its newest timing beside SDPA's backends (at 730294a, after the q_empty fix;
results/h100/attention_study_96aa2fa.json the one before, at 96aa2fa, rung 05 persistent by
default at D = 128 and causal D = 64, whose GPU tests, with lab.ops.attention's, passed on an H100 at 823c643:
results/h100/fix_run_823c643.log; racecheck on the persistent build is clean there, after a fix of the hazard it
found at 96aa2fa; LONGEST_FIRST = 1 measured 1.01x on causal shapes at 40aa909,
results/h100/varlen_run_40aa909.log; the default stays 0),
results/h100/attention_sweep.json its sweep. Its knobs LONGEST_FIRST, PERSISTENT and VARLEN (the packed sequences of
lab.families.attention_varlen) at 0 leave every attention build's SASS as it was (scripts/same_sass.py), as
SOFTMAX_OVERLAP at 0 does. SOFTMAX_OVERLAP (each warpgroup's exponentials under its own P V products: 1; its first
build, whose SASS ran them after the products: 2) defaults to 1 at D = 256 and 2 at D = 64 and 128
(results/h100/attention_study_07cca46.json, an H100 at 07cca46; the kernel's header has the figures). Rung 05's GPU
tests passed with 1 at every head dim at 07cca46 and with 2 (then built as 1) at 85fdfc4
(results/h100/overlap_run_*.log); compute-sanitizer's three tools were clean for both on its D = 64 and 128 cases
(results/h100/sanitize_attention/), and at 262d23d on its D = 256 cases too. Rung 05's PERSISTENT build (a block an
SM, taking query blocks from a counter in lab.families.attention_schedule's order, sections of heads by
section_heads) passed its GPU tests on every check case with a few blocks looping over many items on an H100 at
262d23d (results/h100/persist_run_262d23d.log), memcheck and synccheck there (racecheck ran past its time box);
the attention study times it beside the other build, and the family builds it by default where it measured faster
(persistent_default: D = 128, and causal D = 64).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Family, Problem, Rung
from lab.families.gemm_tc import STORAGE, bfloat16_bits_to_float32, to_float32, to_storage
from lab.measure.bounds import (
    BFLOAT16,
    SAFETY,
    half_subnormal_spacing,
    tensor_core_accumulation_bound,
    unit_roundoff,
)

DTYPES = ("float16", BFLOAT16)
MIN_ARCH = 80  # bf16 conversions; mma.sync m16n8k16, ldmatrix and cp.async for rungs 02-03
MMA_HEAD_DIMS = (64, 128)  # rungs 02-05's HEAD_DIM (rung 05 also WIDE_HEAD_DIM)
WIDE_HEAD_DIM = 256  # rung 05 also builds HEAD_DIM = 256, with 64-key tiles (WIDE_BLOCK_N) to fit its K/V stages
WIDE_BLOCK_N = 64
WIDE_RUNGS = ("05_pingpong",)
HOPPER_ARCH = 90  # rungs 04-05: wgmma, setmaxnreg and TMA (sm_90a)
TMA_BLOCK_M = 128  # rungs 04-05's query rows a block: two consumer warpgroups of 64
MAX_HEAD_DIM = 256  # rung 01's MAX_D
LARGE_LOGIT_FACTOR = math.sqrt(15.0)  # Q and K both: logits of standard deviation 15 on normal inputs
LOG2E = 1.4426950408889634
DEFAULT_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory
DEFAULT_SMEM_OPTIN = 99 * 1024  # the smallest opt-in limit of the sm_80+ GPUs (sm_86, sm_89), where none is known
DEFAULT_SM_COUNT = 132  # the H200's (and H100's): persistent grids planned with no GPU to ask (CPU tests)
DEFAULT_L2_BYTES = 60 * 1024 * 1024  # the H200's L2
L2_SHARE = 0.5  # of L2 for one section's K and V (PERSISTENT, section_heads): the rest for the section before's tail
PERSISTENT_RUNGS = ("05_pingpong",)  # rungs with a PERSISTENT build, chosen by default where persistent_default says
FTZ_FLOOR = 2.0 ** -126  # ex2.approx.ftz flushes results below fp32's smallest normal to 0
# The error model's constants (error_bound's docstring derives them).
EXP_ULPS = 4.0  # ex2.approx: 2 ulps of fp32, 4 u
ARG_ULPS = 3.0  # roundings of the exponent's argument, per unit of |s| + |s - m|
RESCALE_STEP = 16  # the bound counts a rescale (or an fp32 rounding of O and l) per 16 keys: at least one a tile


def _rung(key: str, entry: str, title: str, *, launch: str, min_arch: int = MIN_ARCH, arch_suffix: str = "",
          **knobs: int) -> Rung:
    spec = KernelSpec(f"attention/{key}.cu", entry, tuple(sorted(knobs.items())), min_arch=min_arch,
                      arch_suffix=arch_suffix)
    return Rung("attention", key, spec, title, launch)


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def head_dims(rung: Rung) -> tuple[int, ...] | None:
    """The head dims a rung compiles in (None: rung 01, which takes D at run time, up to MAX_HEAD_DIM)."""
    if "HEAD_DIM" not in _knobs(rung):
        return None
    return MMA_HEAD_DIMS + ((WIDE_HEAD_DIM,) if rung.key in WIDE_RUNGS else ())


def validate_sizes(B: int, H: int, H_kv: int, S_q: int, S_k: int, D: int, dtype: str, causal: int) -> None:
    if min(B, H, H_kv, S_q, S_k, D) < 1:
        raise LabError(f"attention needs B, H, H_kv, S_q, S_k, D >= 1; got B={B} H={H} H_kv={H_kv} S_q={S_q} "
                       f"S_k={S_k} D={D}.")
    if H % H_kv:
        raise LabError(f"attention needs H a multiple of H_kv (grouped-query attention); got H={H} H_kv={H_kv}.")
    if D > MAX_HEAD_DIM:
        raise LabError(f"attention takes head dimensions up to {MAX_HEAD_DIM}; got D={D}.")
    if B * H * max(S_q, S_k) * D >= 2**31 or max(B, H) >= 2**16:
        raise LabError(f"attention takes B * H * S * D below 2^31 and B, H below 2^16 (the grid's y and z); got "
                       f"B={B} H={H} S_q={S_q} S_k={S_k} D={D}.")
    if dtype not in DTYPES:
        raise LabError(f"attention dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")
    if causal not in (0, 1):
        raise LabError(f"attention causal is 0 or 1; got {causal!r}.")


def visible_keys(S_q: int, S_k: int, causal: int) -> np.ndarray:
    """How many keys each query row sees (0 .. S_k): S_k, or with causal (bottom-right aligned) i + S_k - S_q + 1
    clamped to 0 .. S_k."""
    if not causal:
        return np.full(S_q, S_k, dtype=np.int64)
    return np.clip(np.arange(S_q, dtype=np.int64) + S_k - S_q + 1, 0, S_k)


def visible_mask(S_q: int, S_k: int, causal: int) -> np.ndarray:
    """(S_q, S_k) booleans: key j is visible to query row i."""
    return np.arange(S_k)[None, :] < visible_keys(S_q, S_k, causal)[:, None]


def softmax_scale(D: int) -> float:
    return 1.0 / math.sqrt(D)


def tma_smem_bytes(knobs: dict, D: int) -> int:
    """Rung 04's dynamic shared memory: Q's 128 rows and STAGES stages of a K and a V tile (BLOCK_N rows each), D
    two-byte elements a row, and 1024 bytes to align the start to the 128-byte swizzle's period (as the kernel's
    SMEM_BYTES)."""
    return (TMA_BLOCK_M + 2 * knobs["STAGES"] * knobs["BLOCK_N"]) * D * 2 + 1024


def persistent_default(params: dict) -> int:
    """Rung 05's PERSISTENT knob where the rung does not set it: 1 at D = 128, and at D = 64 when causal; 0 elsewhere.
    Measured against PERSISTENT = 0 in the same rounds (results/h100/attention_study_262d23d.json and
    attention_study_d*.json, an H100 at 262d23d, three rounds each): causal 1.12x at D = 128 and 1.17x at D = 64,
    non-causal 1.00-1.04x at D = 128 (0.94-1.17x on B=4 H=32); but 0.98-0.99x non-causal at D = 64 and 0.95-1.00x at
    D = 256, which keep one block a query block. Again with these defaults (results/h100/attention_study_96aa2fa.json):
    causal 1.12x and 1.17x, D = 128 0.99-1.04x, B=4 H=32 0.82-1.06x (1.05x over the nine rounds of three runs)."""
    return int(params["D"] == 128 or (params["D"] == 64 and bool(params["causal"])))


def persistent_build(rung: Rung, params: dict) -> int:
    """The PERSISTENT knob `rung` runs `params` with: its own where it sets one, else persistent_default's for rung
    05's dense peeled build (the packed and unpeeled builds have no persistent form), else 0."""
    own = _knobs(rung)
    if "PERSISTENT" in own:
        return own["PERSISTENT"]
    if rung.key in PERSISTENT_RUNGS and own.get("PEELED", 1) and not own.get("VARLEN"):
        return persistent_default(params)
    return 0


def section_heads(params: dict, l2_bytes: int) -> int:
    """Rung 05's PERSISTENT build runs the (batch, head) pairs in sections of this many, each section's query blocks
    in turn (longest first when causal): sections of equal size (within one head), as few as keep a section's K and V
    (2 * S_k * D * 2 bytes a head, counted per query head, so GQA's sharing only helps) within L2_SHARE of L2. Equal,
    because a short last section puts long items late (lab.families.attention_schedule's model: B=2 H=16 S=4096
    causal on 132 SMs, sections of 15, 15 and 2 heads leave the busiest SM 151 tiles, three of 11 or 10 leave 131,
    an ordinary launch 149, the even share 128)."""
    heads_total = params["B"] * params["H"]
    per_head = 4 * params["S_k"] * params["D"]
    most = max(1, min(heads_total, int(l2_bytes * L2_SHARE) // max(per_head, 1)))
    sections = -(-heads_total // most)
    return -(-heads_total // sections)


def _gpu_figure(name: str, default: int) -> int:
    """The current GPU's sm_count or l2_bytes (lab.core.device), or the H200's where there is no GPU to ask (the CPU
    tests' launch plans)."""
    try:
        from lab.core import device

        return int(getattr(device.current(), name))
    except Exception:  # noqa: BLE001 - no GPU to ask
        return default


def _sm_count() -> int:
    return _gpu_figure("sm_count", DEFAULT_SM_COUNT)


_WORK_COUNTERS: dict = {}  # (device, stream) -> the persistent build's item counter


def work_counter():
    """The int32 the PERSISTENT build's blocks take their next item from, on the current device and stream (two
    launches at once on one counter would share items): zeroed when made, and the kernel's last fetch leaves it at 0
    again."""
    import cupy as cp

    key = (cp.cuda.Device().id, cp.cuda.get_current_stream().ptr)
    if key not in _WORK_COUNTERS:
        _WORK_COUNTERS[key] = cp.zeros(1, dtype=cp.int32)
    return _WORK_COUNTERS[key]


def _l2_bytes() -> int:
    return _gpu_figure("l2_bytes", DEFAULT_L2_BYTES)


class AttentionFamily(Family):
    name = "attention"
    title = "Attention forward (softmax(Q K^T / sqrt(D)) V), fp16/bf16 in, fp32 statistics, GQA, causal"
    metric = "TFLOP/s"
    ceiling_name = "torch_sdpa"
    ceiling_title = "PyTorch SDPA (scaled_dot_product_attention; a library baseline, not a hardware ceiling)"
    sweep_figure = "throughput"
    profile_figure = None
    launches = ("row_per_step", "flash_tiles", "flash_tma")
    rungs = (
        # Launch "row_per_step": grid (ceil(S_q / ROWS), H, B) of THREADS threads, S_k * 4 bytes of dynamic shared
        # memory (opted in above 48 KiB), D passed at run time.
        _rung("01_naive", "attention_naive", "a query row at a time: its scores in shared memory, max/sum, then P V",
              launch="row_per_step", BF16=0, CAUSAL=0, ROWS=16, THREADS=128),
        # Launch "flash_tiles": grid (ceil(S_q / BLOCK_M), H, B) of THREADS threads, static shared memory, HEAD_DIM
        # set per problem; 16-byte-aligned operands only (refusal).
        _rung("02_flash_mma", "attention_flash_mma",
              "FlashAttention-2: online softmax in registers, mma.sync for Q K^T and P V",
              launch="flash_tiles", BF16=0, CAUSAL=0, HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, THREADS=128, PAD=8),
        _rung("03_flash_pipelined", "attention_flash_pipelined",
              "K and V tiles by cp.async, each copy behind the other's product",
              launch="flash_tiles", BF16=0, CAUSAL=0, HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, THREADS=128, PAD=8),
        # Launch "flash_tma" (rungs 04-05): grid (ceil(S_q / 128), H, B) of 384 threads (a producer and two consumer
        # warpgroups), dynamic shared memory for Q and STAGES K/V stages (tma_smem_bytes), three 3-D tensor maps;
        # sm_90a.
        _rung("04_wgmma_ws", "attention_wgmma_ws",
              "Hopper: TMA into a ring of K/V stages, both products on wgmma, a producer warpgroup",
              launch="flash_tma", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, CAUSAL=0, HEAD_DIM=64, BLOCK_N=128,
              STAGES=2, THREADS=384),
        _rung("05_pingpong", "attention_pingpong",
              "ping-pong: the consumer warpgroups take turns, one's softmax under the other's products",
              launch="flash_tma", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, CAUSAL=0, HEAD_DIM=64, BLOCK_N=128,
              STAGES=2, THREADS=384),
    )

    def __init__(self, statistical_scale: float = 1.0):
        # The share of the error model (E in error_bound) a check allows: 1 for the checks; the GPU tests check
        # again at 0.5, to show the bound is not flaky.
        self.statistical_scale = statistical_scale

    def _xp(self):
        if self.array_module is not None:
            return self.array_module
        import cupy

        return cupy

    # --- problems ---------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", B: int = 1, H: int = 1, H_kv: int | None = None,
                     S_q: int = 128, S_k: int | None = None, D: int = 64, dtype: str = "float16", causal: int = 0,
                     large_logits: int = 0, sets: int = 1) -> Problem:
        """Q (B, H, S_q, D), K and V (B, H_kv, S_k, D) of `dist` (random_array, float32 rounded to `dtype`); H_kv
        defaults to H and S_k to S_q. large_logits=1, or dist="large_logits" (normal values), multiplies Q and K
        by LARGE_LOGIT_FACTOR before the rounding."""

        H_kv = H if H_kv is None else H_kv
        S_k = S_q if S_k is None else S_k
        causal = int(causal)
        validate_sizes(B, H, H_kv, S_q, S_k, D, dtype, causal)
        q_shape, kv_shape = (B, H, S_q, D), (B, H_kv, S_k, D)
        inputs, large = self.draw_qkv(q_shape, kv_shape, seed, dist, dtype, large_logits, sets)
        params = {"B": B, "H": H, "H_kv": H_kv, "S_q": S_q, "S_k": S_k, "D": D, "dtype": dtype, "causal": causal}
        params |= {"large_logits": 1} if large else {}
        label = (f"B={B} H={H}" + (f"/{H_kv}" if H_kv != H else "") + f" S_q={S_q} S_k={S_k} D={D} {dtype}"
                 + (" causal" if causal else "") + (" large logits" if large else ""))
        return Problem(label, inputs, q_shape, self.min_dram_bytes(params), params=params, dtype=STORAGE[dtype],
                       flops=self.flops(params))

    def draw_qkv(self, q_shape, kv_shape, seed: int, dist: str, dtype: str, large_logits: int,
                 sets: int) -> tuple[dict, bool]:
        """{"Q", "K", "V"}: `sets` input sets of `dist` (random_array, float32 rounded to `dtype`), Q and K scaled by
        LARGE_LOGIT_FACTOR when large_logits=1 or dist="large_logits" (normal values); and whether they were."""
        from lab.measure.check import random_array

        xp = self._xp()
        large = bool(large_logits) or dist == "large_logits"
        base = "normal" if dist == "large_logits" else dist
        factor = np.float32(LARGE_LOGIT_FACTOR if large else 1.0)

        def draw(shape, s, scaled):
            x = random_array(shape, np.float32, s, base, xp=xp)
            return to_storage(x * factor if scaled else x, dtype, xp)

        return {"Q": [draw(q_shape, seed + 13 * s, True) for s in range(sets)],
                "K": [draw(kv_shape, seed + 13 * s + 1, True) for s in range(sets)],
                "V": [draw(kv_shape, seed + 13 * s + 2, False) for s in range(sets)]}, large

    @staticmethod
    def flops(params: dict) -> int:
        """4 * D FLOPs per visible (query, key) pair (2 D for the score, 2 D for its share of P V), per head."""
        pairs = int(visible_keys(params["S_q"], params["S_k"], params["causal"]).sum())
        return 4 * params["D"] * params["B"] * params["H"] * pairs

    def min_dram_bytes(self, params: dict) -> int:
        """Q, K and V read once and O written once: 2 bytes an element."""
        B, H, H_kv, S_q, S_k, D = (params[k] for k in ("B", "H", "H_kv", "S_q", "S_k", "D"))
        return 2 * (2 * B * H * S_q * D + 2 * B * H_kv * S_k * D)

    # --- the float64 reference --------------------------------------------------------------------
    @staticmethod
    def _heads(problem: Problem):
        """(b, h, q, k, v) for every query head of the problem's first input set: float64 values of the stored
        (rounded) inputs, q (S_q, D), k and v (S_k, D) of the key/value head h // (H // H_kv)."""
        from lab.measure.check import to_numpy

        p = problem.params
        dtype, group = p["dtype"], p["H"] // p["H_kv"]
        q_all, k_all, v_all = (to_float32(to_numpy(problem.inputs[n][0]), dtype).astype(np.float64)
                               for n in ("Q", "K", "V"))
        for b in range(p["B"]):
            for h in range(p["H"]):
                yield b, h, q_all[b, h], k_all[b, h // group], v_all[b, h // group]

    @staticmethod
    def _softmax(problem: Problem, q: np.ndarray, k: np.ndarray) -> dict:
        """One head's float64 softmax: raw = q k^T, s = scale * raw, the visible mask, the row max m over visible
        keys (0 for a row with none), y = the probabilities (0 where masked), l = sum_j exp(s_j - m)."""
        p = problem.params
        raw = q @ k.T
        s = softmax_scale(p["D"]) * raw
        mask = visible_mask(p["S_q"], p["S_k"], p["causal"])
        m = np.where(mask, s, -np.inf).max(axis=1, initial=-np.inf)
        m = np.where(np.isneginf(m), 0.0, m)
        e = np.where(mask, np.exp(np.where(mask, s - m[:, None], 0.0)), 0.0)
        l_sum = e.sum(axis=1)
        y = e / np.where(l_sum > 0, l_sum, 1.0)[:, None]
        return {"raw": raw, "s": s, "mask": mask, "m": m, "y": y, "l": l_sum}

    def reference(self, problem: Problem) -> np.ndarray:
        """O in float64, from the stored inputs; +0 for rows with no visible key (their y are all 0)."""
        cached = problem.derived.get("reference")
        if cached is not None:
            return cached
        p = problem.params
        out = np.zeros((p["B"], p["H"], p["S_q"], p["D"]))
        for b, h, q, k, v in self._heads(problem):
            out[b, h] = self._softmax(problem, q, k)["y"] @ v
        problem.derived["reference"] = out
        return out

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """Each output's allowed |error|, from its own row, for a kernel that computes (rungs 02-03; rung 01 does less
        rounding and fits the same bound):

            s_j = scale * (q . k_j)   (fp32 accumulation on tensor cores, fp16/bf16 inputs)
            w_j = R_in(2^(s_j log2(e) - m log2(e)))   (ex2.approx.ftz; R_in: rounded to the input type)
            o   = (sum_j w_j v_j) / (sum_j w_j)        (fp32 accumulation), rounded once to the output type

        with u = u_32 = 2^-24, u_in the input type's unit roundoff (2^-11 fp16, 2^-8 bf16), y_j the exact
        probabilities, o the exact output, over the row's visible keys j (n of them: S_k, fewer when causal).

        1. The weights. Each computed weight is w_j = exp(s_j - m) r_j + eta_j: a relative factor r_j and an
           absolute part eta_j. Any common factor (the shift m, however it was rounded, the rescales by
           2^(m_old - m_new), applied to O and l alike) cancels in O / l. What is left:
           - the score's error: the dot product's, E_qk (lab.measure.bounds.tensor_core_accumulation_bound over D
             terms), times scale, plus the roundings of the exponent's argument (scale * log2(e) rounded, the
             fma s c - m c, rung 01's product and difference), ARG_ULPS * u * (|s_j| + |s_j - m|):
             delta_j = scale * E_qk,j + 3u (|s_j| + |s_j - m|), so the factor is within e^(+-delta_j);
           - ex2.approx: 2 ulps (EXP_ULPS * u); the rounding of p to the input type: u_in (rung 01 keeps fp32).
           So |r_j - 1| <= theta_j = e^delta_j (1 + 4u)(1 + u_in) - 1. The absolute part: p flushed to 0 below
           2^-126 (.ftz) and fp16's subnormals (half a spacing, 2^-25), h <= 2^-25 + 2^-126 in units where the
           row's largest computed weight is 1 (every later rescale only shrinks it); against the exact weights'
           scale it is h e^g1, g1 = max_j (s_j + delta_j) - m, the most the computed max can exceed the true one.
           Then, exactly (sum_j y_j (v_j - o) = 0):
               o_hat - o = sum_j (w_j - l y_j)(v_j - o) / sum_j w_j
           so with a_j = y_j theta_j and A = sum_j a_j (Cauchy-Schwarz on sum_j a_j |v_j - o|):
               W = [sqrt(A) sqrt(sum_j a_j (v_j - o)^2) + h (sum_j |v_j| + n |o|) / l] / (1 - A - n h / l)
           (infinite where the denominator is not positive). The same holds with every factor taken relative to
           that of the row's largest exact score j* (a common factor cancels): theta_j* = 0, the others
           theta_j = e^(delta_j + delta_j*) (1 + 4u)^2 (1 + u_in)^2 - 1, and h e^g2 / ((1 - 4u)(1 - u_in)) for h,
           g2 = max(0, max_{j != j*} (s_j + delta_j) - (s_j* - delta_j*)) (0 where j* is surely the computed
           max). W is the smaller of the two (the second is the tight one where one key dominates a row: the
           winner's own score error, which the first charges to it, then costs nothing), and never more than
           max_j |v_j - o| (o_hat is an average of the v_j with positive weights). A rounding shared by a row's
           weights costs nothing either, because the kernels sum the same rounded weights they multiply.
        2. The fp32 sums: O's sum_j w_j v_j on tensor cores, E_pv = tensor_core_accumulation_bound(y, V) over the
           S_k terms (relative to O / l as it stands); l's sum of positive terms, SAFETY sqrt(S_k) u l, the
           rescales of O and l and the division, an fp32 rounding per RESCALE_STEP keys and 4 more: all within
               F = u (SAFETY sqrt(S_k) + 2 ceil(S_k / 16) + 4) * 2 sum_j y_j |v_j|.
        So E = W + E_pv + F, and
            bound = statistical_scale * E + u_out (|o| + E) + half_subnormal_spacing(out)
        where the last two terms are the output's one rounding (a single rounding a correct kernel can use in full:
        no margin is asked of it; the GPU tests ask it of E, at statistical_scale = 0.5). Rows with no visible key
        must be exactly +0 (bound 0).

        How it scales: W and u_out |o| grow with u_in (bf16's bound is 4-8x fp16's on the same values); W is about
        u_in * rms(v - o) * sqrt(sum_j y_j) ~ u_in for a spread-out row and 0 for a one-hot one; E_pv and F grow
        like sqrt(S_k) u and S_k / 16 u (a few 1e-5 at S_k = 1000, below fp16's u_in). A key left out of a row
        moves it by y_j |v_j - o|: caught in fp16 where y_j is above ~u_in (most keys of rows up to ~1000 keys).
        """
        p = problem.params
        u = unit_roundoff(np.float32)
        in_type = BFLOAT16 if p["dtype"] == BFLOAT16 else np.float16
        u_in, u_out = unit_roundoff(in_type), unit_roundoff(in_type)
        h_abs = half_subnormal_spacing(in_type) + FTZ_FLOOR
        scale = softmax_scale(p["D"])
        n_vis = visible_keys(p["S_q"], p["S_k"], p["causal"]).astype(np.float64)
        S_k = p["S_k"]
        f_const = u * (SAFETY * math.sqrt(S_k) + 2 * math.ceil(S_k / RESCALE_STEP) + 4)
        bound = np.zeros_like(reference)
        for b, h, q, k, v in self._heads(problem):
            sm = self._softmax(problem, q, k)
            y, mask, o = sm["y"], sm["mask"], reference[b, h]
            e_qk = tensor_core_accumulation_bound(q, k.T, sm["raw"])
            delta = scale * e_qk + ARG_ULPS * u * (np.abs(sm["s"]) + np.abs(sm["s"] - sm["m"][:, None]))
            # Frame 1: each weight's own factor. Frame 2: relative to the row's largest exact score j*, whose
            # factor is then 1 (the others' carry both errors): tight where one key dominates.
            rows = np.arange(len(delta))
            top = np.argmax(np.where(mask, sm["s"], -np.inf), axis=1)
            delta_top = delta[rows, top][:, None]
            reach = np.where(mask, sm["s"] + delta, -np.inf)  # the largest each computed score can be
            g1 = np.maximum(reach.max(axis=1, initial=-np.inf) - sm["m"], 0.0)[:, None]
            reach[rows, top] = -np.inf
            g2 = np.maximum(reach.max(axis=1, initial=-np.inf)[:, None] - sm["m"][:, None] + delta_top, 0.0)
            low = (1 - EXP_ULPS * u) * (1 - u_in)
            with np.errstate(over="ignore"):
                theta = np.exp(np.minimum(delta, 700.0)) * (1 + EXP_ULPS * u) * (1 + u_in) - 1
                theta_top = np.exp(np.minimum(delta + delta_top, 700.0)) * ((1 + EXP_ULPS * u) * (1 + u_in)) ** 2 - 1
                h1 = h_abs * np.exp(np.minimum(g1, 700.0))
                h2 = h_abs * np.exp(np.minimum(g2, 700.0)) / low
            theta_top[rows, top] = 0.0
            w = np.fmin(self._weights_part(y * theta, mask, v, o, sm["l"], n_vis, h1),
                        self._weights_part(y * theta_top, mask, v, o, sm["l"], n_vis, h2))
            w = np.fmin(w, self._spread_cap(v, o, n_vis))
            e_pv = tensor_core_accumulation_bound(y, v, o)
            e = w + e_pv + f_const * 2 * (y @ np.abs(v))
            row = self.statistical_scale * e + u_out * (np.abs(o) + e) + half_subnormal_spacing(in_type)
            bound[b, h] = np.where(n_vis[:, None] > 0, row, 0.0)
        return bound

    @staticmethod
    def _weights_part(a: np.ndarray, mask: np.ndarray, v: np.ndarray, o: np.ndarray, l_sum: np.ndarray,
                      n_vis: np.ndarray, h) -> np.ndarray:
        """W of error_bound for one frame: a_j = y_j theta_j (over visible keys), h the weights' absolute error
        (a scalar or a column)."""
        a = np.where(mask, a, 0.0)
        big_a = a.sum(axis=1)[:, None]
        spread = np.maximum(a @ np.square(v) - 2 * o * (a @ v) + np.square(o) * big_a, 0.0)
        l_col = np.where(l_sum > 0, l_sum, 1.0)[:, None]
        absolute = h * (mask.astype(np.float64) @ np.abs(v) + n_vis[:, None] * np.abs(o)) / l_col
        denominator = 1 - big_a - n_vis[:, None] * h / l_col
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(denominator > 0, (np.sqrt(big_a) * np.sqrt(spread) + absolute) / denominator, np.inf)

    @staticmethod
    def _spread_cap(v: np.ndarray, o: np.ndarray, n_vis: np.ndarray) -> np.ndarray:
        """max_j |v_j - o| over each row's visible keys (a prefix 0 .. n - 1 of the keys): from the running max and
        min of V's columns; 0 for rows with none."""
        top, bottom = np.maximum.accumulate(v, axis=0), np.minimum.accumulate(v, axis=0)
        last = np.maximum(n_vis.astype(np.int64) - 1, 0)
        cap = np.maximum(top[last] - o, o - bottom[last])
        return np.where(n_vis[:, None] > 0, cap, 0.0)

    def output_values(self, out):
        """The output as the checks compare it: bf16 patterns widened to float32 (fp16 compares as it is)."""
        if out.dtype == np.uint16:
            return bfloat16_bits_to_float32(out, np if isinstance(out, np.ndarray) else self._xp())
        return out

    # --- launching --------------------------------------------------------------------------------
    def variant(self, rung: Rung, problem: Problem) -> Rung:
        return self.variant_for(rung, problem.params)

    def variant_for(self, rung: Rung, p: dict) -> Rung:
        """The rung built for these sizes: BF16 and CAUSAL, and HEAD_DIM where the rung compiles D in."""
        knobs = {"BF16": int(p["dtype"] == BFLOAT16), "CAUSAL": int(p["causal"])}
        if "HEAD_DIM" in _knobs(rung):
            knobs["HEAD_DIM"] = p["D"]
        if p["D"] == WIDE_HEAD_DIM and rung.key in WIDE_RUNGS:
            knobs["BLOCK_N"] = WIDE_BLOCK_N
        if persistent_build(rung, p):  # named only where 1: the other builds keep their names and cache keys
            knobs["PERSISTENT"] = 1
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs))

    def rows_per_block(self, rung: Rung) -> int:
        k, scheme = _knobs(rung), self.launch_scheme(rung)
        return k["ROWS"] if scheme == "row_per_step" else TMA_BLOCK_M if scheme == "flash_tma" else k["BLOCK_M"]

    def grid(self, rung: Rung, params: dict) -> tuple[int, int, int]:
        rows = self.rows_per_block(rung)
        blocks = -(-params["S_q"] // rows)
        if persistent_build(rung, params):  # one block an SM, looping over the query blocks of every head
            return (min(blocks * params["H"] * params["B"], _sm_count()), 1, 1)
        return (blocks, params["H"], params["B"])

    def launch_smem(self, rung: Rung, params: dict) -> int:
        """Dynamic shared memory of a launch: rung 01's S_k fp32 scores; none for rungs 02-03 (static tiles); rung
        04's Q tile and K/V stages (tma_smem_bytes)."""
        scheme = self.launch_scheme(rung)
        if scheme == "flash_tma":
            return tma_smem_bytes(_knobs(self.variant_for(rung, params)), params["D"])
        return 4 * params["S_k"] if scheme == "row_per_step" else 0

    def refusal(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> str | None:
        """Why `rung` cannot run `problem`'s input set `set_index` into `out` (one sentence), or None."""
        p = problem.params
        if self.launch_scheme(rung) == "flash_tma":
            why = self._hopper_refusal(rung)
            if why:
                return why
        if self.launch_scheme(rung) in ("flash_tiles", "flash_tma"):
            if p["D"] not in head_dims(rung):
                other = "rung 05 on sm_90, else rung 01" if p["D"] == WIDE_HEAD_DIM else "rung 01"
                return (f"attention rung {rung.key} compiles D as HEAD_DIM in {head_dims(rung)}; D={p['D']} needs "
                        f"{other}.")
            if self.launch_scheme(rung) == "flash_tma" and self._smem_optin() < self.launch_smem(rung, p):
                return (f"attention rung {rung.key} needs {self.launch_smem(rung, p)} bytes of shared memory a block "
                        f"at D={p['D']}, past this GPU's {self._smem_optin()}; use rung 03.")
            arrays = [problem.inputs[n][set_index % len(problem.inputs[n])] for n in ("Q", "K", "V")] + [out]
            if any(a.data.ptr % 16 for a in arrays):
                return (f"attention rung {rung.key} reads and writes 16-byte vectors: Q, K, V and O must start on "
                        "16-byte boundaries (rows of D * 2 bytes then are too).")
            return None
        smem = self.launch_smem(rung, p)
        limit = self._smem_optin()
        if smem > limit:
            return (f"attention rung {rung.key} keeps a row's S_k = {p['S_k']} scores in shared memory ({smem} bytes), "
                    f"past this GPU's {limit} bytes a block; use rung 03.")
        return None

    @staticmethod
    def _smem_optin() -> int:
        try:
            from lab.core import device

            return int(getattr(device.current(), "smem_per_block_optin", DEFAULT_SMEM_OPTIN)) - 2048
        except Exception:  # noqa: BLE001 - no GPU to ask (compile-only use)
            return DEFAULT_SMEM_OPTIN - 2048

    def prepare_launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> tuple:
        """What every attention launch starts with: the refusal (one sentence, raised), then the input set's Q, K and
        V, the rung built for the problem, its kernel (opted in to the launch's dynamic shared memory past 48 KiB),
        that memory, and scale_log2 and the four sizes (H, H_kv, S_q, S_k) as the kernels take them."""
        from lab.core.build import get_kernel

        p = problem.params
        why = self.refusal(rung, problem, out, set_index)
        if why:
            raise LabError(why)
        q, k, v = (problem.inputs[n][set_index % len(problem.inputs[n])] for n in ("Q", "K", "V"))
        built = self.variant(rung, problem)
        kernel = get_kernel(built.spec)
        smem = self.launch_smem(rung, p)
        if smem > DEFAULT_SMEM_LIMIT:
            kernel.max_dynamic_shared_size_bytes = smem
        scale_log2 = np.float32(LOG2E * softmax_scale(p["D"]))
        return q, k, v, built, kernel, smem, scale_log2, [np.int32(p[n]) for n in ("H", "H_kv", "S_q", "S_k")]

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        p = problem.params
        q, k, v, built, kernel, smem, scale_log2, ints = self.prepare_launch(rung, problem, out, set_index)
        if self.launch_scheme(rung) == "row_per_step":
            ints.append(np.int32(p["D"]))
        operands = (q, k, v) if self.launch_scheme(rung) != "flash_tma" else self._tensor_maps(built, p, q, k, v)
        if _knobs(built).get("PERSISTENT"):  # after O, as the kernel takes them
            ints = [work_counter(), np.int32(p["B"]), np.int32(section_heads(p, _l2_bytes())), *ints]
        kernel(self.grid(rung, p), (_knobs(rung)["THREADS"],), (*operands, out, *ints, scale_log2), shared_mem=smem)

    @staticmethod
    def _tensor_maps(rung: Rung, p: dict, q, k, v) -> tuple:
        """Rung 04's three 3-D tensor maps (lab.core.tma.TensorMap3D): (D, S, B * heads) with one plane per batch and
        head, boxes of 64 columns by 64 rows (Q: a consumer warpgroup's rows) or BLOCK_N rows (K, V)."""
        from lab.core import tma

        D, block_n = p["D"], _knobs(rung)["BLOCK_N"]
        row = 2 * D

        def tensor_map(x, S, planes, box_rows):
            return tma.encode(tma.TensorMap3D(x.data.ptr, D, S, planes, row, row * S, 64, box_rows))

        return (tensor_map(q, p["S_q"], p["B"] * p["H"], 64), tensor_map(k, p["S_k"], p["B"] * p["H_kv"], block_n),
                tensor_map(v, p["S_k"], p["B"] * p["H_kv"], block_n))

    def _hopper_refusal(self, rung: Rung) -> str | None:
        """Why rung 04 cannot run on this GPU (one sentence), or None; compile-only use (no GPU) passes."""
        try:
            from lab.core import device

            gpu = device.current()
        except Exception:  # noqa: BLE001 - no GPU to ask
            return None
        if gpu.arch != HOPPER_ARCH:
            return (f"attention rung {rung.key} uses sm_90a's wgmma, setmaxnreg and TMA, which this GPU ({gpu.sm}) "
                    "does not have; use rung 03.")
        return None

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        built = _knobs(self.variant(rung, problem))
        notes = {"kernel": rung.spec.entry, "causal": built["CAUSAL"], "bf16": built["BF16"],
                 "grid": list(self.grid(rung, problem.params))}
        if built.get("PERSISTENT"):
            notes["section_heads"] = section_heads(problem.params, _l2_bytes())
        return notes

    def block_resources(self, rung: Rung) -> tuple[int, int]:
        """(threads, dynamic shared memory) at the default knobs: rung 01's shared memory depends on S_k (0 here);
        rung 04's at D = 128."""
        if self.launch_scheme(rung) == "flash_tma":
            return _knobs(rung)["THREADS"], tma_smem_bytes(_knobs(rung), 128)
        return _knobs(rung)["THREADS"], 0

    # --- the library baseline -----------------------------------------------------------------------
    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """torch.nn.functional.scaled_dot_product_attention on the same memory (DLPack, zero-copy views of Q, K and
        V), its result copied into `out` (SDPA has no out= argument: the copy is inside the timing, 2 bytes an
        output element read and written). Causal with S_q == S_k is is_causal=True; with S_q != S_k PyTorch's
        is_causal is top-left aligned, so the bottom-right mask is passed as torch.nn.attention.bias.
        causal_lower_right. GQA (H_kv < H) uses enable_gqa=True (PyTorch 2.5 and later), except with that mask,
        where K and V are repeated per query head first (check cases only: the timed problems never combine them)."""
        try:
            import torch
            import torch.nn.functional as F
        except ImportError as exc:
            raise LabError("attention's baseline is PyTorch's scaled_dot_product_attention, and PyTorch is not "
                           "installed here (pip install torch, a CUDA build); the rungs still check and time "
                           "without it.") from exc
        if not torch.cuda.is_available():
            raise LabError("attention's baseline is PyTorch's scaled_dot_product_attention, and this PyTorch has no "
                           "CUDA (install a CUDA build of torch).")
        p = problem.params
        q, k, v = (self._torch(problem.inputs[n][set_index % len(problem.inputs[n])], p["dtype"])
                   for n in ("Q", "K", "V"))
        kwargs = {"scale": softmax_scale(p["D"])}
        if p["causal"] and p["S_q"] == p["S_k"]:
            kwargs["is_causal"] = True
        elif p["causal"]:
            from torch.nn.attention.bias import causal_lower_right

            kwargs["attn_mask"] = causal_lower_right(p["S_q"], p["S_k"])
        if p["H_kv"] != p["H"] and "attn_mask" in kwargs:  # the mask's own dispatch may not take enable_gqa
            group = p["H"] // p["H_kv"]
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        elif p["H_kv"] != p["H"]:
            kwargs["enable_gqa"] = True
        result = F.scaled_dot_product_attention(q, k, v, **kwargs)
        self._torch(out, p["dtype"]).copy_(result)

    @staticmethod
    def _torch(x, dtype: str):
        """A PyTorch view of a CuPy array's memory (DLPack, zero-copy), bf16 patterns viewed as torch.bfloat16."""
        import torch

        t = torch.from_dlpack(x)
        return t.view(torch.bfloat16) if dtype == BFLOAT16 else t

    # --- shape families ---------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """S in {1, 17, 128, 1000} with S_q = S_k, decode-like (S_q = 1) and S_q < S_k, and S_q > S_k (causal rows
        with no key); D 64 and 128; causal and not; fp16 and bf16; B = 2, H = 4 on H_kv = 2 (GQA 2:1) for the short
        sequences, B = 1, H = 2 (no grouping) at 1000, and GQA H = 8 on H_kv = 2 on a few; large logits on some;
        D = 256 on a few (rungs 01 and 05: cases_for). B * H keeps the float64 reference and bound under a second a
        case."""
        lengths = [(s, s) for s in (1, 17, 128, 1000)] + [(1, s) for s in (17, 128, 1000)]
        lengths += [(17, 128), (128, 1000), (100, 1000)]
        base = []
        for S_q, S_k in lengths:
            heads = {"B": 1, "H": 2, "H_kv": 2} if max(S_q, S_k) >= 1000 else {"B": 2, "H": 4, "H_kv": 2}
            base += [heads | {"S_q": S_q, "S_k": S_k, "D": d, "causal": c} for d in MMA_HEAD_DIMS for c in (0, 1)]
        # Causal with S_q > S_k: the first S_q - S_k rows see no key.
        base += [{"B": 1, "H": 2, "H_kv": 1, "S_q": S_q, "S_k": S_k, "D": d, "causal": 1}
                 for S_q, S_k in ((128, 17), (17, 1), (200, 129)) for d in MMA_HEAD_DIMS]
        # GQA 4:1, each query head's key/value head h // 4 (h % 2 would differ).
        base += [{"B": 1, "H": 8, "H_kv": 2, "S_q": S_q, "S_k": S_k, "D": d, "causal": c}
                 for S_q, S_k in ((128, 128), (1, 1000), (17, 300)) for d in MMA_HEAD_DIMS for c in (0, 1)]
        # Large logits (standard deviation 15): the max must be subtracted before the exp.
        base += [{"B": 1, "H": 2, "H_kv": 2, "S_q": S_q, "S_k": S_k, "D": d, "causal": c, "large_logits": 1}
                 for S_q, S_k in ((128, 128), (1, 1000), (65, 333)) for d in MMA_HEAD_DIMS for c in (0, 1)]
        # D = 256 (rung 05's wide build with 64-key tiles, and rung 01): tails across the 64-key tiles, causal rows
        # with no key, GQA 2:1, large logits.
        base += [{"B": 1, "H": 2, "H_kv": 1, "S_q": S_q, "S_k": S_k, "D": WIDE_HEAD_DIM, "causal": c}
                 for S_q, S_k in ((1, 1), (17, 17), (130, 130), (65, 333), (200, 129)) for c in (0, 1)]
        base += [{"B": 1, "H": 2, "H_kv": 2, "S_q": 128, "S_k": 300, "D": WIDE_HEAD_DIM, "causal": c,
                  "large_logits": 1} for c in (0, 1)]
        return [case | {"dtype": dtype} for case in base for dtype in DTYPES]

    def cases_for(self, rung: Rung, cases: list[dict] | None = None) -> list[dict]:
        """The check cases a rung serves: those of a head dim it compiles in (rung 01: every one)."""
        cases = self.check_cases() if cases is None else cases
        dims = head_dims(rung)
        return [c for c in cases if dims is None or c["D"] in dims]

    def headline_params(self) -> list[dict]:
        """B = 2, H = 16, S = 4096 (D 128 and 64, causal and not) and a GQA decode step (B = 8, H = 32 on H_kv = 8,
        S_q = 1, S_k = 8192, D = 128), in both types."""
        params = [{"B": 2, "H": 16, "S_q": 4096, "S_k": 4096, "D": d, "causal": c}
                  for d in (128, 64) for c in (0, 1)]
        params += [{"B": 8, "H": 32, "H_kv": 8, "S_q": 1, "S_k": 8192, "D": 128, "causal": 0}]
        return [p | {"dtype": dtype} for dtype in DTYPES for p in params]

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        """S from 256 to 16384 at B * H = 32, D = 128, fp16, not causal."""
        return [{"B": 2, "H": 16, "S_q": s, "S_k": s, "D": 128, "dtype": "float16", "causal": 0}
                for s in (256, 512, 1024, 2048, 4096, 8192, 16384)]

    def tail_params(self) -> list[dict]:
        """S stepping by 1 across 4096 (a multiple of both block sizes) at B * H = 32, D = 128, fp16."""
        return [{"B": 2, "H": 16, "S_q": s, "S_k": s, "D": 128, "dtype": "float16", "causal": 0}
                for s in range(4090, 4100)]

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple[Rung, ...]:
        """Rung 01 (the definition, not a contender) is timed at the headline sizes only."""
        if kind in ("sweep", "tail"):
            return tuple(r for r in self.rungs if r.number >= 2)
        return self.rungs

    def in_readme(self, params: dict) -> bool:
        return params.get("D") == 128 and params.get("S_q") == 4096
