"""The occupancy arithmetic against cases worked by hand (and, for the GEMM rungs, against what Nsight
Compute reported on the H200: 8 warps per SM for 256-thread blocks at 241-255 registers)."""

import pytest

from lab.core.occupancy import occupancy


def test_register_limited_block():
    occ = occupancy(90, threads=256, registers=241, smem_bytes=74_500)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limited_by) == (1, 8, "registers")


def test_two_blocks_at_128_registers():
    occ = occupancy(90, threads=256, registers=127, smem_bytes=49_920)
    assert (occ.blocks_per_sm, occ.warps_per_sm) == (2, 16)


def test_shared_memory_limit_counts_the_reserved_kilobyte():
    # 4 x (57 KB + 1 KB) = 232 KB > 228 KB: three blocks, not four.
    occ = occupancy(90, threads=32, registers=32, smem_bytes=57 * 1024)
    assert (occ.blocks_per_sm, occ.limited_by) == (3, "shared memory")


def test_thread_limit_and_unknown_arch():
    assert occupancy(86, threads=1024, registers=32, smem_bytes=0).blocks_per_sm == 1
    with pytest.raises(ValueError, match="sm_70"):
        occupancy(70, threads=32, registers=32, smem_bytes=0)
