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


# --- rung 03: unpadded XOR-swizzled tiles, a STAGES-deep ring, cp.async with src-size -------------

def swizzle_chunk(row_chunks: int, row: int, chunk: int) -> int:
    """kernels/common/lab_swizzle.cuh's swizzle_chunk<ROW_CHUNKS>(row, chunk), term by term."""
    line = row_chunks if row_chunks > 8 else 8
    lin = row * row_chunks + chunk
    return lin ^ ((lin // line) & 7)


def _rung03_knobs() -> dict:
    from lab.families.gemm_tc import GemmTcFamily

    return dict(GemmTcFamily().rung("03").spec.knobs)


def ldmatrix_flat(mem, byte_addresses, count, trans=False):
    """ldmatrix over a flat array of halves (one stage or the whole ring), lane l giving a byte address."""
    rows2d = []
    for lane in LANES:
        addr = byte_addresses[lane]
        assert addr % 16 == 0, "ldmatrix rows are 16-byte aligned"
        rows2d.append(addr // 2)
    smem = mem.reshape(1, -1)
    return ldmatrix(smem, [(0, h) for h in rows2d], count, trans)


def assert_conflict_free(byte_addresses, what):
    """Each group of 8 lanes (one ldmatrix matrix, or a quarter-warp of 16-byte copies) touches 8 different
    16-byte bank groups of a 128-byte line: one shared-memory wavefront."""
    for i in range(0, len(byte_addresses), 8):
        groups = {(a % 128) // 16 for a in byte_addresses[i:i + 8]}
        assert len(groups) == 8, f"{what}: lanes {i}..{i + 7} hit bank groups {sorted(groups)}"


@pytest.mark.parametrize("row_chunks, rows", [(4, 128), (4, 32), (8, 64), (16, 32), (16, 64), (32, 16)])
def test_the_swizzle_is_a_bijection_inside_each_128_byte_line(row_chunks, rows):
    logical = [(r, c) for r in range(rows) for c in range(row_chunks)]
    phys = [swizzle_chunk(row_chunks, r, c) for r, c in logical]
    assert sorted(phys) == list(range(rows * row_chunks))  # every chunk stored once, no padding
    assert all(p // 8 == (r * row_chunks + c) // 8 for p, (r, c) in zip(phys, logical, strict=True))  # in its line


@pytest.mark.parametrize("row_chunks", [4, 8, 16, 32])
def test_eight_consecutive_rows_at_one_column_hit_eight_bank_groups(row_chunks):
    """What one ldmatrix matrix reads (rows r0..r0+7, r0 a multiple of 8, the same logical chunk), and what
    8 threads copying 8 consecutive chunks write; without the swizzle both conflict."""
    for r0 in range(0, 32, 8):
        for c in range(row_chunks):
            assert_conflict_free([16 * swizzle_chunk(row_chunks, r0 + r, c) for r in range(8)], "read")
    for first in range(0, 32 * row_chunks, 8):
        assert_conflict_free([16 * swizzle_chunk(row_chunks, (first + j) // row_chunks, (first + j) % row_chunks)
                              for j in range(8)], "write")
    plain = {(16 * (r * row_chunks)) % 128 // 16 for r in range(8)}
    assert len(plain) < 8


def test_rows_16_apart_share_the_swizzle_key():
    """The kernel adds constants for fragments 16 rows apart (A_FRAG_STEP, B_FRAG_STEP, B_KSTEP)."""
    for row_chunks in (4, 8, 16):
        for r in range(16):
            for c in range(row_chunks):
                for shift in (16, 32, 48, 112):
                    assert (swizzle_chunk(row_chunks, r + shift, c)
                            == swizzle_chunk(row_chunks, r, c) + shift * row_chunks)


def rung03_copy_tile(stage, offset, X, ld, r0, c0, rows, cols, tile_rows, row_chunks, threads, vec, check_writes):
    """copy_tile<ROWS, ROW_CHUNKS, GUARD=true> into the flat stage at byte `offset`: each chunk's source
    bytes (src-size 0..16, VEC=8) or elements (VEC=1), zero-filled past them. X is a flat array of halves
    with leading dimension ld (a matrix rows x cols stored in it)."""
    copies = tile_rows * row_chunks // threads
    assert copies * threads == tile_rows * row_chunks
    for i in range(copies):
        dsts = []
        for thread in range(threads):
            c = i * threads + thread
            row, chunk = c // row_chunks, c % row_chunks
            gr, gc = r0 + row, c0 + 8 * chunk
            if vec == 8:
                nbytes = 2 * min(max(cols - gc, 0), 8) if gr < rows else 0
                assert nbytes % 2 == 0 and 0 <= nbytes <= 16
                src = X[gr * ld + gc: gr * ld + gc + nbytes // 2] if nbytes else np.zeros(0)
                assert nbytes == 0 or (gr * ld + gc) % 8 == 0, "a cp.async source is 16-byte aligned"
                chunk_vals = np.concatenate([src, np.zeros(8 - nbytes // 2)])
            else:
                chunk_vals = np.array([X[gr * ld + gc + j] if gr < rows and gc + j < cols else 0.0 for j in range(8)])
            dst = offset + 16 * swizzle_chunk(row_chunks, row, chunk)
            assert np.isnan(stage[dst // 2: dst // 2 + 8]).all(), "a chunk written twice in one stage fill"
            stage[dst // 2: dst // 2 + 8] = chunk_vals
            dsts.append(dst)
        if check_writes:
            for q in range(0, threads, 8):
                assert_conflict_free(dsts[q:q + 8], f"cp.async writes, copy {i}")


def rung03_block(A, Bstored, M, N, K, lda, ldb, tn: bool, vec: int, row0=0, col0=0, knobs=None):
    """The whole kernel for one block (all warps, every k-tile, the STAGES ring), with the kernel's copy,
    swizzle and ldmatrix offset expressions; returns the block's BM x BN tile of A @ B."""
    k = knobs or _rung03_knobs()
    bm, bn, bk, wm, wn, threads, stages = k["BM"], k["BN"], k["BK"], k["WM"], k["WN"], k["THREADS"], k["STAGES"]
    mi_n, ni_n, ksteps = wm // 16, wn // 8, bk // 16
    a_chunks = bk // 8
    b_rows, b_chunks = (bn, bk // 8) if tn else (bk, bn // 8)
    a_tile_bytes = bm * bk * 2
    stage_bytes = (bm + bn) * bk * 2
    ring = np.full(stages * stage_bytes // 2, np.nan)
    a_frag_step, b_frag_step, b_kstep = 16 * bk * 2, 16 * bk * 2, 16 * bn * 2

    def load_stage(write, k0):
        ring[write // 2: (write + stage_bytes) // 2] = np.nan  # what a stale stage holds: never read
        rung03_copy_tile(ring, write, A.ravel(), lda, row0, k0, M, K, bm, a_chunks, threads, vec, True)
        if tn:
            rung03_copy_tile(ring, write + a_tile_bytes, Bstored.ravel(), ldb, col0, k0, N, K, bn, b_chunks, threads,
                             vec, True)
        else:
            rung03_copy_tile(ring, write + a_tile_bytes, Bstored.ravel(), ldb, k0, col0, K, N, bk, b_chunks, threads,
                             vec, True)

    warps = threads // 32
    acc = {w: [[[[0.0] * 4 for _ in LANES] for _ in range(ni_n)] for _ in range(mi_n)] for w in range(warps)}
    k_tiles = (K + bk - 1) // bk
    for s in range(stages - 1):
        if s < k_tiles:
            load_stage(s * stage_bytes, s * bk)
    read, write = 0, (stages - 1) * stage_bytes
    for kt in range(k_tiles):
        if kt + stages - 1 < k_tiles:
            assert write != read
            load_stage(write, (kt + stages - 1) * bk)
        for w in range(warps):
            wr, wc = (w // (bn // wn)) * wm, (w % (bn // wn)) * wn
            a_off = [16 * swizzle_chunk(a_chunks, wr + lane % 16, 2 * s + lane // 16) for s in range(ksteps)
                     for lane in LANES]
            a_off = [a_off[s * 32:(s + 1) * 32] for s in range(ksteps)]
            if tn:
                b_off = [[a_tile_bytes + 16 * swizzle_chunk(b_chunks, wc + lane % 8 + 8 * (lane // 16),
                                                            2 * s + (lane // 8) % 2) for lane in LANES]
                         for s in range(ksteps)]
            else:
                b_off = [[a_tile_bytes + 16 * swizzle_chunk(b_chunks, lane % 8 + 8 * ((lane // 8) % 2),
                                                            (wc + 16 * p) // 8 + lane // 16) for lane in LANES]
                         for p in range(ni_n // 2)]
            for s in range(ksteps):
                a = []
                for mi in range(mi_n):
                    addrs = [read + a_off[s][lane] + mi * a_frag_step for lane in LANES]
                    assert_conflict_free(addrs, "A ldmatrix")
                    a.append(ldmatrix_flat(ring, addrs, 4))
                b = [None] * ni_n
                for p in range(ni_n // 2):
                    if tn:
                        addrs = [read + b_off[s][lane] + p * b_frag_step for lane in LANES]
                        r = ldmatrix_flat(ring, addrs, 4)
                    else:
                        addrs = [read + b_off[p][lane] + s * b_kstep for lane in LANES]
                        r = ldmatrix_flat(ring, addrs, 4, trans=True)
                    assert_conflict_free(addrs, "B ldmatrix")
                    b[2 * p] = [[r[lane][0], r[lane][1]] for lane in LANES]
                    b[2 * p + 1] = [[r[lane][2], r[lane][3]] for lane in LANES]
                for mi in range(mi_n):
                    for ni in range(ni_n):
                        acc[w][mi][ni] = mma_m16n8k16(a[mi], b[ni], acc[w][mi][ni])
        read = 0 if read + stage_bytes == stages * stage_bytes else read + stage_bytes
        write = 0 if write + stage_bytes == stages * stage_bytes else write + stage_bytes
    C = np.full((bm, bn), np.nan)
    for w in range(warps):
        wr, wc = (w // (bn // wn)) * wm, (w % (bn // wn)) * wn
        for mi in range(mi_n):
            for ni in range(ni_n):
                for lane in LANES:
                    g, t = lane // 4, lane % 4
                    for h in range(2):
                        for e in range(2):
                            row, col = wr + 16 * mi + g + 8 * h, wc + 8 * ni + 2 * t + e
                            assert np.isnan(C[row, col]), "two lanes own one output"
                            C[row, col] = acc[w][mi][ni][lane][2 * h + e]
    return C


def _stored(M, N, K, tn, pad, seed, vec=1):
    """A (M x lda) and B stored (N x ldb for TN, K x ldb for NN) with NaN in the padding columns, so a read
    past a row's edge would poison the product; and B as the math sees it (K x N). The leading dimensions
    are width + pad, rounded up to a multiple of 8 for VEC = 8 (the launcher picks VEC = 8 only then)."""
    def ld(width):
        return width + pad + (-(width + pad) % 8 if vec == 8 else 0)

    b_width = K if tn else N
    A = np.full((M, ld(K)), np.nan)
    A[:, :K] = _ints((M, K), seed)
    Bm = _ints((K, N), seed + 1)
    Bs = np.full((N if tn else K, ld(b_width)), np.nan)
    Bs[:, :b_width] = Bm.T if tn else Bm
    return A, Bs, Bm


@pytest.mark.parametrize("tn", [False, True], ids=["NN", "TN"])
@pytest.mark.parametrize("M, N, K, pad, vec", [
    (128, 128, 96, 0, 8),    # whole tiles, three k-tiles (fewer than STAGES - 1 + 1 in flight)
    (100, 90, 27, 0, 8),     # M, N edges inside the tile; K = 27 leaves a chunk of 3 halves (6 source bytes)
    (128, 128, 200, 8, 8),   # more k-tiles than stages (the ring wraps); K % 8 == 0, K % BK != 0
    (37, 128, 165, 3, 1),    # VEC = 1: odd leading dimensions, element-wise loads into the same layout
    (9, 13, 7, 1, 1),
], ids=["whole", "edges-partial-chunk", "ring-wraps", "vec1", "tiny-vec1"])
def test_rung03_block_computes_the_product_with_swizzled_tiles(tn, M, N, K, pad, vec):
    """All warps of one block, every k-tile through the STAGES ring: each output exactly, zeros outside
    M x N, no NaN read from the padding columns (cp.async src-size / element guards), every ldmatrix and
    every quarter-warp of copies conflict-free."""
    A, Bs, Bm = _stored(M, N, K, tn, pad, 7, vec)
    C = rung03_block(A, Bs, M, N, K, A.shape[1], Bs.shape[1], tn, vec)
    assert np.array_equal(C[:M, :N], A[:, :K] @ Bm)
    assert not C[M:, :].any() and not C[:, N:].any()


def test_rung03_block_at_an_interior_offset_and_other_geometries():
    """A block that is not the first (row0, col0 > 0), and knob values other than the family's defaults
    (8 warps of 64x32, BK = 64, 2 stages) keep the index math exact."""
    for tn in (False, True):
        A, Bs, Bm = _stored(200, 300, 83, tn, 0, 11, vec=8)
        C = rung03_block(A, Bs, 200, 300, 83, A.shape[1], Bs.shape[1], tn, 8, row0=128, col0=256)
        assert np.array_equal(C[:72, :44], (A[:, :83] @ Bm)[128:200, 256:300])
        assert not C[72:, :].any() and not C[:, 44:].any()
    knobs = {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "WN": 32, "THREADS": 256, "STAGES": 2}
    for tn in (False, True):
        for vec in (1, 8):
            A, Bs, Bm = _stored(128, 128, 150, tn, 2, 12, vec)
            C = rung03_block(A, Bs, 128, 128, 150, A.shape[1], Bs.shape[1], tn, vec, knobs=knobs)
            assert np.array_equal(C, A[:, :150] @ Bm)
