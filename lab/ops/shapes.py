"""What a GEMM call is, for dispatch: its sizes, type, layout, alignment and epilogue (GemmShape), the shape
family it falls in (for the counters and the lessons), and the bucket the autotune cache files it under.

Buckets: M, the dimension that varies from call to call in serving (batch and sequence), is rounded up to a power
of two; N and K, a model's fixed weight sizes, stay exact. One tuned entry then serves every M of its bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

TILE = 128  # the tile side the conditions count tiles in
WIDE_TILE = (128, 256)  # the persistent kernel's default tile, for the last-wave arithmetic
DECODE_MAX_M = 16
K_HEAVY_RATIO = 4.0
SMALL_FLOPS = 2 * 256 ** 3  # below this a GEMM is launch-bound on an H200 (a few microseconds)


@dataclass(frozen=True)
class GemmShape:
    M: int
    N: int
    K: int
    dtype: str  # "float16" or "bfloat16"
    layout: str  # "NN" or "TN"
    aligned: bool  # TMA can read A and B in place (16-byte bases, rows a multiple of 16 bytes)
    epilogue: str  # "none" or ops joined by "+" ("bias+silu+residual")
    sms: int = 132

    @property
    def tiles(self) -> int:
        return -(-self.M // TILE) * -(-self.N // TILE)

    @property
    def last_wave(self) -> float:
        """The share of the SMs the last wave of 128 x 256 tiles keeps busy (1.0: whole waves)."""
        wide = -(-self.M // WIDE_TILE[0]) * -(-self.N // WIDE_TILE[1])
        rest = wide % self.sms
        return 1.0 if rest == 0 else rest / self.sms

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K


def family(shape: GemmShape) -> str:
    """The shape family a call falls in (what the counters and the trace report group by)."""
    if shape.M <= DECODE_MAX_M:
        return "decode"
    if shape.flops < SMALL_FLOPS:
        return "small"
    if not shape.aligned:
        return "unaligned"
    if shape.tiles <= 32 and shape.K / max(shape.M, shape.N) >= K_HEAVY_RATIO:
        return "k_heavy"
    if shape.tiles >= shape.sms and shape.last_wave <= 0.5:
        return "ragged_wave"
    return "square"


def m_bucket(m: int) -> int:
    """M rounded up to a power of two: the autotune cache's bucket for the varying dimension."""
    return 1 << max(0, (m - 1).bit_length())


def bucket(shape: GemmShape) -> str:
    """The autotune cache's key for a shape: every M of one bucket shares an entry."""
    return (f"M<={m_bucket(shape.M)} N={shape.N} K={shape.K} {shape.dtype} {shape.layout} "
            f"{'aligned' if shape.aligned else 'unaligned'} epilogue={shape.epilogue}")
