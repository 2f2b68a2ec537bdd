"""CPU: the shape families include the sizes that break kernels and span the regimes."""

import math

import pytest

from lab.measure import shapes


def test_check_lengths_include_one_primes_and_boundaries():
    lengths = shapes.check_lengths()
    assert lengths == sorted(set(lengths)), "sorted, no duplicates"
    assert lengths[0] == 1
    assert {1, 2, 3, 4, 5} <= set(lengths)
    assert {p for p in shapes.PRIMES if p < 2_000_000} <= set(lengths)
    for m in (8, 32, 128, 256, 1024, 4096, 1 << 16, 1 << 20):
        assert {m - 1, m, m + 1} <= set(lengths), f"missing {m} +- 1"
    assert max(lengths) > 1 << 22  # at least one length past a few million elements
    assert any(n % 4 for n in lengths if n > 1 << 20)  # large lengths with a vector tail


def test_primes_are_prime():
    for p in shapes.PRIMES:
        assert p > 1 and all(p % d for d in range(2, math.isqrt(p) + 1)), p


def test_around():
    assert shapes.around(32) == (31, 32, 33)


def test_check_matrix_shapes_cover_degenerate_and_tile_edges():
    mats = shapes.check_matrix_shapes()
    assert (1, 1) in mats and (32, 32) in mats
    assert any(r == 1 and c > 1 for r, c in mats) and any(c == 1 and r > 1 for r, c in mats)
    assert any(r % 32 and c % 32 for r, c in mats)  # neither side a tile multiple
    assert any(r != c for r, c in mats)


def test_byte_sweep_spans_1kb_to_4gb_by_octaves():
    sweep = shapes.byte_sweep()
    assert sweep[0] == 1 << 10 and sweep[-1] == 1 << 32
    assert len(sweep) == 23
    assert all(b == 2 * a for a, b in zip(sweep, sweep[1:], strict=False))


def test_byte_sweep_finer_steps():
    sweep = shapes.byte_sweep(1 << 10, 1 << 20, per_octave=4)
    assert sweep[0] == 1 << 10 and sweep[-1] == 1 << 20 and len(sweep) == 41
    assert all(b > a for a, b in zip(sweep, sweep[1:], strict=False))


@pytest.mark.parametrize("n", [1, 2, 7, 31, 32, 33, 1000, 8192, 16384])
def test_square_for_bytes_round_trip(n):
    assert shapes.square_for_bytes(2 * 4 * n * n, itemsize=4) == n
    assert shapes.square_for_bytes(2 * 2 * n * n, itemsize=2) == n


def test_square_for_bytes_rounds_to_a_multiple_and_stays_close():
    for b in shapes.byte_sweep(1 << 20, 1 << 32):
        n = shapes.square_for_bytes(b, 4, multiple=32)
        assert n % 32 == 0, (b, n)
        assert abs(2 * 4 * n * n - b) / b < 0.1, (b, n)
    assert shapes.square_for_bytes(8, 4, multiple=32) == 1  # too small for a multiple: left as it is


def test_tail_range_steps_by_one():
    assert shapes.tail_range(10, 3) == [10, 11, 12, 13]
