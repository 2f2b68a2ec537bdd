"""CPU: the decode family (lab.families.decode): every M bucket's build compiles through NVRTC for sm_90 and sm_80
with no spills and with tensor-core SASS; the rung's fragment mapping (16-byte chunks of 8 k as two mma k-steps),
its K split across warps and its tails, executed lane by lane in NumPy against tests/test_gemm_tc_fragments.py's
model of mma.m16n8k16, give X @ W^T exactly; the family's problems, reference, bound, output decoding and checks
run end to end on a NumPy stand-in for the kernel; its launch plan and shape families cover the required
cases; bad input gets one sentence."""

import numpy as np
import pytest
from test_gemm_tc_fragments import mma_m16n8k16

from lab.core import build, headers
from lab.core.errors import LabError
from lab.families.decode import (
    BUCKET_SHAPES,
    DTYPES,
    HEADLINE_SIDES,
    HEADLINE_TOKENS,
    STUDY_FORCES,
    DecodeFamily,
    n_tiles,
    partial_tile_bytes,
    token_chunks,
    vectors_fit,
)
from lab.families.gemm_tc import BFLOAT16, to_float32, to_storage
from lab.measure.verify import check_case

DEC = DecodeFamily()
RUNG = DEC.rung("01")
REGISTERS_PER_SM = 65536


# --- compiling ------------------------------------------------------------------------------------

# Each M bucket as the launcher builds it at N = K = 8192, fp16 with 16-byte loads for sm_90; bf16 with element
# loads for sm_80 at the smallest, the target's and the largest bucket (every type, path and arch for every
# bucket would be 4x the compiles, ~1 s each, for no new code path).
BUILDS = [(mt, 90, "float16", 8) for mt in BUCKET_SHAPES] + [(mt, 80, BFLOAT16, 1) for mt in (1, 2, 16)]


@pytest.mark.parametrize("mt, arch, dtype, vec", BUILDS,
                         ids=[f"MT{mt}-sm_{a}-{d}-VEC{v}" for mt, a, d, v in BUILDS])
def test_every_bucket_compiles_without_spills_on_tensor_cores(mt, arch, dtype, vec):
    (launch,) = DEC.launch_plan(RUNG, 8 * mt, 8192, 8192, dtype, vec)
    k = launch.knobs
    assert (k["MT"], k["VEC"], k["BF16"]) == (mt, vec, int(dtype == BFLOAT16))
    rep = build.compile_report(launch.spec, arch)
    assert rep.registers > 0 and rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0, rep
    assert rep.stack_frame_bytes == 0, rep
    assert rep.smem_static_bytes == partial_tile_bytes(k["WARPS"], k["RT"], k["MT"])  # the partial tiles alone
    # The header's bytes-in-flight argument: at least 3 blocks of 4 warps fit an SM's registers.
    per_warp = -(-rep.registers // 8) * 8 * 32
    assert REGISTERS_PER_SM // (per_warp * k["WARPS"]) >= 3, rep.registers
    if rep.sass_available:
        ops = rep.instructions
        assert ops.get("HMMA", 0) > 0, ops
        if vec == 8:
            assert ops.get("LDG.128", 0) > 0 and "LDG.U16" not in ops, ops
        else:
            assert "LDG.128" not in ops and ops.get("LDG.U16", 0) > 0, ops
        assert not any(op.startswith(("LDL", "STL")) for op in ops), ops


def test_the_eight_warp_build_compiles_and_keeps_one_block_per_sm():
    """N = K = 4096, M = 16: 128 blocks of 32 rows, no more than the SMs, so 8 warps a block."""
    (launch,) = DEC.launch_plan(RUNG, 16, 4096, 4096, "float16", 8)
    assert launch.knobs["WARPS"] == 8 and launch.threads == 256 and launch.grid == 128
    rep = build.compile_report(launch.spec, 90)
    assert rep.spill_store_bytes == 0 and rep.stack_frame_bytes == 0 and rep.registers <= 255, rep


def test_the_rung_refuses_archs_without_bf16_mma():
    with pytest.raises(LabError, match="needs sm_80"):
        build.compile_cubin(RUNG.spec, 75)


def test_the_header_states_the_knobs_the_family_runs():
    assert not headers.knob_mismatches(DEC), headers.knob_mismatches(DEC)
    source = (build.KERNELS_DIR / RUNG.spec.source).read_text()
    head = headers.header(source)
    for part in ("Prediction (", "Requires:", "Knobs", "Ideas", "N = K = 4096"):
        assert part in head, part


# --- the rung's index math, lane by lane ----------------------------------------------------------

def emulate_block(X, W, M, N, K, block, MT, RT, CHUNKS, WARPS, vec):
    """One block of kernels/decode/01_mma_gemv.cu, its expressions transcribed term by term: every lane's chunk
    loads (rows clamped, tokens predicated, K edge masked), two mma k-steps per chunk through the PTX model, the
    warps' partial tiles summed in warp order and stored where inside M x N. Returns {(token, row): value}."""
    KB = 32 * CHUNKS
    row0 = block * 16 * RT
    whole = K // KB

    def load_chunk(mat, row, k, edge):
        if vec == 8:
            if edge and k >= K:
                return np.zeros(8)
            assert k + 8 <= mat.shape[1], "a 16-byte chunk past the row's leading dimension"
            chunk = mat[row, k:k + 8].copy()
            if edge and k + 8 > K:
                chunk[K - k:] = 0
            return chunk
        return np.array([mat[row, k + e] if (not edge or k + e < K) else 0.0 for e in range(8)])

    partial = np.zeros((WARPS, RT * MT * 4, 32))
    for warp in range(WARPS):
        acc = [[[[0.0] * 4 for _ in range(32)] for _ in range(MT)] for _ in range(RT)]
        blocks = [(kb, False) for kb in range(warp, whole, WARPS)]
        if whole * KB < K and whole % WARPS == warp:
            blocks.append((whole, True))
        for kb, edge in blocks:
            for u in range(CHUNKS):
                w = [[[None, None] for _ in range(RT)] for _ in range(32)]
                x = [[None] * MT for _ in range(32)]
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    k = kb * KB + 8 * t + 32 * u
                    for r in range(RT):
                        for h in range(2):
                            w[lane][r][h] = load_chunk(W, min(row0 + 16 * r + 8 * h + g, N - 1), k, edge)
                    for j in range(MT):
                        ok = 8 * j + g < M
                        x[lane][j] = load_chunk(X, min(8 * j + g, M - 1), k, edge) if ok else np.zeros(8)
                assert not any(np.isnan(c).any() for lane in range(32) for pair in w[lane] for c in pair)
                assert not any(np.isnan(c).any() for lane in range(32) for c in x[lane]), "read X past K"
                def word(chunk, q):  # word q of a chunk: its elements 2q and 2q + 1
                    return chunk[2 * q], chunk[2 * q + 1]

                for s in range(2):
                    for r in range(RT):
                        a = [[word(w[ln][r][0], 2 * s), word(w[ln][r][1], 2 * s), word(w[ln][r][0], 2 * s + 1),
                              word(w[ln][r][1], 2 * s + 1)] for ln in range(32)]
                        for j in range(MT):
                            b = [[word(x[ln][j], 2 * s), word(x[ln][j], 2 * s + 1)] for ln in range(32)]
                            acc[r][j] = mma_m16n8k16(a, b, acc[r][j])
        for r in range(RT):
            for j in range(MT):
                for i in range(4):
                    for lane in range(32):
                        partial[warp, (r * MT + j) * 4 + i, lane] = acc[r][j][lane][i]
    stored = {}
    for e in range(RT * MT * 4 * 32):
        reg, lane = e // 32, e % 32
        total = partial[0, reg, lane]
        for w_ in range(1, WARPS):
            total += partial[w_, reg, lane]
        r, j, i = reg // (MT * 4), (reg // 4) % MT, reg % 4
        row, token = row0 + 16 * r + lane // 4 + 8 * (i // 2), 8 * j + 2 * (lane % 4) + i % 2
        if row < N and token < M:
            assert (token, row) not in stored, "two threads store one output"
            stored[(token, row)] = total
    return stored


def _integer_operand(rows, cols, ld, seed):
    """Small integers (exact in any order of summation) with NaN in the padding columns."""
    out = np.full((rows, ld), np.nan)
    out[:, :cols] = np.random.default_rng(seed).integers(-4, 5, size=(rows, cols))
    return out


@pytest.mark.parametrize("M, N, K, ld, MT, RT, CHUNKS, WARPS, vec", [
    (1, 16, 64, 64, 1, 1, 2, 2, 8),      # whole k-blocks only; one token in an 8-token tile
    (5, 23, 77, 80, 1, 1, 1, 2, 8),      # K % 8 = 5: a straddling chunk, a partial k-block; rows past N clamped
    (13, 40, 100, 103, 2, 2, 2, 3, 1),   # element loads, odd leading dimension, 3 warps, 32-row blocks
    (3, 5, 9, 16, 1, 2, 1, 4, 8),        # fewer k-blocks than warps; N < 16
    (20, 33, 40, 40, 4, 1, 1, 2, 8),     # three 8-token tiles used of four
    (9, 16, 1, 8, 2, 1, 1, 2, 1),        # K = 1
], ids=["whole", "straddle", "vec1", "few-k", "mt4", "k1"])
def test_the_kernels_lanes_compute_the_product_exactly(M, N, K, ld, MT, RT, CHUNKS, WARPS, vec):
    """Every block of the grid, every output once and exactly, nothing stored outside M x N, no NaN (padding) read."""
    X, W = _integer_operand(M, K, ld, 1), _integer_operand(N, K, ld, 2)
    want = X[:, :K] @ W[:, :K].T
    got = np.full((M, N), np.nan)
    for block in range(-(-N // (16 * RT))):
        for (token, row), value in emulate_block(X, W, M, N, K, block, MT, RT, CHUNKS, WARPS, vec).items():
            assert np.isnan(got[token, row]), "two blocks store one output"
            got[token, row] = value
    assert np.array_equal(got, want)


def test_the_kernel_transcribed_above_matches_the_source():
    """The expressions emulate_block transcribes, as they stand in the rung (a drift here must reach the test)."""
    source = (build.KERNELS_DIR / RUNG.spec.source).read_text()
    for expression in (
            "min(row0 + 16 * r + 8 * h + g, N - 1)", "x_ok[j] = 8 * j + g < M;", "min(8 * j + g, M - 1)",
            "k_lane + 32 * u", "kb * KB + 8 * t", "whole * KB < K && whole % WARPS == warp",
            "w[u][r][0].w[2 * s], w[u][r][1].w[2 * s], w[u][r][0].w[2 * s + 1]", "w[u][r][1].w[2 * s + 1]",
            "x[u][j].w[2 * s], x[u][j].w[2 * s + 1]", "(r * MT + j) * 4 + i",
            "row0 + 16 * r + l / 4 + 8 * (i / 2), token = 8 * j + 2 * (l % 4) + (i % 2)",
            "if (row < N && token < M)", "if (EDGE && k >= K) return zero_chunk();",
            "(EDGE && k + 8 > K) ? keep_first(c, K - k) : c"):
        assert expression in source, expression


# --- the pipeline on the CPU: problems, reference, bound, checks ------------------------------------

class NumpyStandIn(DecodeFamily):
    """The family on NumPy arrays, with the kernel replaced by NumPy (fp32 accumulation, one rounding to the
    output type), or by one of the ways a kernel goes wrong."""

    array_module = np

    def __init__(self, behaviour: str = "ok"):
        super().__init__()
        self.behaviour = behaviour

    def launch(self, rung, problem, out, set_index=0):
        p = problem.params
        M, N, K, dtype = p["M"], p["N"], p["K"], p["dtype"]
        width = p["ldx"] if self.behaviour == "reads_padding" else K  # the padding holds NaN
        x = to_float32(problem.inputs["X"][0][:, :width], dtype)
        w = to_float32(problem.inputs["W"][0][:, :width], dtype)
        if self.behaviour == "fp16_accumulation":
            acc = np.zeros((M, N), np.float16)
            for k in range(K):
                acc = (acc.astype(np.float32) + np.outer(x[:, k], w[:, k])).astype(np.float16)
            acc = acc.astype(np.float32)
        else:
            acc = x @ w.T
        if self.behaviour == "one_element_off":
            acc[M - 1, N - 1] += np.float32(0.01) * (abs(acc[M - 1, N - 1]) + 1)
        rows = M - 1 if self.behaviour == "drops_last_token" else M
        out[:rows, :N] = to_storage(acc[:rows].astype(np.float32), dtype)
        if self.behaviour == "writes_padding" and out.shape[1] > N:
            out[:, N:] = 0


@pytest.mark.parametrize("case", [
    {"M": 1, "N": 61, "K": 131, "dtype": "float16"},
    {"M": 17, "N": 33, "K": 77, "dtype": BFLOAT16},
    {"M": 9, "N": 50, "K": 100, "pad": 4, "dtype": "float16"},
    {"M": 3, "N": 29, "K": 77, "x_offset": 2, "w_offset": 5, "y_offset": 1, "dtype": BFLOAT16},
    {"M": 4, "N": 5, "K": 8192, "dtype": "float16"},
    {"M": 130, "N": 7, "K": 9, "dtype": BFLOAT16},
])
def test_a_correct_stand_in_passes_every_check(case):
    result = check_case(NumpyStandIn(), RUNG, case, seed=5)
    assert result.passed, result.reasons
    assert 0 < result.worst_ratio <= 1


@pytest.mark.parametrize("behaviour, case, why", [
    ("reads_padding", {"M": 4, "N": 16, "K": 20, "pad": 4}, "NaN"),
    ("fp16_accumulation", {"M": 8, "N": 16, "K": 512, "dtype": "float16"}, "wrong result"),
    ("fp16_accumulation", {"M": 8, "N": 16, "K": 512, "dtype": BFLOAT16}, "wrong result"),
    ("one_element_off", {"M": 16, "N": 24, "K": 96, "dtype": BFLOAT16}, "wrong result"),
    ("one_element_off", {"M": 1, "N": 24, "K": 96}, "wrong result"),
    ("writes_padding", {"M": 8, "N": 8, "K": 8, "pad": 3}, "must leave alone"),
    ("drops_last_token", {"M": 9, "N": 8, "K": 8}, "unwritten"),
])
def test_a_wrong_stand_in_fails(behaviour, case, why):
    result = check_case(NumpyStandIn(behaviour), RUNG, case, seed=6)
    assert not result.passed
    assert any(why in reason for reason in result.reasons), result.reasons


def test_problems_hold_rounded_values_nan_padding_and_their_offsets():
    fam = NumpyStandIn()
    p = fam.make_problem(seed=1, M=3, N=5, K=7, pad=2, w_offset=3, y_offset=1, dtype=BFLOAT16)
    x, w = p.inputs["X"][0], p.inputs["W"][0]
    assert x.shape == (3, 9) and w.shape == (5, 9) and x.dtype == w.dtype == np.uint16 == p.dtype
    assert (p.params["ldx"], p.params["ldw"], p.params["ldy"]) == (9, 9, 7) and p.out_shape == (3, 7)
    assert p.out_offset == 1 and p.write_mask[:, :5].all() and not p.write_mask[:, 5:].any()
    assert np.isnan(to_float32(w[:, 7:], BFLOAT16)).all() and not np.isnan(to_float32(w[:, :7], BFLOAT16)).any()
    assert np.isnan(to_float32(w.base[:3], BFLOAT16)).all()  # the offset head
    assert p.bytes_moved == 2 * (5 * 7 + 3 * 7 + 3 * 5) and p.flops == 2 * 3 * 5 * 7
    assert p.label == "M=3 N=5 K=7 bfloat16 ld+2 W+3 Y+1"
    ref = fam.reference(p)
    want = to_float32(x[:, :7], BFLOAT16).astype(np.float64) @ to_float32(w[:, :7], BFLOAT16).astype(np.float64).T
    assert ref.shape == (3, 7) and np.array_equal(ref[:, :5], want) and not ref[:, 5:].any()
    bound = fam.error_bound(p, ref)
    assert (bound[:, :5] > 0).all() and not bound[:, 5:].any()


def test_fp16_problems_are_float16_and_sets_differ():
    p = NumpyStandIn().make_problem(seed=2, M=2, N=3, K=16, sets=3)
    assert len(p.inputs["X"]) == len(p.inputs["W"]) == 3 and p.dtype == np.float16
    assert not np.array_equal(p.inputs["W"][0], p.inputs["W"][1])
    assert p.params == {"M": 2, "N": 3, "K": 16, "dtype": "float16", "ldx": 16, "ldw": 16, "ldy": 3}


@pytest.mark.parametrize("bad, match", [
    ({"M": 0}, "M, N, K >= 1"), ({"K": 0}, "M, N, K >= 1"), ({"dtype": "float32"}, "dtype"),
    ({"pad": -1}, "pad >= 0"), ({"w_offset": -2}, "offsets >= 0"), ({"N": 2**31}, "below 2\\^30"),
])
def test_bad_parameters_get_one_clear_sentence(bad, match):
    with pytest.raises(LabError, match=match) as info:
        NumpyStandIn().make_problem(**({"M": 2, "N": 8, "K": 8} | bad))
    assert str(info.value).count(". ") == 0 and str(info.value).endswith(".")


# --- the launch plan --------------------------------------------------------------------------------

def test_m_buckets_and_token_chunks():
    assert [n_tiles(m) for m in (1, 8, 9, 16, 17, 32, 33, 64, 65, 127, 128)] == [1, 1, 2, 2, 4, 4, 8, 8, 16, 16, 16]
    assert token_chunks(1) == [(0, 1)] and token_chunks(128) == [(0, 128)]
    assert token_chunks(129) == [(0, 128), (128, 1)] and token_chunks(300) == [(0, 128), (128, 128), (256, 44)]


def test_the_plan_picks_the_bucket_the_warps_and_the_type():
    def knobs(M, N, sm_count=132, dtype="float16", vec=8, fam=DEC):
        return [launch.knobs for launch in fam.launch_plan(RUNG, M, N, N, dtype, vec, sm_count)]

    (k,) = knobs(1, 8192)
    assert (k["MT"], k["RT"], k["CHUNKS"], k["WARPS"], k["THREADS"], k["BF16"], k["VEC"]) == (1, 1, 8, 4, 128, 0, 8)
    (k,) = knobs(16, 8192, dtype=BFLOAT16, vec=1)  # 256 blocks of 32 rows: more than the SMs
    assert (k["MT"], k["RT"], k["CHUNKS"], k["WARPS"], k["BF16"], k["VEC"]) == (2, 2, 4, 4, 1, 1)
    assert knobs(16, 4096)[0]["WARPS"] == 8  # 128 blocks <= 132 SMs
    assert knobs(16, 4096, sm_count=100)[0]["WARPS"] == 4
    assert knobs(1, 2112)[0]["WARPS"] == 8 and knobs(1, 2113)[0]["WARPS"] == 4  # 132 vs 133 blocks of 16 rows
    assert [k["MT"] for k in knobs(200, 8192)] == [16, 16]
    assert knobs(128, 97)[0]["WARPS"] == 4  # 7 blocks, but 8 warps' MT = 16 tiles would not fit 48 KB
    for m in (1, 8, 9, 16, 17, 32, 33, 64, 65, 128):  # every plan's partial tiles fit static shared memory
        for n in (1, 97, 4096, 8192):
            assert all(partial_tile_bytes(k["WARPS"], k["RT"], k["MT"]) <= 48 * 1024 for k in knobs(m, n)), (m, n)
    plan = DEC.launch_plan(RUNG, 200, 100, 100, "float16", 8)
    assert [(s.first, s.tokens, s.grid) for s in plan] == [(0, 128, 7), (128, 72, 7)]
    forced = DecodeFamily(force={"WARPS": 2, "CHUNKS": 1, "RT": 4})
    (k,) = knobs(5, 8192, fam=forced)
    assert (k["WARPS"], k["THREADS"], k["CHUNKS"], k["RT"]) == (2, 64, 1, 4)
    assert forced.launch_plan(RUNG, 5, 8192, 8192, "float16", 8)[0].grid == 128


def test_eight_warp_blocks_when_a_single_wave_of_them_fits():
    """With a GPU to ask, `resident` says how many blocks of the 8-warp build one SM holds (its registers and
    shared memory): 8 warps whenever every block is resident at once, e.g. N = K = 4096 at M = 1 (256 blocks of
    16 rows, two 8-warp blocks of ~128 registers per SM), but not N = K = 8192 (512 blocks)."""
    asked = []

    def two_per_sm(spec):
        asked.append(dict(spec.knobs))
        return 2

    def warps(M, N):
        return [s.knobs["WARPS"] for s in DEC.launch_plan(RUNG, M, N, N, "float16", 8, 132, two_per_sm)]

    assert warps(1, 4096) == [8] and warps(1, 8192) == [4] and warps(16, 8192) == [8] and warps(16, 16384) == [4]
    assert all(k["WARPS"] == 8 and k["THREADS"] == 256 for k in asked)
    assert warps(128, 97) == [4]  # one wave, but the partial tiles of 8 warps would not fit


def test_the_knob_study_forces_what_it_names_within_shared_memory():
    for force in STUDY_FORCES:
        fam = DecodeFamily(force=force)
        for m in (1, 8, 16):
            for n in (4096, 8192):
                (k,) = [s.knobs for s in fam.launch_plan(RUNG, m, n, n, "float16", 8)]
                assert all(k[name] == value for name, value in (force or {}).items())
                assert partial_tile_bytes(k["WARPS"], k["RT"], k["MT"]) <= 48 * 1024


def test_every_bucket_keeps_its_loads_and_accumulators_in_about_128_registers():
    """The bucket table's reasoning, as arithmetic: 32-bit registers for one k-block's chunks (CHUNKS * (2 RT + MT)
    16-byte chunks, 4 each) and the accumulators (4 RT MT, two sets when RT = MT = 1) stay near 100, so ~128 with
    addresses and indices (the compile test above measures them)."""
    for mt, (rt, chunks) in BUCKET_SHAPES.items():
        loads = 4 * chunks * (2 * rt + mt)
        accumulators = 4 * rt * mt * (2 if rt * mt == 1 else 1)
        assert loads + accumulators <= 136, (mt, loads, accumulators)
        if mt <= 2:  # up to M = 16, X's re-reads (M / ROWS of W's bytes) stay at or below half
            assert 8 * mt / (16 * rt) <= 0.5, mt


def test_vec_follows_the_operands_alignment_and_notes_say_which_path_ran():
    fam = NumpyStandIn()
    cases = [({"M": 3, "N": 20, "K": 40}, True), ({"M": 3, "N": 20, "K": 36, "pad": 4}, True),
             ({"M": 3, "N": 20, "K": 36, "pad": 3}, False), ({"M": 3, "N": 20, "K": 40, "w_offset": 1}, False),
             ({"M": 3, "N": 20, "K": 40, "x_offset": 8}, True), ({"M": 3, "N": 20, "K": 40, "y_offset": 1}, True)]
    for case, fits in cases:
        p = fam.make_problem(**case)
        x, w = p.inputs["X"][0], p.inputs["W"][0]
        assert vectors_fit(x, p.params["ldx"], w, p.params["ldw"]) == fits, case
        notes = fam.launch_notes(RUNG, p, None)
        assert notes["path"] == ("16-byte loads" if fits else "element loads"), case
        assert notes["launches"] == 1 and notes["warps"] == 8 and notes["blocks"] == 2 and notes["mt"] == 1
    assert fam.launch_notes(RUNG, fam.make_problem(M=200, N=20, K=40), None)["launches"] == 2


# --- shape families ---------------------------------------------------------------------------------

def test_check_cases_cover_the_issue():
    cases = DEC.check_cases()
    assert {c["dtype"] for c in cases} == set(DTYPES)
    shapes = [tuple(sorted((k, v) for k, v in c.items() if k != "dtype")) for c in cases]
    assert all(shapes.count(s) == 2 for s in shapes)  # each shape in both types
    assert {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 127, 128} <= {c["M"] for c in cases}
    assert any(c["M"] > 128 for c in cases)  # more than one launch
    assert {1, 7, 8, 9, 4099} <= {c["K"] for c in cases} and {1, 17, 4097} <= {c["N"] for c in cases}
    assert {97, 131, 61} <= {x for c in cases for x in (c["N"], c["K"])}  # primes
    padded = [c for c in cases if c.get("pad")]
    assert any((c["K"] + c["pad"]) % 8 == 0 and c["K"] % 8 for c in padded)  # 16-byte loads, straddling chunk
    assert any((c["K"] + c["pad"]) % 8 for c in padded)  # element loads
    for key in ("x_offset", "w_offset", "y_offset"):
        assert any(c.get(key, 0) % 8 for c in cases), key
    assert all(c["M"] * c["N"] <= 128 * 4097 and c["M"] * c["K"] <= 200 * 4099 for c in cases)  # quick references


def test_headline_sweep_and_tail():
    heads = DEC.headline_params()
    assert len(heads) == 32 and {(p["M"], p["N"], p["dtype"]) for p in heads} == {
        (m, n, d) for m in HEADLINE_TOKENS for n in HEADLINE_SIDES for d in DTYPES}
    assert all(p["N"] == p["K"] for p in heads)
    sweep = DEC.sweep_params(1 << 32)
    assert {p["M"] for p in sweep} == {1, 16} and {p["N"] for p in sweep} >= {1024, 4096, 8192, 16384}
    assert all(p["N"] == p["K"] and p["dtype"] == "float16" for p in sweep)
    assert DEC.sweep_params(1 << 20) == sweep[:1]  # the smallest always, the rest within max_bytes
    assert [p["M"] for p in DEC.tail_params()] == list(range(1, 21))
    assert {(p["N"], p["K"]) for p in DEC.tail_params()} == {(8192, 8192)}


def test_min_dram_bytes_readme_rows_and_resources():
    assert DEC.min_dram_bytes({"M": 2, "N": 3, "K": 4}) == 2 * (12 + 8 + 6)
    assert DEC.in_readme({"M": 1}) and DEC.in_readme({"M": 16}) and not DEC.in_readme({"M": 64})
    assert DEC.block_resources(RUNG) == (128, 0)
    assert DEC.metric == "GB/s" and DEC.ceiling_name == "cupy_device_copy" and "cublas" in DEC.baselines()
