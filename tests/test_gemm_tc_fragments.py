"""CPU: the gemm_tc rungs' fragment index math, desk-checked in NumPy.

A model of the two PTX instructions (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"
and "Warp-level matrix load instruction: ldmatrix"), written from the ISA's tables, executes the index
expressions of kernels/gemm_tc/01_mma_global.cu and 02_ldmatrix_smem.cu (copied here term by term) for all
32 lanes. The mma model rebuilds A, B and C from the lanes' registers and fails if any element is held by
two lanes or by none; the products must then equal A @ B exactly (small integers). This proves the index
math, not the compiled code: the GPU tests (tests/test_gpu_gemm_tc.py) check that.
"""

import numpy as np
import pytest

LANES = np.arange(32)


# --- models of the instructions (element values, not bits: a register pair is a tuple) ----------

def mma_m16n8k16(a_regs, b_regs, c_regs):
    """a_regs[lane][4 regs][2 elements], b_regs[lane][2][2], c_regs[lane][4] -> d_regs[lane][4]."""
    A, B = np.full((16, 16), np.nan), np.full((16, 8), np.nan)
    C = np.full((16, 8), np.nan)
    for lane in LANES:
        g, t = lane // 4, lane % 4
        for i in range(8):  # a_i: register i // 2, half i % 2
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = 2 * t + (i & 1) + (8 if i >= 4 else 0)
            assert np.isnan(A[row, col]), f"A[{row}, {col}] held twice"
            A[row, col] = a_regs[lane][i // 2][i % 2]
        for i in range(4):
            row, col = 2 * t + (i & 1) + (8 if i >= 2 else 0), g
            assert np.isnan(B[row, col]), f"B[{row}, {col}] held twice"
            B[row, col] = b_regs[lane][i // 2][i % 2]
        for i in range(4):
            row, col = g + (8 if i >= 2 else 0), 2 * t + (i & 1)
            assert np.isnan(C[row, col])
            C[row, col] = c_regs[lane][i]
    assert not (np.isnan(A).any() or np.isnan(B).any() or np.isnan(C).any()), "a fragment element no lane holds"
    D = A @ B + C
    return [[D[lane // 4 + (8 if i >= 2 else 0), 2 * (lane % 4) + (i & 1)] for i in range(4)] for lane in LANES]


def ldmatrix(smem, row_addresses, count, trans=False):
    """smem: 2-D array (rows of halves); row_addresses[lane] = (row, col) of the 16-byte row that lane gives
    (lanes 8i .. 8i+7 give matrix i's rows 0..7). Returns regs[lane][count] as (element, element)."""
    mats = []
    for i in range(count):
        rows = []
        for r in range(8):
            row, col = row_addresses[8 * i + r]
            assert col % 8 == 0, "ldmatrix rows are 16-byte aligned"
            rows.append(smem[row, col:col + 8])
        mats.append(np.array(rows))
    out = []
    for lane in LANES:
        g, t = lane // 4, lane % 4
        out.append([(m[2 * t, g], m[2 * t + 1, g]) if trans else (m[g, 2 * t], m[g, 2 * t + 1]) for m in mats])
    return out


def _ints(shape, seed):
    return np.random.default_rng(seed).integers(-4, 5, size=shape).astype(np.float64)


# --- rung 01: fragments from global memory --------------------------------------------------------

def rung01_tile(A, B, tn: bool, row0: int, col0: int):
    """The warp's 16x16 tile of A @ B, computed with the kernel's load expressions."""
    M, K = A.shape
    N = B.shape[0] if tn else B.shape[1]

    def load_or_zero(X, row, col, rows, cols):
        return X[row, col] if (row < rows and col < cols) else 0.0

    def load_b(k, n):
        return load_or_zero(B, n, k, N, K) if tn else load_or_zero(B, k, n, K, N)

    acc = [[[0.0] * 4 for _ in LANES] for _ in range(2)]
    for k0 in range(0, K, 16):
        a, b = [], [[], []]
        for lane in LANES:
            g, t = lane // 4, lane % 4
            a.append([(load_or_zero(A, row0 + g, k0 + 2 * t, M, K), load_or_zero(A, row0 + g, k0 + 2 * t + 1, M, K)),
                      (load_or_zero(A, row0 + g + 8, k0 + 2 * t, M, K),
                       load_or_zero(A, row0 + g + 8, k0 + 2 * t + 1, M, K)),
                      (load_or_zero(A, row0 + g, k0 + 2 * t + 8, M, K),
                       load_or_zero(A, row0 + g, k0 + 2 * t + 9, M, K)),
                      (load_or_zero(A, row0 + g + 8, k0 + 2 * t + 8, M, K),
                       load_or_zero(A, row0 + g + 8, k0 + 2 * t + 9, M, K))])
            for j in range(2):
                n = col0 + 8 * j + g
                b[j].append([(load_b(k0 + 2 * t, n), load_b(k0 + 2 * t + 1, n)),
                             (load_b(k0 + 2 * t + 8, n), load_b(k0 + 2 * t + 9, n))])
        for j in range(2):
            acc[j] = mma_m16n8k16(a, b[j], acc[j])
    C = np.zeros((16, 16))
    for j in range(2):
        for lane in LANES:
            g, t = lane // 4, lane % 4
            for i in range(4):
                C[g + 8 * (i // 2), 8 * j + 2 * t + (i % 2)] = acc[j][lane][i]
    return C


@pytest.mark.parametrize("tn", [False, True], ids=["NN", "TN"])
@pytest.mark.parametrize("M, N, K", [(16, 16, 16), (13, 11, 21), (16, 16, 35)])
def test_rung01_fragment_loads_compute_the_product(tn, M, N, K):
    A = _ints((M, K), 1)
    Bm = _ints((K, N), 2)  # B as the math sees it
    C = rung01_tile(A, Bm.T.copy() if tn else Bm, tn, 0, 0)
    assert np.array_equal(C[:M, :N], A @ Bm)
    assert not C[M:, :].any() and not C[:, N:].any()  # rows and columns past the edge hold zeros, not garbage


# --- rung 02: ldmatrix from padded shared-memory tiles --------------------------------------------

BM, BN, BK, WM, WN, PAD = 128, 128, 32, 64, 32, 8
MI, NI = WM // 16, WN // 8


def rung02_warp_tile(As, Bs, tn: bool, warp: int):
    """One warp's 64x32 tile of the k-tile's product, with the kernel's ldmatrix addresses (compute_tile)."""
    wr, wc = (warp // (BN // WN)) * WM, (warp % (BN // WN)) * WN
    acc = [[[[0.0] * 4 for _ in LANES] for _ in range(NI)] for _ in range(MI)]
    for kk in range(0, BK, 16):
        a = [ldmatrix(As, [(wr + 16 * mi + lane % 16, kk + 8 * (lane // 16)) for lane in LANES], 4)
             for mi in range(MI)]
        b = [None] * NI
        for p in range(NI // 2):
            if tn:
                addr = [(wc + 16 * p + lane % 8 + 8 * (lane // 16), kk + 8 * ((lane // 8) % 2)) for lane in LANES]
                r = ldmatrix(Bs, addr, 4)
            else:
                addr = [(kk + lane % 8 + 8 * ((lane // 8) % 2), wc + 16 * p + 8 * (lane // 16)) for lane in LANES]
                r = ldmatrix(Bs, addr, 4, trans=True)
            b[2 * p] = [[r[lane][0], r[lane][1]] for lane in LANES]
            b[2 * p + 1] = [[r[lane][2], r[lane][3]] for lane in LANES]
        for mi in range(MI):
            for ni in range(NI):
                acc[mi][ni] = mma_m16n8k16(a[mi], b[ni], acc[mi][ni])
    C = np.full((WM, WN), np.nan)
    for mi in range(MI):
        for ni in range(NI):
            for lane in LANES:
                g, t = lane // 4, lane % 4
                for h in range(2):
                    for e in range(2):
                        C[16 * mi + g + 8 * h, 8 * ni + 2 * t + e] = acc[mi][ni][lane][2 * h + e]
    return wr, wc, C


@pytest.mark.parametrize("tn", [False, True], ids=["NN", "TN"])
def test_rung02_ldmatrix_addresses_compute_the_block_tile(tn):
    """All 8 warps of a block on one 128x128x32 k-tile: every output element, exactly."""
    A = _ints((BM, BK), 3)
    Bm = _ints((BK, BN), 4)
    As = np.zeros((BM, BK + PAD))
    As[:, :BK] = A
    if tn:
        Bs = np.zeros((BN, BK + PAD))
        Bs[:, :BK] = Bm.T
    else:
        Bs = np.zeros((BK, BN + PAD))
        Bs[:, :BN] = Bm
    C = np.full((BM, BN), np.nan)
    for warp in range(8):
        wr, wc, tile = rung02_warp_tile(As, Bs, tn, warp)
        assert np.isnan(C[wr:wr + WM, wc:wc + WN]).all(), "two warps wrote the same outputs"
        C[wr:wr + WM, wc:wc + WN] = tile
    assert np.array_equal(C, A @ Bm)


def test_padded_rows_make_every_ldmatrix_phase_conflict_free():
    """The 8 rows of one 8x8 matrix start in 8 different 16-byte bank groups (128 bytes = 32 banks) for the
    padded strides of rung 02 (80 bytes for the k-contiguous tiles, 272 for NN's B tile), and do not
    without the padding."""
    def groups(stride_halves):
        return len({(r * stride_halves * 2 % 128) // 16 for r in range(8)})

    assert groups(BK + PAD) == 8 and groups(BN + PAD) == 8
    assert groups(BK) == 2 and groups(BN) == 1


def test_copy_tile_chunks_cover_each_tile_once():
    """copy_tile<ROWS, COLS>: chunk c = i * THREADS + thread is row c / (COLS/8), columns 8 * (c % (COLS/8))."""
    threads = 256
    for rows, cols in ((BM, BK), (BK, BN), (BN, BK)):
        seen = np.zeros((rows, cols), int)
        for i in range(rows * cols // 8 // threads):
            for thread in range(threads):
                c = i * threads + thread
                r, col = c // (cols // 8), 8 * (c % (cols // 8))
                seen[r, col:col + 8] += 1
        assert (seen == 1).all()
