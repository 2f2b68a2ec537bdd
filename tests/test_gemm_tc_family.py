"""CPU: the tensor-core GEMM family (lab.families.gemm_tc): every rung compiles for every mma.sync arch in both
types, both layouts and both VEC variants with no spills and with tensor-core SASS; the family's problems,
reference, bound, output decoding and checks run end to end on NumPy stand-ins for the kernel; its shape
families and launch plan cover the ladder's required cases."""

import dataclasses
import types

import numpy as np
import pytest

from lab.core import build
from lab.core.errors import LabError
from lab.families import families
from lab.families.gemm_tc import (
    BFLOAT16,
    GemmTcFamily,
    block_tile,
    dynamic_smem_bytes,
    round_to_bfloat16_bits,
    to_float32,
    to_storage,
    uses_tma,
)
from lab.measure.verify import check_case

TC = GemmTcFamily()
ARCHS = (80, 86, 89, 90)  # mma.sync m16n8k16 for fp16 and bf16 needs sm_80
SYNC_RUNGS = [r for r in TC.rungs if not uses_tma(r)]
HOPPER_RUNGS = [r for r in TC.rungs + TC.candidate_rungs if uses_tma(r)]  # compiled here before their GPU run too
VARIANTS = [(r, arch, bf16, tn, vec) for r in SYNC_RUNGS for arch in ARCHS for bf16 in (0, 1) for tn in (0, 1)
            for vec in ((1, 8) if r.key in TC.VEC_RUNGS else (None,))]
MULTISTAGE = TC.rung("03")


def _id(v) -> str:
    rung, arch, bf16, tn, vec = v
    return f"{rung.key}-sm_{arch}-{'bf16' if bf16 else 'fp16'}-{'TN' if tn else 'NN'}" + (f"-VEC{vec}" if vec else "")


@pytest.mark.parametrize("variant", VARIANTS, ids=[_id(v) for v in VARIANTS])
def test_every_rung_variant_compiles_without_spills_and_runs_on_tensor_cores(variant):
    rung, arch, bf16, tn, vec = variant
    spec = rung.spec.with_knobs(BF16=bf16, TN=tn, **({"VEC": vec} if vec else {}))
    rep = build.compile_report(spec, arch)
    assert rep.registers > 0 and rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0
    assert rep.stack_frame_bytes == 0, rep
    assert rep.smem_static_bytes <= 48 * 1024
    if rep.sass_available:
        assert rep.instructions.get("HMMA", 0) > 0, rep.instructions
        if rung.number >= 2:
            assert rep.instructions.get("LDSM", 0) > 0, rep.instructions
        if vec == 8 and "STAGES" in dict(rung.spec.knobs):  # cp.async straight to shared memory
            assert any(op.startswith("LDGSTS") for op in rep.instructions), rep.instructions
        elif vec == 8:
            assert rep.instructions.get("LDG.128", 0) > 0, rep.instructions


STAGED = [(arch, bf16, tn, vec, stages) for arch in ARCHS for bf16 in (0, 1) for tn in (0, 1) for vec in (1, 8)
          for stages in (2, 3)]  # STAGES = 4 (the default) is in VARIANTS above


@pytest.mark.parametrize("variant", STAGED, ids=[f"sm_{a}-{'bf16' if b else 'fp16'}-{'TN' if t else 'NN'}-VEC{v}-"
                                                 f"STAGES{s}" for a, b, t, v, s in STAGED])
def test_the_multistage_rung_compiles_at_every_pipeline_depth(variant):
    arch, bf16, tn, vec, stages = variant
    rung = dataclasses.replace(MULTISTAGE, spec=MULTISTAGE.spec.with_knobs(BF16=bf16, TN=tn, VEC=vec, STAGES=stages))
    rep = build.compile_report(rung.spec, arch, TC.dynamic_smem_bytes(rung))
    assert rep.registers > 0 and rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0 and rep.stack_frame_bytes == 0
    assert rep.smem_static_bytes == 0  # every tile is in the dynamic buffer
    if rep.sass_available:
        assert rep.instructions.get("HMMA", 0) > 0 and rep.instructions.get("LDSM", 0) > 0, rep.instructions
        cp_async = sum(n for op, n in rep.instructions.items() if op.startswith("LDGSTS"))
        assert (cp_async > 0) == (vec == 8), rep.instructions  # VEC = 1 loads element by element, synchronously


def test_the_multistage_rung_asks_for_its_dynamic_shared_memory():
    """STAGES * (BM + BN) * BK halves, unpadded (the swizzle replaces rung 02's padding): 64 KB at the defaults,
    above the 48 KB a launch gets without opting in; the other rungs use static shared memory only."""
    assert TC.dynamic_smem_bytes(MULTISTAGE) == 4 * (128 + 128) * 32 * 2 == 65536
    assert TC.block_resources(MULTISTAGE) == (128, 65536)
    assert TC.dynamic_smem_bytes(TC.rung("02")) == 0 and TC.dynamic_smem_bytes(TC.rung("01")) == 0
    shallow = dataclasses.replace(MULTISTAGE, spec=MULTISTAGE.spec.with_knobs(STAGES=2))
    assert TC.dynamic_smem_bytes(shallow) == 32768


def test_the_multistage_rung_traps_when_launched_with_too_little_shared_memory():
    source = (build.KERNELS_DIR / MULTISTAGE.spec.source).read_text()
    assert "if (dynamic_smem_size() < SMEM_BYTES) __trap();" in source
    assert "#define SMEM_BYTES (STAGES * STAGE_BYTES)" in source
    assert "#define STAGE_BYTES ((BM + BN) * BK * 2)" in source


def test_the_rungs_refuse_archs_without_bf16_mma():
    with pytest.raises(LabError, match="needs sm_80"):
        build.compile_cubin(TC.rungs[0].spec, 75)


HOPPER_VARIANTS = [(r, bf16, tn) for r in HOPPER_RUNGS for bf16 in (0, 1) for tn in (0, 1)]


@pytest.mark.parametrize("variant", HOPPER_VARIANTS, ids=[f"{r.key}-{'bf16' if b else 'fp16'}-{'TN' if t else 'NN'}"
                                                          for r, b, t in HOPPER_VARIANTS])
def test_the_hopper_rungs_compile_for_sm90a_with_tma_and_wgmma(variant):
    """sm_90a only (wgmma and setmaxnreg exist in no other target): no spills, no local memory, and the SASS
    holds what the headers promise: TMA loads (UTMALDG), mbarrier operations (SYNCS), warpgroup MMA (HGMMA),
    no mma.sync and no ldmatrix; rungs 05 on also move registers between their roles (USETMAXREG)."""
    rung, bf16, tn = variant
    spec = rung.spec.with_knobs(BF16=bf16, TN=tn)
    rep = build.compile_report(spec, 90, dynamic_smem_bytes(rung))
    assert rep.arch == "sm_90a"
    assert rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0 and rep.stack_frame_bytes == 0, rep
    if rep.sass_available:
        ops = rep.instructions
        assert ops.get("HGMMA", 0) + ops.get("HGMMA.64", 0) > 0 and ops.get("UTMALDG", 0) > 0, ops
        assert ops.get("SYNCS", 0) > 0 and "HMMA" not in ops and "LDSM" not in ops, ops
        assert (ops.get("USETMAXREG", 0) > 0) == (rung.number >= 5), ops


@pytest.mark.parametrize("variant", HOPPER_VARIANTS, ids=[f"{r.key}-{'bf16' if b else 'fp16'}-{'TN' if t else 'NN'}"
                                                          for r, b, t in HOPPER_VARIANTS])
def test_ptxas_keeps_the_wgmma_pipeline(variant):
    """ptxas serializes every wgmma of a kernel ("Potential Performance Loss: wgmma.mma_async instructions are
    serialized", C7515/C7520) when a non-wgmma instruction may write an accumulator while a group is in flight,
    or a warpgroup arrive sits on a divergent path: correct results, but each HGMMA waits for the last. Rung 07's
    old k-loop had it (C7515) and ran its data-parallel tiles at 0.92x of rung 06; its do-while k-loop (now the
    default) does not (results/h200/schedule_stream_k_do_while.json)."""
    rung, bf16, tn = variant
    log = build.compile_cubin(rung.spec.with_knobs(BF16=bf16, TN=tn), 90).log
    assert "Potential Performance Loss" not in log, log


@pytest.mark.parametrize("variant", [v for v in HOPPER_VARIANTS if v[0].key == "07_stream_k"],
                         ids=lambda v: f"{'bf16' if v[1] else 'fp16'}-{'TN' if v[2] else 'NN'}")
@pytest.mark.parametrize("knobs", [{}, {"SK_MIN_GAIN": 0}], ids=["default", "forced"])
def test_rung_07_do_while_k_loop_keeps_the_pipeline_without_spills(variant, knobs):
    rung, bf16, tn = variant
    spec = rung.spec.with_knobs(BF16=bf16, TN=tn, **knobs)
    assert "Potential Performance Loss" not in build.compile_cubin(spec, 90).log
    rep = build.compile_report(spec, 90, dynamic_smem_bytes(rung))
    assert rep.spill_store_bytes == 0 and rep.stack_frame_bytes == 0, rep


@pytest.mark.parametrize("variant", [v for v in HOPPER_VARIANTS if v[0].key == "07_stream_k"],
                         ids=lambda v: f"{'bf16' if v[1] else 'fp16'}-{'TN' if v[2] else 'NN'}")
def test_rung_07_old_while_loop_is_the_known_serialization(variant):
    """The contrast the lesson keeps (KLOOP_DO_WHILE = 0): the known C7515 and nothing else."""
    rung, bf16, tn = variant
    log = build.compile_cubin(rung.spec.with_knobs(BF16=bf16, TN=tn, KLOOP_DO_WHILE=0), 90).log
    assert "(C7515)" in log and log.count("Potential Performance Loss") == 1, log


@pytest.mark.parametrize("rung", HOPPER_RUNGS, ids=lambda r: r.key)
@pytest.mark.parametrize("arch", (80, 86, 89))
def test_the_hopper_rungs_refuse_older_archs_with_a_sentence(rung, arch):
    with pytest.raises(LabError, match="needs sm_90a"):
        build.compile_cubin(rung.spec, arch)


def test_runnable_rungs_leave_the_hopper_rungs_out_below_sm90_with_a_sentence():
    from lab.core.ladder import runnable_rungs

    here, skipped = runnable_rungs(TC.rungs, 86)
    assert here == SYNC_RUNGS and len(skipped) == len(TC.rungs) - len(SYNC_RUNGS)
    assert all("sm_90a" in line and "lab inspect gemm_tc" in line for line in skipped), skipped
    assert runnable_rungs(TC.rungs, 90) == (list(TC.rungs), [])


def test_the_hopper_rungs_ask_for_their_tiles_and_the_alignment_slack():
    """STAGES * (BM + BN) * BK * 2 bytes of tiles plus 1024 to start them on the swizzle's 1024-byte period."""
    assert TC.dynamic_smem_bytes(TC.rung("04")) == 4 * (128 + 128) * 64 * 2 + 1024 == 132096
    assert TC.dynamic_smem_bytes(TC.rung("05")) == 4 * (128 + 256) * 64 * 2 + 1024 == 197632
    assert TC.block_resources(TC.rung("05")) == (384, 197632)
    # Rung 10 also holds C's staging buffers: BM * BN * 2 / C_PARTS more, under the 227 KB a block may have.
    assert TC.dynamic_smem_bytes(TC.rung("10")) == 4 * (128 + 256) * 64 * 2 + 128 * 256 + 1024 == 230400 <= 232448
    for rung in HOPPER_RUNGS:
        source = (build.KERNELS_DIR / rung.spec.source).read_text()
        staging = " + CONSUMERS * STAGING_BYTES" if rung.launch in ("cluster_tma_store", "cluster_stream_k") else ""
        assert f"#define SMEM_BYTES (STAGES * STAGE_BYTES{staging} + 1024)" in source
        assert "if (dynamic_smem_size() < SMEM_BYTES) __trap();" in source


def test_the_family_is_in_the_catalogue_with_its_rungs():
    """Registered after its GPU tests passed on the H200 (results/h200/gemm_tc.json, gemm_tc_margin.json)."""
    assert isinstance(families()["gemm_tc"], GemmTcFamily)
    assert [r.number for r in TC.rungs] == [1, 2, 3, 4, 5, 6, 7, 9, 10, 11]
    # Rung 12 waits outside the ladder for its GPU tests; the family still finds it by key.
    assert [r.key for r in TC.candidate_rungs] == ["12_stream_k_cluster"] and TC.rung("12") is TC.candidate_rungs[0]
    assert TC.rung("12_stream_k_cluster").launch == "cluster_stream_k"
    assert all(r.spec.min_arch == 80 for r in SYNC_RUNGS)
    assert all(r.spec.min_arch == 90 and r.spec.arch_suffix == "a" for r in HOPPER_RUNGS)


def test_block_tiles_match_the_kernels_geometry():
    assert block_tile(TC.rung("01")) == (32, 32)
    assert block_tile(TC.rung("02")) == (128, 128)
    assert block_tile(TC.rung("03")) == (128, 128)
    assert block_tile(TC.rung("04")) == (128, 128)
    assert block_tile(TC.rung("05")) == (128, 256)
    assert all(block_tile(TC.rung(key)) == (128, 256) for key in ("06", "07", "09", "10"))
    assert block_tile(TC.rung("12")) == (128, 256)
    assert TC.PERSISTENT_RUNGS == ("06_persistent", "07_stream_k")
    assert TC.STREAM_K_RUNGS == ("07_stream_k",)  # the ladder's; rung 12 joins it after its GPU tests
    # Rung 12 holds rung 10's staging buffers as well as its stages: the same 230400 bytes.
    assert TC.dynamic_smem_bytes(TC.rung("12")) == TC.dynamic_smem_bytes(TC.rung("10")) == 230400


# --- the pipeline on the CPU: problems, reference, bound, bf16 decoding, checks ----------------

class NumpyStandIn(GemmTcFamily):
    """The family on NumPy arrays, with the kernel replaced by NumPy: fp32 accumulation (NumPy's SGEMM),
    alpha and beta in fp32, one rounding to the output type; or one of the ways a kernel goes wrong."""

    array_module = np

    def __init__(self, behaviour: str = "ok"):
        super().__init__()
        self.behaviour = behaviour

    def launch(self, rung, problem, out, set_index=0):
        p = problem.params
        M, N, K, dtype = p["M"], p["N"], p["K"], p["dtype"]
        a = to_float32(problem.inputs["A"][0][:, :K], dtype)
        b_stored = to_float32(problem.inputs["B"][0], dtype)
        b = b_stored[:, :N] if p["layout"] == "NN" else b_stored[:, :K].T
        if self.behaviour == "fp16_accumulation":
            acc = np.zeros((M, N), np.float16)
            for k in range(K):
                acc = (acc.astype(np.float32) + np.outer(a[:, k], b[k])).astype(np.float16)
            acc = acc.astype(np.float32)
        elif self.behaviour == "ignores_layout":  # reads a stored N x K B as if it were K x N
            acc = a @ b_stored[:K, :N]
        else:
            acc = a @ b
        r = np.float32(p["alpha"]) * acc
        if p["beta"] != 0 or self.behaviour == "reads_c_when_beta_is_zero":
            r = np.float32(p["beta"]) * to_float32(out[:, :N], dtype) + r
        if self.behaviour == "one_element_off":
            r[M - 1, N - 1] += np.float32(0.01) * (abs(r[M - 1, N - 1]) + 1)
        out[:, :N] = to_storage(r.astype(np.float32), dtype)
        if self.behaviour == "writes_padding" and out.shape[1] > N:
            out[:, N:] = 0


RUNG = TC.rungs[1]


@pytest.mark.parametrize("case", [
    {"M": 33, "N": 17, "K": 65, "layout": "NN", "dtype": "float16"},
    {"M": 33, "N": 17, "K": 65, "layout": "TN", "dtype": BFLOAT16},
    {"M": 20, "N": 30, "K": 300, "layout": "TN", "dtype": "float16", "alpha": -2.0, "beta": 0.5, "pad": 3},
    {"M": 20, "N": 30, "K": 300, "layout": "NN", "dtype": BFLOAT16, "alpha": 0.5, "beta": -1.5, "pad": 8},
    {"M": 4, "N": 5, "K": 16384, "layout": "TN", "dtype": "float16"},
    {"M": 1, "N": 1, "K": 1, "layout": "NN", "dtype": BFLOAT16},
])
def test_a_correct_stand_in_passes_every_check(case):
    result = check_case(NumpyStandIn(), RUNG, case, seed=5)
    assert result.passed, result.reasons
    assert 0 < result.worst_ratio <= 1


@pytest.mark.parametrize("behaviour, case, why", [
    ("fp16_accumulation", {"M": 16, "N": 16, "K": 512, "dtype": "float16"}, "wrong result"),
    ("fp16_accumulation", {"M": 16, "N": 16, "K": 512, "dtype": BFLOAT16}, "wrong result"),
    ("one_element_off", {"M": 40, "N": 24, "K": 96, "dtype": BFLOAT16, "layout": "NN"}, "wrong result"),
    ("one_element_off", {"M": 40, "N": 24, "K": 96, "dtype": "float16"}, "wrong result"),
    ("writes_padding", {"M": 8, "N": 8, "K": 8, "pad": 3}, "must leave alone"),
    ("reads_c_when_beta_is_zero", {"M": 8, "N": 8, "K": 8, "dtype": "float16"}, "NaN"),
    ("ignores_layout", {"M": 24, "N": 24, "K": 24, "layout": "TN"}, "wrong result"),
])
def test_a_wrong_stand_in_fails(behaviour, case, why):
    result = check_case(NumpyStandIn(behaviour), RUNG, case, seed=6)
    assert not result.passed
    assert any(why in reason for reason in result.reasons), result.reasons


def test_bf16_problems_hold_rounded_bit_patterns_and_the_reference_uses_them():
    fam = NumpyStandIn()
    p = fam.make_problem(seed=1, M=8, N=16, K=24, layout="TN", dtype=BFLOAT16)
    a = p.inputs["A"][0]
    assert a.dtype == np.uint16 and p.dtype == np.uint16 and p.inputs["B"][0].shape == (16, 24)
    assert np.array_equal(round_to_bfloat16_bits(to_float32(a, BFLOAT16)), a)  # already bf16 values
    b = to_float32(p.inputs["B"][0], BFLOAT16).astype(np.float64).T
    ref = fam.reference(p)
    assert np.array_equal(ref[:, :16], to_float32(a, BFLOAT16).astype(np.float64) @ b)


def test_leading_dimensions_and_flops():
    p = NumpyStandIn().make_problem(M=5, N=7, K=9, pad=3, layout="NN")
    assert (p.params["lda"], p.params["ldb"], p.params["ldc"]) == (12, 10, 10)
    assert p.inputs["B"][0].shape == (9, 10) and p.out_shape == (5, 10) and p.flops == 2 * 5 * 7 * 9
    q = NumpyStandIn().make_problem(M=5, N=7, K=9, pad=3, layout="TN")
    assert q.params["ldb"] == 12 and q.inputs["B"][0].shape == (7, 12)


@pytest.mark.parametrize("bad, match", [
    ({"layout": "NT"}, "layout"), ({"dtype": "float32"}, "dtype"), ({"K": 0}, "M, N, K >= 1"),
])
def test_bad_parameters_get_one_clear_sentence(bad, match):
    with pytest.raises(LabError, match=match):
        NumpyStandIn().make_problem(**({"M": 8, "N": 8, "K": 8} | bad))


# --- shape families and plan ------------------------------------------------------------------

def test_check_cases_cover_the_issue():
    cases = TC.check_cases()
    assert {(c["layout"], c["dtype"]) for c in cases} == {("NN", "float16"), ("NN", BFLOAT16), ("TN", "float16"),
                                                          ("TN", BFLOAT16)}
    dims = [(c["M"], c["N"], c["K"]) for c in cases]
    assert (1, 1, 1) in dims and any(1 in d for d in dims if d != (1, 1, 1))
    assert {15, 17, 63, 65, 127, 129, 255, 257} <= {c["M"] for c in cases}  # multiples of 16/64/128 +- 1
    assert {97, 101, 103} <= {x for d in dims for x in d}  # primes
    ks = {c["K"] for c in cases}
    assert min(ks) == 1 and 8 in ks and 65536 in ks and 65535 in ks
    assert all(c["M"] * c["N"] <= 1024 for c in cases if c["K"] >= 16384)  # large K stays small in M, N
    assert any(c.get("beta") for c in cases) and any(c.get("alpha", 1) != 1 for c in cases)
    assert {c.get("pad", 0) % 8 for c in cases if c.get("pad")} >= {0, 1, 3, 5}  # aligned and unaligned pads


def test_headline_sweep_and_tail():
    heads = TC.headline_params()
    assert {(p["M"], p["dtype"], p["layout"]) for p in heads} >= {
        (n, d, lay) for n in (4095, 4096, 4097, 8192) for d in ("float16", BFLOAT16) for lay in ("TN", "NN")}
    assert all(p["M"] == p["N"] == p["K"] for p in heads)
    tail = [p["N"] for p in TC.tail_params()]
    assert tail == list(range(tail[0], tail[-1] + 1)) and tail[0] < 4096 < tail[-1]
    assert max(p["M"] for p in TC.sweep_params()) == 8192


def test_the_first_rung_stays_out_of_the_tail_and_the_largest_sweep_sizes():
    numbers = lambda rungs: [r.number for r in rungs]  # noqa: E731
    assert numbers(TC.rungs_for("headline", {"M": 8192, "N": 8192})) == [1, 2, 3, 4, 5, 6, 7, 9, 10, 11]
    assert numbers(TC.rungs_for("sweep", {"M": 8192, "N": 8192})) == [2, 3, 4, 5, 6, 7, 9, 10, 11]
    assert numbers(TC.rungs_for("sweep", {"M": 2048, "N": 2048})) == [1, 2, 3, 4, 5, 6, 7, 9, 10, 11]
    assert numbers(TC.rungs_for("tail", {"M": 4096, "N": 4097})) == [2, 3, 4, 5, 6, 7, 9, 10, 11]


def test_min_dram_bytes_counts_two_byte_elements():
    assert TC.min_dram_bytes({"M": 2, "N": 3, "K": 4}) == 2 * (8 + 12 + 6)
    assert TC.min_dram_bytes({"M": 2, "N": 3, "K": 4, "beta": 1.0}) == 2 * (8 + 12 + 12)


def test_the_tour_shows_rungs_this_gpu_cannot_run_compiled_for_their_own_arch():
    """On an sm_86 GPU the tour's compile table still lists the Hopper rungs, built for sm_90a (compile-only)."""
    from lab.cli.tour import compile_reports

    reports = compile_reports(86, [TC])
    assert [r.source for r in reports] == [r.spec.source for r in TC.rungs]
    assert {r.source: r.arch for r in reports if "gemm_tc/" in r.source} == {
        r.spec.source: ("sm_90a" if uses_tma(r) else "sm_86") for r in TC.rungs}


def test_rung_10_stores_through_tma_only_where_a_store_cannot_touch_what_lies_outside_c():
    """TMA writes whole 16-byte pieces of a row (measured on the H200: a padded C with N = 131 had its padding
    written), needs a 16-byte-aligned C and stride, and does not read C: each refusal is one sentence."""
    from lab.families.gemm_tc import c_store_refusal

    half = np.dtype(np.float16)
    out = types.SimpleNamespace(data=types.SimpleNamespace(ptr=1 << 20), dtype=half)
    base = {"M": 129, "N": 136, "ldc": 136, "beta": 0.0}
    assert c_store_refusal(base, out) is None
    assert "multiple of 8" in c_store_refusal(base | {"N": 131}, out)
    assert "row stride" in c_store_refusal(base | {"N": 131, "ldc": 131}, out)
    assert "beta" in c_store_refusal(base | {"beta": 0.5}, out)
    unaligned = types.SimpleNamespace(data=types.SimpleNamespace(ptr=(1 << 20) + 2), dtype=half)
    assert "aligned" in c_store_refusal(base, unaligned)
    # A fused epilogue's int8 or e4m3 output is stored from registers: no 2-byte tensor map is made for it.
    quantized = types.SimpleNamespace(data=types.SimpleNamespace(ptr=1 << 20), dtype=np.dtype(np.int8))
    assert "quantized" in c_store_refusal(base, quantized)
