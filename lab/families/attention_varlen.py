"""Variable-length attention prefill: a batch of sequences of different lengths, packed end to end, in one launch.

Q and O are (T_q, H, D) and K, V (T_k, H_kv, D): the tokens of every sequence one after another (T_q the sum of the
query lengths), as serving engines and FlashAttention's varlen functions keep a batch. cu_seqlens_q and cu_seqlens_k
(int32, B + 1 entries, starting at 0) say where each sequence starts: sequence b's queries are rows cu_seqlens_q[b]
.. cu_seqlens_q[b + 1] - 1. Each sequence is its own attention problem (lab.families.attention's: fp32 scores and
statistics, GQA, causal masks bottom-right aligned per sequence, rows that see no key exactly +0). Lengths of 0 are
allowed (a sequence with no queries writes nothing; one with no keys writes zeros).

Why a kernel of its own: a batch padded to its longest sequence does the longest sequence's work for every sequence.
With prompt lengths spread over 1 .. 8192 most of that work is padding. The packed kernel does each sequence's own
work, and a block past its sequence's last query row leaves at once.

The rung is attention rung 05 (ping-pong, sm_90a) built with VARLEN = 1: the same tiles, pipeline and softmax; its
tensor maps see (T, heads, D) with tokens as rows and heads as planes (row stride H * D * 2 bytes, plane stride
D * 2), so a tile's rows are one head's consecutive tokens, and each block adds its sequence's start to the row it
asks for. A tile that runs past its sequence's end reads the next sequence's tokens (TMA zero-fills only past T):
keys past the end are masked like any key past S_k, and query rows past it are not written. VARLEN = 0 (the dense
family's build) compiles to the same instructions as before the knob (scripts/same_sass.py, 36 variants).

The reference and the error bound are lab.families.attention's, applied to each sequence on its own (its own lengths,
its own causal alignment). The metric is TFLOP/s of each sequence's own visible (query, key) pairs (padding is not
work). The baseline (`launch_ceiling`) is what a caller without a varlen kernel runs: the batch padded to its longest
sequence, once, outside the timing, and PyTorch's scaled_dot_product_attention on it (is_causal where every sequence
has as many keys as queries: a padded key then follows every real query and the mask drops it; else a boolean key
mask), its real rows gathered into the packed output inside the timing. lab.studies.varlen_attention_study times
that beside the lab's own dense rung on the padded batch and PyTorch's varlen function
(torch.nn.attention.varlen.varlen_attn, FlashAttention-2's varlen kernel) where the installed PyTorch has one.

Evidence, an H100 at 40aa909 (results/h100/): the GPU tests (tests/test_gpu_attention_varlen.py: every check case,
half the bound, each sequence the bits of the dense rung 05 on it alone, the padded baseline) passed
(varlen_run_40aa909.log), again at 420908f with lab.ops.attention_varlen's (varlen_gpu_tests_420908f.log);
compute-sanitizer memcheck, racecheck and synccheck clean (sanitize_attention_varlen/: scripts/gemm_tc_sanitize.py's
cases at 420908f, and by hand at 40aa909 on 10, 3 and 3 check cases, where the first log's 34 memcheck "errors" are
CUDA API calls that probe for driver entry points, gone with --report-api-errors no in the second);
varlen_attention_study.json holds the study (a repeat at ae3f4d2 beside it). Not yet on an H200.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Problem, Rung
from lab.families.attention import (
    DTYPES,
    HOPPER_ARCH,
    MMA_HEAD_DIMS,
    TMA_BLOCK_M,
    AttentionFamily,
    softmax_scale,
    tma_smem_bytes,
    validate_sizes,
    visible_keys,
)
from lab.families.gemm_tc import STORAGE

SERVING_SEED = 20261206  # the headline batches' lengths (serving_lengths)


def cu_seqlens(lengths) -> np.ndarray:
    """int32 offsets (B + 1 of them, from 0): where each sequence starts in the packed arrays, then the total."""
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(np.int32)


def serving_lengths(B: int, longest: int, seed: int = SERVING_SEED) -> list[int]:
    """B prompt lengths for a prefill batch: log-uniform over 1 .. longest (as many prompts of 10-100 tokens as of
    1000-10000; published serving traces such as ShareGPT's are heavy on short prompts with a long tail), the first
    one exactly `longest` so that padding pads to it. A stand-in for a trace, not a measured one."""
    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.uniform(0.0, np.log(longest), size=B)).astype(np.int64).clip(1, longest)
    lengths[0] = longest
    return [int(n) for n in lengths]


def padded_work_share(lengths_q, lengths_k, causal: int) -> float:
    """The batch's own (query, key) pairs over those of the same batch padded to its longest sequence: the share of a
    padded launch's work that is real."""
    own = sum(int(visible_keys(q, k, causal).sum()) for q, k in zip(lengths_q, lengths_k, strict=True))
    padded = len(lengths_q) * int(visible_keys(max(lengths_q), max(lengths_k), causal).sum())
    return own / padded if padded else 0.0


class AttentionVarlenFamily(AttentionFamily):
    name = "attention_varlen"
    title = "Attention prefill on packed sequences of different lengths (cu_seqlens), fp16/bf16, GQA, causal"
    metric = "TFLOP/s"
    ceiling_name = "torch_sdpa_padded"
    ceiling_title = ("PyTorch SDPA on the batch padded to its longest sequence (what a caller without a varlen kernel "
                     "runs; a library baseline, not a hardware ceiling)")
    sweep_figure = "throughput"
    profile_figure = None
    launches = ("flash_tma_varlen",)
    rungs = (
        # Grid (ceil(longest S_q / 128), H, B) of 384 threads, attention rung 05's dynamic shared memory, three 3-D
        # tensor maps over the packed arrays, then cu_seqlens_q and cu_seqlens_k; sm_90a.
        Rung("attention_varlen", "05_pingpong",
             KernelSpec("attention/05_pingpong.cu", "attention_pingpong",
                        tuple(sorted({"BF16": 0, "CAUSAL": 0, "HEAD_DIM": 64, "BLOCK_N": 128, "STAGES": 2,
                                      "THREADS": 384, "VARLEN": 1, "SOFTMAX_OVERLAP": 1}.items())),
                        min_arch=HOPPER_ARCH, arch_suffix="a"),
             "attention rung 05 on packed sequences: each block finds its sequence's rows by cu_seqlens",
             "flash_tma_varlen"),
    )

    # --- problems ---------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", H: int = 1, H_kv: int | None = None,
                     seq_lens: tuple = (128,), seq_lens_k: tuple | None = None, D: int = 64,
                     dtype: str = "float16", causal: int = 0, large_logits: int = 0, sets: int = 1) -> Problem:
        """Packed Q (T_q, H, D), K and V (T_k, H_kv, D) of `dist` (random_array, rounded to `dtype`), sequence b with
        seq_lens[b] queries and seq_lens_k[b] keys (default: seq_lens). large_logits as lab.families.attention's."""

        xp = self._xp()
        H_kv = H if H_kv is None else H_kv
        lens_q = [int(n) for n in seq_lens]
        lens_k = lens_q if seq_lens_k is None else [int(n) for n in seq_lens_k]
        self._validate_lengths(lens_q, lens_k)
        causal = int(causal)
        longest_q, longest_k = max(lens_q), max(lens_k)
        validate_sizes(1, H, H_kv, max(longest_q, 1), max(longest_k, 1), D, dtype, causal)  # one sequence's sizes
        if len(lens_q) >= 2**16 or max(sum(lens_q) * H, sum(lens_k) * H_kv) * D >= 2**31:
            raise LabError(f"attention_varlen takes fewer than 2^16 sequences and packed arrays below 2^31 elements; "
                           f"got {len(lens_q)} sequences, {sum(lens_q)} query and {sum(lens_k)} key tokens of "
                           f"H={H}/{H_kv} heads, D={D}: split the batch.")
        q_shape, kv_shape = (sum(lens_q), H, D), (sum(lens_k), H_kv, D)
        inputs, large = self.draw_qkv(q_shape, kv_shape, seed, dist, dtype, large_logits, sets)
        inputs |= {"cu_seqlens_q": [xp.asarray(cu_seqlens(lens_q))], "cu_seqlens_k": [xp.asarray(cu_seqlens(lens_k))]}
        params = {"B": len(lens_q), "H": H, "H_kv": H_kv, "S_q": longest_q, "S_k": longest_k, "D": D, "dtype": dtype,
                  "causal": causal, "seq_lens": lens_q}
        params |= {"seq_lens_k": lens_k} if seq_lens_k is not None else {}
        params |= {"large_logits": 1} if large else {}
        label = (f"B={len(lens_q)} H={H}" + (f"/{H_kv}" if H_kv != H else "") + f" T_q={sum(lens_q)}"
                 + (f" T_k={sum(lens_k)}" if seq_lens_k is not None else "") + f" S<={max(longest_q, longest_k)}"
                 + f" D={D} {dtype}" + (" causal" if causal else "") + (" large logits" if large else "")
                 + (f" lengths {lens_q}" if len(lens_q) <= 6 else ""))
        return Problem(label, inputs, q_shape, self.min_dram_bytes(params), params=params, dtype=STORAGE[dtype],
                       flops=self.flops(params))

    @staticmethod
    def _validate_lengths(lens_q: list, lens_k: list) -> None:
        if not lens_q or len(lens_q) != len(lens_k):
            raise LabError(f"attention_varlen needs one query and one key length per sequence (at least one "
                           f"sequence); got {len(lens_q)} and {len(lens_k)}.")
        if min(lens_q + lens_k) < 0 or sum(lens_q) < 1 or sum(lens_k) < 1:
            raise LabError(f"attention_varlen takes lengths >= 0 and at least one query and one key token in the "
                           f"batch; got query lengths {lens_q} and key lengths {lens_k}.")

    @staticmethod
    def lengths(params: dict) -> tuple[list, list]:
        """(query lengths, key lengths) of a problem's parameters."""
        return list(params["seq_lens"]), list(params.get("seq_lens_k", params["seq_lens"]))

    @staticmethod
    def flops(params: dict) -> int:
        """4 D FLOPs per visible (query, key) pair of each sequence, per query head."""
        lens_q, lens_k = AttentionVarlenFamily.lengths(params)
        pairs = sum(int(visible_keys(q, k, params["causal"]).sum()) for q, k in zip(lens_q, lens_k, strict=True))
        return 4 * params["D"] * params["H"] * pairs

    def min_dram_bytes(self, params: dict) -> int:
        """Q, K and V read once and O written once (the packed arrays): 2 bytes an element."""
        lens_q, lens_k = self.lengths(params)
        return 2 * params["D"] * (2 * params["H"] * sum(lens_q) + 2 * params["H_kv"] * sum(lens_k))

    # --- the float64 reference and the bound: lab.families.attention's, per sequence --------------------------------
    def _sequences(self, problem: Problem) -> list:
        """Per sequence with at least one query row: (its first packed row, an attention Problem of B = 1 over host
        copies of its rows, (1, H, S, D))."""
        from lab.measure.check import to_numpy

        cached = problem.derived.get("sequences")
        if cached is not None:
            return cached
        p = problem.params
        q, k, v = (to_numpy(problem.inputs[n][0]) for n in ("Q", "K", "V"))
        lens_q, lens_k = self.lengths(p)
        starts_q, starts_k = cu_seqlens(lens_q), cu_seqlens(lens_k)
        out = []
        for b, (n_q, n_k) in enumerate(zip(lens_q, lens_k, strict=True)):
            if n_q == 0:
                continue
            rows = slice(starts_q[b], starts_q[b] + n_q)
            keys = slice(starts_k[b], starts_k[b] + n_k)
            params = {key: p[key] for key in ("H", "H_kv", "D", "dtype", "causal")} | {"B": 1, "S_q": n_q, "S_k": n_k}
            inputs = {"Q": [q[rows].transpose(1, 0, 2)[None]], "K": [k[keys].transpose(1, 0, 2)[None]],
                      "V": [v[keys].transpose(1, 0, 2)[None]]}
            out.append((int(starts_q[b]), Problem(f"sequence {b}", inputs, (1, p["H"], n_q, p["D"]), 0, params=params,
                                                   dtype=problem.dtype)))
        problem.derived["sequences"] = out
        return out

    def _packed(self, problem: Problem, per_sequence) -> np.ndarray:
        """(T_q, H, D) from one (1, H, S, D) array per sequence (`per_sequence(start, seq)`)."""
        p = problem.params
        out = np.zeros((sum(p["seq_lens"]), p["H"], p["D"]))
        for start, seq in self._sequences(problem):
            out[start:start + seq.params["S_q"]] = per_sequence(start, seq)[0].transpose(1, 0, 2)
        return out

    def reference(self, problem: Problem) -> np.ndarray:
        cached = problem.derived.get("reference")
        if cached is None:
            cached = problem.derived["reference"] = self._packed(
                problem, lambda start, seq: AttentionFamily.reference(self, seq))
        return cached

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """lab.families.attention's bound, sequence by sequence, on its own rows of the reference (0 for a sequence
        with no key)."""
        def one(start: int, seq: Problem) -> np.ndarray:
            if seq.params["S_k"] == 0:  # no key at all: the rows must be exactly +0
                return np.zeros(seq.out_shape)
            rows = reference[start:start + seq.params["S_q"]].transpose(1, 0, 2)[None]
            return AttentionFamily.error_bound(self, seq, rows)

        return self._packed(problem, one)

    # --- launching --------------------------------------------------------------------------------
    def grid(self, rung: Rung, params: dict) -> tuple[int, int, int]:
        """(ceil(longest S_q / 128), H, B): the blocks of a shorter sequence past its rows leave at once."""
        return (-(-params["S_q"] // TMA_BLOCK_M), params["H"], params["B"])

    def launch_smem(self, rung: Rung, params: dict) -> int:
        return tma_smem_bytes(dict(rung.spec.knobs), params["D"])

    def block_resources(self, rung: Rung) -> tuple[int, int]:
        return dict(rung.spec.knobs)["THREADS"], tma_smem_bytes(dict(rung.spec.knobs), 128)

    def refusal(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> str | None:
        """Why the packed kernel cannot run `problem` into `out` (one sentence), or None."""
        p = problem.params
        why = self._hopper_refusal(rung)
        if why:
            return why.replace("use rung 03", "pad the batch and use the attention family's rung 03")
        if p["D"] not in MMA_HEAD_DIMS:
            return (f"attention_varlen's kernel compiles D as HEAD_DIM in {MMA_HEAD_DIMS}; D={p['D']} needs each "
                    "sequence on its own through the attention family's rung 01.")
        if self._smem_optin() < self.launch_smem(rung, p):
            return (f"attention_varlen's kernel needs {self.launch_smem(rung, p)} bytes of shared memory a block at "
                    f"D={p['D']}, past this GPU's {self._smem_optin()}.")
        arrays = [problem.inputs[n][set_index % len(problem.inputs[n])] for n in ("Q", "K", "V")] + [out]
        if any(a.data.ptr % 16 for a in arrays):
            return ("attention_varlen's kernel reads and writes 16-byte vectors: Q, K, V and O must start on 16-byte "
                    "boundaries.")
        return None

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        p = problem.params
        q, k, v, _, kernel, smem, scale_log2, ints = self.prepare_launch(rung, problem, out, set_index)
        cu_q, cu_k = problem.inputs["cu_seqlens_q"][0], problem.inputs["cu_seqlens_k"][0]
        maps = self._packed_maps(rung, p, q, k, v)
        kernel(self.grid(rung, p), (dict(rung.spec.knobs)["THREADS"],), (*maps, out, cu_q, cu_k, *ints, scale_log2),
               shared_mem=smem)

    @staticmethod
    def _packed_maps(rung: Rung, p: dict, q, k, v) -> tuple:
        """Three 3-D tensor maps (lab.core.tma.TensorMap3D) over the packed arrays: D columns, T token rows (a row
        H * D elements after the one before), one plane per head (D elements apart); boxes of 64 columns by 64 rows
        (Q: a consumer warpgroup's rows) or BLOCK_N rows (K, V), as the dense family's."""
        from lab.core import tma

        D, block_n = p["D"], dict(rung.spec.knobs)["BLOCK_N"]
        lens_q, lens_k = AttentionVarlenFamily.lengths(p)

        def tensor_map(x, tokens, heads, box_rows):
            return tma.encode(tma.TensorMap3D(x.data.ptr, D, tokens, heads, heads * D * 2, D * 2, 64, box_rows))

        return (tensor_map(q, sum(lens_q), p["H"], 64), tensor_map(k, sum(lens_k), p["H_kv"], block_n),
                tensor_map(v, sum(lens_k), p["H_kv"], block_n))

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        lens_q, lens_k = self.lengths(problem.params)
        return super().launch_notes(rung, problem, out) | {
            "real_work_share_of_padded": round(padded_work_share(lens_q, lens_k, problem.params["causal"]), 4)}

    # --- the library baseline -----------------------------------------------------------------------
    def padded(self, problem: Problem, set_index: int = 0) -> dict:
        """The batch padded to its longest sequence, made once and kept: {"Q": (B, H, S_q, D), "K", "V": (B, H_kv,
        S_k, D)} of the input type (padding rows 0), in the family's storage (CuPy)."""
        key = f"padded_{set_index}"
        cached = problem.derived.get(key)
        if cached is not None:
            return cached
        xp = self._xp()
        p = problem.params
        lens_q, lens_k = self.lengths(p)
        out = {}
        for name, lens, heads, longest in (("Q", lens_q, p["H"], p["S_q"]), ("K", lens_k, p["H_kv"], p["S_k"]),
                                           ("V", lens_k, p["H_kv"], p["S_k"])):
            packed = problem.inputs[name][set_index % len(problem.inputs[name])]
            dense = xp.zeros((len(lens), heads, max(longest, 1), p["D"]), dtype=packed.dtype)
            starts = cu_seqlens(lens)
            for b, n in enumerate(lens):
                dense[b, :, :n] = packed[starts[b]:starts[b] + n].transpose(1, 0, 2)
            out[name] = dense
        problem.derived[key] = out
        return out

    def packed_rows(self, problem: Problem) -> object:
        """For each packed query row, its row in the padded (B * S_q) row order: b * S_q + i (CuPy int64)."""
        cached = problem.derived.get("packed_rows")
        if cached is None:
            p = problem.params
            rows = np.concatenate([b * p["S_q"] + np.arange(n) for b, n in enumerate(p["seq_lens"])])
            cached = problem.derived["packed_rows"] = self._xp().asarray(rows.astype(np.int64))
        return cached

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """SDPA on the padded batch (`padded`, made once): is_causal=True where every sequence has as many keys as
        queries (right padding then hides itself behind the causal mask), else a boolean (B, 1, S_q, S_k) mask of
        each sequence's visible keys (made once); GQA by enable_gqa, or K and V repeated per query head (made once)
        with a mask. The real rows are gathered into the packed `out` inside the timing."""
        try:
            import torch
            import torch.nn.functional as F
        except ImportError as exc:
            raise LabError("attention_varlen's baseline is PyTorch's scaled_dot_product_attention, and PyTorch is not "
                           "installed here (pip install torch, a CUDA build).") from exc
        p = problem.params
        key = f"sdpa_padded_{set_index}"
        prepared = problem.derived.get(key)
        if prepared is None:
            dense = self.padded(problem, set_index)
            q, k, v = (self._torch(dense[n], p["dtype"]) for n in ("Q", "K", "V"))
            lens_q, lens_k = self.lengths(p)
            kwargs = {"scale": softmax_scale(p["D"])}
            if p["causal"] and lens_q == lens_k:
                kwargs["is_causal"] = True
            else:
                lq = torch.as_tensor(lens_q, device=q.device)[:, None, None]
                lk = torch.as_tensor(lens_k, device=q.device)[:, None, None]
                i = torch.arange(q.shape[2], device=q.device)[None, :, None]
                j = torch.arange(k.shape[2], device=q.device)[None, None, :]
                mask = j < lk
                if p["causal"]:
                    mask = mask & (j <= i + lk - lq)
                kwargs["attn_mask"] = mask[:, None]
            if p["H_kv"] != p["H"] and "attn_mask" in kwargs:
                group = p["H"] // p["H_kv"]
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            elif p["H_kv"] != p["H"]:
                kwargs["enable_gqa"] = True
            rows = torch.from_dlpack(self.packed_rows(problem))
            prepared = problem.derived[key] = (q, k, v, kwargs, rows)
        q, k, v, kwargs, rows = prepared
        result = F.scaled_dot_product_attention(q, k, v, **kwargs)  # (B, H, S_q, D)
        flat = result.transpose(1, 2).reshape(-1, p["H"], p["D"])  # (B * S_q, H, D)
        torch.index_select(flat, 0, rows, out=self._torch(out, p["dtype"]))

    # --- shape families ---------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """Packed batches with tails: single-token and empty sequences, lengths 1, 17, 127-129, 200, 333, 1000; a
        sequence that fills several 128-row blocks beside ones that fill none; keys past queries (a cached prefix:
        chunked prefill) and fewer keys than queries (causal rows with no key); a sequence with no keys; GQA 2:1 and
        1:1; D 64 and 128; causal and not; large logits on one; fp16 and bf16."""
        sets = [
            {"seq_lens": [1, 17, 0, 128, 200, 129]},
            {"seq_lens": [1000, 1, 333]},
            {"seq_lens": [5]},
            {"seq_lens": [0, 64, 0, 65, 127]},
            {"seq_lens": [17, 1, 100, 40], "seq_lens_k": [300, 1, 250, 0]},
            {"seq_lens": [128, 200, 3], "seq_lens_k": [17, 129, 3]},
        ]
        base = []
        for i, lengths in enumerate(sets):
            heads = {"H": 4, "H_kv": 2} if i % 2 == 0 else {"H": 2, "H_kv": 2}
            base += [heads | lengths | {"D": d, "causal": c} for d in MMA_HEAD_DIMS for c in (0, 1)]
        base += [{"H": 2, "H_kv": 1, "seq_lens": [65, 333, 1], "D": d, "causal": c, "large_logits": 1}
                 for d in MMA_HEAD_DIMS for c in (0, 1)]
        return [case | {"dtype": dtype} for case in base for dtype in DTYPES]

    def headline_params(self) -> list[dict]:
        """A prefill batch of 16 prompts of log-uniform lengths up to 8192 (serving_lengths), H = 32 on H_kv = 8,
        D = 128, causal; fp16 and bf16."""
        lens = serving_lengths(16, 8192)
        return [{"H": 32, "H_kv": 8, "seq_lens": lens, "D": 128, "causal": 1, "dtype": dtype} for dtype in DTYPES]

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        """Batches of 4 to 32 serving-mix prompts up to 8192, fp16, causal."""
        return [{"H": 32, "H_kv": 8, "seq_lens": serving_lengths(b, 8192), "D": 128, "causal": 1,
                 "dtype": "float16"} for b in (4, 8, 16, 32)]

    def tail_params(self) -> list[dict]:
        """16 sequences of one length stepping by 1 across 1024 (every block of each full but the last)."""
        return [{"H": 32, "H_kv": 8, "seq_lens": [s] * 16, "D": 128, "causal": 1, "dtype": "float16"}
                for s in range(1020, 1030)]

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple:
        return self.rungs

    def in_readme(self, params: dict) -> bool:
        return False

    def variant_for(self, rung: Rung, p: dict) -> Rung:
        """BF16, CAUSAL and HEAD_DIM for these sizes (VARLEN stays 1)."""
        knobs = {"BF16": int(p["dtype"] == "bfloat16"), "CAUSAL": int(p["causal"]), "HEAD_DIM": p["D"]}
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs))
