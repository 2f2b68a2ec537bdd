"""The index arithmetic of the tensor-core ladder, in Python, for the pictures notebook 03 draws: who holds
which element of an mma.sync m16n8k16 fragment, what ldmatrix hands each lane, where a tile row's 16-byte
chunks land among the shared-memory bank groups (unpadded, padded, XOR-swizzled), what a STAGES-deep
cp.async pipeline has in flight at each k-iteration, and a schematic producer/consumer timeline.

Each function restates a formula from kernels/common/ (lab_mma.cuh's fragment table, lab_swizzle.cuh's
swizzle_chunk) or from a rung's main loop; tests/test_lessons_layouts.py holds them to those files'
statements and to each other. Nothing here is measured: these are layouts and schedules, not timings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LANES = 32
BANK_GROUPS = 8  # 32 banks of 4 bytes: one 128-byte line is 8 groups of 4 banks, one 16-byte chunk each
CHUNK_BYTES = 16


# ----------------------------------------------------------------------------------------------
# mma.sync.m16n8k16 fragments (lab_mma.cuh; PTX ISA, "Matrix Fragments for mma.m16n8k16")
# ----------------------------------------------------------------------------------------------

def _group_thread(lane: int) -> tuple[int, int]:
    """(groupID, threadID_in_group) = (lane / 4, lane % 4): the two indices every fragment formula uses."""
    return lane // 4, lane % 4


def mma_fragment(operand: str) -> tuple[np.ndarray, np.ndarray]:
    """(lane, register) of every element of one m16n8k16 operand: "A" (16 x 16, rows x k), "B" (16 x 8,
    k x n) or "C" (16 x 8, the fp32 accumulators). A and B registers hold two 16-bit elements each; the
    register index here is the .b32 register (A: 0-3, B: 0-1), C's is the f32 register (0-3)."""
    shapes = {"A": (16, 16), "B": (16, 8), "C": (16, 8)}
    if operand not in shapes:
        raise ValueError(f"operand must be A, B or C, not {operand!r}")
    lanes = np.full(shapes[operand], -1)
    regs = np.full(shapes[operand], -1)
    for lane in range(LANES):
        g, t = _group_thread(lane)
        if operand == "A":  # a[0] = A[g][2t..], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]
            cells = [(g + 8 * (r % 2), 2 * t + 8 * (r // 2) + e, r) for r in range(4) for e in range(2)]
        elif operand == "B":  # b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
            cells = [(2 * t + 8 * r + e, g, r) for r in range(2) for e in range(2)]
        else:  # c[0], c[1] = C[g][2t, 2t+1]; c[2], c[3] = C[g+8][2t, 2t+1]
            cells = [(g + 8 * (r // 2), 2 * t + r % 2, r) for r in range(4)]
        for row, col, reg in cells:
            if lanes[row, col] >= 0:
                raise AssertionError(f"{operand}[{row}][{col}] held by lanes {lanes[row, col]} and {lane}")
            lanes[row, col], regs[row, col] = lane, reg
    return lanes, regs


def lane_elements(operand: str, lane: int) -> list[tuple[int, int]]:
    """The (row, column) elements of `operand` that one lane holds, in register order."""
    lanes, regs = mma_fragment(operand)
    cells = [(int(regs[r, c]), int(r), int(c)) for r, c in zip(*np.nonzero(lanes == lane), strict=True)]
    return [(r, c) for _, r, c in sorted(cells)]


# ----------------------------------------------------------------------------------------------
# ldmatrix.m8n8.x4 (PTX ISA, "Warp-level matrix load instruction: ldmatrix")
# ----------------------------------------------------------------------------------------------

def ldmatrix_receivers(trans: bool = False) -> np.ndarray:
    """(8, 8): the lane that receives each element of one 8x8 matrix. Without .trans lane (g, t) gets row g,
    columns 2t and 2t+1; with .trans it gets column g, rows 2t and 2t+1."""
    out = np.full((8, 8), -1)
    for lane in range(LANES):
        g, t = _group_thread(lane)
        for e in range(2):
            row, col = (2 * t + e, g) if trans else (g, 2 * t + e)
            out[row, col] = lane
    return out


def ldmatrix_x4_a_addresses() -> np.ndarray:
    """(16, 2): the lane that gives the shared-memory address of each 16-byte row piece of a 16x16 A tile
    (row, k half) in an ldmatrix.x4, as the rungs compute it: lane L points at row L % 16, k from 8 * (L / 16).
    Lanes 8i .. 8i+7 give matrix i's rows, so the matrices come out as rows 0-7/k 0-7, rows 8-15/k 0-7,
    rows 0-7/k 8-15, rows 8-15/k 8-15: the order of mma's A registers a[0] .. a[3]."""
    out = np.full((16, 2), -1)
    for lane in range(LANES):
        out[lane % 16, lane // 16] = lane
    return out


def ldmatrix_x4_a_fragment() -> tuple[np.ndarray, np.ndarray]:
    """(lane, register) of every element of a 16x16 A tile after ldmatrix.x4 with ldmatrix_x4_a_addresses:
    register i of each lane is matrix i as ldmatrix_receivers hands it out. It equals mma_fragment("A"),
    which is why one ldmatrix.x4 loads a whole A fragment."""
    lanes, regs = np.full((16, 16), -1), np.full((16, 16), -1)
    receivers = ldmatrix_receivers()
    for giver in range(LANES):  # row r of matrix i comes from the address lane 8i + r gives
        matrix, r = divmod(giver, 8)
        row, k0 = giver % 16, 8 * (giver // 16)
        lanes[row, k0:k0 + 8] = receivers[r, :]
        regs[row, k0:k0 + 8] = matrix
    return lanes, regs


# ----------------------------------------------------------------------------------------------
# Shared-memory bank groups of one ldmatrix phase (lab_swizzle.cuh)
# ----------------------------------------------------------------------------------------------

def swizzle_chunk(row: int, chunk: int, row_chunks: int) -> int:
    """lab_swizzle.cuh's swizzle_chunk<ROW_CHUNKS>(row, chunk): the physical 16-byte chunk (from the tile's
    start) of logical chunk `chunk` of tile row `row`, XOR-ing the chunk's place in its 128-byte line with
    3 bits of the line's index."""
    if row_chunks < 4 or row_chunks & (row_chunks - 1):
        raise ValueError("rows of a power-of-two number of 16-byte chunks, at least 4 (64 bytes)")
    line = max(row_chunks, 8)
    linear = row * row_chunks + chunk
    return linear ^ ((linear // line) & 7)


LAYOUTS = ("unpadded", "padded", "swizzled")


def chunk_byte_offset(row: int, chunk: int, row_bytes: int, layout: str, pad_bytes: int = 16) -> int:
    """Byte offset from the tile's start of logical 16-byte chunk `chunk` of tile row `row`, for rows of
    `row_bytes` stored unpadded, padded by `pad_bytes` (rung 02), or XOR-swizzled (rung 03)."""
    if layout == "unpadded":
        return row * row_bytes + CHUNK_BYTES * chunk
    if layout == "padded":
        return row * (row_bytes + pad_bytes) + CHUNK_BYTES * chunk
    if layout == "swizzled":
        return CHUNK_BYTES * swizzle_chunk(row, chunk, row_bytes // CHUNK_BYTES)
    raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")


def bank_group(byte_offset: int) -> int:
    """Which of a 128-byte line's 8 groups of 4 banks a 16-byte-aligned chunk occupies."""
    return (byte_offset % (BANK_GROUPS * CHUNK_BYTES)) // CHUNK_BYTES


def ldmatrix_groups(row_bytes: int, layout: str, chunk: int = 0, pad_bytes: int = 16, rows: int = 8) -> list[int]:
    """The bank group of logical chunk `chunk` in each of `rows` consecutive tile rows: what the 8 lanes of
    one ldmatrix matrix point at."""
    return [bank_group(chunk_byte_offset(r, chunk, row_bytes, layout, pad_bytes)) for r in range(rows)]


def wavefronts(groups: list[int]) -> int:
    """Shared-memory wavefronts one 8-row ldmatrix phase needs: the most rows that share a bank group (each
    row reads 16 bytes, all 4 banks of its group, so two rows in one group cannot go in the same pass)."""
    return max(groups.count(g) for g in set(groups))


def row_bank_map(row_bytes: int, layout: str, pad_bytes: int = 16, rows: int = 8) -> list[list[list[int]]]:
    """For each of `rows` tile rows, for each of the 8 bank groups, the logical chunks of that row that land
    there (a 64-byte row fills half the groups, a 256-byte row puts two chunks in each)."""
    out = []
    for r in range(rows):
        cells: list[list[int]] = [[] for _ in range(BANK_GROUPS)]
        for c in range(row_bytes // CHUNK_BYTES):
            cells[bank_group(chunk_byte_offset(r, c, row_bytes, layout, pad_bytes))].append(c)
        out.append(cells)
    return out


# ----------------------------------------------------------------------------------------------
# A STAGES-deep cp.async pipeline (rung 03's main loop)
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TileLife:
    """One k-tile in the pipeline: the iteration whose code issues its copies (-1: the prologue), the
    iteration that waits for them and computes on it, and the shared-memory stage it occupies."""

    tile: int
    issued: int
    computed: int
    stage: int


def pipeline_schedule(k_tiles: int, stages: int) -> list[TileLife]:
    """Rung 03's loop: the prologue issues tiles 0 .. STAGES-2; iteration kt waits until tile kt has landed,
    passes one barrier, refills the stage tile kt-1 used with tile kt + STAGES-1, and computes on tile kt."""
    if stages < 2 or k_tiles < 1:
        raise ValueError("a pipeline needs at least two stages and one k-tile")
    out = []
    for tile in range(k_tiles):
        issued = -1 if tile < stages - 1 else tile - (stages - 1)
        out.append(TileLife(tile, issued, tile, tile % stages))
    return out


def in_flight(schedule: list[TileLife], iteration: int) -> list[int]:
    """Tiles whose copies are issued but not yet waited for while iteration `iteration` computes."""
    return [t.tile for t in schedule if t.issued <= iteration < t.computed]


# ----------------------------------------------------------------------------------------------
# Warp specialization: a producer warp (TMA) and consumer warpgroups (wgmma), schematically
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Span:
    role: str  # "producer", "consumer 0", ...
    what: str  # "TMA k-tile 3", "wgmma k-tile 3", "wait full[1]", ...
    start: float
    end: float
    tile: int
    stage: int


def specialized_timeline(k_tiles: int, stages: int, load_time: float, mma_time: float, consumers: int = 2,
                         issue_time: float = 0.1) -> list[Span]:
    """A schematic schedule of a warp-specialized mainloop in arbitrary time units (assumed durations, not
    measurements): the producer waits until stage s is empty (every consumer released the tile that used it
    STAGES tiles ago), issues one TMA copy for the k-tile (issue_time), and the tile lands load_time later,
    completing the stage's "full" barrier. Each consumer waits on that barrier, runs its wgmma on the tile
    (mma_time; the consumers split the block tile, so they work on the same k-tile side by side) and
    arrives on the stage's "empty" barrier."""
    spans: list[Span] = []
    released = [0.0] * stages  # when each stage's empty barrier last completed
    landed = []
    producer_free = 0.0
    consumer_free = [0.0] * consumers
    for kt in range(k_tiles):
        s = kt % stages
        start = max(producer_free, released[s] if kt >= stages else 0.0)
        if start > producer_free:
            spans.append(Span("producer", f"wait empty[{s}]", producer_free, start, kt, s))
        spans.append(Span("producer", f"TMA k-tile {kt}", start, start + issue_time, kt, s))
        spans.append(Span("in flight", f"k-tile {kt}", start + issue_time, start + issue_time + load_time, kt, s))
        producer_free = start + issue_time
        landed.append(start + issue_time + load_time)
        # Consumers take the tiles in order; the stage is released when the last of them finishes it.
        ends = []
        for c in range(consumers):
            begin = max(consumer_free[c], landed[kt])
            if begin > consumer_free[c]:
                spans.append(Span(f"consumer {c}", f"wait full[{s}]", consumer_free[c], begin, kt, s))
            spans.append(Span(f"consumer {c}", f"wgmma k-tile {kt}", begin, begin + mma_time, kt, s))
            consumer_free[c] = begin + mma_time
            ends.append(begin + mma_time)
        released[s] = max(ends)
    return spans
