"""The decode-attention ladder: a few new query tokens against a long key/value cache, O = softmax(Q K^T / sqrt(D)) V
per query head, as one step of generating text runs it.

Q and O are (B, H, S_q, D) with S_q small (1 for one new token; up to DECODE_MAX_S_Q for speculative steps), H a
multiple of H_kv (grouped-query attention: query head h reads key/value head h // (H // H_kv)). The cache is either
contiguous, K and V (B, H_kv, S_k, D), or paged (page_size > 0): K and V (pages, page_size, H_kv, D) and a block
table (B, max_pages) of int32 page numbers, key j of sequence b in row j % page_size of page table[b, j //
page_size], as serving engines keep it. With varlen = 1 every sequence has its own length (seq_lens, int32, 1 ..
S_k; a contiguous cache is then (B, H_kv, S_k, D) with each sequence's keys first). Causal masks are bottom-right
aligned per sequence (row s sees keys j <= s + L_b - S_q), as lab.families.attention's.

Rung 01 packs the G * S_q query rows of a key/value head (G = H / H_kv) into one mma.sync tile and gives a block all of
a head's keys (grid B * H_kv); rung 02 splits them across blocks and combines the splits in the kernel (split-KV,
FlashDecoding), and reads a paged cache and per-sequence lengths (rung 01 refuses both). Both need D in (64, 128) and
16-byte-aligned operands (`refusal`); other head dims go to lab.families.attention's rung 01.

Storage, inputs, the float64 reference and the error bound are lab.families.attention's (this family subclasses it),
applied per sequence to its visible cache. The bound's model holds for the split too: a split's and a warp's
partial results are scaled by one 2^(m - M) each (ex2.approx, 2 ulps) before they are summed, a relative error of
at most 8 u on all of that part's weights together, against the bound's u_in (2^-11 or 2^-8) on every weight, and a
few more fp32 additions, which its F term (a rounding per 16 keys) covers.

The metric is GB/s: Q, K, V (each sequence's visible cache) and O once each, over the time (a decode step is bound by
reading the cache). The baseline is PyTorch's scaled_dot_product_attention on a contiguous copy of the cache
(`launch_ceiling`): with varlen, padded to the longest sequence and masked, as a caller without a varlen kernel
would run it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Problem, Rung
from lab.families.attention import (
    DEFAULT_SMEM_LIMIT,
    DTYPES,
    LOG2E,
    MMA_HEAD_DIMS,
    AttentionFamily,
    softmax_scale,
)
from lab.families.gemm_tc import STORAGE, to_storage

MIN_ARCH = 80  # mma.sync m16n8k16, cp.async
DECODE_MAX_S_Q = 16  # query tokens a step: more are a prefill (lab.families.attention)
ROWS = 16  # packed query rows a block (the kernels' ROWS)
DEFAULT_SM_COUNT = 132  # the H200's, for plans made with no GPU to ask (CPU tests)
DEFAULT_SMEM_PER_SM = 228 * 1024
SMEM_RESERVED = 1024  # shared memory the driver keeps per block
MAX_SPLITS = 256  # rung 02's combine keeps a row's split weights in shared memory (the kernel's MAX_SPLITS)
WAVE_SHARE = 0.9  # split_plan's bar for the block slots a grid keeps busy
# A paged cache runs at 2 stages (three blocks an SM at D = 128), which measured 0.94-0.97x of the contiguous cache
# with both at 2 stages on the H200 (B = 8, L = 8192, pages of 64 keys in random order;
# results/h200/decode_attention_study_5e5c670.json); at 4 stages (one block an SM) 0.57-0.87x
# (decode_attention_study_883fb3d.json): the block-table read before each row's copy stalls a lone block's warps.
# (decode_attention_study_d9b549a.json measured 0.49-0.84x before `plan` was keyed by the build: a paged cache was
# served the contiguous cache's plan, made for one block an SM, so a third of its block slots stood empty.)
PAGED_STAGES = 2


def _rung(key: str, entry: str, title: str, *, launch: str, **knobs: int) -> Rung:
    spec = KernelSpec(f"attention_decode/{key}.cu", entry, tuple(sorted(knobs.items())), min_arch=MIN_ARCH)
    return Rung("attention_decode", key, spec, title, launch)


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def smem_bytes(knobs: dict, D: int) -> int:
    """A block's dynamic shared memory: Q's 16 rows and STAGES stages of a K and a V tile, (D + PAD) halves a row."""
    return (ROWS + 2 * knobs["STAGES"] * knobs["BLOCK_N"]) * (D + knobs["PAD"]) * 2


def row_groups(params: dict) -> int:
    """Blocks a key/value head's query rows take: ceil(G * S_q / 16)."""
    return -(-(params["H"] // params["H_kv"]) * params["S_q"] // ROWS)


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """How rung 02 cuts a head's keys: `splits` blocks of `split_keys` keys (the last may have fewer)."""

    splits: int
    split_keys: int


def wave_share(blocks: int, capacity: int) -> float:
    """The share of the block slots (capacity = SMs x blocks an SM holds) a grid keeps busy over its waves."""
    return blocks / (-(-blocks // capacity) * capacity)


def split_plan(params: dict, block_n: int, blocks_per_sm: int, sm_count: int) -> SplitPlan:
    """params["split_keys"] when given (> 0); else the fewest splits (of whole BLOCK_N-key tiles, at most MAX_SPLITS
    and one a tile) whose grid, beside the B * H_kv * row_groups blocks there already are, keeps at least
    WAVE_SHARE of the GPU's block slots busy over its waves (wave_share), or the best share when none reaches it: a
    partial last wave leaves SMs without bytes in flight, and every split costs a combine."""
    S_k = params["S_k"]
    forced = int(params.get("split_keys", 0) or 0)
    if forced > 0:
        splits = -(-S_k // forced)
        if splits > MAX_SPLITS:
            raise LabError(f"decode attention combines at most {MAX_SPLITS} splits; split_keys={forced} cuts "
                           f"S_k={S_k} into {splits}: use split_keys >= {-(-S_k // MAX_SPLITS)}.")
        return SplitPlan(splits, forced)
    base = params["B"] * params["H_kv"] * row_groups(params)
    capacity = sm_count * blocks_per_sm
    tiles = -(-S_k // block_n)
    candidates = range(1, min(tiles, MAX_SPLITS) + 1)
    good = [s for s in candidates if wave_share(base * s, capacity) >= WAVE_SHARE]
    splits = good[0] if good else max(candidates, key=lambda s: (wave_share(base * s, capacity), -s))
    split_keys = block_n * -(-tiles // splits)
    return SplitPlan(-(-S_k // split_keys), split_keys)


class AttentionDecodeFamily(AttentionFamily):
    name = "attention_decode"
    title = "Decode attention (a few query tokens against a long KV cache): GQA rows packed, split-KV, paged cache"
    metric = "GB/s"
    ceiling_name = "torch_sdpa"
    ceiling_title = "PyTorch SDPA on a contiguous cache (a library baseline, not a hardware ceiling)"
    sweep_figure = "throughput"
    profile_figure = None
    launches = ("one_block_per_head", "split_kv")
    rungs = (
        # Launch "one_block_per_head": grid (1, H_kv * row_groups, B) of THREADS threads, smem_bytes of dynamic
        # shared memory; contiguous cache, one length.
        _rung("01_gqa_packed", "attention_decode_gqa",
              "a key/value head's query rows in one mma tile, its keys split among the warps",
              launch="one_block_per_head", BF16=0, CAUSAL=0, HEAD_DIM=128, BLOCK_N=64, STAGES=4, THREADS=128, PAD=8),
        # Launch "split_kv": grid (splits, H_kv * row_groups, B) (split_plan), a workspace and arrival counters
        # (_workspace), the block table and lengths when the problem has them.
        _rung("02_split_kv", "attention_decode_split_kv",
              "split-KV: a head's keys across blocks, combined by the last to finish; paged cache, varlen",
              launch="split_kv", BF16=0, CAUSAL=0, HEAD_DIM=128, PAGED=0, BLOCK_N=64, STAGES=4, THREADS=128, PAD=8),
    )

    def __init__(self, statistical_scale: float = 1.0):
        super().__init__(statistical_scale)
        self._workspaces: dict = {}  # (device, slots, splits, D) -> (part_o, part_ml, arrivals)
        self._plans: dict = {}  # (knobs, sizes) -> SplitPlan
        self._variants: dict = {}  # (spec, type, causal, D, paged) -> the Rung built for them

    # --- problems ---------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", B: int = 1, H: int = 8, H_kv: int | None = None,
                     S_q: int = 1, S_k: int = 1024, D: int = 128, dtype: str = "float16", causal: int = 0,
                     large_logits: int = 0, page_size: int = 0, varlen: int = 0, split_keys: int = 0,
                     sets: int = 1) -> Problem:
        """Q (B, H, S_q, D) and a cache of S_k keys a sequence (varlen = 1: lengths drawn from 1 .. S_k, the first
        S_k and, with B > 1, the last 1), contiguous or paged (page_size > 0: each sequence's pages at random places
        among some spare ones, whose rows hold random values that must never be read). The dense inputs (Q, K_dense,
        V_dense: lab.families.attention's make_problem, same seed) stay in the problem for the reference and the
        baseline; K and V are the cache as the kernel reads it."""
        xp = self._xp()
        H_kv = H if H_kv is None else H_kv
        if not 1 <= S_q <= DECODE_MAX_S_Q:
            raise LabError(f"decode attention takes 1 .. {DECODE_MAX_S_Q} query tokens a step; got S_q={S_q} (a "
                           "longer step is a prefill: the attention family).")
        if page_size < 0 or varlen not in (0, 1) or split_keys < 0:
            raise LabError(f"decode attention takes page_size >= 0, varlen 0 or 1 and split_keys >= 0; got "
                           f"page_size={page_size} varlen={varlen} split_keys={split_keys}.")
        dense = super().make_problem(seed, dist, B=B, H=H, H_kv=H_kv, S_q=S_q, S_k=S_k, D=D, dtype=dtype,
                                     causal=causal, large_logits=large_logits, sets=sets)
        lengths = self._lengths(seed, B, S_k, varlen)
        params = dense.params | {"page_size": page_size, "varlen": varlen}
        params |= {"split_keys": split_keys} if split_keys else {}
        inputs = {"Q": dense.inputs["Q"], "K_dense": dense.inputs["K"], "V_dense": dense.inputs["V"],
                  "seq_lens": [xp.asarray(lengths, dtype=np.int32)]}
        if page_size:
            table, pages = self._page_table(seed, lengths, page_size)
            inputs["block_table"] = [xp.asarray(table)]
            inputs["K"], inputs["V"] = ([self._paged(x, table, lengths, pages, page_size, dtype, seed + 7 + i)
                                         for x in dense.inputs[n]] for i, n in enumerate(("K", "V")))
        else:
            inputs["K"], inputs["V"] = dense.inputs["K"], dense.inputs["V"]
        label = dense.label + (f" paged {page_size}" if page_size else "") + (" varlen" if varlen else "")
        label += f" split {split_keys}" if split_keys else ""
        problem = Problem(label, inputs, dense.out_shape, 0, params=params, dtype=STORAGE[dtype])
        problem.bytes_moved = self.min_dram_bytes(params, lengths)
        problem.flops = self.flops(params, lengths)
        problem.derived["lengths"] = lengths
        return problem

    @staticmethod
    def _lengths(seed: int, B: int, S_k: int, varlen: int) -> np.ndarray:
        if not varlen:
            return np.full(B, S_k, dtype=np.int32)
        lengths = np.random.default_rng(seed + 101).integers(1, S_k + 1, size=B).astype(np.int32)
        lengths[0] = S_k
        if B > 1:
            lengths[-1] = 1
        return lengths

    @staticmethod
    def _page_table(seed: int, lengths: np.ndarray, page_size: int) -> tuple[np.ndarray, int]:
        """(B, max_pages) int32 page numbers, a random permutation of all pages (two spare ones among them), -1
        past a sequence's last page; and the number of pages."""
        need = [-(-int(n) // page_size) for n in lengths]
        pages = sum(need) + 2
        order = np.random.default_rng(seed + 202).permutation(pages).astype(np.int32)
        table = np.full((len(lengths), max(need)), -1, dtype=np.int32)
        at = 0
        for b, n in enumerate(need):
            table[b, :n] = order[at:at + n]
            at += n
        return table, pages

    def _paged(self, dense, table: np.ndarray, lengths: np.ndarray, pages: int, page_size: int, dtype: str,
               seed: int):
        """The dense (B, H_kv, S_k, D) cache in pages (pages, page_size, H_kv, D): each sequence's first L_b keys
        in its pages, random values everywhere else (rows a kernel must not read)."""
        from lab.measure.check import random_array

        xp = self._xp()
        B, H_kv, _, D = dense.shape
        cache = to_storage(random_array((pages * page_size, H_kv, D), np.float32, seed, "normal", xp=xp), dtype, xp)
        for b in range(B):
            n = int(lengths[b])
            rows = xp.asarray(table[b, np.arange(n) // page_size].astype(np.int64) * page_size
                               + np.arange(n) % page_size)
            cache[rows] = dense[b, :, :n].transpose(1, 0, 2)
        return cache.reshape(pages, page_size, H_kv, D)

    def flops(self, params: dict, lengths: np.ndarray | None = None) -> int:
        """4 D FLOPs per visible (query row, key) pair, per query head, summed over the sequences."""
        lengths = np.full(params["B"], params["S_k"]) if lengths is None else lengths
        one = {**params, "B": 1}
        return sum(AttentionFamily.flops({**one, "S_k": int(n)}) for n in lengths)

    def min_dram_bytes(self, params: dict, lengths: np.ndarray | None = None) -> int:
        """Q and O once, and each sequence's L_b keys of K and V once: 2 bytes an element."""
        lengths = np.full(params["B"], params["S_k"]) if lengths is None else lengths
        q = params["B"] * params["H"] * params["S_q"] * params["D"]
        return 2 * (2 * q + 2 * params["H_kv"] * params["D"] * int(np.sum(lengths)))

    # --- the float64 reference and the bound: lab.families.attention's, per sequence --------------------------------
    def _sequences(self, problem: Problem):
        """Per sequence b: an attention Problem over its query rows and its L_b visible keys (host copies)."""
        from lab.measure.check import to_numpy

        cached = problem.derived.get("sequences")
        if cached is not None:
            return cached
        p = problem.params
        q, k, v = (to_numpy(problem.inputs[n][0]) for n in ("Q", "K_dense", "V_dense"))
        out = []
        for b, n in enumerate(problem.derived["lengths"]):
            n = int(n)
            params = {key: p[key] for key in ("H", "H_kv", "S_q", "D", "dtype", "causal")} | {"B": 1, "S_k": n}
            out.append(Problem(f"sequence {b}", {"Q": [q[b:b + 1]], "K": [k[b:b + 1, :, :n]], "V": [v[b:b + 1, :, :n]]},
                               q[b:b + 1].shape, 0, params=params, dtype=problem.dtype))
        problem.derived["sequences"] = out
        return out

    def reference(self, problem: Problem) -> np.ndarray:
        cached = problem.derived.get("reference")
        if cached is None:
            cached = np.concatenate([AttentionFamily.reference(self, seq) for seq in self._sequences(problem)])
            problem.derived["reference"] = cached
        return cached

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """lab.families.attention's bound, sequence by sequence (the module's docstring says why it holds)."""
        sequences = self._sequences(problem)
        return np.concatenate([AttentionFamily.error_bound(self, seq, reference[b:b + 1])
                               for b, seq in enumerate(sequences)])

    # --- launching --------------------------------------------------------------------------------
    def variant(self, rung: Rung, problem: Problem) -> Rung:
        return self.variant_for(rung, problem.params)

    def variant_for(self, rung: Rung, p: dict) -> Rung:
        """The rung built for these sizes: BF16, CAUSAL, HEAD_DIM, PAGED, and STAGES lowered (to 2 at the least) until
        a block's shared memory fits this GPU's opt-in (4 stages at D = 128 need 143 KB: sm_90 and sm_80 have it,
        sm_86 and sm_89 do not); a paged cache at PAGED_STAGES."""
        key = (rung.spec, p["dtype"], p["causal"], p["D"], bool(p.get("page_size")))
        built = self._variants.get(key)
        if built is None:
            built = self._variants[key] = self._build_variant(rung, p)
        return built

    def _build_variant(self, rung: Rung, p: dict) -> Rung:
        knobs = {"BF16": int(p["dtype"] == "bfloat16"), "CAUSAL": int(p["causal"]), "HEAD_DIM": p["D"]}
        if "PAGED" in _knobs(rung):
            knobs["PAGED"] = int(bool(p.get("page_size")))
        stages = _knobs(rung)["STAGES"]
        if p.get("page_size"):
            stages = min(stages, PAGED_STAGES)
        while stages > 2 and smem_bytes(_knobs(rung) | {"STAGES": stages}, p["D"]) > self._smem_optin():
            stages -= 1
        knobs["STAGES"] = stages
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs))

    def launch_smem(self, rung: Rung, params: dict) -> int:
        """A launch's dynamic shared memory, at the stages it is built with (variant_for)."""
        return smem_bytes(_knobs(self.variant_for(rung, params)), params["D"])

    def plan(self, rung: Rung, params: dict) -> SplitPlan:
        """Rung 01: one split. Rung 02: split_plan on this GPU (its SM count, and the blocks an SM holds by shared
        memory; the H200's where no GPU answers), kept per rung build and sizes: a launch's host time is inside a
        short step's timing."""
        if self.launch_scheme(rung) != "split_kv":
            return SplitPlan(1, params["S_k"])
        # Keyed by the build this launch uses (a paged cache's has fewer stages, so more blocks an SM) and the sizes.
        built = self.variant_for(rung, params).spec.knobs
        key = (built, *(params.get(n, 0) for n in ("B", "H", "H_kv", "S_q", "S_k", "D", "split_keys")))
        plan = self._plans.get(key)
        if plan is None:
            sm_count, smem_per_sm = DEFAULT_SM_COUNT, DEFAULT_SMEM_PER_SM
            try:
                from lab.core import device

                gpu = device.current()
                sm_count, smem_per_sm = gpu.sm_count, gpu.smem_per_sm
            except Exception:  # noqa: BLE001 - no GPU to ask (plans for the CPU tests)
                pass
            per_sm = max(1, smem_per_sm // (self.launch_smem(rung, params) + SMEM_RESERVED))
            plan = split_plan(params, _knobs(rung)["BLOCK_N"], per_sm, sm_count)
            self._plans[key] = plan
        return plan

    def grid(self, rung: Rung, params: dict) -> tuple[int, int, int]:
        return (self.plan(rung, params).splits, params["H_kv"] * row_groups(params), params["B"])

    def refusal(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> str | None:
        p = problem.params
        if p["D"] not in MMA_HEAD_DIMS:
            return (f"decode attention rung {rung.key} compiles D as HEAD_DIM in {MMA_HEAD_DIMS}; D={p['D']} needs the "
                    "attention family's rung 01.")
        if self.launch_scheme(rung) == "one_block_per_head" and (p.get("page_size") or p.get("varlen")):
            return (f"decode attention rung {rung.key} reads a contiguous cache of one length; a paged cache or "
                    "per-sequence lengths need rung 02.")
        if self.launch_smem(rung, p) > self._smem_optin():
            return (f"decode attention rung {rung.key} needs {self.launch_smem(rung, p)} bytes of shared memory a "
                    f"block, past this GPU's {self._smem_optin()}; lower STAGES.")
        arrays = [problem.inputs[n][set_index % len(problem.inputs[n])] for n in ("Q", "K", "V")] + [out]
        if any(a.data.ptr % 16 for a in arrays):
            return (f"decode attention rung {rung.key} copies 16-byte vectors: Q, K, V and O must start on 16-byte "
                    "boundaries.")
        return None

    def _workspace(self, params: dict, grid: tuple[int, int, int]):
        """Rung 02's partial rows (fp32), their (m, l) and zeroed arrival counters for a grid, kept per device and
        size (the kernel leaves the counters at 0 again; a launch that fails part-way is the one way to break
        that, and a LabError from it drops the family's workspaces)."""
        import cupy as cp

        splits, y, z = grid
        key = (cp.cuda.Device().id, y * z, splits, params["D"])
        ws = self._workspaces.get(key)
        if ws is None:
            ws = (cp.empty(y * z * splits * ROWS * params["D"], dtype=np.float32),
                  cp.empty(y * z * splits * ROWS * 2, dtype=np.float32), cp.zeros(y * z, dtype=np.uint32))
            self._workspaces[key] = ws
        return ws

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        p = problem.params
        why = self.refusal(rung, problem, out, set_index)
        if why:
            raise LabError(why)
        q, k, v = (problem.inputs[n][set_index % len(problem.inputs[n])] for n in ("Q", "K", "V"))
        kernel = get_kernel(self.variant(rung, problem).spec)
        smem = self.launch_smem(rung, p)
        if smem > DEFAULT_SMEM_LIMIT and getattr(kernel, "max_dynamic_shared_size_bytes", 0) < smem:
            kernel.max_dynamic_shared_size_bytes = smem  # only ever raised: lab.ops replays launches recorded earlier
        grid = self.grid(rung, p)
        scale_log2 = np.float32(LOG2E * softmax_scale(p["D"]))
        heads = [np.int32(p[n]) for n in ("H", "H_kv", "S_q", "S_k")]
        if self.launch_scheme(rung) == "one_block_per_head":
            args = (q, k, v, out, *heads, scale_log2)
        else:
            part_o, part_ml, arrivals = self._workspace(p, grid)
            table = problem.inputs["block_table"][0] if p.get("page_size") else None
            lens = problem.inputs["seq_lens"][0] if p.get("varlen") else None
            null = np.uint64(0)
            args = (q, k, v, out, part_o, part_ml, arrivals, null if table is None else table,
                    null if lens is None else lens, *heads, np.int32(p.get("page_size") or 1),
                    np.int32(0 if table is None else table.shape[1]), np.int32(self.plan(rung, p).split_keys),
                    scale_log2)
        kernel(grid, (_knobs(rung)["THREADS"],), args, shared_mem=smem)

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        built = _knobs(self.variant(rung, problem))
        plan = self.plan(rung, problem.params)
        return {"kernel": rung.spec.entry, "causal": built["CAUSAL"], "bf16": built["BF16"],
                "paged": built.get("PAGED", 0), "grid": list(self.grid(rung, problem.params)),
                "splits": plan.splits, "split_keys": plan.split_keys}

    def block_resources(self, rung: Rung) -> tuple[int, int]:
        return _knobs(rung)["THREADS"], smem_bytes(_knobs(rung), 128)

    # --- the library baseline -----------------------------------------------------------------------
    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """SDPA on the contiguous cache (K_dense, V_dense), its result copied into `out`. One length: as
        lab.families.attention's baseline (enable_gqa). varlen: padded to S_k and masked by a boolean (B, 1, S_q,
        S_k) mask, K and V repeated per query head (a mask and enable_gqa together may not reach a fused backend);
        the mask and the repeats are made on the first call and kept, outside what later calls time."""
        p = problem.params
        if not p.get("varlen"):
            dense = dataclasses.replace(problem, inputs={"Q": problem.inputs["Q"], "K": problem.inputs["K_dense"],
                                                         "V": problem.inputs["V_dense"]})
            return AttentionFamily.launch_ceiling(self, dense, out, set_index)
        import torch
        import torch.nn.functional as F

        prepared = problem.derived.get("sdpa_varlen")
        if prepared is None:
            q, k, v = (self._torch(problem.inputs[n][0], p["dtype"]) for n in ("Q", "K_dense", "V_dense"))
            group = p["H"] // p["H_kv"]
            lengths = torch.as_tensor(problem.derived["lengths"], device=q.device, dtype=torch.int64)
            j = torch.arange(p["S_k"], device=q.device)
            s = torch.arange(p["S_q"], device=q.device)
            limit = lengths[:, None] if not p["causal"] else lengths[:, None] - p["S_q"] + s[None, :] + 1
            mask = (j[None, None, :] < limit[:, :, None]) if p["causal"] else (j[None, None, :] < limit[:, None, :])
            prepared = (q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), mask[:, None])
            problem.derived["sdpa_varlen"] = prepared
        q, k, v, mask = prepared
        result = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=softmax_scale(p["D"]))
        self._torch(out, p["dtype"]).copy_(result)

    # --- shape families ---------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """Contiguous, one length: S_k in {1, 17, 64, 65, 1000, 4097} with S_q 1, 1-4 and 16 tokens; GQA 4:1, 1:1
        and 16:1 (16:1 with S_q = 2: 32 packed rows, two row groups); D 64 and 128; causal and not; large logits;
        forced splits of 64 and of 100 keys (a split's end inside a tile). Paged (pages of 16, 64 and 7 keys) and
        varlen (lengths 1 .. S_k, one of 1) on a few. Both types. Rung 01 takes the contiguous one-length ones
        (cases_for)."""
        base = []
        for S_k in (1, 17, 64, 65, 1000, 4097):
            for S_q in (1, 4) if S_k < 4097 else (1,):
                base += [{"B": 2, "H": 8, "H_kv": 2, "S_q": S_q, "S_k": S_k, "D": d, "causal": c}
                         for d in MMA_HEAD_DIMS for c in (0, 1)]
        base += [{"B": 1, "H": 4, "H_kv": 4, "S_q": 16, "S_k": 300, "D": d, "causal": c}
                 for d in MMA_HEAD_DIMS for c in (0, 1)]
        base += [{"B": 1, "H": 16, "H_kv": 1, "S_q": 2, "S_k": 777, "D": d, "causal": c}
                 for d in MMA_HEAD_DIMS for c in (0, 1)]
        base += [{"B": 1, "H": 4, "H_kv": 2, "S_q": 3, "S_k": 2000, "D": d, "causal": c, "large_logits": 1}
                 for d in MMA_HEAD_DIMS for c in (0, 1)]
        base += [{"B": 2, "H": 8, "H_kv": 2, "S_q": S_q, "S_k": 1000, "D": 128, "causal": c, "split_keys": sk}
                 for sk in (64, 100) for S_q in (1, 4) for c in (0, 1)]
        # Paged and varlen (rung 02 only); causal with S_q = 4 on a sequence of 1 key: rows that see none.
        base += [{"B": 4, "H": 8, "H_kv": 2, "S_q": S_q, "S_k": 1000, "D": d, "causal": c, "page_size": ps,
                  "varlen": vl} for ps, vl in ((16, 1), (64, 0), (7, 1), (0, 1)) for S_q in (1, 4)
                 for d in MMA_HEAD_DIMS for c in (0, 1)]
        base += [{"B": 3, "H": 8, "H_kv": 8, "S_q": 1, "S_k": 4097, "D": 128, "causal": 0, "page_size": 64,
                  "varlen": 1, "split_keys": 512}]
        return [case | {"dtype": dtype} for case in base for dtype in DTYPES]

    def cases_for(self, rung: Rung, cases: list[dict] | None = None) -> list[dict]:
        """The check cases a rung serves: rung 01 has neither pages nor per-sequence lengths (nor splits)."""
        cases = self.check_cases() if cases is None else cases
        if self.launch_scheme(rung) == "split_kv":
            return cases
        return [c for c in cases if not (c.get("page_size") or c.get("varlen") or c.get("split_keys"))]

    def headline_params(self) -> list[dict]:
        """A decode step (S_q = 1, H = 32 on H_kv = 8, D = 128) at B = 1, 8 and 32 with L = 8192, B = 1 and 4 at
        32768, and B = 64 at 4096; the same with a paged cache (pages of 64 keys) at B = 8; fp16 and bf16."""
        shapes = [(1, 8192), (8, 8192), (32, 8192), (1, 32768), (4, 32768), (64, 4096)]
        params = [{"B": b, "H": 32, "H_kv": 8, "S_q": 1, "S_k": s, "D": 128, "causal": 0} for b, s in shapes]
        params += [{"B": 8, "H": 32, "H_kv": 8, "S_q": 1, "S_k": 8192, "D": 128, "causal": 0, "page_size": 64}]
        return [p | {"dtype": dtype} for dtype in DTYPES for p in params]

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        """L from 1024 to 32768 at B = 1 (where splitting matters most) and B = 8, fp16, H = 32 on 8, D = 128."""
        return [{"B": b, "H": 32, "H_kv": 8, "S_q": 1, "S_k": s, "D": 128, "dtype": "float16", "causal": 0}
                for b in (1, 8) for s in (1024, 2048, 4096, 8192, 16384, 32768)]

    def tail_params(self) -> list[dict]:
        return [{"B": 4, "H": 32, "H_kv": 8, "S_q": 1, "S_k": s, "D": 128, "dtype": "float16", "causal": 0}
                for s in range(8188, 8198)]

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple:
        if params.get("page_size") or params.get("varlen"):
            return tuple(r for r in self.rungs if self.launch_scheme(r) == "split_kv")
        return self.rungs

    def in_readme(self, params: dict) -> bool:
        """None: a decode step is tens of microseconds, where one cold timing of SDPA moved 2x between runs (the
        headline bench times each method once); the study's same-round ratios over three rounds are the figures to
        quote (notebook 09 prints them)."""
        return False

    def reproducible(self, rung: Rung) -> bool:
        return True  # the splits combine in split order, whichever block finishes last
