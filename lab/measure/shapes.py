"""Shape families: the sizes every kernel is checked and measured on.

Checks favour the shapes that break kernels (1, primes, multiples +- 1, misaligned starts);
measurements favour sizes that show a regime (launch-bound, L2-resident, HBM plateau).
"""

from __future__ import annotations

import math

PRIMES = (2, 3, 5, 7, 13, 31, 97, 127, 257, 1021, 4099, 7919, 65537, 104729, 1000003)


def around(multiple: int) -> tuple[int, int, int]:
    """A multiple and its two neighbours: where tail handling breaks."""
    return (multiple - 1, multiple, multiple + 1)


def check_lengths() -> list[int]:
    """1-D lengths for correctness: tiny, vector/warp/block boundaries +- 1, primes, a few large."""
    lengths = {1, 2, 3, 4, 5}
    for m in (8, 32, 128, 256, 1024, 4096, 1 << 16, 1 << 20):
        lengths.update(around(m))
    lengths.update(p for p in PRIMES if p < 2_000_000)
    lengths.update({(1 << 22) + 3, 3 * (1 << 20) + 7})
    return sorted(lengths)


def check_matrix_shapes() -> list[tuple[int, int]]:
    """2-D shapes for correctness: 1s, tile multiples +- 1, primes, skinny, a large square."""
    shapes = [(1, 1), (1, 7), (7, 1), (1, 1024), (1024, 1), (2, 3), (31, 33), (32, 32), (33, 31), (64, 64),
              (63, 65), (97, 101), (127, 257), (1021, 7), (7, 1021), (1023, 1025), (2048, 2049), (4099, 17),
              (17, 4099), (2049, 2047)]
    return shapes


def byte_sweep(min_bytes: int = 1 << 10, max_bytes: int = 1 << 32, per_octave: int = 1) -> list[int]:
    """Bytes moved, geometric from min to max: the x axis of a bandwidth-vs-size plot."""
    steps = int(round(math.log2(max_bytes / min_bytes) * per_octave))
    return [int(round(min_bytes * 2 ** (i / per_octave))) for i in range(steps + 1)]


def square_for_bytes(bytes_moved: int, itemsize: int = 4, multiple: int = 1) -> int:
    """The side n of an n x n matrix whose read-plus-write traffic is about `bytes_moved`."""
    n = max(1, int(round(math.sqrt(bytes_moved / (2 * itemsize)))))
    return max(multiple, n // multiple * multiple) if n >= 2 * multiple else n


def tail_range(base: int, span: int) -> list[int]:
    """Every length from base to base + span, stepping by 1: shows a sawtooth or its absence."""
    return list(range(base, base + span + 1))


# Hidden sizes of widely used LLMs, for the GEMM ladders' realistic shape sets.
LLM_HIDDEN_SIZES = (2048, 2560, 3072, 4096, 5120, 6144, 8192, 12288)
