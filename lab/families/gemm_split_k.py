"""Split-K: GEMMs whose M x N has too few tiles to fill the GPU, while K is long (K-heavy reductions, the
weight-gradient GEMMs of training, a decode step's larger batches). gemm_tc's rung 06 runs one block per tile, so
256 x 256 x 65536 keeps 2 of 132 SMs busy; rung 08 (kernels/gemm_tc/08_split_k.cu) cuts K into S splits and sums
the partial tiles four ways: an fp32 workspace and a reduction kernel, in-kernel after a grid barrier (both
deterministic, bit-identical to each other), with fp32 atomics in L2 (not reproducible bit for bit:
`run_to_run_bits` counts the differences), or inside thread-block clusters through distributed shared memory, a
tile's splits in clusters of up to 8 blocks, each cluster's sum a slice of a much smaller workspace (deterministic;
its own bits).

The problems, the reference, the bound and the cuBLAS ceiling are gemm_tc's (fp16 and bf16, NN and TN, any shape).
A problem may name its split factor (`splits`; 0 lets `choose_splits` pick it); the launcher clamps it to
[1, k-tiles] and says what ran in `launch_notes`. Where N <= 128 or the output has few tiles, every rung runs
128 x 128 tiles instead of 128 x 256 (`narrow_tiles`): a shape specialization the dispatch layer can reuse.

STATUS: tests/test_gpu_split_k.py passed on the H200 at 8b8c2d1 (every check case of every rung, the deterministic
modes bit-identical run to run and to each other); compute-sanitizer memcheck clean on every rung
(results/h200/sanitize_split_k_decode_grouped/, 5355749). Records: results/h200/gemm_split_k.json,
split_k_factors.json, split_k_ncu.json. Racecheck and synccheck not yet run on rung 08. The cluster mode
(08_split_k_cluster): its GPU tests passed on an H100 at 0195461 (every check case, the same bits every run) and
memcheck, racecheck and synccheck are clean there (results/h100/sanitize_split_k/); its launcher's cluster plan
(_cluster_plan) came after that run, and its GPU tests passed again with it on an H100 at 262d23d (every check case,
the same bits every run, the clusters that fit; results/h100/persist_run_262d23d.log) but for the launch-notes test,
since changed to check the splits against the driver's count. Where its time goes: the kernel's header
(results/h100/split_k_ncu.json). The plan rule changed again after results/h100/split_k_plans.json (730294a: the
widest size that fits, PLAN_GROUPS at most); its GPU tests passed with it on an H100 at ec4fdb8 (14 passed;
results/h100/hopper_sched_run_ec4fdb8.log) and split_k_rounds.json was measured there. That run showed the widest
size losing where it left half the blocks idle (512 x 512 x 32768), so the rule keeps PLAN_BUSY_SHARE of the busiest
plan's blocks since: CPU-tested (tests/test_gemm_split_k_family.py); the plans it picks on the study's shapes are
the ones those two GPU runs measured.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Problem, Rung
from lab.families import gemm_tc
from lab.families.gemm_tc import HOPPER_ARCH, GemmTcFamily, dynamic_smem_bytes

MODE_NAMES = {0: "workspace + reduction kernel", 1: "in-kernel after a grid barrier", 2: "fp32 atomics in L2",
              3: "clusters through DSMEM, then their slices"}
MAX_SPLIT_CLUSTER = 8  # the portable cluster size
MAX_SLICES = 16  # mode 3: at most this many clusters a tile (the slices its last cluster sums, band by band)
# The most clusters a tile the launcher's plan takes: each slice more is more for the tile's last cluster to sum, and
# past 12 that cost more than the K it shared out (results/h100/split_k_plans.json, 730294a: at 128 x 128 x 131072,
# 8 x 12 and 8 x 8 ran 1.04x the workspace mode, 8 x 15 1.02x).
PLAN_GROUPS = 12
# A wider cluster wins only while it keeps this share of the blocks the busiest plan keeps: at 512 x 512 x 32768 on
# that H100, 4 x 1 (64 blocks) ran 0.80x the workspace mode where 2 x 4 (128) had run 0.92x
# (results/h100/split_k_rounds.json at ec4fdb8 against split_k_rounds_262d23d.json).
PLAN_BUSY_SHARE = 0.75
MIN_K_TILES_PER_SPLIT = 4  # a split shorter than this spends more on its pipeline fill and partial tile than it saves
MAX_WORKSPACE_BYTES = 1 << 30
REDUCE_THREADS = 256
REDUCE_ENTRY = "gemm_tc_split_k_reduce"  # mode 0's second kernel, in the same source
MAX_PLANS = 256  # launch plans kept per family instance (the check cases make a few hundred)
NARROW_N = 128  # at or below this N every rung uses 128 x 128 tiles
FEW_TILES = 8  # at or below this many 128 x 256 tiles, too (narrow_tiles)


def _split_rung(key: str, mode: int, title: str) -> Rung:
    """A rung of kernels/gemm_tc/08_split_k.cu built with reduction `mode` (MODE_NAMES), launched "split_k"; mode 3
    also with its cluster size (SPLIT_CLUSTER; the launcher picks it per problem: _cluster_plan)."""
    knobs = dict(BF16=0, TN=1, BM=128, BN=256, BK=64, STAGES=4, RASTER=2, GROUP_M=8, SPLIT_MODE=mode,
                 SPLIT_INTERLEAVE=0, THREADS=384)
    if mode == 3:
        knobs["SPLIT_CLUSTER"] = MAX_SPLIT_CLUSTER
    spec = KernelSpec("gemm_tc/08_split_k.cu", "gemm_tc_split_k", tuple(sorted(knobs.items())),
                      min_arch=HOPPER_ARCH, arch_suffix="a")
    return Rung("gemm_split_k", key, spec, title, "split_k")


def split_mode(rung: Rung) -> int | None:
    """How a split-K rung sums its splits (its build's SPLIT_MODE knob, MODE_NAMES: 0 a workspace and a reduction
    kernel, 1 in-kernel after a grid barrier, 2 fp32 atomics); None for a rung that does not launch "split_k"."""
    return dict(rung.spec.knobs)["SPLIT_MODE"] if rung.launch == "split_k" else None


def _address(x) -> int:
    """A CuPy array's device address (a NumPy stand-in's host address, for the CPU tests)."""
    return x.data.ptr if hasattr(x.data, "ptr") else x.ctypes.data


def narrow_tiles(M: int, N: int) -> bool:
    """128 x 128 tiles instead of 128 x 256 where N <= 128 (half a wide tile would be wasted), or where the output
    has at most FEW_TILES wide tiles: there the split units are DRAM-bound, and the narrow tile's shorter B reads
    (a study run before this became the default: 256 x 256 x 65536 ran faster with 4 narrow tiles x 33 splits than
    with 2 wide tiles x 66) pay more than its lower math rate costs."""
    return N <= NARROW_N or -(-M // 128) * -(-N // 256) <= FEW_TILES


def choose_splits(M: int, N: int, K: int, bm: int, bn: int, sms: int) -> int:
    """S for a shape: about one wave of (tile, split) units, each split at least MIN_K_TILES_PER_SPLIT k-tiles
    long; 1 when the tiles alone fill the GPU."""
    tiles = -(-M // bm) * -(-N // bn)
    k_tiles = -(-K // 64)
    return max(1, min(sms // tiles, k_tiles // MIN_K_TILES_PER_SPLIT))


def split_cluster_width(splits: int) -> int:
    """Mode 3's blocks a cluster for a wanted split factor: the largest power of two up to MAX_SPLIT_CLUSTER that
    is at most `splits` (the launcher then runs a multiple of it)."""
    width = 1
    while width * 2 <= min(splits, MAX_SPLIT_CLUSTER):
        width *= 2
    return width


def reduce_lanes(splits: int) -> int:
    """Threads that share one quad of C in the reduction (lab_split_k.cuh's lab_split_lanes, restated to size the
    reduction kernel's grid)."""
    return 8 if splits >= 32 else 4 if splits >= 8 else 1


def workspace_floats(mode: int, M: int, N: int, splits: int, cluster: int = 1) -> int:
    """fp32 elements of workspace a launch needs: S slices of M x LDW (modes 0, 1), one accumulator (mode 2), or
    one slice per cluster of a tile, S / `cluster` (mode 3)."""
    ldw = -(-N // 4) * 4
    slices = {0: splits, 1: splits, 2: 1, 3: splits // cluster}[mode]
    return slices * M * ldw


@dataclasses.dataclass
class SplitPlan:
    """One launch's decisions (GemmSplitKFamily._plan): the build, the split, the grid, the kernels, the tensor
    maps (None: repacked per launch) and the scalar arguments, ready to pass."""

    built: Rung
    mode: int
    splits: int
    tiles: int
    grid: int
    threads: int
    smem: int
    kernel: object
    reduce: object
    reduce_blocks: int
    maps: tuple | None
    m: np.int32
    n: np.int32
    k: np.int32
    alpha: np.float32
    beta: np.float32
    ldc: np.int32
    splits_arg: np.int32
    cluster: int = 1  # mode 3's blocks a cluster


class GemmSplitKFamily(GemmTcFamily):
    name = "gemm_split_k"
    title = "Split-K GEMM for K-heavy shapes with few output tiles (fp16/bf16, fp32 accumulation)"
    PLAIN = GemmTcFamily.rungs[5]
    launches = ("persistent", "split_k")
    candidate_rungs = ()  # gemm_tc's are not split-K rungs
    rungs = (
        # Launch "persistent" (GemmTcFamily's launcher, with this family's tile choice: variant): a 1-D grid of
        # min(tiles, SMs) blocks.
        Rung("gemm_split_k", "06_persistent", PLAIN.spec, "rung 06: one block per tile, data-parallel", "persistent"),
        # Launch "split_k" (_plan): a 1-D grid of min(tiles x S, SMs) blocks over the (tile, split) units, with S, a
        # workspace and its counters as arguments (split_k_workspace); the build's SPLIT_MODE says how the splits are
        # summed: mode 0 launches the reduction kernel (REDUCE_ENTRY) after it, mode 1 is a cooperative launch (its
        # grid barrier), mode 2 adds into a zeroed accumulator with fp32 atomics.
        _split_rung("08_split_k", 0, "split-K: fp32 slices, then a reduction kernel (deterministic)"),
        _split_rung("08_split_k_in_kernel", 1, "split-K: slices reduced in-kernel after a grid barrier "
                                               "(deterministic)"),
        _split_rung("08_split_k_atomic", 2, "split-K: fp32 atomics in L2, the last split stores C "
                                            "(not deterministic)"),
        # Mode 3: one unit a block (a grid of tiles x S blocks, S a multiple of the cluster size the launcher
        # compiles in), no second kernel.
        _split_rung("08_split_k_cluster", 3, "split-K: a tile's splits in clusters, summed through DSMEM "
                                             "(deterministic)"),
    )
    sweep_figure = "throughput"
    profile_figure = None

    def __init__(self, accumulation_scale: float = 1.0):
        super().__init__(accumulation_scale)
        self._plans: dict = {}  # _plan's, by rung, params and operand addresses

    def companion_entries(self, rung: Rung) -> tuple[str, ...]:
        return (REDUCE_ENTRY,) if split_mode(rung) == 0 else ()

    def make_problem(self, seed: int = 0, dist: str = "normal", M: int = 64, N: int = 64, K: int = 64,
                     alpha: float = 1.0, beta: float = 0.0, pad: int = 0, layout: str = "TN", dtype: str = "float16",
                     sets: int = 1, splits: int = 0, cluster: int = 0) -> Problem:
        """`splits` fixes S (0: the launcher's choice); `cluster` fixes the cluster mode's blocks a cluster (0: the
        launcher's _cluster_plan; 1, 2, 4 or 8: that size, S rounded down to a multiple of it), for the studies that
        time one plan against another."""
        if splits < 0:
            raise LabError(f"splits is the number of K splits (0 lets the launcher choose); got {splits}.")
        if cluster not in (0, 1, 2, 4, 8):
            raise LabError(f"cluster is the cluster mode's blocks a cluster: 1, 2, 4 or 8 (0 lets the launcher "
                           f"choose); got {cluster}.")
        if M * (-(-N // 4) * 4) >= 1 << 31:
            raise LabError(f"gemm_split_k's workspace slices hold fewer than 2^31 floats (M x N rounded up to 4 "
                           f"columns); {M} x {N} is too large: split M into row blocks, or use gemm_tc.")
        problem = super().make_problem(seed, dist, M=M, N=N, K=K, alpha=alpha, beta=beta, pad=pad, layout=layout,
                                       dtype=dtype, sets=sets)
        problem.params["splits"] = splits
        if splits:
            problem.label += f" S={splits}"
        if cluster:
            problem.params["cluster"] = cluster
            problem.label += f" cluster={cluster}"
        return problem

    # --- launching ------------------------------------------------------------------------------
    def variant(self, rung: Rung, problem: Problem, out=None) -> Rung:
        rung = self._tiled(rung, problem, out)
        if split_mode(rung) == 3:
            width, _ = self._cluster_plan(rung, problem)
            rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(SPLIT_CLUSTER=width))
        return rung

    def _tiled(self, rung: Rung, problem: Problem, out=None) -> Rung:
        """gemm_tc's variant, with 128 x 128 tiles where narrow_tiles says so."""
        rung = super().variant(rung, problem, out)
        if narrow_tiles(problem.params["M"], problem.params["N"]):
            rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(BN=128))
        return rung

    def splits_for(self, rung: Rung, problem: Problem) -> int:
        """The split factor a launch of `rung` uses: the problem's, else choose_splits', clamped to [1, k-tiles]
        and to MAX_WORKSPACE_BYTES of slices; mode 3's from _cluster_plan (a multiple of its cluster size)."""
        tiled = self._tiled(rung, problem)
        return self._cluster_plan(tiled, problem)[1] if split_mode(rung) == 3 else self._wanted_splits(tiled, problem)

    def _cluster_plan(self, tiled: Rung, problem: Problem) -> tuple[int, int]:
        """Mode 3's (cluster size, S) for the S the other modes would run (_wanted_splits). A cluster's blocks share
        a GPC, so fewer clusters fit at once than SMs / size (cluster_fit: the driver's count; on an H100, 15 of 8),
        and a cluster that does not fit runs in a second wave, after the first. Each size (8, 4, 2, 1, up to S) gets
        as many clusters a tile as fit for every tile in one wave (at most PLAN_GROUPS); the widest wins that keeps
        PLAN_BUSY_SHARE of the blocks the busiest size keeps.
        Measured plan by plan (results/h100/split_k_plans.json, an H100 at 730294a): wider clusters won even with
        fewer SMs busy, because a tile's last cluster has fewer slices to sum; at 256 x 256 x 65536, 8 x 3 (96 blocks)
        ran 1.01x the workspace mode and 4 x 7 (112) 0.98x, where the earlier rule's 2 x 16 (most SMs busy) ran 0.87x.
        With no count (no GPU, or the driver cannot say): the widest, S rounded down to a multiple of it. A problem
        made with `cluster` gets that size, S rounded down to a multiple of it (at least one cluster)."""
        wanted = self._wanted_splits(tiled, problem)
        if pinned := problem.params.get("cluster"):
            if wanted < pinned:
                raise LabError(f"clusters of {pinned} need at least {pinned} splits of K, and this problem has "
                               f"{wanted}: ask for a smaller cluster or a longer K.")
            return pinned, pinned * (wanted // pinned)
        k, p = dict(tiled.spec.knobs), problem.params
        tiles = -(-p["M"] // k["BM"]) * -(-p["N"] // k["BN"])
        widest = split_cluster_width(wanted)
        groups = {}  # width -> clusters a tile, all in the first wave
        for width in (w for w in (8, 4, 2, 1) if w <= widest):
            fit = cluster_fit(dataclasses.replace(tiled, spec=tiled.spec.with_knobs(SPLIT_CLUSTER=width)))
            if fit is None:
                return widest, widest * (wanted // widest)
            if n := min(wanted // width, fit // tiles, PLAN_GROUPS):
                groups[width] = n
        if not groups:  # not even one cluster a tile fits at once: the widest, in waves
            return widest, widest * (wanted // widest)
        busy = {w: w * n * tiles for w, n in groups.items()}
        width = next(w for w in groups if busy[w] >= PLAN_BUSY_SHARE * max(busy.values()))  # widest first
        return width, width * groups[width]

    def _wanted_splits(self, tiled: Rung, problem: Problem) -> int:
        """The problem's S, else choose_splits', clamped (splits_for) for the tile knobs of `tiled`."""
        from lab.core import device

        p = problem.params
        k = dict(tiled.spec.knobs)
        k_tiles = -(-p["K"] // k["BK"])
        s = p.get("splits") or choose_splits(p["M"], p["N"], p["K"], k["BM"], k["BN"], device.current().sm_count)
        s = max(1, min(s, k_tiles))
        if split_mode(tiled) in (0, 1, 3):
            s = min(s, max(1, MAX_WORKSPACE_BYTES // (4 * workspace_floats(0, p["M"], p["N"], 1))))
        return s

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        if self.launch_scheme(rung) == "persistent":  # GemmTcFamily's launcher, with this family's tile choice
            return super().launch(rung, problem, out, set_index)
        p = problem.params
        a = problem.inputs["A"][set_index % len(problem.inputs["A"])]
        b = problem.inputs["B"][set_index % len(problem.inputs["B"])]
        plan = self._plan(rung, problem, a, b)
        maps = plan.maps
        if maps is None:  # an operand TMA cannot read as it is: repacked on every launch (its values may change)
            maps, a, b = self._tensor_maps(plan.built, p, a, b)
        workspace, sync = split_k_workspace(plan.mode, p["M"], p["N"], plan.splits, plan.tiles, plan.cluster)
        plan.kernel((plan.grid,), (plan.threads,),
                    (*maps, plan.m, plan.n, plan.k, plan.alpha, plan.beta, out, plan.ldc, plan.splits_arg, workspace,
                     sync), shared_mem=plan.smem)
        if plan.reduce is not None:
            plan.reduce((plan.reduce_blocks,), (REDUCE_THREADS,),
                        (plan.m, plan.n, plan.alpha, plan.beta, out, plan.ldc, workspace, plan.splits_arg))

    def _plan(self, rung: Rung, problem: Problem, a, b) -> SplitPlan:
        """Everything a launch decides from the rung, the problem's params and the operands' addresses, decided
        once: a timed launch's host work must stay inside the spin kernel in front of it (measured at ~130 us per
        launch when it was all redone each time, more than the spin and the flush cover)."""
        from lab.core import device, tma
        from lab.core.build import get_kernel

        p = problem.params
        key = (rung.spec, tuple(sorted(p.items())), _address(a), _address(b))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        mode = split_mode(rung)
        built = self.variant(rung, problem)
        k = dict(built.spec.knobs)
        splits = self.splits_for(rung, problem)
        tiles = -(-p["M"] // k["BM"]) * -(-p["N"] // k["BN"])
        sms = device.current().sm_count
        kernel = get_kernel(built.spec, cooperative=mode == 1)
        smem = dynamic_smem_bytes(built)
        kernel.max_dynamic_shared_size_bytes = smem
        direct = all(tma.refusal(_address(x), ld) is None for x, ld in ((a, p["lda"]), (b, p["ldb"])))
        maps = self._tensor_maps(built, p, a, b)[0] if direct else None
        reduce, blocks = None, 0
        if mode == 0:
            reduce = get_kernel(dataclasses.replace(built.spec, entry=REDUCE_ENTRY))
            items = p["M"] * (-(-p["N"] // 4)) * reduce_lanes(splits)
            blocks = max(1, min(-(-items // REDUCE_THREADS), 8 * sms))
        grid = tiles * splits if mode == 3 else min(tiles * splits, sms)  # mode 3: one unit a block
        plan = SplitPlan(built, mode, splits, tiles, grid, k["THREADS"], smem, kernel, reduce, blocks, maps,
                         np.int32(p["M"]), np.int32(p["N"]), np.int32(p["K"]), np.float32(p["alpha"]),
                         np.float32(p["beta"]), np.int32(p["ldc"]), np.int32(splits), k.get("SPLIT_CLUSTER", 1))
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        notes = super().launch_notes(rung, problem, out)
        built = self.variant(rung, problem, out)
        k = dict(built.spec.knobs)
        notes["tile"] = f"{k['BM']}x{k['BN']}"
        if self.launch_scheme(rung) == "split_k":
            notes["splits"] = self.splits_for(rung, problem)
            notes["reduction"] = MODE_NAMES[split_mode(rung)]
            if split_mode(rung) == 3:  # the cluster size chosen, and how many such clusters the GPU runs at once
                notes["cluster"] = k["SPLIT_CLUSTER"]
                if (fit := cluster_fit(built)) is not None:  # None with no GPU to ask
                    notes["clusters_at_once"] = fit
        return notes

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple[Rung, ...]:
        return self.rungs

    def reproducible(self, rung: Rung) -> bool:
        """The atomic reduction adds the splits in the order they arrive: its low bits change from run to run."""
        return split_mode(rung) != 2

    # --- shape families -------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """gemm_tc's shapes (automatic S), then K-heavy ones with split factors that do not divide the k-tiles,
        more splits than k-tiles (clamped), S = 1, and tails in M, N and K."""
        cases = super().check_cases()
        forced = [{"M": 256, "N": 256, "K": 1000, "splits": s} for s in (1, 3, 5, 7, 16, 40)]
        forced += [{"M": 129, "N": 67, "K": 4099, "splits": 13}, {"M": 1, "N": 1, "K": 8191, "splits": 9},
                   {"M": 130, "N": 257, "K": 3000, "splits": 6, "alpha": 0.5, "beta": -1.5},
                   {"M": 64, "N": 128, "K": 640, "splits": 10}, {"M": 300, "N": 129, "K": 16384, "splits": 0},
                   {"M": 33, "N": 17, "K": 70000, "splits": 0}, {"M": 128, "N": 128, "K": 131072, "splits": 0}]
        return cases + [case | {"layout": layout, "dtype": dtype} for case in forced
                        for layout in ("TN", "NN") for dtype in ("float16", "bfloat16")]

    def headline_params(self) -> list[dict]:
        shapes = ({"M": 256, "N": 256, "K": 65536}, {"M": 128, "N": 128, "K": 131072},
                  {"M": 512, "N": 512, "K": 32768}, {"M": 1024, "N": 1024, "K": 16384})
        return [s | {"layout": "TN", "dtype": dtype} for dtype in ("float16", "bfloat16") for s in shapes]

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        return []  # the split-factor sweep is lab.studies.split_k.split_factor_study (TFLOP/s against S)

    def tail_params(self) -> list[dict]:
        return []

    def in_readme(self, params: dict) -> bool:
        return params.get("dtype") == "float16"


# Each split rung's reduction by key (its SPLIT_MODE), for the studies, scripts and tests.
SPLIT_MODES = {r.key: split_mode(r) for r in GemmSplitKFamily.rungs if r.launch == "split_k"}

_WORKSPACES: dict = {}  # (device, stream, mode) -> (workspace, sync), grown as needed


def split_k_workspace(mode: int, M: int, N: int, splits: int, tiles: int, cluster: int = 1) -> tuple:
    """(workspace, sync) for a split-K launch on the current device and stream: fp32 slices (modes 0, 1, and 3's
    one a cluster of a tile) or the zeroed accumulator (mode 2), and the ints the kernel synchronizes on (mode 1:
    the grid barrier's count and generation; mode 2: one arrival counter per tile; mode 3: one per band of a tile,
    `cluster` a tile). Kept per device, stream and mode (two launches at once on one workspace would mix their
    partial sums); grown, never shrunk; the kernels leave mode 2's accumulator and every counter at zero when they
    finish."""
    import cupy as cp

    key = (cp.cuda.Device().id, cp.cuda.get_current_stream().ptr, mode)
    need = workspace_floats(mode, M, N, splits, cluster)
    ints = 2 if mode == 1 else max(tiles * (cluster if mode == 3 else 1), 1)
    workspace, sync = _WORKSPACES.get(key, (None, None))
    if workspace is None or workspace.size < need or sync.size < ints:
        size = max(need, workspace.size if workspace is not None else 0)
        workspace = cp.zeros(size, dtype=cp.float32) if mode == 2 else cp.empty(size, dtype=cp.float32)
        sync = cp.zeros(max(ints, sync.size if sync is not None else 0), dtype=cp.int32)
        _WORKSPACES[key] = (workspace, sync)
    return workspace, sync


def cluster_fit(built: Rung) -> int | None:
    """gemm_tc.cluster_fit for a mode-3 build (its SPLIT_CLUSTER compiled in): clusters that fit on the GPU at once;
    None with no GPU (nothing to ask) or where the driver cannot say."""
    from lab.core import device

    return gemm_tc.cluster_fit(built) if device.gpu_available() else None


def run_to_run_bits(family: GemmSplitKFamily, rung: Rung, problem: Problem, runs: int = 20) -> dict:
    """Launch `rung` `runs` times on the same inputs and compare each output with the first, bit for bit: how
    many elements differ, and the largest difference of their 16-bit patterns (ULPs of the stored type, for values
    of one sign)."""
    import cupy as cp

    out = cp.empty(problem.out_shape, problem.dtype)
    first = None
    differing, max_ulps = [], 0
    for _ in range(runs):
        if problem.out_init is not None:
            out[...] = problem.out_init
        family.launch(rung, problem, out)
        bits = out.view(cp.int16).astype(cp.int32)[:, :problem.params["N"]]
        if first is None:
            first = bits.copy()
            continue
        diff = cp.abs(bits - first)
        differing.append(int(cp.count_nonzero(diff)))
        max_ulps = max(max_ulps, int(diff.max()))
    return {"rung": rung.key, "runs": runs, "elements": int(first.size), "differing_per_run": differing,
            "runs_with_differences": sum(1 for d in differing if d), "max_ulps": max_ulps,
            "splits": family.splits_for(rung, problem) if rung.launch == "split_k" else 1}
