"""Grouped GEMM: many GEMMs of different sizes in one launch, as a mixture-of-experts layer needs them.

For each group g: C_g (M_g x N_g) = A_g (M_g x K_g) @ B_g^T, with B_g stored N_g x K_g ("TN": expert g's weight),
fp16 or bf16 in (bf16 as uint16 bit patterns, as in lab.families.gemm_tc), fp32 accumulation, C_g in the input
type. M_g = 0 is allowed (an expert that got no tokens: it contributes no tiles); N_g, K_g >= 1.

A problem names its groups either by an explicit list of (M, N, K) or by a named case:
    moe       64 experts, 16384 tokens routed by `route_tokens` (seeded, skewed: lognormal shares, a few experts
              dead), N = K = 4096: a few experts take thousands of tokens and some take none.
    uniform   64 experts x M = 256 (the same 16384 tokens), N = K = 4096: the shape cuBLAS's batched call serves.
    small     128 groups with random M in [32, 512], N = K = 1024: launch overhead dominates a loop of calls.
Each case's sizes are arguments (experts, tokens, N, K, route_seed; small: count, m_min, m_max), so tests and
check cases use the same code at small sizes.

Storage (how the family allocates; TMA's rule is a 16-byte-aligned base and a row stride that is a multiple of 16
bytes): all A_g in one buffer and all B_g in another, group after group, each with leading dimension
ld_g = K_g rounded up to a multiple of 8 elements, so every group starts 16-byte aligned (the columns past K_g are
never read: the tensor map's width is K_g). The output is all C_g concatenated in one flat buffer, out_shape
(total,), group g at c_offset_g with ldc_g = N_g, so the lab's checker (poison, guard zones) covers every group
and every gap between them. A user's operands that are not laid out this way (an unaligned base, a stride that
is not a multiple of 8 elements, separate arrays) need one copy into this layout: `pack_operands` does it. (In a
real MoE layer the token permutation that groups tokens by expert can write this layout directly, at no extra cost.)

The problem table (kernels/grouped/01_grouped_persistent.cu, struct LabGroup; GROUP_DTYPE here): per group, its TMA
tensor maps for A_g and B_g, sizes, ldc_g, C_g's offset and the prefix sum of tiles. `build_table` makes it on the
host (two cuTensorMapEncodeTiled calls per non-empty group); the family builds it once per problem, input set and
tile shape and keeps it in problem.derived, so it is not in the timed launch. `table_build_cost` times that host
work for a case: what a re-route (new token counts every step) costs when the maps are rebuilt on the host.

Ceiling: "cupy_loop", a Python loop of cuBLAS calls (cupy.matmul for fp16 with ld = K, cublasGemmEx otherwise),
one per non-empty group, into the output's slices: what a user writes without a grouped kernel. Baseline
"cublas_batched" (cublasGemmStridedBatchedEx with fp32 compute, in both types) only where every group has
the same shape (`baselines_for`). Metric TFLOP/s of sum 2 M_g N_g K_g.

The error bound is lab.measure.bounds.tensor_core_matmul_bound, per group (each group's K, inputs and outputs).

STATUS: tests/test_gpu_grouped_gemm.py passed on the H200 at 8b8c2d1; compute-sanitizer memcheck clean
(results/h200/sanitize_split_k_decode_grouped/, 27d1d24). In the catalogue. Records:
results/h200/grouped_gemm.json (8b8c2d1), grouped_table_cost.json (a03e279).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from lab.core import tma
from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Family, Problem, Rung
from lab.families.gemm import DEFAULT_SMEM_LIMIT
from lab.families.gemm_tc import STORAGE, bfloat16_bits_to_float32, input_scale, to_float32, to_storage
from lab.measure.bounds import BFLOAT16

DTYPES = ("float16", BFLOAT16)
CASES = ("moe", "uniform", "small")
HOPPER_ARCH = 90
LD_MULTIPLE = 8  # elements: 16 bytes of 2-byte values (TMA's row-stride granularity)
TABLE_ALIGN = 128  # bytes: each entry starts with its two tensor maps (CUDA 13's cuda.h aligns CUtensorMap to 128)

# One entry of the problem table: kernels/grouped/01_grouped_persistent.cu's LabGroup, field for field.
GROUP_DTYPE = np.dtype({
    "names": ["map_a", "map_b", "first_tile", "tiles", "tiles_m", "tiles_n", "M", "N", "ldc", "k_tiles", "c_offset",
              "K"],
    "formats": [(np.uint8, (tma.MAP_BYTES,)), (np.uint8, (tma.MAP_BYTES,)), np.int32, np.int32, np.int32, np.int32,
                np.int32, np.int32, np.int32, np.int32, np.int64, np.int32],
    "offsets": [0, 128, 256, 260, 264, 268, 272, 276, 280, 284, 288, 296],
    "itemsize": 384,
})

MOE_DEFAULTS = {"experts": 64, "tokens": 16384, "N": 4096, "K": 4096, "route_seed": 0}
UNIFORM_DEFAULTS = {"experts": 64, "tokens": 16384, "N": 4096, "K": 4096}
SMALL_DEFAULTS = {"count": 128, "m_min": 32, "m_max": 512, "N": 1024, "K": 1024, "route_seed": 0}
CASE_DEFAULTS = {"moe": MOE_DEFAULTS, "uniform": UNIFORM_DEFAULTS, "small": SMALL_DEFAULTS}
ROUTE_SIGMA = 2.0  # lognormal spread of the experts' shares: the top expert takes ~15-30% of the tokens
DEAD_SHARE = 1 / 16  # experts the router never picks this step (at least one when there are two or more)

Shape = tuple[int, int, int]


# --- groups: named cases and routing ----------------------------------------------------------------

def route_tokens(tokens: int, experts: int, seed: int = 0, sigma: float = ROUTE_SIGMA) -> list[int]:
    """Tokens per expert for one MoE step, deterministic in `seed`: shares drawn lognormal (a few experts take
    most tokens), round(experts * DEAD_SHARE) experts (at least one, when there are two or more) get none, and the
    tokens are dealt out by a multinomial draw. The counts sum to `tokens`."""
    if tokens < 0 or experts < 1:
        raise LabError(f"route_tokens needs tokens >= 0 and experts >= 1; got tokens={tokens} experts={experts}.")
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, sigma, experts)
    dead = max(1, round(experts * DEAD_SHARE)) if experts > 1 else 0
    weights[rng.choice(experts, size=dead, replace=False)] = 0.0
    return [int(c) for c in rng.multinomial(tokens, weights / weights.sum())]


def _case_args(case: str, args: dict) -> dict:
    unknown = set(args) - set(CASE_DEFAULTS[case])
    if unknown:
        raise LabError(f"grouped_gemm case {case!r} takes {', '.join(CASE_DEFAULTS[case])}; got "
                       f"{', '.join(sorted(unknown))}.")
    return CASE_DEFAULTS[case] | args


def case_groups(case: str, **args: int) -> list[Shape]:
    """The (M, N, K) of every group of a named case (CASES), its arguments defaulting to CASE_DEFAULTS."""
    if case not in CASE_DEFAULTS:
        raise LabError(f"grouped_gemm knows the cases {', '.join(CASES)} (or an explicit list of groups); got "
                       f"{case!r}.")
    a = _case_args(case, args)
    if case == "moe":
        return [(m, a["N"], a["K"]) for m in route_tokens(a["tokens"], a["experts"], a["route_seed"])]
    if case == "uniform":
        if a["experts"] < 1 or a["tokens"] % a["experts"]:
            raise LabError(f"the uniform case splits the tokens evenly: tokens ({a['tokens']}) must be a multiple of "
                           f"experts ({a['experts']}).")
        return [(a["tokens"] // a["experts"], a["N"], a["K"])] * a["experts"]
    if not 0 <= a["m_min"] <= a["m_max"] or a["count"] < 1:
        raise LabError(f"the small case needs count >= 1 and 0 <= m_min <= m_max; got {a}.")
    rng = np.random.default_rng(a["route_seed"])
    return [(int(m), a["N"], a["K"]) for m in rng.integers(a["m_min"], a["m_max"] + 1, a["count"])]


def parse_groups(groups) -> tuple[Shape, ...]:
    """Groups as given (a list of (M, N, K), or the "MxNxK,MxNxK" string a problem's params hold), checked:
    at least one group, M >= 0, N >= 1, K >= 1, and at least one group with work."""
    if isinstance(groups, str):
        try:
            groups = [tuple(int(x) for x in g.split("x")) for g in groups.split(",") if g.strip()]
        except ValueError as exc:
            raise LabError(f"grouped_gemm groups as text are 'MxNxK,MxNxK,...'; got {groups[:60]!r}.") from exc
    shapes = tuple(tuple(int(x) for x in g) for g in groups)
    if not shapes:
        raise LabError("grouped_gemm needs at least one group; got an empty list.")
    for i, g in enumerate(shapes):
        if len(g) != 3:
            raise LabError(f"grouped_gemm group {i} is {g}: each group is (M, N, K).")
        M, N, K = g
        if M < 0 or N < 1 or K < 1:
            raise LabError(f"grouped_gemm group {i} is M={M} N={N} K={K}: M must be >= 0 (0: an expert with no "
                           "tokens) and N, K >= 1.")
    if all(M == 0 for M, _, _ in shapes):
        raise LabError(f"every one of the {len(shapes)} groups has M = 0: there is nothing to compute.")
    return shapes


def groups_text(groups: Sequence[Shape]) -> str:
    return ",".join(f"{M}x{N}x{K}" for M, N, K in groups)


def groups_of(params: dict) -> tuple[Shape, ...]:
    """The groups a problem's params name: the explicit `groups`, else the named `case` and its arguments.
    Cached: launches ask for them every time, and a named case's routing should not run inside a timed launch."""
    groups = params.get("groups")
    if groups is not None:
        return _parsed_text(groups) if isinstance(groups, str) else parse_groups(groups)
    case = params.get("case")
    if case is None:
        raise LabError("grouped_gemm needs either groups=[(M, N, K), ...] or case= one of " + ", ".join(CASES) + ".")
    args = {k: v for k, v in params.items() if k in CASE_DEFAULTS.get(case, {})}
    return _named_groups(case, tuple(sorted(args.items())))


@functools.lru_cache(maxsize=256)
def _parsed_text(text: str) -> tuple[Shape, ...]:
    return parse_groups(text)


@functools.lru_cache(maxsize=256)
def _named_groups(case: str, args: tuple[tuple[str, int], ...]) -> tuple[Shape, ...]:
    return parse_groups(case_groups(case, **dict(args)))


def same_shape(groups: Sequence[Shape]) -> bool:
    """Every group the same (M, N, K) with M >= 1: the problems a strided-batched call serves."""
    return len(set(groups)) == 1 and groups[0][0] >= 1


# --- storage ------------------------------------------------------------------------------------------

def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


@dataclasses.dataclass(frozen=True)
class GroupLayout:
    """Where each group lives in the family's buffers (element offsets; see the module docstring)."""

    groups: tuple[Shape, ...]
    ld: tuple[int, ...]  # A_g's and B_g's leading dimension: K_g rounded up to LD_MULTIPLE
    a_offsets: tuple[int, ...]
    b_offsets: tuple[int, ...]
    c_offsets: tuple[int, ...]
    a_elements: int
    b_elements: int
    c_elements: int

    @property
    def count(self) -> int:
        return len(self.groups)

    def a_view(self, buf, g: int):
        """A_g (M_g x K_g) as a view of the A buffer (row stride ld_g)."""
        M, _, K = self.groups[g]
        return buf[self.a_offsets[g]:self.a_offsets[g] + M * self.ld[g]].reshape(M, self.ld[g])[:, :K]

    def b_view(self, buf, g: int):
        """B_g (N_g x K_g) as a view of the B buffer (row stride ld_g)."""
        _, N, K = self.groups[g]
        return buf[self.b_offsets[g]:self.b_offsets[g] + N * self.ld[g]].reshape(N, self.ld[g])[:, :K]

    def c_view(self, out, g: int):
        """C_g (M_g x N_g, contiguous) as a view of the flat output."""
        M, N, _ = self.groups[g]
        return out[self.c_offsets[g]:self.c_offsets[g] + M * N].reshape(M, N)


def _prefix(sizes: Sequence[int]) -> tuple[tuple[int, ...], int]:
    starts = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    return tuple(int(s) for s in starts[:-1]), int(starts[-1])


@functools.lru_cache(maxsize=64)
def layout(groups: tuple[Shape, ...]) -> GroupLayout:
    ld = tuple(round_up(K, LD_MULTIPLE) for _, _, K in groups)
    a_off, a_total = _prefix([M * l for (M, _, _), l in zip(groups, ld, strict=True)])
    b_off, b_total = _prefix([N * l for (_, N, _), l in zip(groups, ld, strict=True)])
    c_off, c_total = _prefix([M * N for M, N, _ in groups])
    return GroupLayout(groups, ld, a_off, b_off, c_off, a_total, b_total, c_total)


# --- the problem table --------------------------------------------------------------------------------

def tile_counts(groups: Sequence[Shape], bm: int, bn: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tiles_m, tiles_n, first_tile) per group for bm x bn tiles: an empty group has tiles_m = 0, so no tiles,
    and its first_tile equals the next group's. first_tile has one more entry: the total."""
    tiles_m = np.array([-(-M // bm) for M, _, _ in groups], dtype=np.int64)
    tiles_n = np.array([-(-N // bn) for _, N, _ in groups], dtype=np.int64)
    first = np.concatenate(([0], np.cumsum(tiles_m * tiles_n)))
    return tiles_m, tiles_n, first


def _encode_uncached(spec: tma.TensorMap2D) -> np.ndarray:
    # The table is cached whole (problem.derived); its maps would only crowd lab.core.tma.encode's cache.
    return tma.encode.__wrapped__(spec)


def build_table(lay: GroupLayout, a_address: int, b_address: int, bm: int, bn: int, bk: int,
                encode: Callable[[tma.TensorMap2D], np.ndarray] | None = None) -> tuple[np.ndarray, int]:
    """The problem table (an array of GROUP_DTYPE) for A and B buffers at these device addresses, and the total
    number of tiles. `encode` turns a TensorMap2D into its 128 bytes (default: cuTensorMapEncodeTiled; tests pass
    a stand-in). Empty groups get no maps (the driver refuses a height of 0, and no tile reads them)."""
    encode = encode or _encode_uncached
    tiles_m, tiles_n, first = tile_counts(lay.groups, bm, bn)
    total = int(first[-1])
    if total >= 2 ** 31:
        raise LabError(f"this problem has {total} tiles; the kernel counts them in 32-bit ints: split it in two.")
    M, N, K = (np.array(column, dtype=np.int64) for column in zip(*lay.groups, strict=True))
    table = np.zeros(lay.count, dtype=GROUP_DTYPE)
    table["first_tile"], table["tiles"] = first[:-1], tiles_m * tiles_n
    table["tiles_m"], table["tiles_n"] = tiles_m, tiles_n
    table["M"], table["N"], table["K"], table["ldc"] = M, N, K, N
    table["k_tiles"], table["c_offset"] = -(-K // bk), lay.c_offsets
    for g in np.flatnonzero(M > 0):
        ld_bytes = 2 * lay.ld[g]
        maps = (tma.TensorMap2D(a_address + 2 * lay.a_offsets[g], int(K[g]), int(M[g]), ld_bytes, bk, bm),
                tma.TensorMap2D(b_address + 2 * lay.b_offsets[g], int(K[g]), int(N[g]), ld_bytes, bk, bn))
        for field, spec in zip(("map_a", "map_b"), maps, strict=True):
            table[field][g] = np.frombuffer(np.asarray(encode(spec)).tobytes(), dtype=np.uint8)
    return table, total


def block_walk(table: np.ndarray, blocks: int, bm: int = 128, bn: int = 256, order: str = "grouped",
               group_m: int = 8) -> list[list[tuple[int, int, int]]]:
    """The kernel's walk, restated for lessons and tests: for each of `blocks` blocks, the (group, row0, col0) of
    every tile it computes, in order. Block b takes global tiles b, b + blocks, ...; a cursor moves forward
    through the table (seek_group in the kernel) and a group's own tiles go in `order` (lab.core.tile_order.tile_of)."""
    from lab.core.tile_order import tile_of

    total = int(table["first_tile"][-1] + table["tiles"][-1]) if len(table) else 0
    walks = []
    for b in range(blocks):
        g, end, walk = -1, 0, []
        for tile in range(b, total, blocks):
            while tile >= end and g + 1 < len(table):
                g += 1
                end = int(table["first_tile"][g] + table["tiles"][g])
            e = table[g]
            tm, tn = tile_of(tile - int(e["first_tile"]), int(e["tiles_m"]), int(e["tiles_n"]), order, group_m)
            walk.append((g, tm * bm, tn * bn))
        walks.append(walk)
    return walks


def _address(x) -> int:
    return int(x.data.ptr) if hasattr(x, "data") and hasattr(x.data, "ptr") else int(x.ctypes.data)


def table_build_cost(case: str = "moe", repeats: int = 5, bm: int = 128, bn: int = 256, bk: int = 64,
                     encode: Callable[[tma.TensorMap2D], np.ndarray] | None = None, **case_args: int) -> dict:
    """Host time to build a case's problem table (2 tensor maps per non-empty group and the packing), median and
    best of `repeats` builds, the work a per-step re-route repeats when the maps are made on the host. Pure host
    work (timed with the host clock); the upload (table_bytes over PCIe, microseconds) is not included. Needs the
    CUDA driver (cuda-bindings) unless `encode` is given; the buffers' addresses are stand-ins (TMA's encoder
    checks alignment and sizes, it does not read the memory)."""
    groups = parse_groups(case_groups(case, **case_args))
    lay = layout(groups)
    if encode is None:
        tma.driver().cuInit(0)  # the encoder needs an initialized driver (idempotent), not a context
    base = 1 << 40  # any 16-byte-aligned address will do
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        table, _ = build_table(lay, base, base + 2 * lay.a_elements + 4096, bm, bn, bk, encode)
        times.append(time.perf_counter() - start)
    maps = 2 * sum(1 for M, _, _ in groups if M > 0)
    median = statistics.median(times)
    return {"case": case, "groups": len(groups), "empty_groups": len(groups) - maps // 2, "maps": maps,
            "table_bytes": table.nbytes, "median_ms": 1e3 * median, "best_ms": 1e3 * min(times),
            "per_map_us": 1e6 * median / max(maps, 1)}


# --- the family ---------------------------------------------------------------------------------------

def _rung(key: str, entry: str, title: str, *, launch: str, **knobs: int) -> Rung:
    spec = KernelSpec(f"grouped/{key}.cu", entry, tuple(sorted(knobs.items())), min_arch=HOPPER_ARCH,
                      arch_suffix="a")
    return Rung("grouped_gemm", key, spec, title, launch)


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def dynamic_smem_bytes(rung: Rung) -> int:
    """STAGES * (BM + BN) * BK two-byte elements plus 1024 to align the tiles to the swizzle's period."""
    k = _knobs(rung)
    return k["STAGES"] * (k["BM"] + k["BN"]) * k["BK"] * 2 + 1024


def _validate_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise LabError(f"grouped_gemm dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")


class GroupedGemmFamily(Family):
    name = "grouped_gemm"
    title = "Grouped GEMM (C_g = A_g @ B_g^T for many groups of different M), fp16/bf16 in, fp32 accumulation"
    metric = "TFLOP/s"
    ceiling_name = "cupy_loop"
    ceiling_title = "a Python loop of cuBLAS calls, one per non-empty group"
    sweep_figure = "throughput"
    profile_figure = None
    launches = ("persistent",)
    rungs = (
        # Launch "persistent": a 1-D grid of min(total tiles, SMs or max_blocks) blocks of THREADS threads walking
        # the tiles of every group, the problem table (tensor maps per group) as an argument, dynamic shared memory.
        _rung("01_grouped_persistent", "grouped_gemm_persistent",
              "gemm_tc rung 06's persistent kernel over a device-side table of groups",
              launch="persistent", BF16=0, BM=128, BN=256, BK=64, STAGES=4, RASTER=2, GROUP_M=8, THREADS=384),
    )

    def __init__(self, max_blocks: int | None = None):
        # At most this many blocks (None: one per SM). Tests set a few, so every block walks many tiles and
        # crosses groups even on small problems.
        self.max_blocks = max_blocks

    def _xp(self):
        if self.array_module is not None:
            return self.array_module
        import cupy

        return cupy

    # --- problems -------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", case: str | None = None, groups=None,
                     dtype: str = "float16", sets: int = 1, **case_args: int) -> Problem:
        """The groups of `case` (with its arguments) or the explicit `groups`, with random A and B (drawn in
        float32, scaled per group as gemm_tc scales its inputs, rounded to `dtype`) in the family's layout."""
        from lab.measure.check import random_array

        _validate_dtype(dtype)
        if groups is not None and (case not in (None, "custom") or case_args):
            raise LabError("give grouped_gemm either groups=[(M, N, K), ...] or a named case with its arguments, "
                           "not both.")
        if groups is None and case_args and case is None:
            raise LabError(f"arguments {', '.join(sorted(case_args))} need a named case ({', '.join(CASES)}).")
        params = self._params(case, groups, dtype, case_args)
        shapes = groups_of(params)
        lay = layout(shapes)
        xp = self._xp()

        def draw(n: int, offsets: tuple[int, ...], rows: Callable[[Shape], int], s: int):
            x = random_array((n,), np.float32, s, dist, xp=xp)
            for g, shape in enumerate(shapes):  # gemm_tc's input scale, which depends on K: per group
                scale = input_scale(dist, shape[2])
                if scale != 1.0:
                    x[offsets[g]:offsets[g] + rows(shape) * lay.ld[g]] *= np.float32(scale)
            return to_storage(x, dtype, xp)

        a_sets = [draw(lay.a_elements, lay.a_offsets, lambda s: s[0], seed + 11 * i) for i in range(sets)]
        b_sets = [draw(lay.b_elements, lay.b_offsets, lambda s: s[1], seed + 11 * i + 1) for i in range(sets)]
        return self._problem(params, shapes, {"A": a_sets, "B": b_sets})

    @staticmethod
    def _params(case: str | None, groups, dtype: str, case_args: dict) -> dict:
        """JSON-friendly params that make the same problem again through make_problem(**params); a named case's
        first key is the one a sweep varies (tokens)."""
        if groups is not None:
            return {"case": "custom", "groups": groups_text(parse_groups(groups)), "dtype": dtype}
        if case is None:
            raise LabError("grouped_gemm needs either groups=[(M, N, K), ...] or case= one of " + ", ".join(CASES)
                           + ".")
        if case not in CASE_DEFAULTS:
            case_groups(case)  # raises the sentence naming the cases
        args = _case_args(case, case_args)
        lead = {"tokens": args["tokens"]} if "tokens" in args else {}
        return lead | {"case": case} | args | {"dtype": dtype}

    def _problem(self, params: dict, shapes: tuple[Shape, ...], inputs: dict) -> Problem:
        lay = layout(shapes)
        live = [(M, N, K) for M, N, K in shapes if M > 0]
        flops = sum(2 * M * N * K for M, N, K in live)
        return Problem(self._label(params, shapes), inputs, (lay.c_elements,), self.min_dram_bytes(params),
                       params=params, dtype=STORAGE[params["dtype"]], flops=flops)

    @staticmethod
    def _label(params: dict, shapes: tuple[Shape, ...]) -> str:
        empty = sum(1 for M, _, _ in shapes if M == 0)
        tokens = sum(M for M, _, _ in shapes)
        if params["case"] == "custom":
            shown = ", ".join(f"{M}x{N}x{K}" for M, N, K in shapes[:4]) + (", ..." if len(shapes) > 4 else "")
            return f"{len(shapes)} groups ({empty} empty): {shown} {params['dtype']}"
        ns, ks = {N for _, N, _ in shapes}, {K for _, _, K in shapes}
        nk = f"N={ns.pop()} K={ks.pop()}" if len(ns) == len(ks) == 1 else "mixed N, K"
        return f"{params['case']}: {len(shapes)} groups ({empty} empty), {tokens} rows, {nk} {params['dtype']}"

    def layout_of(self, problem: Problem) -> GroupLayout:
        return layout(groups_of(problem.params))

    def pack_operands(self, a_list: Sequence, b_list: Sequence, dtype: str = "float16") -> Problem:
        """A problem from a user's operands: A_g (M_g x K_g) and B_g (N_g x K_g) arrays of the storage type (fp16;
        bf16 as uint16 patterns), anywhere and with any strides, copied into the family's aligned layout (one
        read and one write of every operand: the price of an operand TMA cannot read where it is)."""
        _validate_dtype(dtype)
        if len(a_list) != len(b_list):
            raise LabError(f"grouped_gemm needs one B per A; got {len(a_list)} A's and {len(b_list)} B's.")
        shapes = []
        for g, (a, b) in enumerate(zip(a_list, b_list, strict=True)):
            if a.ndim != 2 or b.ndim != 2:
                raise LabError(f"group {g}: A and B must be 2-D (A is M x K, B is N x K); got shapes {a.shape} and "
                               f"{b.shape}.")
            if a.shape[1] != b.shape[1]:
                raise LabError(f"group {g}: A is {a.shape[0]} x {a.shape[1]} but B is {b.shape[0]} x {b.shape[1]}; "
                               "B must be N x K with A's K (TN: a linear layer's weight, one row per output).")
            for name, x in (("A", a), ("B", b)):
                if np.dtype(x.dtype) != STORAGE[dtype]:
                    raise LabError(f"group {g}: {name} is {x.dtype}; {dtype} operands are stored as "
                                   f"{STORAGE[dtype]} (bf16 as uint16 bit patterns).")
            shapes.append((a.shape[0], b.shape[0], a.shape[1]))
        shapes = parse_groups(shapes)
        lay = layout(shapes)
        xp = self._xp()
        a_buf = xp.zeros(lay.a_elements, dtype=STORAGE[dtype])
        b_buf = xp.zeros(lay.b_elements, dtype=STORAGE[dtype])
        for g in range(lay.count):
            lay.a_view(a_buf, g)[...] = xp.asarray(a_list[g])
            lay.b_view(b_buf, g)[...] = xp.asarray(b_list[g])
        return self._problem({"case": "custom", "groups": groups_text(shapes), "dtype": dtype}, shapes,
                             {"A": [a_buf], "B": [b_buf]})

    def reroute(self, problem: Problem, counts: Sequence[int]) -> Problem:
        """The same experts (B_g, N_g, K_g) with new token counts M_g over the same A buffer, as a router's next
        step would give them: a new problem (a new table, built on first launch) sharing the input arrays."""
        old = groups_of(problem.params)
        if len(counts) != len(old):
            raise LabError(f"reroute needs one count per group ({len(old)}); got {len(counts)}.")
        shapes = parse_groups([(int(m), N, K) for m, (_, N, K) in zip(counts, old, strict=True)])
        need = layout(shapes).a_elements
        have = min(len(a) for a in problem.inputs["A"])
        if need > have:
            raise LabError(f"the re-routed groups need {need} elements of A and the buffer holds {have}: keep the "
                           "total tokens (per K) at most what the problem was made with.")
        params = {"case": "custom", "groups": groups_text(shapes), "dtype": problem.params["dtype"]}
        return self._problem(params, shapes, problem.inputs)

    def _operands(self, problem: Problem, g: int, host: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A_g (M x K) and B_g^T (K x N) as float64 values of the stored inputs (set 0)."""
        from lab.measure.check import to_numpy

        lay, dtype = self.layout_of(problem), problem.params["dtype"]
        a_buf, b_buf = host or (to_numpy(problem.inputs["A"][0]), to_numpy(problem.inputs["B"][0]))
        a = to_float32(np.ascontiguousarray(lay.a_view(a_buf, g)), dtype).astype(np.float64)
        b = to_float32(np.ascontiguousarray(lay.b_view(b_buf, g)), dtype).astype(np.float64)
        return a, b.T

    def _per_group(self, problem: Problem, fill: Callable[[int, np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        from lab.measure.check import to_numpy

        lay = self.layout_of(problem)
        host = (to_numpy(problem.inputs["A"][0]), to_numpy(problem.inputs["B"][0]))
        out = np.zeros(lay.c_elements)
        for g, (M, N, _) in enumerate(lay.groups):
            if M:
                a, b = self._operands(problem, g, host)
                out[lay.c_offsets[g]:lay.c_offsets[g] + M * N] = fill(g, a, b).ravel()
        return out

    def reference(self, problem: Problem) -> np.ndarray:
        return self._per_group(problem, lambda g, a, b: a @ b)

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """lab.measure.bounds.tensor_core_matmul_bound for each group (its own K and inputs), flattened like the
        output."""
        from lab.measure.bounds import tensor_core_matmul_bound

        lay = self.layout_of(problem)
        out_dtype = BFLOAT16 if problem.params["dtype"] == BFLOAT16 else np.float16

        def bound(g: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            M, N, _ = lay.groups[g]
            ref = reference[lay.c_offsets[g]:lay.c_offsets[g] + M * N].reshape(M, N)
            return tensor_core_matmul_bound(a, b, ref, out_dtype=out_dtype)

        return self._per_group(problem, bound)

    def output_values(self, out):
        """bf16 patterns widened to float32 (fp16 compares as it is)."""
        if out.dtype == np.uint16:
            return bfloat16_bits_to_float32(out, np if isinstance(out, np.ndarray) else self._xp())
        return out

    # --- launching ------------------------------------------------------------------------------
    def variant(self, rung: Rung, problem: Problem) -> Rung:
        """The rung built for this problem's type."""
        bf16 = int(problem.params["dtype"] == BFLOAT16)
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(BF16=bf16))

    def table(self, problem: Problem, rung: Rung, set_index: int = 0,
              encode: Callable[[tma.TensorMap2D], np.ndarray] | None = None) -> tuple[object, np.ndarray, int]:
        """(the table in device memory, the same on the host, total tiles) for input set `set_index` and the rung's
        tile shape: built on first use and kept in problem.derived (the maps point at that set's buffers)."""
        k = _knobs(rung)
        i = set_index % len(problem.inputs["A"])
        key = ("table", i, k["BM"], k["BN"], k["BK"])
        if key not in problem.derived:
            host, total = build_table(self.layout_of(problem), _address(problem.inputs["A"][i]),
                                      _address(problem.inputs["B"][i]), k["BM"], k["BN"], k["BK"], encode)
            device = self._xp().asarray(host.view(np.uint8))
            if self.array_module is None and _address(device) % TABLE_ALIGN:  # (a NumPy stand-in runs no kernel)
                raise LabError(f"the problem table landed at an address that is not {TABLE_ALIGN}-byte aligned; "
                               "its tensor maps need that alignment (report this: the allocator changed).")
            problem.derived[key] = (device, host, total)
        return problem.derived[key]

    def blocks(self, total_tiles: int) -> int:
        from lab.core import device

        limit = device.current().sm_count if self.max_blocks is None else self.max_blocks
        return max(1, min(total_tiles, limit))

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        self.launch_scheme(rung)  # "persistent", the family's one scheme: the grid is `blocks`
        rung = self.variant(rung, problem)
        device_table, host_table, total = self.table(problem, rung, set_index)
        kernel = get_kernel(rung.spec)
        smem = dynamic_smem_bytes(rung)
        if smem > DEFAULT_SMEM_LIMIT:  # above 48 KB a kernel must opt in to more dynamic shared memory
            kernel.max_dynamic_shared_size_bytes = smem
        args = (device_table, np.int32(len(host_table)), np.int32(total), out)
        kernel((self.blocks(total),), (_knobs(rung)["THREADS"],), args, shared_mem=smem)

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        """How many groups (and empty ones), tiles and blocks a launch has: the records' `extra`."""
        lay = self.layout_of(problem)
        k = _knobs(rung)
        _, _, first = tile_counts(lay.groups, k["BM"], k["BN"])
        total = int(first[-1])
        return {"path": "tma, table in global memory", "groups": lay.count,
                "empty_groups": sum(1 for M, _, _ in lay.groups if M == 0), "tiles": total,
                "blocks": self.blocks(total)}

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """cupy_loop: one cuBLAS call per non-empty group into its slice of the output, from Python: fp16 with
        ld = K through cupy.matmul (as a CuPy user writes it), the rest through cublasGemmEx (fp32 compute)."""
        import cupy as cp

        from lab.tools.library_gemm import gemm_ex

        lay, dtype = self.layout_of(problem), problem.params["dtype"]
        a_buf = problem.inputs["A"][set_index % len(problem.inputs["A"])]
        b_buf = problem.inputs["B"][set_index % len(problem.inputs["B"])]
        for g, (M, N, K) in enumerate(lay.groups):
            if M == 0:
                continue
            a, b, c = lay.a_view(a_buf, g), lay.b_view(b_buf, g), lay.c_view(out, g)
            if dtype == "float16" and lay.ld[g] == K:
                cp.matmul(a, b.T, out=c)
            else:
                p = {"M": M, "N": N, "K": K, "dtype": dtype, "layout": "TN", "alpha": 1.0, "beta": 0.0,
                     "lda": lay.ld[g], "ldb": lay.ld[g], "ldc": N}
                gemm_ex(p, a, b, c)

    def baselines(self) -> dict:
        return {"cublas_batched": self.launch_batched}

    def baselines_for(self, params: dict) -> dict:
        """cuBLAS's strided-batched call only where every group has the same shape (it takes one M, N, K)."""
        return self.baselines() if same_shape(groups_of(params)) else {}

    def launch_batched(self, problem: Problem, out, set_index: int = 0) -> None:
        """cublas_batched: one cublasGemmStridedBatchedEx call (fp32 compute) over groups of one shape (the buffers
        are regular 3-D stacks then), for both types. Not cupy.matmul on the 3-D stacks: for fp16 with B transposed
        that took 18.2 ms at 64 x 256 x 4096 x 4096 on the H200 (30 TFLOP/s; results/h200/grouped_gemm.json at
        384ca0b), 23x the strided-batched call's bf16 time on the same shapes."""

        lay, dtype = self.layout_of(problem), problem.params["dtype"]
        if not same_shape(lay.groups):
            raise LabError("cublas_batched serves only groups of one shape; this problem's groups differ (use the "
                           "cupy_loop ceiling or the grouped kernel).")
        G, (M, N, K), ld = lay.count, lay.groups[0], lay.ld[0]
        a_buf = problem.inputs["A"][set_index % len(problem.inputs["A"])]
        b_buf = problem.inputs["B"][set_index % len(problem.inputs["B"])]
        _cublas_gemm_strided_batched(dtype, G, M, N, K, ld, a_buf, b_buf, out)

    # --- sizes ----------------------------------------------------------------------------------
    def min_dram_bytes(self, params: dict) -> int:
        """2 bytes x (A_g, B_g read once and C_g written once) over the groups with tokens (an empty expert's
        weight is not read)."""
        return sum(2 * (M * K + N * K + M * N) for M, N, K in groups_of(params) if M > 0)

    def dynamic_smem_bytes(self, rung: Rung) -> int:
        return dynamic_smem_bytes(rung)

    def block_resources(self, rung: Rung) -> tuple[int, int]:
        return _knobs(rung)["THREADS"], dynamic_smem_bytes(rung)

    def check_cases(self) -> list[dict]:
        """Tails (empty groups first, in the middle and last; one expert with every token; K not a multiple of 64
        and K % 8 != 0; N = 1; M = 1), mixed odd shapes, more tiles than an H200 has SMs (so blocks walk several
        tiles across groups), and the named cases at small sizes; each in both types."""
        many = [(m, 260, 24) for _ in range(10) for m in (129, 0, 1, 300, 200, 64)]  # 180 tiles of 128 x 256
        base = [
            {"groups": [(0, 64, 64), (17, 33, 40), (0, 8, 8), (65, 64, 128), (0, 1, 1)]},
            {"groups": [(0, 96, 72), (0, 96, 72), (300, 96, 72), (0, 96, 72)]},
            {"case": "moe", "experts": 1, "tokens": 257, "N": 130, "K": 72},
            {"groups": [(100, 72, 100), (37, 130, 65), (64, 64, 127), (130, 257, 191)]},
            {"groups": [(33, 40, 7), (20, 17, 33), (1, 9, 1), (70, 300, 13)]},
            {"groups": [(129, 1, 64), (5, 1, 3), (1, 1, 1)]},
            {"groups": [(1, 300, 77), (1, 256, 64), (1, 1, 9)]},
            {"groups": [(129, 131, 67), (1, 257, 200), (255, 1, 130), (64, 128, 64), (3, 300, 5), (33, 65, 4099)]},
            {"groups": many},
            {"case": "moe", "experts": 16, "tokens": 1024, "N": 192, "K": 136},
            {"case": "uniform", "experts": 8, "tokens": 512, "N": 128, "K": 64},
            {"case": "small", "count": 12, "m_min": 1, "m_max": 140, "N": 136, "K": 72},
        ]
        return [case | {"dtype": dtype} for case in base for dtype in DTYPES]

    def headline_params(self) -> list[dict]:
        return [{"case": "moe", "dtype": "float16"}, {"case": "moe", "dtype": BFLOAT16},
                {"case": "uniform", "dtype": "float16"}, {"case": "uniform", "dtype": BFLOAT16},
                {"case": "small", "dtype": "float16"}]

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        """moe at N = K = 4096 from 1024 to 65536 tokens (fp16): where the loop's per-call cost stops mattering."""
        return [{"case": "moe", "tokens": t, "dtype": "float16"} for t in (1024, 2048, 4096, 8192, 16384, 32768, 65536)]

    def tail_params(self) -> list[dict]:
        """uniform, 8 experts, tokens per expert stepping by 1 across the 128-row tile (120 .. 136), N = K = 4096."""
        return [{"case": "uniform", "experts": 8, "tokens": 8 * m, "dtype": "float16"} for m in range(120, 137)]


# --- the batched baseline's cuBLAS call -----------------------------------------------------------------

_CUDA_R_16F, _CUDA_R_16BF = 2, 14  # cudaDataType values (library_types.h)
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1
_CUBLAS_OP_N, _CUBLAS_OP_T = 0, 1


def _cublas_gemm_strided_batched(dtype: str, G: int, M: int, N: int, K: int, ld: int, a, b, out) -> None:
    """G products C_g = A_g @ B_g^T in cuBLAS's column-major terms (as lab.tools.library_gemm.gemm_ex): C_g^T (N x M) =
    B_g (N x K row-major, column-major K x N transposed) @ A_g^T; strides from one group to the next: N * ld of B,
    M * ld of A, M * N of C."""
    import cupy as cp
    from cupy_backends.cuda.libs import cublas

    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    kind = _CUDA_R_16BF if dtype == BFLOAT16 else _CUDA_R_16F
    one, zero = np.array(1.0, np.float32), np.array(0.0, np.float32)
    cublas.gemmStridedBatchedEx(handle, _CUBLAS_OP_T, _CUBLAS_OP_N, N, M, K, one.ctypes.data, b.data.ptr, kind, ld,
                                N * ld, a.data.ptr, kind, ld, M * ld, zero.ctypes.data, out.data.ptr, kind, N, M * N,
                                G, _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT)
