"""CPU: every rung compiles through NVRTC for every CI arch, clean; cache keys and compile errors behave."""

import functools
import re
import shutil

import pytest

from lab import build, report
from lab.errors import CompileError, LabError
from lab.ladder import all_rungs, get_family

RUNG_ARCHS = [(r, a) for r in all_rungs() for a in build.ARCHS if a >= r.spec.min_arch]
NO_NVDISASM = build.find_nvdisasm() is None
needs_nvdisasm = pytest.mark.skipif(
    NO_NVDISASM, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)"
)


def _id(param) -> str:
    rung, arch = param
    return f"{rung.family}/{rung.key}-sm_{arch}"


@functools.cache
def compiled_report(rung, arch: int) -> build.CompileReport:
    """One NVRTC compile per (rung, arch), shared by every test below."""
    return build.compile_report(rung.spec, arch)


def _mix(family: str, key: str, arch: int) -> dict:
    rep = compiled_report(get_family(family).rung(key), arch)
    assert rep.sass_available, "nvdisasm is installed but the report has no instruction mix"
    return rep.instructions


# ----------------------------------------------------------------------------------------------
# Every rung x arch: compiles, no spills, no stack frame
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rung_arch", RUNG_ARCHS, ids=[_id(p) for p in RUNG_ARCHS])
def test_every_rung_compiles_without_spills_or_stack(rung_arch):
    rung, arch = rung_arch
    rep = compiled_report(rung, arch)
    assert rep.arch == f"sm_{arch}"
    assert rep.source == rung.spec.source and rep.entry == rung.spec.entry
    assert rep.registers > 0, "ptxas reported no register count: the log was not parsed"
    assert rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0, (
        f"{rep.source} spills on sm_{arch}: {rep}"
    )
    assert not rep.spills
    assert rep.stack_frame_bytes == 0, (
        f"{rep.source} has a {rep.stack_frame_bytes}-byte stack frame on sm_{arch}"
    )


def test_ci_arch_list_covers_turing_to_hopper():
    assert set(build.ARCHS) == {75, 80, 86, 89, 90}
    assert len(RUNG_ARCHS) == len(all_rungs()) * len(build.ARCHS)  # every rung is built for every arch


@pytest.mark.parametrize("key", ["02_smem_tiled", "03_padded", "04_swizzled"])
def test_tiled_transposes_report_their_static_shared_memory(key):
    rep = compiled_report(get_family("transpose").rung(key), 90)
    tile = dict(get_family("transpose").rung(key).spec.knobs)["TILE"]
    assert rep.smem_static_bytes >= tile * tile * 4


def test_parse_ptxas_log_reads_spills_and_stack():
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'other' for 'sm_90'\n"
        "ptxas info    : Function properties for other\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 12 registers\n"
        "ptxas info    : Compiling entry function 'heavy' for 'sm_90'\n"
        "ptxas info    : Function properties for heavy\n"
        "ptxas         .     40 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem\n"
    )
    usage = build.parse_ptxas_log(log, "heavy")
    assert usage == {
        "registers": 255,
        "smem_static_bytes": 8192,
        "stack_frame_bytes": 40,
        "spill_store_bytes": 24,
        "spill_load_bytes": 16,
    }
    assert build.parse_ptxas_log(log, "other")["registers"] == 12
    assert build.parse_ptxas_log(log, "missing") is None  # compile_report then asks the driver instead


# ----------------------------------------------------------------------------------------------
# Instruction mix (where nvdisasm exists)
# ----------------------------------------------------------------------------------------------


@needs_nvdisasm
@pytest.mark.parametrize("arch", build.ARCHS)
@pytest.mark.parametrize("key", ["03_vectorized", "04_unrolled"])
def test_vectorized_copies_use_128_bit_loads_and_stores(key, arch):
    mix = _mix("copy", key, arch)
    assert mix.get("LDG.128", 0) > 0 and mix.get("STG.128", 0) > 0, mix


@needs_nvdisasm
@pytest.mark.parametrize("arch", build.ARCHS)
def test_naive_copy_has_only_scalar_accesses(arch):
    mix = _mix("copy", "01_naive", arch)
    assert mix.get("LDG", 0) > 0 and mix.get("STG", 0) > 0, mix
    assert "LDG.128" not in mix and "STG.128" not in mix, mix


@needs_nvdisasm
@pytest.mark.parametrize("arch", build.ARCHS)
@pytest.mark.parametrize("key", ["02_smem_tiled", "03_padded", "04_swizzled"])
def test_tiled_transposes_stage_through_shared_memory(key, arch):
    mix = _mix("transpose", key, arch)
    for op in ("LDS", "STS", "BAR"):
        assert mix.get(op, 0) > 0, f"{key} on sm_{arch} has no {op}: {mix}"


@needs_nvdisasm
def test_naive_transpose_uses_no_shared_memory():
    mix = _mix("transpose", "01_naive", 90)
    assert not any(op.startswith(("LDS", "STS", "BAR")) for op in mix), mix


@needs_nvdisasm
def test_compile_report_tables_show_the_instruction_mix():
    reports = [compiled_report(get_family("copy").rung(k), 90) for k in ("01_naive", "03_vectorized")]
    md = report.compile_markdown(reports)
    assert "copy/01_naive.cu" in md and "copy/03_vectorized.cu" in md
    assert re.search(r"LDG\.128x\d+", md) and re.search(r"STG\.128x\d+", md)
    naive_row = next(line for line in md.splitlines() if "copy/01_naive.cu" in line)
    assert "LDG.128" not in naive_row and re.search(r"LDGx\d+", naive_row)


def test_compile_markdown_says_when_there_is_no_mix():
    rep = build.CompileReport("copy/01_naive.cu", "copy_naive", "sm_90", {}, 8, 0, 0, 0, 0)
    row = report.compile_markdown([rep]).splitlines()[-1]
    assert row.endswith("| - |") and "| 8 |" in row


# ----------------------------------------------------------------------------------------------
# Cache keys
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def kernels_tree(tmp_path, monkeypatch):
    """A private copy of kernels/ that build.py reads instead of the real one."""
    root = tmp_path / "kernels"
    shutil.copytree(build.REPO_ROOT / "kernels", root)
    monkeypatch.setattr(build, "KERNELS_DIR", root)
    monkeypatch.setattr(build, "COMMON_DIR", root / "common")
    return root


def test_cache_key_changes_when_an_included_header_changes(kernels_tree):
    spec = get_family("copy").rung("01").spec
    before = build.cache_key(spec, 90)
    assert build.cache_key(spec, 90) == before, "the key must be stable when nothing changed"
    header = kernels_tree / "common" / "lab_memory.cuh"
    assert header in build.included_headers(build.read_source(spec))
    header.write_text(header.read_text() + "\n// an edit a stale cache would miss\n")
    assert build.cache_key(spec, 90) != before
    # The real tree was not touched.
    assert "stale cache" not in (build.REPO_ROOT / "kernels" / "common" / "lab_memory.cuh").read_text()


def test_cache_key_follows_nested_includes(kernels_tree):
    common = kernels_tree / "common"
    (common / "inner.cuh").write_text("#pragma once\n#define INNER 1\n")
    (common / "outer.cuh").write_text('#pragma once\n#include "inner.cuh"\n')
    (kernels_tree / "nested.cu").write_text(
        '#include "outer.cuh"\nextern "C" __global__ void k(float* y) { y[0] = INNER; }\n'
    )
    spec = build.KernelSpec("nested.cu", "k")
    assert [p.name for p in build.included_headers(build.read_source(spec))] == ["outer.cuh", "inner.cuh"]
    before = build.cache_key(spec, 90)
    (common / "inner.cuh").write_text("#pragma once\n#define INNER 2\n")
    assert build.cache_key(spec, 90) != before


def test_cache_key_changes_with_knobs_and_arch():
    spec = get_family("copy").rung("04").spec
    unroll = dict(spec.knobs)["UNROLL"]
    base = build.cache_key(spec, 90)
    assert build.cache_key(spec.with_knobs(UNROLL=unroll), 90) == base
    assert build.cache_key(spec.with_knobs(UNROLL=2 * unroll), 90) != base
    assert build.cache_key(spec.with_knobs(EXTRA=1), 90) != base
    assert build.cache_key(spec, 80) != base


def test_with_knobs_merges_and_sorts():
    spec = build.KernelSpec("x.cu", "k", (("B", 1),))
    assert spec.with_knobs(A=2, B=3).knobs == (("A", 2), ("B", 3))
    assert spec.knobs == (("B", 1),)  # the original is unchanged
    assert "-DA=2" in build.compile_options(spec.with_knobs(A=2), 90)


# ----------------------------------------------------------------------------------------------
# Errors a learner will meet
# ----------------------------------------------------------------------------------------------

BROKEN = """#include "lab_memory.cuh"

extern "C" __global__ void broken(float* y, long long n) {
    long long i = global_thread_index();
    if (i < n) y[i] = not_declared_anywhere;
}
"""

GOOD = """#include "lab_memory.cuh"

extern "C" __global__ void fill_one(float* y, long long n) {
    long long i = global_thread_index();
    if (i < n) y[i] = 1.0f;
}
"""


def test_syntax_error_shows_file_line_and_marks_the_source_line(kernels_tree):
    (kernels_tree / "scratch").mkdir()
    (kernels_tree / "scratch" / "broken.cu").write_text(BROKEN)
    spec = build.KernelSpec("scratch/broken.cu", "broken")
    with pytest.raises(CompileError) as info:
        build.compile_cubin(spec, 90)
    msg = str(info.value)
    assert "scratch/broken.cu failed to compile for sm_90" in msg
    assert re.search(r"^broken\.cu:5: error: .*not_declared_anywhere", msg, re.MULTILINE), msg
    marked = [line for line in msg.splitlines() if line.lstrip().startswith(">>")]
    assert len(marked) == 1 and "y[i] = not_declared_anywhere;" in marked[0] and " 5 |" in marked[0], msg
    assert "not_declared_anywhere" in info.value.log  # NVRTC's raw log is kept on the exception


def test_wrong_entry_name_is_a_compile_error_naming_it(kernels_tree):
    (kernels_tree / "scratch").mkdir()
    (kernels_tree / "scratch" / "good.cu").write_text(GOOD)
    assert build.compile_cubin(build.KernelSpec("scratch/good.cu", "fill_one"), 90).lowered_name == "fill_one"
    with pytest.raises(CompileError, match="fill_ones"):
        build.compile_cubin(build.KernelSpec("scratch/good.cu", "fill_ones"), 90)


def test_arch_older_than_the_rung_is_refused():
    spec = get_family("copy").rung("01").spec
    with pytest.raises(LabError, match="sm_35"):
        build.compile_cubin(spec, 35)


def test_arch_nvrtc_cannot_build_is_refused():
    spec = build.KernelSpec(get_family("copy").rung("01").spec.source, "copy_naive", min_arch=30)
    with pytest.raises(LabError, match=r"cannot build for sm_35.*sm_75"):
        build.compile_cubin(spec, 35)


def test_missing_include_is_a_lab_error(kernels_tree):
    (kernels_tree / "scratch").mkdir()
    (kernels_tree / "scratch" / "noinc.cu").write_text(
        '#include "no_such_header.cuh"\nextern "C" __global__ void k(float* y) { y[0] = 1.0f; }\n'
    )
    spec = build.KernelSpec("scratch/noinc.cu", "k")
    with pytest.raises(LabError, match=r"no_such_header\.cuh") as info:
        build.cache_key(spec, 90)
    assert str(kernels_tree / "common") in str(info.value)  # it says where it looked
    with pytest.raises(LabError, match=r"no_such_header\.cuh"):
        build.compile_cubin(spec, 90)


def test_missing_source_is_a_lab_error(kernels_tree):
    with pytest.raises(LabError, match="does not exist"):
        build.compile_cubin(build.KernelSpec("copy/99_missing.cu", "k"), 90)


def test_hopper_only_rungs_compile_for_sm_90a():
    """A rung that asks for arch-specific features (wgmma, setmaxnreg) is built for sm_90a on Hopper."""
    spec = build.KernelSpec("copy/01_naive.cu", "copy_naive", arch_suffix="a", min_arch=90)
    assert "--gpu-architecture=sm_90a" in build.compile_options(spec, 90)
    report = build.compile_report(spec, 90)
    assert report.arch == "sm_90a" and report.registers > 0
    with pytest.raises(LabError, match="sm_90"):
        build.compile_cubin(spec, 80)


def test_nvrtc_override_that_is_not_a_file_is_a_clear_error(monkeypatch):
    from lab import nvrtc
    from lab.errors import LabError

    monkeypatch.setenv("LAB_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13")
    nvrtc.library_path.cache_clear()
    try:
        with pytest.raises(LabError, match="LAB_NVRTC_LIBRARY=/nonexistent"):
            nvrtc.library_path()
    finally:
        monkeypatch.delenv("LAB_NVRTC_LIBRARY")
        nvrtc.library_path.cache_clear()
