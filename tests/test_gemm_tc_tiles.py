"""CPU: the wave model that picks rung 10's tile per shape (lab.families.gemm_tc_tiles), the builds it picks from (each
fits a block's shared memory and compiles for sm_90a without spills), and the family's `shaped`."""

import dataclasses

import pytest

from lab.core import build
from lab.core.ladder import Problem
from lab.families import gemm_tc_tiles as tiles
from lab.families.gemm_tc import GemmTcFamily, dynamic_smem_bytes
from lab.studies.compile_grids import smem_limit_per_block

TC = GemmTcFamily()
RUNG = TC.rung("10_tma_store")
H200_SLOTS = 66  # clusters of two that fit at once on the H200 (results/h200/hopper_gemm_study.json)


def _build(bn: int, layout: str = "TN", bf16: int = 0):
    knobs = tiles.TILE_KNOBS[bn] | {"TN": int(layout == "TN"), "BF16": bf16}
    return dataclasses.replace(RUNG, spec=RUNG.spec.with_knobs(**knobs))


@pytest.mark.parametrize("M,N,bn", [(4096, 4096, 256), (6144, 6144, 256), (8192, 8192, 256), (2048, 2048, 256),
                                    (3072, 3072, 192), (2176, 2176, 192), (3200, 4096, 128), (4352, 4096, 192)])
def test_the_model_picks_the_tiles_its_docstring_predicts_for_the_study_shapes(M, N, bn):
    assert tiles.choose(M, N, "TN", H200_SLOTS) == bn


def test_waves_count_pair_tiles_over_slots():
    # 3072^3: 12 x 12 pair tiles of 256 x 256 are 144, three waves of 66 (the third 12 busy); 192 columns: 192 in 3.
    assert tiles.pair_tiles(3072, 3072, 256) == 144 and tiles.waves(3072, 3072, 256, 66) == 3
    assert tiles.pair_tiles(3072, 3072, 192) == 192 and tiles.waves(3072, 3072, 192, 66) == 3
    assert tiles.predicted_speedups(3072, 3072, "TN", 66)[192] == pytest.approx(256 / 192)


def test_nn_never_takes_192_columns_and_falls_to_128_where_narrower_pays():
    assert tiles.candidates("NN") == (256, 128)
    assert tiles.choose(3072, 3072, "NN", H200_SLOTS) == 128
    assert all(tiles.choose(m, n, "NN", s) != 192 for m in range(256, 9000, 700) for n in range(128, 9000, 900)
               for s in (1, 33, 66))


def test_a_gain_under_min_gain_keeps_the_default_and_ties_keep_the_wider():
    assert tiles.predicted_speedups(8192, 8192, "TN", 66)[192] == pytest.approx(4096 / 4032)  # 1.6%: kept at 256
    assert tiles.choose(8192, 8192, "TN", 66) == 256
    assert tiles.predicted_speedups(2176, 2176, "TN", 66)[128] == tiles.predicted_speedups(2176, 2176, "TN", 66)[192]
    assert tiles.choose(2176, 2176, "TN", 66) == 192
    # Clusters left idle: narrower tiles put more of them to work (256 x 256 as two clusters' tiles, not one's), and
    # past N they compute fewer columns that are thrown away.
    assert tiles.choose(256, 256, "TN", 66) == 128 and tiles.choose(256, 100, "TN", 66) == 128


def test_no_slots_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 1"):
        tiles.choose(4096, 4096, "TN", 0)


@pytest.mark.parametrize("bn", sorted(tiles.TILE_KNOBS))
def test_every_tile_build_fits_a_blocks_shared_memory_on_sm_90(bn):
    assert dynamic_smem_bytes(_build(bn)) <= smem_limit_per_block(90)


@pytest.mark.parametrize("bn,layout,bf16", [(bn, layout, bf16) for bn in sorted(tiles.TILE_KNOBS)
                                             for layout in ("TN", "NN") if bn in tiles.candidates(layout)
                                             for bf16 in (0, 1)])
def test_every_tile_build_compiles_for_sm_90a_without_spills(bn, layout, bf16):
    rep = build.compile_report(_build(bn, layout, bf16).spec, 90)
    assert rep.arch == "sm_90a" and rep.registers > 0
    assert rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0 and rep.stack_frame_bytes == 0, rep


def test_shaped_builds_rung_10_with_the_models_tile_and_leaves_other_rungs_alone():
    params = {"M": 3072, "N": 3072, "K": 3072, "layout": "TN", "dtype": "float16"}
    problem = Problem("3072^3", {}, (3072, 3072), 0, params=params)  # only the params decide: no arrays on a CPU
    built = TC.shaped(RUNG, problem, slots=H200_SLOTS)
    assert dict(built.spec.knobs) == dict(RUNG.spec.knobs) | tiles.TILE_KNOBS[192]
    assert built.key == RUNG.key and built.launch == RUNG.launch
    other = TC.rung("06_persistent")
    assert TC.shaped(other, problem, slots=H200_SLOTS) is other


@pytest.mark.parametrize("M,N,K,expected", [
    (2176, 2176, 4096, ("12_stream_k_cluster", 256)), (3200, 4096, 4096, ("12_stream_k_cluster", 256)),
    (4352, 4096, 4096, ("12_stream_k_cluster", 256)), (1152, 4096, 4096, ("12_stream_k_cluster", 256)),
    (3072, 3072, 3072, ("10_tma_store", 192)), (4096, 4096, 4096, ("10_tma_store", 256)),
    (6144, 6144, 6144, ("10_tma_store", 256)), (8192, 8192, 8192, ("10_tma_store", 256)),
    (2048, 2048, 2048, ("10_tma_store", 256))])
def test_the_schedule_orders_the_study_shapes_as_measured(M, N, K, expected):
    """The fitted costs pick what results/h100/stream_k_cluster_study.json measured fastest on each shape (rung 12
    ahead of rung 10's pick at 2176, 3200, 4352 and 1152; rung 10 BN = 192 at 3072^3), and rung 10 where rung 12
    does not split (whole waves, or a partial one too full to pay for the fix-up)."""
    assert tiles.schedule(M, N, K, "TN", H200_SLOTS) == expected


def test_rung_12_is_only_scheduled_where_its_own_model_splits():
    for m in range(256, 8193, 640):
        for n in range(256, 8193, 768):
            for k in (512, 4096):
                key, bn = tiles.schedule(m, n, k, "TN", H200_SLOTS)
                if key == tiles.STREAM_K_RUNG:
                    assert bn == 256 and tiles.stream_k_split(m, n, k, H200_SLOTS)["split"], (m, n, k)


def test_the_split_model_is_the_kernels_arithmetic_and_its_defaults_are_the_rungs():
    """tiles.split_model mirrors kernels/common/lab_stream_k.cuh, and STREAM_K_KNOBS rung 12's knob defaults."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    rung = (root / "kernels/gemm_tc/12_stream_k_cluster.cu").read_text()
    for knob in ("SK_WAVES", "SK_FIXUP_COST", "SK_MIN_GAIN"):
        assert re.search(rf"#define {knob} (\d+)", rung).group(1) == str(tiles.STREAM_K_KNOBS[knob])
    m = tiles.split_model(81, 64, 66)
    assert (m["dp"], m["sk"], m["split"], m["sk_tiles"]) == (200, 172, True, 81)
    # The launcher's clusters: never more than pair tiles x k-tiles.
    assert tiles.stream_k_split(128, 256, 192, 66)["workers"] == 3


def test_scheduled_builds_rung_12_or_rung_10_with_its_tile():
    def problem(m, n, k):
        params = {"M": m, "N": n, "K": k, "layout": "TN", "dtype": "float16"}
        return Problem(f"{m}x{n}x{k}", {}, (m, n), 0, params=params)

    assert TC.scheduled(problem(2176, 2176, 4096), slots=H200_SLOTS) is TC.rung("12_stream_k_cluster")
    built = TC.scheduled(problem(3072, 3072, 3072), slots=H200_SLOTS)
    assert built.key == "10_tma_store" and dict(built.spec.knobs)["BN"] == 192
    assert TC.scheduled(problem(4096, 4096, 4096), slots=H200_SLOTS).key == "10_tma_store"
