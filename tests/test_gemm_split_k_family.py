"""CPU: the split-K family's rungs compile for sm_90a without spills and without wgmma serialization, its split
factor choice, its workspace sizes, and its sentences for bad input."""

import types

import pytest

from lab.core import build
from lab.core.errors import LabError
from lab.families import get_family
from lab.families.gemm_split_k import (
    SPLIT_MODES,
    GemmSplitKFamily,
    choose_splits,
    narrow_tiles,
    split_cluster_width,
    workspace_floats,
)
from lab.families.gemm_tc import dynamic_smem_bytes

FAM = GemmSplitKFamily()
SPLIT_RUNGS = [FAM.rung(key) for key in SPLIT_MODES]


def test_the_family_is_in_the_catalogue():
    assert get_family("gemm_split_k").rungs == FAM.rungs
    assert [r.key for r in FAM.rungs] == ["06_persistent", "08_split_k", "08_split_k_in_kernel", "08_split_k_atomic",
                                          "08_split_k_cluster"]


@pytest.mark.parametrize("rung", SPLIT_RUNGS, ids=lambda r: r.key)
@pytest.mark.parametrize("knobs", [{"BF16": 0, "TN": 1, "BN": 256}, {"BF16": 1, "TN": 0, "BN": 128}],
                         ids=["fp16-TN-256", "bf16-NN-128"])
def test_split_rungs_compile_without_spills_and_keep_the_wgmma_pipeline(rung, knobs):
    """A 64-bit division after the mainloop (a called subroutine) made ptxas serialize every wgmma (C7520): the
    kernels keep to 32-bit index arithmetic, and this guards it."""
    spec = rung.spec.with_knobs(**knobs)
    assert "Potential Performance Loss" not in build.compile_cubin(spec, 90).log
    rep = build.compile_report(spec, 90, dynamic_smem_bytes(rung))
    assert rep.arch == "sm_90a"
    assert rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0 and rep.stack_frame_bytes == 0, rep
    if rep.sass_available:
        assert rep.instructions.get("HGMMA", 0) + rep.instructions.get("HGMMA.64", 0) > 0, rep.instructions
        if SPLIT_MODES[rung.key] == 2:
            assert any(op.startswith("RED") for op in rep.instructions), rep.instructions


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_the_cluster_mode_reads_its_peers_through_dsmem(width):
    """Mode 3 at every cluster size the launcher picks: no spills, the wgmma pipeline kept, and its peers' partial
    tiles read through the cluster's shared-memory window (LD.E.128 on mapa's addresses: one a peer and float4 in the
    unrolled loop) between cluster barriers (UCGABAR_ARV / UCGABAR_WAIT)."""
    spec = FAM.rung("08_split_k_cluster").spec.with_knobs(SPLIT_CLUSTER=width, BN=128)
    built = build.compile_cubin(spec, 90)
    assert "Potential Performance Loss" not in built.log
    rep = build.compile_report(spec, 90, dynamic_smem_bytes(FAM.rung("08_split_k_cluster")))
    assert rep.spill_store_bytes == 0 and rep.stack_frame_bytes == 0, rep
    sass = build.function_sass(built.cubin, built.lowered_name)
    assert sass is not None, "nvdisasm is here but read no machine code for the entry"
    ops = [line.split(";")[0].split()[1] if len(line.split()) > 1 else "" for line in sass]
    assert ops.count("UCGABAR_ARV") >= 2 and ops.count("UCGABAR_WAIT") >= 2, ops
    assert ops.count("LD.E.128") >= width, ops
    assert any(op.startswith("HGMMA") for op in ops)


def test_the_reduction_kernel_compiles():
    spec = FAM.rung("08_split_k").spec
    rep = build.compile_report(spec.__class__(**{**spec.__dict__, "entry": "gemm_tc_split_k_reduce"}), 90)
    assert rep.spill_store_bytes == 0 and rep.registers > 0, rep


def test_choose_splits_fills_about_one_wave():
    assert choose_splits(256, 256, 65536, 128, 256, 132) == 66  # 2 tiles
    assert choose_splits(128, 128, 131072, 128, 128, 132) == 132  # 1 tile
    assert choose_splits(1024, 1024, 16384, 128, 256, 132) == 4  # 32 tiles
    assert choose_splits(4096, 4096, 4096, 128, 256, 132) == 1  # the tiles alone fill the GPU
    assert choose_splits(64, 64, 512, 128, 256, 132) == 2  # 8 k-tiles: splits of at least 4


def test_workspace_sizes():
    assert workspace_floats(0, 10, 9, 3) == 3 * 10 * 12  # LDW: N rounded up to 4
    assert workspace_floats(1, 10, 8, 3) == 3 * 10 * 8
    assert workspace_floats(2, 10, 9, 3) == 10 * 12  # one accumulator, whatever S
    assert workspace_floats(3, 10, 9, 32, 8) == 4 * 10 * 12  # one slice per cluster of a tile


def test_cluster_width_is_the_largest_power_of_two_within_s():
    assert [split_cluster_width(s) for s in (1, 2, 3, 4, 5, 7, 8, 13, 33, 132)] == [1, 2, 2, 4, 4, 4, 8, 8, 8, 8]


def test_the_cluster_mode_runs_whole_clusters_of_splits(monkeypatch):
    """Mode 3's S is a multiple of its cluster size (rounded down from what the other modes run) and its grid is
    one block a unit; with no GPU the driver is not asked how many clusters fit."""
    from lab.core import device

    monkeypatch.setattr(device, "current", lambda: types.SimpleNamespace(sm_count=132))
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    fam = GemmSplitKFamily()
    fam.array_module = __import__("numpy")
    rung = fam.rung("08_split_k_cluster")
    cases = [(dict(M=256, N=256, K=65536), 32, 8), (dict(M=128, N=128, K=131072), 128, 8),
             (dict(M=1024, N=1024, K=16384), 4, 4), (dict(M=256, N=256, K=1000, splits=7), 4, 4),
             (dict(M=256, N=256, K=1000, splits=3), 2, 2), (dict(M=1, N=1, K=64, splits=9), 1, 1),
             (dict(M=256, N=256, K=1000, splits=40), 16, 8)]  # 16 k-tiles: S clamped to 16, then 2 clusters of 8
    for params, splits, width in cases:
        problem = fam.make_problem(**params)
        assert fam.splits_for(rung, problem) == splits, params
        assert dict(fam.variant(rung, problem).spec.knobs)["SPLIT_CLUSTER"] == width, params
        assert dict(fam.variant(fam.rung("08_split_k"), problem).spec.knobs).get("SPLIT_CLUSTER") is None
    assert fam.splits_for(fam.rung("08_split_k"), fam.make_problem(M=256, N=256, K=1000, splits=40)) == 16


def test_narrow_or_few_tiles_run_128_wide_tiles(monkeypatch):
    from lab.core import device

    monkeypatch.setattr(device, "current", lambda: types.SimpleNamespace(sm_count=132))  # mode 3 sizes its cluster
    assert narrow_tiles(4096, 128) and narrow_tiles(256, 256) and narrow_tiles(512, 512)
    assert not narrow_tiles(1024, 1024) and not narrow_tiles(64, 4096)
    fam = GemmSplitKFamily()
    fam.array_module = __import__("numpy")
    narrow = fam.make_problem(M=64, N=128, K=64)
    wide = fam.make_problem(M=1024, N=1024, K=64)  # 32 wide tiles
    for rung in FAM.rungs:
        assert dict(fam.variant(rung, narrow).spec.knobs)["BN"] == 128
        assert dict(fam.variant(rung, wide).spec.knobs)["BN"] == 256


def test_splits_are_clamped_to_the_k_tiles(monkeypatch):
    from lab.core import device

    monkeypatch.setattr(device, "current", lambda: types.SimpleNamespace(sm_count=132))
    fam = GemmSplitKFamily()
    fam.array_module = __import__("numpy")
    rung = fam.rung("08_split_k")
    assert fam.splits_for(rung, fam.make_problem(M=64, N=64, K=300, splits=40)) == 5  # 5 k-tiles
    assert fam.splits_for(rung, fam.make_problem(M=64, N=64, K=300, splits=3)) == 3
    assert fam.splits_for(rung, fam.make_problem(M=256, N=256, K=65536)) == 33  # 4 narrow tiles


def test_bad_input_gets_one_sentence():
    fam = GemmSplitKFamily()
    fam.array_module = __import__("numpy")
    with pytest.raises(LabError, match="splits is the number of K splits"):
        fam.make_problem(M=8, N=8, K=8, splits=-1)
    with pytest.raises(LabError, match="fewer than 2\\^31 floats"):
        fam.make_problem(M=1 << 20, N=1 << 12, K=8)


def test_check_cases_cover_uneven_and_excess_split_factors():
    cases = FAM.check_cases()
    forced = [c for c in cases if c.get("splits")]
    assert any(-(-c["K"] // 64) % c["splits"] for c in forced)  # S does not divide the k-tiles
    assert any(c["splits"] > -(-c["K"] // 64) for c in forced)  # more splits than k-tiles: clamped
    assert {c["dtype"] for c in forced} == {"float16", "bfloat16"} and {c["layout"] for c in forced} == {"TN", "NN"}
    assert any(c.get("beta") for c in forced)


@pytest.mark.parametrize("fits, params, plan", [
    ({8: 14, 4: 32, 2: 66, 1: 132}, dict(M=256, N=256, K=65536), (8, 24)),  # 3 clusters of 8 a tile: the widest
    ({8: 16, 4: 33, 2: 66, 1: 132}, dict(M=256, N=256, K=65536), (8, 32)),  # 16 of 8 fit: 4 a tile
    ({8: 14, 4: 32, 2: 66, 1: 132}, dict(M=128, N=128, K=131072), (8, 96)),  # one tile: PLAN_GROUPS clusters at most
    ({8: 14, 4: 32, 2: 66, 1: 132}, dict(M=1024, N=1024, K=16384), (4, 4)),
    ({8: 14, 4: 30, 2: 66, 1: 132}, dict(M=1024, N=1024, K=16384), (2, 4)),  # 32 tiles: clusters of 4 do not fit
    ({8: 15, 4: 30, 2: 66, 1: 132}, dict(M=512, N=512, K=32768), (2, 8)),  # 4 x 1 keeps half the blocks of 2 x 4
    ({8: 15, 4: 30, 2: 66, 1: 132}, dict(M=256, N=256, K=65536), (8, 24)),  # 96 of 4 x 7's 112 blocks: wide enough
])
def test_the_cluster_plan_keeps_every_cluster_in_the_first_wave(monkeypatch, fits, params, plan):
    """Mode 3's size and S from how many clusters of each size fit at once (the driver's count, here given): every
    cluster in the first wave (one that does not fit would run after it), the widest size that keeps PLAN_BUSY_SHARE
    of the busiest size's blocks."""
    from lab.core import device
    from lab.families import gemm_split_k

    monkeypatch.setattr(device, "current", lambda: types.SimpleNamespace(sm_count=132))
    monkeypatch.setattr(gemm_split_k, "cluster_fit", lambda built: fits[dict(built.spec.knobs)["SPLIT_CLUSTER"]])
    fam = GemmSplitKFamily()
    fam.array_module = __import__("numpy")
    rung, problem = fam.rung("08_split_k_cluster"), fam.make_problem(**params)
    assert (dict(fam.variant(rung, problem).spec.knobs)["SPLIT_CLUSTER"], fam.splits_for(rung, problem)) == plan
