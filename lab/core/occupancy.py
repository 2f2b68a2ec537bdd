"""Theoretical occupancy: how many blocks of a kernel one SM can hold, and what limits it.

The per-arch limits are those of the CUDA C++ Programming Guide's table of technical specifications
per compute capability (threads, blocks and registers per SM, shared memory per SM); registers are
allocated per warp in units of 256, and from sm_80 on each block also reserves 1 KB of shared memory
for the system. This is the occupancy calculator's arithmetic, enough to explain a ladder (one block
per SM or three); Nsight Compute's "Theoretical Occupancy" is the measured counterpart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# arch -> (max threads per SM, max blocks per SM, registers per SM, shared memory per SM in bytes)
LIMITS = {
    75: (1024, 16, 65536, 64 * 1024),
    80: (2048, 32, 65536, 164 * 1024),
    86: (1536, 16, 65536, 100 * 1024),
    89: (1536, 24, 65536, 100 * 1024),
    90: (2048, 32, 65536, 228 * 1024),
}
REGISTER_UNIT = 256  # registers are allocated per warp in units of this many


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    limited_by: str  # "threads", "blocks", "registers" or "shared memory"

    def __str__(self) -> str:
        return f"{self.blocks_per_sm} blocks ({self.warps_per_sm} warps) per SM, limited by {self.limited_by}"


def occupancy(arch: int, threads: int, registers: int, smem_bytes: int) -> Occupancy:
    """Blocks of `threads` threads using `registers` registers a thread and `smem_bytes` of shared
    memory (static + dynamic) a block that fit on one SM of compute capability `arch`."""
    if arch not in LIMITS:
        raise ValueError(f"no occupancy limits for sm_{arch}; known: {', '.join(f'sm_{a}' for a in LIMITS)}")
    max_threads, max_blocks, regs_per_sm, smem_per_sm = LIMITS[arch]
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(registers * 32 / REGISTER_UNIT) * REGISTER_UNIT
    reserved = 1024 if arch >= 80 else 0
    candidates = {
        "threads": max_threads // (warps * 32),
        "blocks": max_blocks,
        "registers": regs_per_sm // (regs_per_warp * warps) if registers else max_blocks,
        "shared memory": smem_per_sm // (smem_bytes + reserved) if smem_bytes + reserved else max_blocks,
    }
    limited_by = min(candidates, key=candidates.get)
    blocks = candidates[limited_by]
    return Occupancy(blocks, blocks * warps, limited_by)
