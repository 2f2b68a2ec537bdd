"""CPU: the grader's fault-suite submissions for exercise 01 (tests/grading) are what the manifest says.

Each folder under tests/grading/submissions is one student submission, good or deliberately broken;
tests/grading/manifest.json maps its name to the outcome the grader should report ("expect"), a word
the grader's reason should contain, and the check that should catch it. Running them through the
grader needs a GPU; what can be checked without one is checked here: every entry has its folder and
every folder its entry, kernels that are meant to build build for sm_90 through NVRTC, the ones meant
not to build raise CompileError, and the generated over-size kernel is over the limit.
"""

import json
import re
import struct
from pathlib import Path

import pytest

from lab.core.build import KernelSpec, compile_cubin
from lab.core.errors import CompileError

GRADING = Path(__file__).resolve().parent / "grading"
SUBMISSIONS = GRADING / "submissions"
MANIFEST = json.loads((GRADING / "manifest.json").read_text())
ENTRY = "copy_vectorized"  # exercise 01's entry point
LAUNCHER_BLOCK = 256  # threads per block the copy family launches rung 03 (and the student's kernel) with
MAX_KERNEL_BYTES = 1 << 20  # the grader refuses a kernel source past 1 MiB

OUTCOMES = {"pass", "compile_error", "missing_kernel", "crash", "timeout", "wrong", "oob", "unwritten", "race",
            "nonfinite", "tails_fail", "launch_error", "no_submission", "gaming", "slow_pass",
            "extra_files_pass", "too_large"}
COMPILES = {"pass", "slow_pass", "extra_files_pass", "crash", "timeout", "wrong", "oob", "unwritten", "race",
            "nonfinite", "tails_fail", "launch_error", "gaming"}
CHECKS = {None, "submission", "compile", "friendly", "tails", "misaligned", "performance"}


def _names(*expects: str) -> list[str]:
    return sorted(n for n, e in MANIFEST.items() if e["expect"] in expects and not e.get("generated"))


def _compile(name: str):
    return compile_cubin(KernelSpec(str(SUBMISSIONS / name / "kernel.cu"), ENTRY), 90)


def make_huge_kernel(folder: Path) -> Path:
    """Write the huge_file submission's kernel.cu into `folder` (a temporary copy, never the repo)."""
    spec = MANIFEST["huge_file"]["generate"]
    text = (SUBMISSIONS / spec["from"] / "kernel.cu").read_text()
    line = "// padding: this submission is only too large, its kernel is correct\n"
    text += line * ((spec["min_bytes"] - len(text.encode())) // len(line) + 1)
    path = folder / "kernel.cu"
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------------------------
# The manifest and the folders
# ----------------------------------------------------------------------------------------------


def test_manifest_entries_are_well_formed():
    assert len(MANIFEST) >= 22
    for name, entry in MANIFEST.items():
        assert {"expect", "why", "reason_keyword", "check"} <= set(entry), name
        assert entry["expect"] in OUTCOMES, f"{name}: unknown outcome {entry['expect']!r}"
        assert entry["check"] in CHECKS, f"{name}: unknown check {entry['check']!r}"
        keyword = entry["reason_keyword"]
        assert keyword and keyword == keyword.lower() and keyword.strip() == keyword, name
        why = entry["why"]
        assert why.endswith(".") and "\n" not in why and not re.search(r"\.\s+[A-Z]", why), (
            f"{name}: 'why' should be one sentence")
        assert set(entry.get("also_accept", [])) <= OUTCOMES, name
    # Every outcome the brief names is represented at least once.
    assert {e["expect"] for e in MANIFEST.values()} == OUTCOMES


def test_every_entry_has_a_folder_and_every_folder_an_entry():
    folders = {p.name for p in SUBMISSIONS.iterdir() if p.is_dir()}
    assert folders == set(MANIFEST), (
        f"folders without an entry: {sorted(folders - set(MANIFEST))}; "
        f"entries without a folder: {sorted(set(MANIFEST) - folders)}")


@pytest.mark.parametrize("name", sorted(n for n in MANIFEST if (SUBMISSIONS / n / "kernel.cu").is_file()))
def test_every_kernel_starts_with_a_comment_naming_its_fault(name):
    first = (SUBMISSIONS / name / "kernel.cu").read_text().splitlines()[0]
    assert first.startswith("// fault: "), f"{name}/kernel.cu should open with '// fault: ...', not {first!r}"
    assert f"({name})" in first or first.startswith(f"// fault: {name}"), (
        f"{name}/kernel.cu's first line should name the submission: {first!r}")


def test_no_submission_folders_hold_only_hidden_files():
    for name in _names("no_submission"):
        visible = [p for p in (SUBMISSIONS / name).rglob("*") if p.is_file() and not p.name.startswith(".")]
        assert visible == [], f"{name} should look empty to the grader, but holds {visible}"
        assert any((SUBMISSIONS / name).iterdir()), f"{name} needs a .gitkeep so git keeps the folder"


def test_extra_files_submission_has_files_the_kernel_does_not_include():
    for name in _names("extra_files_pass"):
        folder = SUBMISSIONS / name
        others = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != "kernel.cu")
        assert len(others) >= 2 and any(o.endswith(".cuh") for o in others), others
        source = (folder / "kernel.cu").read_text()
        assert not any(f'"{o}"' in source for o in others), "kernel.cu must not include its extra files"


# ----------------------------------------------------------------------------------------------
# Compiling (NVRTC, sm_90; no GPU needed)
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _names(*COMPILES))
def test_submission_compiles_for_sm90(name):
    compiled = _compile(name)
    assert compiled.cubin and compiled.lowered_name == ENTRY


@pytest.mark.parametrize("name", _names("compile_error"))
def test_compile_error_submission_raises_compile_error(name):
    with pytest.raises(CompileError) as info:
        _compile(name)
    assert "failed to compile" in str(info.value)
    line = MANIFEST[name].get("error_line")
    if line is not None:
        assert f"kernel.cu:{line}:" in str(info.value), str(info.value)


@pytest.mark.parametrize("name", _names("missing_kernel"))
def test_missing_kernel_submission_raises_compile_error_naming_the_entry(name):
    with pytest.raises(CompileError) as info:
        _compile(name)
    assert ENTRY in str(info.value)


def _max_threads(cubin: bytes) -> int | None:
    """The x of EIATTR_MAX_THREADS (__launch_bounds__ / .maxntid) in a cubin's .nv.info, if present.

    nv.info records are (format u8, attribute u8, size u16, value); EIFMT_SVAL = 0x04 and
    EIATTR_MAX_THREADS = 0x05 with three u32 (x, y, z).
    """
    m = re.search(rb"\x04\x05\x0c\x00(.{12})", cubin, re.DOTALL)
    return struct.unpack("<3I", m.group(1))[0] if m else None


def test_launch_bounds_fixture_is_built_for_fewer_threads_than_the_launcher_uses():
    for name in _names("launch_error"):
        limit = _max_threads(_compile(name).cubin)
        assert limit is not None and limit < LAUNCHER_BLOCK, f"{name}: max threads {limit}"
    assert _max_threads(_compile("good_reference").cubin) is None


# ----------------------------------------------------------------------------------------------
# The generated over-size submission
# ----------------------------------------------------------------------------------------------


def test_huge_file_is_generated_not_committed(tmp_path):
    entry = MANIFEST["huge_file"]
    assert entry["generated"] is True and entry["expect"] == "too_large"
    folder = SUBMISSIONS / "huge_file"
    assert not (folder / "kernel.cu").exists(), "the over-size kernel is generated at test time, never committed"
    assert (folder / "README.md").is_file()
    path = make_huge_kernel(tmp_path)
    assert path.stat().st_size > MAX_KERNEL_BYTES
    assert path.stat().st_size >= entry["generate"]["min_bytes"]
    # Only its size is at fault: the padded file still builds.
    compiled = compile_cubin(KernelSpec(str(path), ENTRY), 90)
    assert compiled.lowered_name == ENTRY
