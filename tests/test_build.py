"""CPU: every rung compiles through NVRTC for every CI arch, clean; cache keys and compile errors behave."""

import functools
import json
import re
import shutil

import pytest

from lab.core import build
from lab.core.errors import CompileError, LabError
from lab.families import all_rungs, get_family
from lab.studies import report

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
    assert rep.arch == build.arch_string(arch, rung.spec.arch_suffix if arch >= 90 else "")  # sm_90a for wgmma
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
    for rung in all_rungs():  # every rung is built for every arch it runs on: sm_75 up, sm_80 up (mma.sync), sm_90
        built = {a for r, a in RUNG_ARCHS if r == rung}  # up (clusters), or sm_90a alone (wgmma, setmaxnreg)
        assert rung.spec.min_arch in (75, 80, 90) and built == {a for a in build.ARCHS if a >= rung.spec.min_arch}
        assert rung.spec.min_arch < 90 or (rung.spec.arch_suffix in ("a", "") and built == {90})
        assert not rung.spec.arch_suffix or rung.spec.min_arch >= 90
    assert any(r.spec.arch_suffix == "a" for r in all_rungs())
    assert any(r.spec.min_arch == 80 for r in all_rungs()) and any(r.spec.min_arch == 75 for r in all_rungs())


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
    assert re.search(r"^scratch/broken\.cu:5: error: .*not_declared_anywhere", msg, re.MULTILINE), msg
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
        build.compile_cubin(spec, 90)
    assert "lab_memory.cuh" in str(info.value)  # it names the headers a kernel may include


def test_the_cache_key_covers_every_lab_header_even_one_not_included(kernels_tree):
    # NVRTC is handed every lab header in memory, so the key hashes them all.
    spec = get_family("copy").rung("01").spec
    before = build.cache_key(spec, 90)
    (kernels_tree / "common" / "lab_cp_async.cuh").write_text("// changed\n")
    assert "lab_cp_async.cuh" not in build.read_source(spec)
    assert build.cache_key(spec, 90) != before


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


def test_a_knob_a_rung_takes_from_a_shared_header_is_one_its_family_passes():
    """build.knob_names (what `lab inspect --knob` and the compile study accept) reads a rung's own #ifndef
    fallbacks and its family's knobs, not the headers it includes. So a fallback that lives in a shared knob header
    (lab_hopper_knobs.cuh) is one every family that runs the rung passes, and the rung takes the same knobs as when
    its fallbacks stood in its source; a knob left at its default by some family (EPI_*, RASTER in gemm_fp32)
    stays in the rung."""
    from lab.core import headers

    for rung in all_rungs():
        taken = headers.fallbacks(build.read_source(rung.spec))
        shared = sorted(name for name, f in taken.items() if f.origin)
        assert set(shared) <= set(build.knob_names(rung.spec)), (rung.family, rung.key, shared)


def test_nvrtc_override_that_is_not_a_file_is_a_clear_error(monkeypatch):
    from lab.core import nvrtc
    from lab.core.errors import LabError

    monkeypatch.setenv("LAB_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13")
    nvrtc.library_path.cache_clear()
    try:
        with pytest.raises(LabError, match="LAB_NVRTC_LIBRARY=/nonexistent"):
            nvrtc.library_path()
    finally:
        monkeypatch.delenv("LAB_NVRTC_LIBRARY")
        nvrtc.library_path.cache_clear()


# ----------------------------------------------------------------------------------------------
# The compiler reads nothing but the source and the lab's headers
# ----------------------------------------------------------------------------------------------

CANARY = "CANARY_7f3a_never_shown"

# Each trick names the canary file, planted at {canary} (an absolute path) and next to the source.
INCLUDE_TRICKS = {
    "absolute_path": '#include "{canary}"\n',
    "absolute_path_angle": "#include <{canary}>\n",
    "macro_path": '#define F "{canary}"\n#include F\n',
    "backslash_newline": '#inc\\\nlude "{canary}"\n',
    "comment_after_hash": '#/* hidden */include "{canary}"\n',
    "stringizing_macro": "#define STR(x) #x\n#define XSTR(x) STR(x)\n#include XSTR({canary})\n",
    "digraph_hash": '%:include "{canary}"\n',
    "relative_path": '#include "canary.h"\n',
    "parent_path": '#include "../{parent}/canary.h"\n',
    # A C++14 digit separator before R": the preprocessor sees one number token then a plain string, so the
    # line after it is code, not a raw string (found in review: the first two readings were fooled).
    "digit_separator_raw_string": 'int v = 1\'2\'R"(";\n/**/#include "{canary}"\n// )"\n',
    "digit_separator_block_comment": 'int v = 1\'2\'R"(";\n/*\n*/ #include "{canary}"\n// )"\n',
    "raw_string_without_parenthesis": 'const char* s = R"x;\n#include "{canary}"\n',
}
KERNEL_TAIL = 'extern "C" __global__ void k(float* y) { y[0] = 1.0f; }\n'


@pytest.fixture
def canary(tmp_path):
    folder = tmp_path / "student"
    folder.mkdir()
    path = folder / "canary.h"
    path.write_text(f"#error {CANARY}\nint {CANARY}_value = 1;\n")
    return path


def _trick_source(trick: str, canary_path) -> str:
    return INCLUDE_TRICKS[trick].format(canary=canary_path, parent=canary_path.parent.name) + KERNEL_TAIL


@pytest.mark.parametrize("trick", list(INCLUDE_TRICKS))
def test_no_include_trick_reads_a_file_outside_the_lab_headers(trick, canary, monkeypatch):
    kernel = canary.parent / "kernel.cu"
    kernel.write_text(_trick_source(trick, canary))
    monkeypatch.chdir(canary.parent)  # the canary is also in the current folder, for relative paths
    spec = build.KernelSpec(str(kernel), "k", label="kernel.cu")
    with pytest.raises(CompileError) as info:
        build.compile_cubin(spec, 90)
    shown = str(info.value) + info.value.log
    assert CANARY not in shown, shown
    assert "lab's headers" in str(info.value) and "lab_memory.cuh" in str(info.value), str(info.value)
    assert str(info.value).startswith("kernel.cu:"), str(info.value)  # names the file and line


@pytest.mark.parametrize("trick", ["relative_path", "parent_path"])
def test_relative_includes_find_nothing_even_without_the_source_check(trick, canary, monkeypatch):
    # Layer 1 alone: NVRTC has the lab's headers in memory and no directory to search.
    monkeypatch.setattr(build.source_guard, "check_includes", lambda *a: None)
    kernel = canary.parent / "kernel.cu"
    kernel.write_text(_trick_source(trick, canary))
    monkeypatch.chdir(canary.parent)
    with pytest.raises(CompileError) as info:
        build.compile_cubin(build.KernelSpec(str(kernel), "k"), 90)
    assert CANARY not in str(info.value) + info.value.log
    assert "could not open source file" in info.value.log


@pytest.mark.parametrize("trick", ["absolute_path", "macro_path", "comment_after_hash", "stringizing_macro"])
def test_a_log_that_names_an_outside_file_is_never_shown(trick, canary, monkeypatch):
    # Layer 3 alone: were the source check to miss a trick, the compiler's messages stay hidden.
    monkeypatch.setattr(build.source_guard, "check_includes", lambda *a: None)
    kernel = canary.parent / "kernel.cu"
    kernel.write_text(_trick_source(trick, canary))
    with pytest.raises(CompileError) as info:
        build.compile_cubin(build.KernelSpec(str(kernel), "k", label="kernel.cu"), 90)
    assert CANARY not in str(info.value) + info.value.log
    assert "made the compiler read" in str(info.value) and str(canary) in str(info.value)


@pytest.mark.parametrize("source", [
    '#include "lab_memory.cuh"  // the lab header\n',
    "# include <lab_memory.cuh>\n",
    'auto r = R"x(/* )x";\n#include "lab_memory.cuh"\n// */\n',
    "// see lab_memory.cuh for the helpers; #pragma unroll stays legal\n",
])
def test_the_source_check_lets_lab_headers_and_text_through(source):
    build.source_guard.check_includes(source, "kernel.cu", {"lab_memory.cuh", "lab_cp_async.cuh"})


@pytest.mark.parametrize("source", [
    'const char* s = "#include \\"/etc/passwd\\"";\n',
    "// #include \"/etc/passwd\" in a line comment\n",
])
def test_a_foreign_include_is_refused_even_in_a_string_or_comment(source):
    """The third reading scans every line as written, whatever the first two took for a literal or a comment:
    text that looks like a foreign #include is refused, with a sentence that says why, rather than trusted."""
    with pytest.raises(CompileError, match="even inside a comment or string"):
        build.source_guard.check_includes(source, "kernel.cu", {"lab_memory.cuh"})


@pytest.mark.parametrize("source", [
    '# /* a */ /* b */ include "/etc/passwd"\n',
    '%: /**/include_next <x.h>\n',
    'int a; ??=/* c */import "y.h"\n',
])
def test_comments_between_the_hash_and_the_name_do_not_hide_a_directive(source):
    with pytest.raises(CompileError, match="is not allowed"):
        build.source_guard.check_includes(source, "kernel.cu", {"lab_memory.cuh"})


@pytest.mark.parametrize("tail", ["", "include", " x"])
def test_a_hostile_line_of_comments_is_checked_in_linear_time(tail):
    """A `#` followed by a megabyte of `/**/`: a backtracking pattern took seconds on a few thousand; the scan takes
    one pass. With a foreign include at its end, it is still refused."""
    import time

    line = "#" + "/**/" * 250_000 + tail
    started = time.perf_counter()
    if tail == "include":
        with pytest.raises(CompileError):
            build.source_guard.check_includes(line + ' "/etc/passwd"\n', "kernel.cu", {"lab_memory.cuh"})
    else:
        try:
            build.source_guard.check_includes(line + "\n", "kernel.cu", {"lab_memory.cuh"})
        except CompileError:
            pass  # the plain-directive reading may refuse the odd line; what is tested is the time
    assert time.perf_counter() - started < 1.0


def test_a_raw_string_cannot_hide_an_include_behind_a_fake_comment():
    source = 'auto r = R"x(" /* )x";\n#include "/etc/passwd"\n// */\n'
    with pytest.raises(CompileError, match="kernel.cu:2"):
        build.source_guard.check_includes(source, "kernel.cu", {"lab_memory.cuh"})


def test_has_include_is_refused():
    with pytest.raises(CompileError, match="__has_include"):
        build.source_guard.check_includes('#if __has_include("/etc/passwd")\n#endif\n', "k.cu", set())


def test_a_latin1_source_is_read_with_a_note_and_compiles(tmp_path):
    kernel = tmp_path / "kernel.cu"
    kernel.write_bytes(b"// caf\xe9 from a Windows editor\n" + KERNEL_TAIL.encode())
    text, note = build.decode_source(kernel.read_bytes(), "kernel.cu")
    assert "café" in text and note.startswith("kernel.cu is not UTF-8 (byte 6)")
    assert build.compile_cubin(build.KernelSpec(str(kernel), "k"), 90).lowered_name == "k"
    assert build.decode_source(KERNEL_TAIL.encode(), "kernel.cu")[1] is None


def test_a_utf16_source_is_refused_with_a_sentence(tmp_path):
    kernel = tmp_path / "kernel.cu"
    kernel.write_bytes(KERNEL_TAIL.encode("utf-16"))
    with pytest.raises(CompileError, match=r"kernel.cu contains a NUL byte \(byte \d+\).*UTF-8"):
        build.compile_cubin(build.KernelSpec(str(kernel), "k"), 90)


def test_arch_refusal_says_why_a_rung_cannot_run():
    plain = build.KernelSpec("gemm_tc/02_ldmatrix_smem.cu", "k", min_arch=80)
    hopper = build.KernelSpec("gemm_tc/04_tma_wgmma.cu", "k", min_arch=90, arch_suffix="a")
    assert build.arch_refusal(plain, 80) is None and build.arch_refusal(plain, 90) is None
    assert build.arch_refusal(plain, 75) == "needs sm_80 or newer; this GPU is sm_75"
    assert build.arch_refusal(hopper, 90) is None
    assert build.arch_refusal(hopper, 86) == "needs sm_90a or newer; this GPU is sm_86"
    assert build.arch_refusal(hopper, 100) == "uses sm_90a-only instructions, which sm_100 does not have"


def test_a_damaged_cache_entry_is_compiled_again_and_written_whole(tmp_path, monkeypatch):
    """The cubin and its metadata are each written under a private name and renamed into place; an entry whose
    metadata is half a file (as an older writer could leave one) is compiled again rather than read."""
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    spec = build.KernelSpec("common/spin.cu", "lab_spin_ns")
    path, lowered = build.cached_cubin(spec, 80)
    meta = path.with_suffix(".json")
    assert json.loads(meta.read_text())["lowered_name"] == lowered
    meta.write_text('{"lowered_na')  # half a file
    again, lowered_again = build.cached_cubin(spec, 80)
    assert again == path and lowered_again == lowered and json.loads(meta.read_text())["lowered_name"] == lowered
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize("line, words", [
    ("#undef EPI_PLUGIN", "may not #undef"),
    ("#define EPI_PLUGIN 0", "may not #define EPI_PLUGIN"),
    ("#  define BN 64", "may not #define BN"),
    ("#define __CUDA_ARCH__ 700", "may not #define __CUDA_ARCH__"),
    ('#pragma push_macro("BN")', "save or restore macros"),
])
def test_a_plugin_cannot_change_the_kernel_it_plugs_into(tmp_path, line, words):
    """A plugin of gemm_tc rung 06 that undefines or redefines the rung's configuration is refused before it is
    compiled, in one sentence: it would otherwise compile the lab's own epilogue chain under the grade."""
    plugin = tmp_path / "plugin.cuh"
    plugin.write_text(f"#pragma once\n// a student's functors\n{line}\n__device__ int helper() {{ return 1; }}\n")
    spec = build.KernelSpec("gemm_tc/06_persistent.cu", "lab_gemm_tc_persistent", (("EPI_PLUGIN", 1), ("BN", 128)),
                            plugin=str(plugin))
    with pytest.raises(CompileError, match=words) as err:
        build.read_plugin(spec)
    assert "\n" not in str(err.value)


def test_a_plugin_may_define_macros_of_its_own(tmp_path):
    spec = build.KernelSpec("gemm_tc/06_persistent.cu", "lab_gemm_tc_persistent", (("EPI_PLUGIN", 1),),
                            plugin="common/lab_epilogue_plugin.cuh")
    assert "lab_plugin_store_pair" in build.read_plugin(spec)  # the lab's own
    mine = tmp_path / "mine.cuh"
    mine.write_text("#pragma once\n#define MY_SCALE 2.0f\n__device__ float scaled(float v) { return v * MY_SCALE; }\n")
    assert "MY_SCALE" in build.read_plugin(build.KernelSpec("gemm_tc/06_persistent.cu", "x", plugin=str(mine)))
