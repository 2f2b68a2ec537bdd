"""CPU: the grouped GEMM family (lab.families.grouped_gemm): MoE routing, the named cases, the storage layout and
the problem table (offsets against the kernel's struct, alignment, prefix sums, maps built with a stand-in encoder),
the rung compiling for sm_90a with no spills, the checks running end to end on a NumPy stand-in for the kernel, and
one-sentence errors for bad input."""

import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from lab.core import build, headers, tma
from lab.core.errors import LabError
from lab.families.gemm_tc import to_float32, to_storage
from lab.families.grouped_gemm import (
    BFLOAT16,
    CASES,
    GROUP_DTYPE,
    LD_MULTIPLE,
    GroupedGemmFamily,
    block_walk,
    build_table,
    case_groups,
    dynamic_smem_bytes,
    groups_of,
    layout,
    parse_groups,
    route_tokens,
    table_build_cost,
    tile_counts,
)
from lab.measure.verify import check_case

FAMILY = GroupedGemmFamily()
RUNG = FAMILY.rungs[0]
BM, BN, BK = 128, 256, 64


def fake_encode(spec: tma.TensorMap2D) -> np.ndarray:
    """A stand-in for cuTensorMapEncodeTiled: the spec's numbers in the map's first six 8-byte words."""
    words = np.zeros(tma.MAP_BYTES // 8, dtype=np.uint64)
    words[:6] = (spec.address, spec.width, spec.height, spec.row_stride_bytes, spec.box_width, spec.box_height)
    return np.frombuffer(words.tobytes(), dtype=tma.MAP_DTYPE).copy()


def map_words(raw: np.ndarray) -> list[int]:
    return [int(w) for w in np.asarray(raw, dtype=np.uint8).view(np.uint64)[:6]]


class NumpyStandIn(GroupedGemmFamily):
    """The family on NumPy arrays, the kernel replaced by NumPy (fp32 products, one rounding per group), or by
    one of the ways a grouped kernel goes wrong."""

    array_module = np

    def __init__(self, behaviour: str = "ok"):
        super().__init__()
        self.behaviour = behaviour

    def launch(self, rung, problem, out, set_index=0):
        lay, dtype = self.layout_of(problem), problem.params["dtype"]
        a_buf, b_buf = problem.inputs["A"][0], problem.inputs["B"][0]
        live = [g for g, (M, _, _) in enumerate(lay.groups) if M > 0]
        for g in live:
            if self.behaviour == "drops_last_group" and g == live[-1]:
                continue
            M, N, K = lay.groups[g]
            a = to_float32(np.ascontiguousarray(lay.a_view(a_buf, g)), dtype)
            b = to_float32(np.ascontiguousarray(lay.b_view(b_buf, g)), dtype)
            k = K - K % 32 or K if self.behaviour == "drops_the_k_tail" else K  # k_tiles rounded down
            acc = a[:, :k] @ b[:, :k].T
            if self.behaviour == "one_element_off" and g == live[-1]:
                acc[-1, -1] += np.float32(0.01) * (abs(acc[-1, -1]) + 1)
            lay.c_view(out, g)[...] = to_storage(acc.astype(np.float32), dtype)
        if self.behaviour == "overruns_the_last_group":  # one element past the output, into the guard zone
            np.lib.stride_tricks.as_strided(out, shape=(out.size + 1,), strides=out.strides)[-1] = 0


# --- routing and the named cases --------------------------------------------------------------------

def test_moe_routing_is_deterministic_sums_to_the_tokens_and_leaves_experts_empty():
    counts = route_tokens(16384, 64, seed=0)
    assert counts == route_tokens(16384, 64, seed=0) and counts != route_tokens(16384, 64, seed=1)
    assert len(counts) == 64 and sum(counts) == 16384 and min(counts) == 0
    assert sum(1 for c in counts if c == 0) >= 4  # round(64 / 16) dead experts at least
    assert max(counts) > 5 * 16384 / 64  # skewed: the busiest expert far above the mean
    for seed in range(5):
        assert sum(route_tokens(1000, 7, seed)) == 1000 and min(route_tokens(1000, 7, seed)) == 0
    assert route_tokens(300, 1) == [300]  # one expert takes every token
    assert sorted(route_tokens(300, 2)) == [0, 300]


def test_the_named_cases_have_the_issues_shapes():
    moe = case_groups("moe")
    assert len(moe) == 64 and sum(m for m, _, _ in moe) == 16384 and any(m == 0 for m, _, _ in moe)
    assert {(n, k) for _, n, k in moe} == {(4096, 4096)}
    assert case_groups("uniform") == [(256, 4096, 4096)] * 64  # the same 16384 tokens
    small = case_groups("small")
    assert len(small) == 128 and all(32 <= m <= 512 and (n, k) == (1024, 1024) for m, n, k in small)
    assert len({m for m, _, _ in small}) > 50
    assert set(CASES) == {"moe", "uniform", "small"}


def test_params_make_the_same_problem_again_and_name_the_sweeps_variable_first():
    fam = NumpyStandIn()
    for kwargs in ({"case": "moe", "experts": 8, "tokens": 200, "N": 24, "K": 40},
                   {"case": "small", "count": 5, "m_min": 1, "m_max": 9, "N": 8, "K": 8},
                   {"groups": [(3, 5, 7), (0, 2, 2)], "dtype": BFLOAT16}):
        p = fam.make_problem(seed=3, **kwargs)
        q = fam.make_problem(seed=3, **p.params)
        assert groups_of(p.params) == groups_of(q.params) and p.label == q.label
        assert np.array_equal(p.inputs["A"][0], q.inputs["A"][0])
    assert next(iter(fam.make_problem(case="moe", experts=4, tokens=64, N=8, K=8).params)) == "tokens"
    assert fam.make_problem(groups=[(3, 5, 7)]).params["groups"] == "3x5x7"


# --- storage layout and the problem table ------------------------------------------------------------

GROUPS = parse_groups([(0, 64, 64), (17, 33, 40), (0, 8, 8), (65, 300, 7), (1, 1, 1), (200, 257, 130)])


def test_every_group_starts_16_byte_aligned_with_a_leading_dimension_of_whole_16_byte_rows():
    lay = layout(GROUPS)
    for g, (_, _, K) in enumerate(GROUPS):
        assert lay.ld[g] % LD_MULTIPLE == 0 and K <= lay.ld[g] < K + LD_MULTIPLE
        assert (2 * lay.a_offsets[g]) % 16 == 0 and (2 * lay.b_offsets[g]) % 16 == 0
    a_sizes = [M * lay.ld[g] for g, (M, _, _) in enumerate(GROUPS)]
    assert list(lay.a_offsets) == list(np.cumsum([0] + a_sizes[:-1])) and lay.a_elements == sum(a_sizes)
    c_sizes = [M * N for M, N, _ in GROUPS]  # C: the groups back to back, ldc = N
    assert list(lay.c_offsets) == list(np.cumsum([0] + c_sizes[:-1])) and lay.c_elements == sum(c_sizes)
    a_buf = np.arange(lay.a_elements)
    assert lay.a_view(a_buf, 3).shape == (65, 7) and lay.a_view(a_buf, 3)[1, 0] == lay.a_offsets[3] + lay.ld[3]
    assert lay.c_view(np.arange(lay.c_elements), 5).shape == (200, 257)


def _struct_offsets() -> dict[str, int]:
    source = (build.KERNELS_DIR / RUNG.spec.source).read_text()
    found = dict(re.findall(r"__builtin_offsetof\(LabGroup, (\w+)\) == (\d+)", source))
    size = re.search(r"sizeof\(LabGroup\) == (\d+)", source)
    return {k: int(v) for k, v in found.items()} | {"sizeof": int(size[1])}


def test_the_table_dtype_is_the_kernels_struct_field_for_field():
    asserted = _struct_offsets()
    assert asserted.pop("sizeof") == GROUP_DTYPE.itemsize == 384
    assert asserted == {name: GROUP_DTYPE.fields[name][1] for name in GROUP_DTYPE.names}
    assert GROUP_DTYPE.itemsize % 128 == 0 and GROUP_DTYPE.fields["map_a"][1] % 128 == 0  # maps stay aligned
    assert GROUP_DTYPE.fields["map_b"][1] % 128 == 0 and GROUP_DTYPE.fields["first_tile"][1] % 16 == 0  # int4 loads
    assert GROUP_DTYPE.fields["M"][1] % 16 == 0


def test_the_table_holds_prefix_sums_of_tiles_and_each_groups_maps():
    lay = layout(GROUPS)
    a_base, b_base = 1 << 32, 1 << 33
    table, total = build_table(lay, a_base, b_base, BM, BN, BK, encode=fake_encode)
    tiles_m, tiles_n, first = tile_counts(GROUPS, BM, BN)
    assert total == first[-1] == sum(-(-M // BM) * -(-N // BN) for M, N, _ in GROUPS)
    assert list(table["first_tile"]) == list(first[:-1])
    assert list(table["first_tile"][1:]) == list(table["first_tile"][:-1] + table["tiles"][:-1])
    for g, (M, N, K) in enumerate(GROUPS):
        e = table[g]
        assert (e["M"], e["N"], e["K"], e["ldc"]) == (M, N, K, N)
        assert e["k_tiles"] == -(-K // BK) and e["c_offset"] == lay.c_offsets[g]
        assert (e["tiles_m"], e["tiles_n"]) == (-(-M // BM), -(-N // BN))
        if M == 0:  # no tiles, no maps: the kernel steps over it
            assert e["tiles"] == 0 and not e["map_a"].any() and not e["map_b"].any()
            continue
        assert map_words(e["map_a"]) == [a_base + 2 * lay.a_offsets[g], K, M, 2 * lay.ld[g], BK, BM]
        assert map_words(e["map_b"]) == [b_base + 2 * lay.b_offsets[g], K, N, 2 * lay.ld[g], BK, BN]


@pytest.mark.parametrize("blocks", (1, 5, 132))
def test_the_kernels_walk_computes_every_tile_of_every_group_once(blocks):
    """block_walk restates the kernel's cursor: over all blocks, each tile of each non-empty group exactly once,
    none of an empty group, and within a block the group only moves forward."""
    for groups in (GROUPS, *(groups_of(c) for c in FAMILY.check_cases()[::2])):
        table, total = build_table(layout(groups), 1 << 32, 1 << 33, BM, BN, BK, encode=fake_encode)
        walks = block_walk(table, min(blocks, total), BM, BN)
        seen = [t for walk in walks for t in walk]
        expected = {(g, BM * i, BN * j) for g, (M, N, _) in enumerate(groups)
                    for i in range(-(-M // BM)) for j in range(-(-N // BN))}
        assert len(seen) == total == len(expected) and set(seen) == expected
        assert all([g for g, _, _ in walk] == sorted(g for g, _, _ in walk) for walk in walks)


def test_the_family_builds_the_table_once_per_input_set_and_keeps_it():
    fam = NumpyStandIn()
    p = fam.make_problem(groups=GROUPS, sets=2)
    first = fam.table(p, RUNG, 0, encode=fake_encode)
    assert fam.table(p, RUNG, 0, encode=fake_encode) is first and fam.table(p, RUNG, 2, encode=fake_encode) is first
    other = fam.table(p, RUNG, 1, encode=fake_encode)
    assert other is not first and other[2] == first[2]
    assert map_words(first[1]["map_a"][1])[0] == p.inputs["A"][0].ctypes.data + 2 * layout(GROUPS).a_offsets[1]
    assert map_words(other[1]["map_a"][1])[0] == p.inputs["A"][1].ctypes.data + 2 * layout(GROUPS).a_offsets[1]
    assert first[0].nbytes == 384 * len(GROUPS)


def test_table_build_cost_times_the_host_work_of_a_case():
    cost = table_build_cost("moe", repeats=2, encode=fake_encode, experts=16, tokens=512, N=64, K=64)
    assert cost["groups"] == 16 and cost["maps"] == 2 * (16 - cost["empty_groups"]) and cost["empty_groups"] >= 1
    assert cost["table_bytes"] == 16 * 384 and 0 < cost["best_ms"] <= cost["median_ms"]


# --- the kernel compiles --------------------------------------------------------------------------------

@pytest.mark.parametrize("bf16", (0, 1), ids=("fp16", "bf16"))
def test_the_rung_compiles_for_sm90a_without_spills_and_keeps_the_wgmma_pipeline(bf16):
    spec = RUNG.spec.with_knobs(BF16=bf16)
    rep = build.compile_report(spec, 90, dynamic_smem_bytes(RUNG))
    assert rep.arch == "sm_90a" and rep.registers > 0
    assert rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0 and rep.stack_frame_bytes == 0, rep
    compiled = build.compile_cubin(spec, 90)
    assert "Potential Performance Loss" not in compiled.log, compiled.log
    if rep.sass_available:
        ops = rep.instructions
        assert ops.get("HGMMA", 0) + ops.get("HGMMA.64", 0) > 0 and ops.get("UTMALDG", 0) > 0, ops
        assert ops.get("USETMAXREG", 0) > 0 and "HMMA" not in ops, ops
        sass = _disassemble(compiled)
        assert "UTMACCTL.IV" in sass and "UTMACCTL.PF" in sass  # the tensormap acquire fence and the prefetch


def _disassemble(compiled) -> str:
    tool = build.find_nvdisasm()
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.cubin)
        f.flush()
        return subprocess.run([tool or shutil.which("nvdisasm"), "-c", f.name], capture_output=True,
                              text=True).stdout


@pytest.mark.parametrize("arch", (80, 86, 89))
def test_the_rung_refuses_older_archs_with_a_sentence(arch):
    with pytest.raises(LabError, match="needs sm_90a"):
        build.compile_cubin(RUNG.spec, arch)


def test_the_header_states_the_knobs_the_family_runs():
    assert not headers.knob_mismatches(FAMILY), headers.knob_mismatches(FAMILY)
    assert FAMILY.dynamic_smem_bytes(RUNG) == 4 * (128 + 256) * 64 * 2 + 1024 == 197632
    assert FAMILY.block_resources(RUNG) == (384, 197632)


# --- the checks on a NumPy stand-in ---------------------------------------------------------------------

STAND_IN_CASES = [
    {"groups": [(0, 64, 64), (17, 33, 40), (0, 8, 8), (65, 64, 128), (0, 1, 1)]},
    {"groups": [(33, 40, 7), (1, 9, 1), (3, 1, 300)], "dtype": BFLOAT16},
    {"case": "moe", "experts": 6, "tokens": 90, "N": 20, "K": 24},
    {"case": "uniform", "experts": 3, "tokens": 30, "N": 9, "K": 513, "dtype": BFLOAT16},
]


@pytest.mark.parametrize("case", STAND_IN_CASES, ids=lambda c: c.get("case", "groups") + "-" + c.get("dtype", "fp16"))
def test_a_correct_stand_in_passes_every_check(case):
    result = check_case(NumpyStandIn(), RUNG, case, seed=5)
    assert result.passed, result.reasons
    assert 0 < result.worst_ratio <= 1


@pytest.mark.parametrize("behaviour, why", [
    ("drops_last_group", "unwritten"),
    ("drops_the_k_tail", "wrong result"),
    ("one_element_off", "wrong result"),
    ("overruns_the_last_group", "guard zone AFTER"),
])
def test_a_wrong_stand_in_fails(behaviour, why):
    case = {"groups": [(0, 16, 16), (20, 24, 96), (0, 4, 4), (9, 17, 40)]}
    result = check_case(NumpyStandIn(behaviour), RUNG, case, seed=6)
    assert not result.passed
    assert any(why in reason for reason in result.reasons), result.reasons


def test_pack_operands_copies_a_users_arrays_into_the_aligned_layout():
    rng = np.random.default_rng(0)
    a_list = [rng.standard_normal(s).astype(np.float16) for s in ((5, 7), (0, 9), (3, 16))]
    b_list = [rng.standard_normal(s).astype(np.float16) for s in ((4, 7), (2, 9), (1, 16))]
    p = NumpyStandIn().pack_operands(a_list, b_list)
    assert groups_of(p.params) == ((5, 4, 7), (0, 2, 9), (3, 1, 16))
    lay = layout(groups_of(p.params))
    for g in range(3):
        assert np.array_equal(lay.a_view(p.inputs["A"][0], g), a_list[g])
        assert np.array_equal(lay.b_view(p.inputs["B"][0], g), b_list[g])
    ref = NumpyStandIn().reference(p)
    expect = a_list[0].astype(np.float64) @ b_list[0].astype(np.float64).T
    assert np.array_equal(ref[:20].reshape(5, 4), expect)


def test_reroute_keeps_the_experts_and_the_buffers_and_makes_a_new_table():
    fam = NumpyStandIn()
    p = fam.make_problem(case="moe", experts=8, tokens=300, N=24, K=40)
    fam.table(p, RUNG, encode=fake_encode)
    counts = route_tokens(300, 8, seed=7)
    q = fam.reroute(p, counts)
    assert [m for m, _, _ in groups_of(q.params)] == counts and q.inputs is p.inputs and not q.derived
    assert q.out_shape == (sum(counts) * 24,)
    assert check_case_on(fam, q).passed
    with pytest.raises(LabError, match="one count per group"):
        fam.reroute(p, counts[:-1])
    with pytest.raises(LabError, match="buffer holds"):
        fam.reroute(p, [c + 1 for c in counts])


def check_case_on(fam, problem):
    """check_case's comparison on a given problem (check_case makes its own from params)."""
    from lab.measure.check import GuardedBuffer
    from lab.measure.verify import compare_output

    buf = GuardedBuffer(problem.out_shape, problem.dtype, xp=np)
    buf.poison()
    fam.launch(RUNG, problem, buf.out)
    assert not buf.problems()
    return compare_output(fam, problem, buf.out)


# --- bad input, baselines, shape lists ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"groups": []}, "at least one group; got an empty list"),
    ({"groups": [(4, 4, 4), (-1, 4, 4)]}, "group 1 is M=-1"),
    ({"groups": [(4, 0, 4)]}, "N, K >= 1"),
    ({"groups": [(4, 4)]}, r"each group is \(M, N, K\)"),
    ({"groups": [(0, 4, 4), (0, 8, 8)]}, "nothing to compute"),
    ({"case": "dense"}, "knows the cases moe, uniform, small"),
    ({"case": "moe", "experts": 4, "hidden": 3}, "takes experts, tokens"),
    ({"case": "moe", "groups": [(1, 1, 1)]}, "not both"),
    ({}, "either groups="),
    ({"case": "uniform", "experts": 3, "tokens": 10}, "multiple of experts"),
    ({"groups": [(1, 1, 1)], "dtype": "float32"}, "dtype must be one of"),
    ({"groups": "4x4"}, r"each group is \(M, N, K\)"),
])
def test_bad_input_gets_one_clear_sentence(kwargs, match):
    with pytest.raises(LabError, match=match):
        NumpyStandIn().make_problem(**kwargs)


def test_operands_with_mismatched_k_or_type_get_one_clear_sentence():
    fam = NumpyStandIn()
    a, b = np.ones((5, 64), np.float16), np.ones((32, 48), np.float16)
    with pytest.raises(LabError, match="group 0: A is 5 x 64 but B is 32 x 48; B must be N x K with A's K"):
        fam.pack_operands([a], [b])
    with pytest.raises(LabError, match="one B per A"):
        fam.pack_operands([a], [])
    with pytest.raises(LabError, match="stored as uint16"):
        fam.pack_operands([a], [np.ones((3, 64), np.float16)], dtype=BFLOAT16)
    with pytest.raises(LabError, match="at least one group"):
        fam.pack_operands([], [])


def test_the_batched_baseline_applies_only_to_groups_of_one_shape():
    assert set(FAMILY.baselines_for({"case": "uniform", "dtype": "float16"})) == {"cublas_batched"}
    assert FAMILY.baselines_for({"case": "moe", "dtype": "float16"}) == {}
    assert FAMILY.baselines_for({"case": "small", "dtype": "float16"}) == {}
    assert set(FAMILY.baselines_for({"groups": "8x16x24,8x16x24"})) == {"cublas_batched"}
    assert FAMILY.baselines_for({"groups": "8x16x24,8x16x32"}) == {}
    assert FAMILY.baselines_for({"groups": "0x16x24,0x16x24,4x4x4"}) == {}


def test_headline_check_cases_and_sizes_cover_the_issue():
    heads = FAMILY.headline_params()
    assert {(p["case"], p["dtype"]) for p in heads} == {("moe", "float16"), ("moe", BFLOAT16), ("uniform", "float16"),
                                                         ("uniform", BFLOAT16), ("small", "float16")}
    cases = FAMILY.check_cases()
    assert {c["dtype"] for c in cases} == {"float16", BFLOAT16}
    shapes = [groups_of(c) for c in cases]
    empties = [[M == 0 for M, _, _ in s] for s in shapes]
    assert any(e[0] for e in empties) and any(e[-1] for e in empties) and any(any(e[1:-1]) for e in empties)
    assert any(sum(M > 0 for M, _, _ in s) == 1 and len(s) > 1 for s in shapes)  # one expert takes every token
    ks = {K for s in shapes for _, _, K in s}
    assert any(K % 64 for K in ks) and any(K % 8 for K in ks) and 1 in ks and max(ks) > 4096
    assert any(N == 1 for s in shapes for _, N, _ in s) and any(M == 1 for s in shapes for M, _, _ in s)
    assert max(int(tile_counts(s, BM, BN)[2][-1]) for s in shapes) > 132  # more tiles than the H200 has SMs
    assert {c.get("case") for c in cases} >= {"moe", "uniform", "small"}


def test_flops_bytes_and_launch_notes_count_only_groups_with_tokens():
    fam = NumpyStandIn()
    p = fam.make_problem(groups=[(0, 64, 64), (3, 5, 7), (130, 260, 9)])
    assert p.flops == 2 * (3 * 5 * 7 + 130 * 260 * 9)
    assert p.bytes_moved == 2 * (3 * 7 + 5 * 7 + 3 * 5) + 2 * (130 * 9 + 260 * 9 + 130 * 260)
    fam.max_blocks = 4
    notes = fam.launch_notes(RUNG, p, None)
    assert notes["groups"] == 3 and notes["empty_groups"] == 1 and notes["tiles"] == 1 + 2 * 2
    assert notes["blocks"] == 4 and p.out_shape == (3 * 5 + 130 * 260,)


def test_bench_times_the_batched_baseline_only_on_problems_of_one_shape():
    """lab.measure.bench asks the family which baselines apply to each problem (Family.baselines_for)."""
    from lab.measure import bench

    def names(params):
        return [name for name, _ in bench._targets(FAMILY, "headline", params)]

    assert names({"case": "uniform", "dtype": "float16"}) == ["cupy_loop", "cublas_batched", RUNG.key]
    assert names({"case": "moe", "dtype": BFLOAT16}) == ["cupy_loop", RUNG.key]
    assert names({"case": "small", "dtype": "float16"}) == ["cupy_loop", RUNG.key]
