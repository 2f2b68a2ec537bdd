"""Many small work items (lesson 2a, persistent kernels): what a launch per item costs, and what removes it.

N items (RMSNorm of one fp32 row each, kernels/persistent/small_items.cu) are run four ways, in the same run:
- "launch":    one CuPy launch of `item_one` per item, from a Python loop;
- "graph":     the same N launches captured once in a CUDA graph (stream capture) and replayed;
- "per_block": one launch of `items_per_block`, one block per item;
- "queue":     one launch of `items_queue`, a persistent grid whose blocks take items from a device counter.
Each is timed as a whole batch (an event pair around the N launches, the graph replay, or the one launch) and
reported as microseconds per item, against the item's size. "alone_us" is one item on its own: the time per
launch of many launches of that one item in a graph (lab.measure.timing.measure_graph), i.e. the item's own latency on
one SM plus a graph node's launch cost. L2 is warm throughout (nothing is flushed between repeats).

Every path is checked against a float64 reference on the same inputs before it is timed (outputs poisoned with
NaN, guard zones around them, every element against its own error bound), and the queue again after timing, so
thousands of launches with no host reset in between are seen to leave it correct.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.measure.records import read_json

SOURCE = "persistent/small_items.cu"
BLOCK_THREADS = 256  # the kernel's BLOCK_THREADS knob (its header states the same default)
ENTRIES = ("item_one", "items_per_block", "items_queue")
EPS = 1e-6  # passed to the kernel as float32; the reference uses the same float32 value
ALIGN = 4  # item rows start on multiples of this many elements (16 bytes: the kernel's float4 path)
PATHS = ("launch", "graph", "per_block", "queue")
PATH_LABELS = {
    "launch": "one CuPy launch per item",
    "graph": "CUDA graph of per-item launches",
    "per_block": "one launch, one block per item",
    "queue": "persistent kernel + device queue",
    "alone": "one item alone (graph of launches of it)",
}
SIZES = (256, 1024, 4096, 16384, 65536, 262144)  # item lengths (fp32 elements) the script sweeps
N_ITEMS = 10_000
ITEM_BUDGET_ELEMENTS = 5 << 25  # elements per table at most (640 MiB of x): 10000 items up to 16384 elements
BYTES_PER_ELEMENT = 12  # an item reads x and w and writes y, fp32 each
MAX_LENGTH = 2**30  # lengths are int in the kernel, whose loops step an int index past the length
BOUND_SAFETY = 8.0
PAYLOAD_KIND = "small_items"
PAYLOAD_SCHEMA = 1
_U32 = 2.0**-24  # fp32 unit roundoff


def spec(entry: str) -> KernelSpec:
    if entry not in ENTRIES:
        raise LabError(f"{SOURCE} has no entry {entry!r}; use one of {', '.join(ENTRIES)}.")
    return KernelSpec(SOURCE, entry, knobs=(("BLOCK_THREADS", BLOCK_THREADS),))


# ----------------------------------------------------------------------------------------------
# The item table (no GPU needed)
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ItemTable:
    """Where each item's row lies in the one big buffer: offsets[i] (elements) and lengths[i]."""

    offsets: np.ndarray  # int64
    lengths: np.ndarray  # int32
    total: int  # the buffer's length in elements (rows, and the padding that aligns each row's start)
    mix: str = "uniform"  # "uniform" | "skewed" | "custom"
    align: int = ALIGN

    @property
    def n_items(self) -> int:
        return int(self.lengths.size)

    @property
    def max_length(self) -> int:
        return int(self.lengths.max())

    @property
    def mean_length(self) -> float:
        return float(self.lengths.mean())

    @property
    def bytes_per_item(self) -> float:
        """Mean bytes an item moves: x and w read, y written (fp32)."""
        return BYTES_PER_ELEMENT * self.mean_length

    def describe(self) -> str:
        if self.mix == "uniform":
            return f"{self.n_items} items of {self.max_length} elements"
        return (f"{self.n_items} items, {self.mix} lengths {int(self.lengths.min())}..{self.max_length} "
                f"(mean {self.mean_length:.0f})")

    def element_mask(self) -> np.ndarray:
        """True for the buffer elements that belong to an item (False for the alignment padding)."""
        mask = np.zeros(self.total, dtype=bool)
        for off, n in zip(self.offsets.tolist(), self.lengths.tolist(), strict=True):
            mask[off:off + n] = True
        return mask


def _count(n_items, what: str = "n_items") -> int:
    if isinstance(n_items, bool) or not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise LabError(f"{what} must be a whole number of at least 1 (got {n_items!r}): there is nothing to run.")
    return int(n_items)


def _length(length, what: str = "item length") -> int:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or not 1 <= length <= MAX_LENGTH:
        raise LabError(f"The {what} must be a whole number of elements from 1 to {MAX_LENGTH} (got {length!r}).")
    return int(length)


def uniform_lengths(n_items: int, length: int) -> np.ndarray:
    """N items of the same length."""
    return np.full(_count(n_items), _length(length), dtype=np.int32)


def skewed_lengths(n_items: int, mean_length: int, seed: int = 0) -> np.ndarray:
    """N lengths drawn from a log-normal (sigma 1) scaled to about `mean_length`: most items short, a few up to
    ~20x the mean, as the rows of a decode batch with sequences of very different lengths."""
    n, mean = _count(n_items), _length(mean_length, "mean item length")
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(mean=0.0, sigma=1.0, size=n) / math.exp(0.5)  # E[lognormal(0, 1)] = e^0.5
    return np.clip(np.rint(raw * mean), 1, min(MAX_LENGTH, 64 * mean)).astype(np.int32)


def item_table(lengths: Sequence[int] | np.ndarray, align: int = ALIGN, mix: str = "custom") -> ItemTable:
    """Rows laid end to end in one buffer, each starting on a multiple of `align` elements."""
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size == 0:
        raise LabError("An item table needs at least one item: give a non-empty 1-D list of lengths.")
    if not np.issubdtype(lengths.dtype, np.integer):
        raise LabError(f"Item lengths must be whole numbers of elements, not {lengths.dtype}.")
    bad = np.flatnonzero((lengths < 1) | (lengths > MAX_LENGTH))
    if bad.size:
        i = int(bad[0])
        raise LabError(f"Item {i} has length {int(lengths[i])}; every item needs 1 to {MAX_LENGTH} elements.")
    align = _count(align, "align")
    padded = -(-lengths.astype(np.int64) // align) * align
    offsets = np.concatenate(([0], np.cumsum(padded)[:-1])).astype(np.int64)
    return ItemTable(offsets, lengths.astype(np.int32), int(padded.sum()), mix, align)


def uniform_table(n_items: int, length: int, align: int = ALIGN) -> ItemTable:
    return item_table(uniform_lengths(n_items, length), align, "uniform")


def skewed_table(n_items: int, mean_length: int, seed: int = 0, align: int = ALIGN) -> ItemTable:
    return item_table(skewed_lengths(n_items, mean_length, seed), align, "skewed")


def n_items_for(length: int, n_items: int = N_ITEMS) -> int:
    """`n_items`, or fewer for long items, so a table holds at most ITEM_BUDGET_ELEMENTS elements (and the
    slowest path, one launch per item on one SM each, stays well under a second per batch)."""
    return max(1, min(_count(n_items), ITEM_BUDGET_ELEMENTS // _length(length)))


def queue_grid(sm_count: int, blocks_per_sm: int, n_items: int) -> int:
    """The persistent grid: blocks_per_sm on every SM, but no more blocks than items."""
    sms = _count(sm_count, "sm_count")
    per_sm = _count(blocks_per_sm, "blocks_per_sm")
    return min(sms * per_sm, _count(n_items))


# ----------------------------------------------------------------------------------------------
# On the GPU: buffers, launches, the float64 reference, the checks
# ----------------------------------------------------------------------------------------------

@dataclass
class Problem:
    table: ItemTable
    x: object  # cupy float32 (total,)
    w: object  # cupy float32 (max_length,)
    out: object  # lab.measure.check.GuardedBuffer of (total,): y with guard zones around it
    offsets: object  # cupy int64
    lengths: object  # cupy int32
    queue: object  # cupy uint64 (2,): next ticket, blocks finished; zeroed once, here
    blocks_per_sm: int
    queue_blocks: int
    _reference: object = field(default=None, repr=False)

    @property
    def y(self):
        return self.out.out


def default_blocks_per_sm() -> int:
    """As many blocks of items_queue as fit on one SM of this GPU (theoretical occupancy)."""
    from lab.core import device, occupancy
    from lab.core.build import get_kernel

    kernel = get_kernel(spec("items_queue"))
    arch = device.current().arch
    arch = arch if arch in occupancy.LIMITS else max(a for a in occupancy.LIMITS if a <= arch)
    return occupancy.occupancy(arch, BLOCK_THREADS, int(kernel.num_regs), int(kernel.shared_size_bytes)).blocks_per_sm


def make_problem(table: ItemTable, seed: int = 0, blocks_per_sm: int | None = None) -> Problem:
    """Fresh random inputs (never zeros) for `table`, a guarded output and a zeroed queue counter (needs a GPU)."""
    import cupy as cp

    from lab.core import device
    from lab.measure import check

    gpu = device.current()
    _kernels()  # every module loaded now: never for the first time inside a graph capture
    per_sm = default_blocks_per_sm() if blocks_per_sm is None else _count(blocks_per_sm, "blocks_per_sm")
    x = check.random_array((table.total,), np.float32, seed=seed)
    w = check.random_array((table.max_length,), np.float32, seed=seed + 1, dist="uniform")
    problem = Problem(table, x, w, check.GuardedBuffer((table.total,), np.float32),
                      cp.asarray(table.offsets), cp.asarray(table.lengths), cp.zeros(2, dtype=cp.uint64),
                      per_sm, queue_grid(gpu.sm_count, per_sm, table.n_items))
    # The inputs were written on this thread's current stream; the paths run on other (non-blocking) streams
    # too, which do not wait for it: finish the writes first.
    cp.cuda.Device().synchronize()
    return problem


def _kernels() -> dict:
    from lab.core.build import get_kernel

    return {entry: get_kernel(spec(entry)) for entry in ENTRIES}


def launch_one(p: Problem, item: int) -> None:
    _kernels()["item_one"]((1,), (BLOCK_THREADS,),
                           (p.x, p.w, p.y, p.offsets, p.lengths, np.int32(item), np.float32(EPS)))


def launch_each(p: Problem) -> None:
    """N launches of item_one, one per item, from a Python loop (on the current stream)."""
    kernel = _kernels()["item_one"]
    head, eps = (p.x, p.w, p.y, p.offsets, p.lengths), np.float32(EPS)
    for item in range(p.table.n_items):
        kernel((1,), (BLOCK_THREADS,), (*head, np.int32(item), eps))


def launch_per_block(p: Problem) -> None:
    _kernels()["items_per_block"]((p.table.n_items,), (BLOCK_THREADS,),
                                  (p.x, p.w, p.y, p.offsets, p.lengths, np.int64(p.table.n_items), np.float32(EPS)))


def launch_queue(p: Problem, visits=None) -> None:
    """One persistent launch; `visits` (cupy uint32 of n_items), when given, counts how often each item is taken."""
    visits_arg = np.uint64(0) if visits is None else visits  # a null pointer
    _kernels()["items_queue"]((p.queue_blocks,), (BLOCK_THREADS,),
                              (p.x, p.w, p.y, p.offsets, p.lengths, np.int64(p.table.n_items), np.float32(EPS),
                               p.queue, visits_arg))


def capture_graph(p: Problem, stream):
    """The N per-item launches captured once in a CUDA graph on `stream` (not the legacy default stream)."""
    _kernels()  # modules load before the capture: loading one is not a capturable operation
    with stream:
        stream.begin_capture()
        try:
            launch_each(p)
        finally:
            graph = stream.end_capture()
        graph.upload(stream)
    return graph


def run_path(p: Problem, path: str, graph=None) -> None:
    """One batch of all N items by `path` (the graph path replays `graph`, from capture_graph)."""
    import cupy as cp

    if path == "launch":
        launch_each(p)
    elif path == "graph":
        if graph is None:
            raise LabError("The graph path needs the graph captured by capture_graph(problem, stream).")
        graph.launch(cp.cuda.get_current_stream())
    elif path == "per_block":
        launch_per_block(p)
    elif path == "queue":
        launch_queue(p)
    else:
        raise LabError(f"Unknown path {path!r}; use one of {', '.join(PATHS)}.")


@dataclass
class Reference:
    value: object  # cupy float64 (total,): the float64 result, 0 in the padding
    bound: object  # cupy float64 (total,): each element's allowed absolute error
    valid: object  # cupy bool (total,): the elements that belong to an item
    item_of: object  # cupy int64 (total,): the item an element belongs to (its predecessor's, in padding)


def error_bound(reference, lengths):
    """Each element's allowed |error|: SAFETY x u32 x (sqrt(n) + 4) relative to the reference. The sum of n
    positive squares in fp32 is off by about u32 * sqrt(n) (the probabilistic bound of lab.measure.bounds; the block's
    tree keeps every thread's sequential part short), the scale takes half of that; rsqrtf (2 ulp), the
    division by n, + eps and the two products add a few u32 more."""
    xp = np if isinstance(reference, np.ndarray) else _cupy()
    return BOUND_SAFETY * _U32 * (xp.sqrt(lengths.astype(xp.float64)) + 4.0) * xp.abs(reference)


def _cupy():
    import cupy

    return cupy


def reference(p: Problem) -> Reference:
    """The float64 RMSNorm of every item (computed once per problem, on the GPU)."""
    if p._reference is not None:
        return p._reference
    import cupy as cp
    import cupyx

    t = p.table
    pos = cp.arange(t.total, dtype=cp.int64)
    item_of = cp.searchsorted(p.offsets, pos, side="right") - 1
    col = pos - p.offsets[item_of]
    lengths = p.lengths[item_of]
    valid = col < lengths
    x64 = p.x.astype(cp.float64)
    sums = cp.zeros(t.n_items, dtype=cp.float64)
    cupyx.scatter_add(sums, item_of[valid], (x64 * x64)[valid])
    eps = float(np.float32(EPS))
    scale = 1.0 / cp.sqrt(sums / p.lengths.astype(cp.float64) + eps)
    w64 = p.w.astype(cp.float64)[cp.minimum(col, t.max_length - 1)]
    value = cp.where(valid, x64 * scale[item_of] * w64, 0.0)
    p._reference = Reference(value, error_bound(value, lengths), valid, item_of)
    return p._reference


def check_path(p: Problem, path: str, graph=None, variant: int = 0) -> list[str]:
    """Poison y, run all N items by `path`, and say what is wrong: out-of-bounds writes (guard zones, the
    padding between rows), unwritten elements, elements outside their error bound, a queue counter left
    non-zero. An empty list: correct."""
    import cupy as cp

    ref = reference(p)
    p.out.poison(variant)
    before = p.out.output_bits()
    run_path(p, path, graph)
    cp.cuda.get_current_stream().synchronize()
    found = p.out.problems(must_write=ref.valid, before=before)
    got = p.y.astype(cp.float64)
    bad = ref.valid & ~(cp.abs(got - ref.value) <= ref.bound)  # NaN compares False: counted as bad
    n_bad = int(cp.count_nonzero(bad))
    if n_bad:
        e = int(cp.argmax(bad))
        item = int(ref.item_of[e])
        col = e - int(p.table.offsets[item])
        found.append(f"{n_bad} element(s) outside their error bound, first item {item} element {col} (of "
                     f"{int(p.table.lengths[item])}): got {float(got[e]):.9g}, reference {float(ref.value[e]):.9g}, "
                     f"bound {float(ref.bound[e]):.3g}")
    if path == "queue":
        left = [int(v) for v in p.queue.get()]
        if left != [0, 0]:
            found.append(f"the queue counter was left at {left} instead of [0, 0]: the next launch would skip items")
    return [f"{path}: {msg}" for msg in found]


def visit_counts(p: Problem) -> np.ndarray:
    """How often one launch of items_queue took each item (every entry must be 1)."""
    import cupy as cp

    visits = cp.zeros(p.table.n_items, dtype=cp.uint32)
    launch_queue(p, visits)
    return visits.get()


# ----------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------

def _median_item(table: ItemTable) -> int:
    """The index of an item of median length: the one timed alone."""
    return int(np.argsort(table.lengths, kind="stable")[table.n_items // 2])


def measure_table(table: ItemTable, seed: int = 0, blocks_per_sm: int | None = None,
                  min_graph_ms: float = 2.0) -> dict:
    """Check every path on `table`, then time it: one row (see measure)."""
    import cupy as cp

    from lab.measure import timing

    p = make_problem(table, seed, blocks_per_sm)
    n = table.n_items
    stream = cp.cuda.Stream(non_blocking=True)  # the legacy default stream cannot be captured
    graph = capture_graph(p, stream)
    with stream:
        for i, path in enumerate(PATHS):
            found = check_path(p, path, graph, variant=i)
            if found:
                raise LabError(f"{table.describe()}: {found[0]}; fix the kernel before timing it.")
        # A batch of N launches from Python: one event pair around the whole batch.
        launch = timing.measure(lambda i: launch_each(p), warmup=1, min_reps=5, max_reps=5, min_time_ms=0.0)
        graphed = timing.measure(lambda i: graph.launch(stream), warmup=1, min_reps=5, max_reps=50,
                                 min_time_ms=50.0)
    # One launch for all N: many such launches in a graph, so the event pair's fixed cost is amortized.
    per_block = timing.measure_graph(lambda i: launch_per_block(p), min_graph_ms=min_graph_ms)
    queue = timing.measure_graph(lambda i: launch_queue(p), min_graph_ms=min_graph_ms)
    alone_item = _median_item(table)
    alone = timing.measure_graph(lambda i: launch_one(p, alone_item), min_graph_ms=min_graph_ms)
    with stream:  # thousands of queue launches later, with no host reset: still every item, exactly once
        found = check_path(p, "queue", variant=1)
    if found:
        raise LabError(f"{table.describe()}: after timing, {found[0]}.")

    us = 1e3 / n  # ms per batch -> us per item
    spread = {"launch": [launch.p10_ms * us, launch.p90_ms * us],
              "graph": [graphed.p10_ms * us, graphed.p90_ms * us],
              "per_block": [per_block.p10_ms * us, per_block.p90_ms * us],
              "queue": [queue.p10_ms * us, queue.p90_ms * us],
              "alone": [alone.p10_ms * 1e3, alone.p90_ms * 1e3]}
    return {
        "mix": table.mix,
        "length": int(round(table.mean_length)) if table.mix != "uniform" else table.max_length,
        "mean_length": table.mean_length,
        "max_length": table.max_length,
        "bytes_per_item": table.bytes_per_item,
        "n_items": n,
        "launch_us": launch.median_ms * us,
        "graph_us": graphed.median_ms * us,
        "per_block_us": per_block.per_launch_ms * us,
        "queue_us": queue.per_launch_ms * us,
        "alone_us": alone.per_launch_ms * 1e3,
        "alone_length": int(table.lengths[alone_item]),
        "spread_us": spread,  # p10, p90 per item, per path
        "blocks_per_sm": p.blocks_per_sm,
        "queue_blocks": p.queue_blocks,
        "graph_launches": {"per_block": per_block.launches, "queue": queue.launches, "alone": alone.launches},
        "checked": True,
    }


def _validate_sizes(sizes: Sequence[int], what: str) -> list[int]:
    sizes = list(sizes)
    for s in sizes:
        _length(s, what)
    return sizes


def measure(sizes: Sequence[int] = SIZES, n_items: int = N_ITEMS, *, skewed: Sequence[int] = (), seed: int = 0,
            blocks_per_sm: int | None = None, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Time every path for uniform items of each length in `sizes` (and a skewed mix of each mean in `skewed`),
    `n_items` items each (fewer for long items: n_items_for). One row per table:
    mix, length, mean_length, max_length, bytes_per_item, n_items, {launch,graph,per_block,queue,alone}_us,
    spread_us, blocks_per_sm, queue_blocks, graph_launches, checked. Needs a GPU."""
    sizes = _validate_sizes(sizes, "item length")
    skewed = _validate_sizes(skewed, "mean item length")
    if not sizes and not skewed:
        raise LabError("measure() needs at least one item length: pass sizes=[256, 4096, ...].")
    _count(n_items)
    if blocks_per_sm is not None:
        _count(blocks_per_sm, "blocks_per_sm")
    tables = [uniform_table(n_items_for(s, n_items), s) for s in sizes]
    tables += [skewed_table(n_items_for(s, n_items), s, seed=seed) for s in skewed]
    rows = []
    for i, table in enumerate(tables):
        rows.append(measure_table(table, seed=seed + 10 * i, blocks_per_sm=blocks_per_sm))
        if progress is not None:
            progress(format_row(rows[-1]))
    return rows


# ----------------------------------------------------------------------------------------------
# Payload (JSON), table
# ----------------------------------------------------------------------------------------------

def make_payload(rows: list[dict], provenance: dict, **extra) -> dict:
    return {"schema": PAYLOAD_SCHEMA, "kind": PAYLOAD_KIND, "provenance": provenance, "paths": list(PATHS),
            "knobs": {"BLOCK_THREADS": BLOCK_THREADS, "eps": EPS, "align": ALIGN}, "rows": rows, **extra}


def load_payload(path: Path | str) -> dict:
    """A payload written by `lab study items`, marked as replayed (for notebooks with no GPU)."""
    path = Path(path)
    payload = read_json(path, f"No measurement at {path}; run `lab study items --out {path.parent}` on a GPU.",
                        "small-items measurement")
    if payload.get("kind") != PAYLOAD_KIND or payload.get("schema") != PAYLOAD_SCHEMA:
        raise LabError(f"{path} is not a small-items measurement of schema {PAYLOAD_SCHEMA} (kind "
                       f"{payload.get('kind')!r}, schema {payload.get('schema')!r}).")
    return payload | {"replayed": True}


def payload_label(payload: dict) -> str:
    p = payload.get("provenance", {})
    tag = "REPLAYED" if payload.get("replayed") else "measured"
    return f"{tag} on {p.get('device', '?')} ({p.get('arch', '?')}), {str(p.get('date', '?'))[:10]}"


def format_row(row: dict) -> str:
    from lab.measure.records import format_bytes

    ratio = row["launch_us"] / row["queue_us"] if row["queue_us"] > 0 else float("inf")
    what = f"{row['length']:>7d}" if row["mix"] == "uniform" else f"~{row['length']:>6d}"
    return (f"{what} {format_bytes(row['bytes_per_item']):>9} {row['n_items']:>6d} "
            + " ".join(f"{row[f'{p}_us']:>10.3f}" for p in (*PATHS, "alone"))
            + f" {ratio:>9.0f}x" + ("" if row["mix"] == "uniform" else f"  ({row['mix']} mix)"))


def summary(rows: list[dict]) -> str:
    """A table: per-item microseconds of every path, and how many times faster the queue is than a launch."""
    head = (f"{'length':>7} {'bytes/item':>9} {'items':>6} " + " ".join(f"{p + '_us':>10}" for p in (*PATHS, "alone"))
            + f" {'launch/q':>10}")
    return "\n".join([head, *map(format_row, rows)])


SKEWED_MEANS = (4096,)  # one skewed mix of lengths, at this mean
QUICK_SIZES = (256, 4096, 65536)
QUICK_N_ITEMS = 2000


def study(quick: bool = False, n_items: int | None = None, blocks_per_sm: int | None = None,
          progress: Callable[[str], None] | None = None) -> dict:
    """The small-items record (results/h200/small_items.json): every path checked, then timed, over SIZES (or
    QUICK_SIZES) and one skewed mix, with the empty kernel's launch cost measured in the same run."""
    from lab.measure import records, timing

    sizes = QUICK_SIZES if quick else SIZES
    rows = measure(sizes, n_items or (QUICK_N_ITEMS if quick else N_ITEMS), skewed=SKEWED_MEANS,
                   blocks_per_sm=blocks_per_sm, progress=progress)
    overhead = timing.launch_overhead()
    empty = {"events_us": overhead["events"].median_ms * 1e3, "graph_us": overhead["graph"].per_launch_ms * 1e3}
    return make_payload(rows, records.provenance(), empty_kernel=empty, sizes=list(sizes),
                        skewed_means=list(SKEWED_MEANS))
