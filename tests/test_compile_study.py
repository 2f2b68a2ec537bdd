"""CPU: the compile-cache study (lab.studies.compile_study, its grids in lab.studies.compile_grids) and its figures.
NVRTC builds for any arch with no GPU, so the quick grid really compiles (gemm_tc rung 03 at sm_80, rung 06 at sm_90a,
the decode attention rung at sm_90: a few seconds); records go to tmp_path only."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import matplotlib
import pytest

matplotlib.use("Agg")

from lab.core.errors import LabError  # noqa: E402
from lab.lessons import plots  # noqa: E402
from lab.studies import compile_grids as cg  # noqa: E402
from lab.studies import compile_study as cs  # noqa: E402


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick study through main(), as `python -m lab.studies.compile_study OUT --quick` runs it, then loaded
    back."""
    out = tmp_path_factory.mktemp("compile_study") / "quick.json"
    env_before = os.environ.get("LAB_CACHE_DIR")
    assert cs.main([str(out), "--quick"]) == 0
    assert os.environ.get("LAB_CACHE_DIR") == env_before  # restored after the study
    return cs.load(out)


# --- the grid (no compiling) -------------------------------------------------------------------------------------

def test_study_grid_is_the_product_of_its_axes():
    for axes in cs.STUDY_AXES:
        grid = cg.variant_grid(axes)
        assert not grid.skipped
        assert len(grid.variants) == math.prod(len(axes.values(a)) for a in axes.order)
        assert len({(v.spec, v.arch) for v in grid.variants}) == len(grid.variants)  # all distinct
        assert axes.order[-1] == "archs" and all(v.family == axes.family for v in grid.variants)
    assert {v.arch for v in cg.variant_grid(cs.PORTABLE_AXES).variants} == {80, 86, 89, 90}
    assert {v.target for v in cg.variant_grid(cs.ATTENTION_HOPPER_AXES).variants} == {"sm_90a"}
    assert {v.target for v in cg.variant_grid(cs.ATTENTION_PORTABLE_AXES).variants} == {"sm_80", "sm_86", "sm_89",
                                                                                          "sm_90"}


def test_attention_variants_are_the_ones_the_family_builds():
    """The study asks the families for their knobs (variant_for), so a variant is the cubin lab.ops.attention would
    look up: HEAD_DIM, CAUSAL and BF16 set, the decode rung's stages as its shared memory allows on the arch (and as
    a paged cache runs it, for the family's own use)."""
    from lab.families import get_family

    v = next(v for v in cg.variant_grid(cs.ATTENTION_HOPPER_AXES).variants
             if (v.axis("head_dims"), v.axis("causal"), v.axis("dtypes")) == (128, 1, "bfloat16"))
    knobs = dict(v.spec.knobs)
    assert (knobs["HEAD_DIM"], knobs["CAUSAL"], knobs["BF16"], knobs["BLOCK_N"]) == (128, 1, 1, 128)
    assert v.smem_bytes == (128 + 2 * 2 * 128) * 128 * 2 + 1024  # Q and two K/V stages, plus the swizzle's alignment
    rung = next(r for r in get_family("attention").rungs if r.key == "05_pingpong")
    params = {"D": 128, "dtype": "bfloat16", "causal": 1}
    assert get_family("attention").variant_for(rung, params).spec == v.spec
    paged_too = dataclasses.replace(cs.DECODE_AXES, paged=(0, 1), archs=(90,))  # lab.ops passes no paged cache
    decode = {(v.axis("head_dims"), v.axis("paged")): dict(v.spec.knobs) for v in cg.variant_grid(paged_too).variants
              if v.axis("dtypes") == "float16" and not v.axis("causal")}
    assert decode[(128, 0)]["STAGES"] == 4 and decode[(128, 1)]["STAGES"] == 2  # a paged cache runs at 2 stages
    assert decode[(128, 1)]["PAGED"] == 1 and decode[(64, 0)]["PAGED"] == 0
    # at D = 128 four stages of 64 keys take 143 KB: sm_80 holds them, sm_86's 99 KB a block only two (three: 109 KB)
    at86 = cg.variant_grid(dataclasses.replace(cs.DECODE_AXES, head_dims=(128,), causal=(0,), dtypes=("float16",),
                                               paged=(0,), archs=(80, 86))).variants
    assert [dict(v.spec.knobs)["STAGES"] for v in at86] == [4, 2]


def test_attention_axes_refuse_what_the_family_cannot_build():
    # the family's own limit: what an sm_90 GPU reports (227 KB) less the 2 KB the family keeps free
    assert cs.DECODE_AXES.smem_limit(90) == 232448 - 2048 and cs.PERSISTENT_AXES.smem_limit(90) == 232448
    with pytest.raises(LabError, match="head dim"):
        cg.variant_grid(dataclasses.replace(cs.ATTENTION_HOPPER_AXES, head_dims=(96,)))
    with pytest.raises(LabError, match="no paged cache"):
        cg.variant_grid(dataclasses.replace(cs.ATTENTION_HOPPER_AXES, paged=(0, 1)))
    grid = cg.variant_grid(dataclasses.replace(cs.ATTENTION_HOPPER_AXES, archs=(80, 90)))
    assert {v.arch for v in grid.variants} == {90} and all("sm_90a" in s["reason"] for s in grid.skipped)


def test_variant_knobs_follow_the_family_and_the_epilogue():
    grid = cg.variant_grid(cs.PERSISTENT_AXES)
    v = next(v for v in grid.variants if v.axis("tiles") == "128x256" and v.axis("epilogues") == "bias+gelu_tanh->int8"
             and v.axis("dtypes") == "bfloat16")
    knobs = dict(v.spec.knobs)
    assert (knobs["BM"], knobs["BN"], knobs["BF16"], knobs["TN"], knobs["THREADS"]) == (128, 256, 1, 1, 384)
    assert (knobs["EPI_OP1"], knobs["EPI_OP2"], knobs["EPI_OUT"]) == (1, 5, 1)  # bias, gelu_tanh, int8
    assert v.spec.arch_suffix == "a" and v.arch == 90
    assert knobs["GROUP_M"] == 8 and knobs["BK"] == 64  # the rung's own knobs kept
    portable = cg.variant_grid(cs.PORTABLE_AXES).variants
    wide = next(v for v in portable if v.axis("tiles") == "128x256")
    assert dict(wide.spec.knobs)["THREADS"] == 256  # 2 x 4 warp tiles of 64 x 64
    assert not any(k.startswith("EPI_") for k, _ in wide.spec.knobs)


def test_combinations_over_the_shared_memory_limit_are_skipped_with_a_reason():
    grid = cg.variant_grid(dataclasses.replace(cs.PERSISTENT_AXES, stages=(4, 5), epilogues=("none",),
                                               dtypes=("float16",)))
    assert [s["axes"]["tiles"] for s in grid.skipped] == ["128x256"]  # 5 * 384 * 64 * 2 + 1024 > 227 KB
    assert "shared memory" in grid.skipped[0]["reason"] and "232448" in grid.skipped[0]["reason"]
    assert len(grid.variants) == 3
    # The same tile fits sm_80 (163 KB) but not sm_86 (99 KB) at 6 stages of rung 03 (6 * 384 * 32 * 2 B).
    grid = cg.variant_grid(dataclasses.replace(cs.PORTABLE_AXES, tiles=((128, 256),), stages=(6,),
                                               dtypes=("float16",), archs=(80, 86)))
    assert [v.arch for v in grid.variants] == [80] and [s["axes"]["archs"] for s in grid.skipped] == [86]


def test_an_arch_the_rung_cannot_use_is_skipped():
    grid = cg.variant_grid(dataclasses.replace(cs.QUICK_AXES[1], archs=(80, 90)))
    assert {v.arch for v in grid.variants} == {90}
    assert all("sm_90a" in s["reason"] for s in grid.skipped)


def test_a_knob_the_kernel_does_not_take_is_an_error():
    with pytest.raises(LabError, match="takes no knob EPI_OP1"):
        cg.variant_grid(dataclasses.replace(cs.PORTABLE_AXES, epilogues=("bias",)))
    with pytest.raises(LabError, match="dtype"):
        cg.variant_grid(dataclasses.replace(cs.PORTABLE_AXES, dtypes=("float32",)))


@pytest.mark.parametrize("name", ["none", "bias+gelu_tanh", "bias+silu+residual", "bias+gelu_tanh->int8",
                                  "row_scale+gelu_tanh->e4m3/row"])
def test_epilogue_names_round_trip(name):
    assert cg.epilogue_from_name(name).name == name
    with pytest.raises(LabError):
        cg.epilogue_from_name("bias->int4")


# --- the measurement ---------------------------------------------------------------------------------------------

def test_quick_study_really_compiles(quick):
    rows = quick["rows"]
    assert len(rows) == quick["summary"]["variants"] == 6
    assert {(r["family"], r["rung"], r["target"]) for r in rows} == {
        ("gemm_tc", "03_swizzled_multistage", "sm_80"), ("gemm_tc", "06_persistent", "sm_90a"),
        ("attention_decode", "02_split_kv", "sm_90")}
    for r in rows:
        assert r["compile_s"] > 0 and r["cubin_bytes"] > 0 and r["meta_bytes"] > 0
        assert 0 < r["hit_s"] < r["compile_s"]  # a hit only hashes and reads; a miss compiles
    caches = [r["cache_bytes_after"] for r in rows]
    assert all(b > a for a, b in zip(caches, caches[1:], strict=False))  # grows with every cubin written
    assert caches[-1] == sum(r["entry_bytes"] for r in rows) == quick["summary"]["cache_bytes"]
    assert quick["summary"]["total_compile_s"] == pytest.approx(sum(r["compile_s"] for r in rows))
    assert quick["warm_up"]["seconds"] > 0


def test_growth_series_multiplies_the_axes(quick):
    for axes in cs.QUICK_AXES:
        steps = [g for g in quick["growth"] if g["series"] == axes.rung]
        multiplied = [a for a in axes.order if len(axes.values(a)) > 1]
        assert [g["step"] for g in steps] == ["1 variant"] + [f"x {a}" for a in multiplied]
        expected = 1
        for g in steps:
            expected *= g["factor"]
            assert g["variants"] == g["product"] == expected
        mine = [r for r in quick["rows"] if r["rung"] == axes.rung]
        assert steps[-1]["compile_s"] == pytest.approx(sum(r["compile_s"] for r in mine))
        assert steps[-1]["cache_bytes"] == sum(r["entry_bytes"] for r in mine)
        assert all(b["compile_s"] > a["compile_s"] and b["cache_bytes"] > a["cache_bytes"]
                   for a, b in zip(steps, steps[1:], strict=False))


def test_growth_series_on_the_full_grid_with_made_up_rows():
    """The full study's series, on rows with a made-up second and 1000 bytes each (test data): counts
    2, 4, 24, 48 for rung 06 and 2, 4, 8, 32 for rung 03, seconds and bytes summed from the rows."""
    grid = cg.study_grid(cs.STUDY_AXES)
    rows = [{"family": v.family, "rung": v.rung, "axes": dict(v.axes), "compile_s": 1.0, "entry_bytes": 1000,
             "entry_disk_bytes": 4096}
            for v in grid.variants]
    for axes, counts in ((cs.PERSISTENT_AXES, [1, 2, 4, 24, 48]), (cs.PORTABLE_AXES, [1, 2, 4, 8, 32]),
                         (cs.ATTENTION_HOPPER_AXES, [1, 3, 6, 12]),
                         (cs.ATTENTION_PORTABLE_AXES, [1, 2, 4, 8, 32]), (cs.DECODE_AXES, [1, 2, 4, 8, 32])):
        steps = cs.growth_series(axes, rows)
        assert [g["variants"] for g in steps] == counts
        assert [g["compile_s"] for g in steps] == [float(c) for c in counts]
        assert [g["cache_bytes"] for g in steps] == [1000 * c for c in counts]
    assert cs.growth_series(cs.PORTABLE_AXES, rows)[-1]["step"] == "x archs"
    assert cs.growth_series(cs.DECODE_AXES, rows)[-1]["step"] == "x archs"


def test_record_has_cpu_provenance(quick):
    p = quick["provenance"]
    for key in ("commit", "date", "cpu", "nproc", "nvrtc", "host", "lab"):
        assert p[key], key
    assert p["gpu"] is None and "no GPU" in p["note"]
    assert p["nvrtc"].count(".") == 1
    assert quick["schema"] == cs.SCHEMA and quick["study"] == cs.STUDY and quick["replayed"] is True


def test_two_variants_with_one_cache_key_are_caught(tmp_path):
    v = cg.variant_grid(cs.QUICK_AXES[0]).variants[0]
    with pytest.raises(LabError, match="share a cache key"):
        cs.measure([v, v], tmp_path)
    assert list(tmp_path.iterdir()) == []  # the study's cache directory is removed, even after an error


def test_load_refuses_other_records(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": 1, "study": "checklist"}))
    with pytest.raises(LabError, match="not a compile-study record"):
        cs.load(other)
    with pytest.raises(LabError, match="No compile-study record"):
        cs.load(tmp_path / "missing.json")


# --- the figures -------------------------------------------------------------------------------------------------

def test_plots_draw(quick, tmp_path):
    import matplotlib.pyplot as plt

    assert plots.compile_growth(quick, path=tmp_path / "growth.png").stat().st_size > 0
    assert plots.compile_time_per_variant(quick, path=tmp_path / "strip.png").stat().st_size > 0
    fig, axes = plt.subplots(1, 2)
    assert plots.compile_growth(quick, ax=axes[0]) is fig
    assert plots.compile_time_per_variant(quick, ax=axes[1]) is fig
    assert any(t.get_text() == "x epilogues" for t in axes[0].texts)
    plt.close(fig)
    assert plots.compile_growth({"growth": []}) is None
    assert plots.compile_time_per_variant({"rows": []}) is None
