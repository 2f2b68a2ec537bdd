"""Per-block timeline of decode attention rung 02 (split-KV): when each block starts, when its split's main loop is
done, when it exits, and on which SM, read from the kernel built with TIMELINE = 1 (%globaltimer, one clock for all
SMs, in ns).

For B = 1 and 8 sequences of 8192 keys (H = 32 on H_kv = 8, S_q = 1, D = 128, fp16: the decode study's heads), the
build runs once to warm up; then in each round the timeline is zeroed, the L2 evicted (by writing, as records do)
and the kernel launched once. Per round, in ns from the earliest block start: the ramp (the latest start), the first
and last loop end and their spread, the last exit (the kernel's span as its blocks see it), the median block and
main-loop durations, the combine tail (last exit minus last loop end: the warps' merge, the partial rows written,
the arrivals and the last block's combine), the same tail per (sequence, key/value head), the SMs used and how many
blocks each ran, and the timer's step (the gcd of the readings' differences). An event pair around each launch
gives the host's view of the same launch (a few us of its own). One round's per-block readings (the round of median
span) are kept for a figure; the last round's output is compared with the uninstrumented build's, bit for bit.

Prediction (written before the first GPU run, from Nsight Compute's figures at B = 1: a 21.2 us kernel whose SMs are
active 62% of its cycles, 120 blocks on 132 SMs): a ramp of 1-2 us, a spread of the loop ends of 3-5 us (the blocks
that started last, and the DRAM they share), and a combine tail of 2-3 us, so that a block's main loop itself takes
13-15 us of the span.

Measured (results/h100/decode_timeline.json, an H100 at ec4fdb8; the first run, at 730294a, is
decode_timeline_730294a.json): at B = 1 a ramp of 0.06 us, the full splits' loop ends spread over 5.2 us (the first
run's 13.6 us "spread" counted the 8 short last splits, 128 keys of 576, which end at 5.4 us), a combine tail of
4.7 us, in a 24.1 us span; at B = 8 (all splits full) the loop ends spread over 23.2 us of 101.4. So at B = 1 the
main loop's rate and the combine tail are where the time goes, and the spread at B = 8 (rung 02's header says what
follows).

    python3 scripts/decode_timeline.py OUT_DIR [--rounds N]   (on a GPU machine; writes OUT_DIR/decode_timeline.json)
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SYMBOL = "lab_decode_timeline"
TIMELINE_BLOCKS = 1 << 16  # the kernel's TIMELINE_BLOCKS: rows of (start, loop end, exit, SM), by linear block id
SHAPES = ({"B": 1, "S_k": 8192}, {"B": 8, "S_k": 8192})
ROUNDS = 5


def short_splits(grid: tuple[int, int, int], keys: int, split_keys: int) -> np.ndarray:
    """Per block in linear order (x fastest): whether its split holds fewer keys than split_keys (the last split of a
    sequence of `keys` keys when split_keys does not divide it), so the loop ends of equal work can be told apart."""
    x = np.arange(grid[0] * grid[1] * grid[2]) % grid[0]
    return np.minimum(keys - x * split_keys, split_keys) < split_keys


def summarize(rows: np.ndarray, grid: tuple[int, int, int], short: np.ndarray | None = None) -> dict:
    """One launch's readings, rows (blocks, 4) of (start, loop end, exit, SM) in linear block order (x fastest), as
    times in ns from the earliest start. A row left at zero is a block that recorded nothing. `short` (short_splits)
    marks the blocks with less work: the full splits' first loop end and spread are given apart."""
    rows = np.asarray(rows, dtype=np.int64)
    recorded = rows[:, 0] > 0
    full = recorded & ~(np.zeros(len(rows), bool) if short is None else np.asarray(short[:len(rows)], bool))
    start, loop, end, sm = (rows[recorded, i] for i in range(4))
    if not len(start):
        return {"blocks": len(rows), "blocks_missing": len(rows)}
    t0 = int(start.min())
    # A block row (sequence, key/value head) is grid.x consecutive blocks: its tail is its last exit after its
    # last loop end, which the block that arrives last and combines sets.
    slot = np.flatnonzero(recorded) // grid[0]
    tails = [int(end[slot == s].max() - loop[slot == s].max()) for s in np.unique(slot)]
    per_sm = Counter(Counter(sm.tolist()).values())  # blocks an SM ran -> how many SMs ran that many
    readings = np.concatenate([start, loop, end]) - t0
    return {
        "blocks": len(rows),
        "blocks_missing": int((~recorded).sum()),
        "ramp_ns": int(start.max()) - t0,
        "loop_end_first_ns": int(loop.min()) - t0,
        "loop_end_last_ns": int(loop.max()) - t0,
        "loop_end_spread_ns": int(loop.max() - loop.min()),
        "full_splits": int(full.sum()),
        "full_loop_end_first_ns": int(rows[full, 1].min()) - t0 if full.any() else None,
        "full_loop_end_spread_ns": int(rows[full, 1].max() - rows[full, 1].min()) if full.any() else None,
        "span_ns": int(end.max()) - t0,
        "median_block_ns": float(np.median(end - start)),
        "median_loop_ns": float(np.median(loop - start)),
        "combine_tail_ns": int(end.max() - loop.max()),
        "head_tail_median_ns": float(np.median(tails)),
        "head_tail_max_ns": max(tails),
        "sms_used": len(set(sm.tolist())),
        "blocks_per_sm": {str(k): per_sm[k] for k in sorted(per_sm)},
        "timer_step_ns": math.gcd(*(int(x) for x in np.unique(readings))),
    }


def raw_blocks(rows: np.ndarray) -> dict:
    """Per-block readings for a figure, in linear block order: start, loop end and exit in ns from the earliest start,
    and the SM; None for a block that recorded nothing."""
    rows = np.asarray(rows, dtype=np.int64)
    recorded = rows[:, 0] > 0
    t0 = int(rows[recorded, 0].min()) if recorded.any() else 0

    def column(i: int, shift: int) -> list:
        return [int(v) - shift if ok else None for v, ok in zip(rows[:, i], recorded, strict=True)]

    return {"start_ns": column(0, t0), "loop_end_ns": column(1, t0), "end_ns": column(2, t0), "smid": column(3, 0)}


def timeline_array(fam, rung, problem):
    """The kernel's timeline as a CuPy array over the module the family's launch loaded (a module loaded a second
    time would have a timeline of its own)."""
    import cupy as cp
    from cupy.cuda.memory import MemoryPointer, UnownedMemory

    from lab.core.build import get_kernel

    module = get_kernel(fam.variant(rung, problem).spec).raw.kernel.module
    mem = UnownedMemory(module.get_global_var(SYMBOL), TIMELINE_BLOCKS * 4 * 8, module, cp.cuda.Device().id)
    return cp.ndarray((TIMELINE_BLOCKS, 4), cp.uint64, MemoryPointer(mem, 0))


def run_shape(shape: dict, rounds: int) -> dict:
    import cupy as cp

    from lab.core.errors import LabError
    from lab.families.attention_decode import AttentionDecodeFamily
    from lab.measure import timing
    from lab.studies.decode_attention_study import HEADS

    fam = AttentionDecodeFamily()
    problem = fam.make_problem(seed=9, **HEADS, **shape, dtype="float16")
    base = fam.rung("02_split_kv")
    rung = dataclasses.replace(base, spec=base.spec.with_knobs(TIMELINE=1))
    out = cp.empty(problem.out_shape, problem.dtype)
    grid = fam.grid(rung, problem.params)
    blocks = grid[0] * grid[1] * grid[2]
    if blocks > TIMELINE_BLOCKS:
        raise LabError(f"the timeline holds {TIMELINE_BLOCKS} blocks and this launch has {blocks}; raise "
                       "TIMELINE_BLOCKS in the kernel and in this script together.")
    fam.launch(rung, problem, out)  # warm-up: builds and loads the kernel, makes the workspace
    table = timeline_array(fam, rung, problem)[:blocks]
    notes = fam.launch_notes(rung, problem, out)
    short = short_splits(grid, problem.params["S_k"], notes["split_keys"])
    flusher = timing.L2Flusher()
    rows, readings = [], []
    for r in range(rounds):
        table.fill(0)
        flusher.flush()
        begin, stop = cp.cuda.Event(), cp.cuda.Event()
        begin.record()
        fam.launch(rung, problem, out)
        stop.record()
        stop.synchronize()
        readings.append(table.get())
        rows.append({"round": r, "event_us": cp.cuda.get_elapsed_time(begin, stop) * 1e3,
                     **summarize(readings[-1], grid, short)})
        print(json.dumps({"shape": shape, **rows[-1]}), flush=True)
    plain = cp.empty_like(out)
    fam.launch(base, problem, plain)
    cp.cuda.Device().synchronize()
    spans = [row.get("span_ns", 0) for row in rows]
    kept = int(np.argsort(spans)[len(spans) // 2])
    return {"shape": shape, "params": problem.params, "grid": list(grid), "notes": notes,
            "same_bits_as_uninstrumented": bool((out.view(cp.uint16) == plain.view(cp.uint16)).all()),
            "rounds": rows, "blocks_round": kept, "per_block": raw_blocks(readings[kept])}


def main(out_dir: Path, rounds: int = ROUNDS) -> int:
    from lab.core import device

    if not device.gpu_available():
        print(f"decode_timeline.py needs a CUDA GPU, but {device.why_no_gpu()}.", file=sys.stderr)
        return 1
    from lab.measure.records import provenance, write_json

    record = {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "symbol": SYMBOL, "shapes": []}
    path = out_dir / "decode_timeline.json"
    for shape in SHAPES:
        record["shapes"].append(run_shape(shape, rounds))
        write_json(path, record)  # what there is so far, should a later shape fail
    print(f"wrote {path}")
    for entry in record["shapes"]:
        keys = ("ramp_ns", "full_loop_end_spread_ns", "span_ns", "median_block_ns", "combine_tail_ns")
        med = {k: float(np.median([row[k] or 0 for row in entry["rounds"] if k in row] or [0])) for k in keys}
        first = entry["rounds"][0]
        print(f"B={entry['shape']['B']} grid {tuple(entry['grid'])}, {first.get('sms_used')} SMs "
              f"{first.get('blocks_per_sm')}: median over {rounds} rounds: ramp {med['ramp_ns'] / 1e3:.2f} us, "
              f"full splits' loop ends spread {med['full_loop_end_spread_ns'] / 1e3:.2f} us, "
              f"span {med['span_ns'] / 1e3:.2f} us, "
              f"block {med['median_block_ns'] / 1e3:.2f} us, combine tail {med['combine_tail_ns'] / 1e3:.2f} us; "
              f"same bits: {entry['same_bits_as_uninstrumented']}")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    rounds = ROUNDS
    if "--rounds" in args:
        at = args.index("--rounds")
        rounds = int(args[at + 1])
        del args[at:at + 2]
    if len(args) != 1 or rounds < 1:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(args[0]), rounds))
