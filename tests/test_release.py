"""CPU: `lab release` writes a student bundle with no solution text, no hidden checks, no outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.core import build
from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.families import all_rungs
from lab.grading import exercises, release

REPO = build.REPO_ROOT


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return release.release(tmp_path_factory.mktemp("release") / "student")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------------------------
# What is in the bundle, and what is not
# ----------------------------------------------------------------------------------------------

def test_bundle_has_the_package_the_set_up_and_the_material(bundle):
    for name in ("pyproject.toml", "run.sh", "README.md", "lab/__init__.py", "lab/grading/exercises.py",
                 "lab/core/build.py",
                 "lab/families/copy.py", "results/h200/copy.json", "exercises/README.md"):
        assert (bundle / name).is_file(), name
    assert (bundle / "run.sh").read_bytes() == (REPO / "run.sh").read_bytes()
    assert os.access(bundle / "run.sh", os.X_OK) == os.access(REPO / "run.sh", os.X_OK)
    shipped_lab = {p.relative_to(bundle) for p in (bundle / "lab").rglob("*.py")}
    assert shipped_lab == {p.relative_to(REPO) for p in (REPO / "lab").rglob("*.py")}
    for nb in (REPO / "notebooks").glob("[0-9][0-9]_*"):
        if nb.suffix in (".py", ".ipynb"):
            assert (bundle / "notebooks" / nb.name).is_file(), nb.name
    kernels = {p.relative_to(REPO / "kernels") for p in _files(REPO / "kernels")}
    assert {p.relative_to(bundle / "kernels") for p in _files(bundle / "kernels")} == kernels


def test_each_exercise_ships_readme_spec_and_starter_only(bundle):
    for ex in exercises.all_exercises():
        folder = bundle / "exercises" / ex.id
        assert sorted(p.name for p in folder.iterdir()) == ["README.md", "exercise.json", "starter.cu"]
        assert (folder / "starter.cu").read_text() == ex.starter_path.read_text()
        assert (folder / "exercise.json").read_text() == (ex.path / "exercise.json").read_text()


def test_no_hidden_checks_tests_scripts_or_hidden_files(bundle):
    assert (REPO / "exercises" / "01_vectorized_copy" / "hidden.json").is_file()  # there is something to leave out
    names = [p.relative_to(bundle) for p in bundle.rglob("*")]
    assert not [p for p in names if p.name == "hidden.json"]
    assert not [p for p in names if p.parts[0] in ("tests", ".ci", "scripts", "report", ".git", ".venv")]
    assert not [p for p in names if any(part.startswith(".") for part in p.parts)]
    assert not [p for p in names if "__pycache__" in p.parts or p.suffix == ".pyc" or "egg-info" in str(p)]
    # nothing in the bundle names a hidden group either
    hidden_names = {g.name for ex in exercises.all_exercises() for g in ex.hidden_checks()}
    hidden_names -= {g.name for ex in exercises.all_exercises() for g in ex.checks}
    for path in (bundle / "exercises").rglob("*"):
        if path.is_file():
            assert not [n for n in hidden_names if f'"{n}"' in path.read_text()], path


def test_hidden_cases_are_nowhere_in_the_bundle(bundle):
    texts = [p.read_text() for p in _files(bundle / "exercises")]
    for ex in exercises.all_exercises():
        for group in ex.hidden_checks():
            for case in group.cases:
                assert not any(json.dumps(case) in t for t in texts), case


# ----------------------------------------------------------------------------------------------
# No solution text anywhere
# ----------------------------------------------------------------------------------------------

def _solution_lines() -> set[str]:
    """Every line of a solution region longer than 12 characters, except those its file also has outside the
    regions (the starter keeps them)."""
    lines = set()
    for path in _files(REPO / "kernels"):
        text = path.read_text()
        outside = {ln.strip() for ln in exercises.strip_solution(text, path.name).splitlines()}
        for region in exercises.solution_regions(text, path.name):
            lines |= {ln.strip() for ln in region.splitlines() if len(ln.strip()) > 12 and ln.strip() not in outside}
    return lines


def test_the_leak_check_has_solution_lines_to_look_for():
    lines = _solution_lines()
    for ex in exercises.all_exercises():  # both reference rungs contribute
        assert any(ln in ex.reference_source() for ln in lines - release.GENERIC_LINES), ex.id
    assert "for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];" in lines
    assert "__shared__ float tile[TILE][TILE + 1];" in lines
    assert "for (int k = 0; k < BK; ++k) acc += As[tr][k] * Bs[k][tc];" in lines  # GEMM rung 03
    assert "for (int n = 0; n < TN; ++n) acc[m][n] += a_reg[m] * b_reg[n];" in lines  # GEMM rung 05
    # the exemptions stay boilerplate: a short list, and no line that reads or writes memory
    assert len(release.GENERIC_LINES) <= 8  # loop headers and barriers, one or two per ladder
    assert not [g for g in release.GENERIC_LINES if "[" in g]


def test_no_solution_line_appears_in_any_file_of_the_bundle(bundle):
    lines = _solution_lines() - release.GENERIC_LINES
    leaks = []
    for path in _files(bundle):
        data = path.read_bytes()
        leaks += [f"{path.relative_to(bundle)}: {ln}" for ln in lines if ln.encode() in data]
    assert not leaks, "\n".join(leaks)
    assert release.find_leaks(bundle) == []


def test_stripped_kernels_carry_todos_not_markers(bundle):
    for path in _files(bundle / "kernels"):
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, path
    for ex in exercises.all_exercises():
        shipped = bundle / "kernels" / ex.reference_file  # the rung's source, or its plugin header (exercise 08)
        assert shipped.read_text() == ex.starter_text()


def test_the_gemm_exercises_ship_as_starters_and_their_tile_code_nowhere(bundle):
    # Rungs 03, 04 and 05 share their tile loads line for line, so all three carry solution regions:
    # the bundle's rung 04 must not hand exercise 03's answer over, nor rung 03 exercise 04's.
    gemm = bundle / "kernels" / "gemm_fp32"
    tile_load = "As[a_r + i][a_c] = (a_r + i < rows_left && k0 + a_c < K) ? a_src[(long long)i * lda] : 0.f;"
    for ex_id, todos in (("03_smem_tiled_gemm", 1), ("04_register_tiled_gemm", 2)):
        starter = (bundle / "exercises" / ex_id / "starter.cu").read_text()
        assert starter.count("// TODO: ") == todos and tile_load not in starter
    for rung in ("03_smem_tiled", "04_register_tile_1d", "05_register_tile_2d"):
        assert tile_load in (REPO / "kernels" / "gemm_fp32" / f"{rung}.cu").read_text()
        assert tile_load not in (gemm / f"{rung}.cu").read_text()
    assert not [p for p in _files(bundle) if tile_load.encode() in p.read_bytes()]


def test_the_tensor_core_exercise_ships_as_a_starter_and_its_fragment_code_nowhere(bundle):
    # Exercise 05's three regions (A fragments, B fragments in both layouts, the mma calls) become three
    # TODOs; rung 03 repeats the mma loop inside its own region, so no shipped rung hands it over.
    fragment_code = ("ldmatrix_x4(a[mi], a_base + 2 * ((wr + 16 * mi + lane % 16) * A_STRIDE + kk + 8 * (lane / 16)));",
                     "ldmatrix_x4(r, b_base + 2 * (n * B_STRIDE + k));",
                     "ldmatrix_x4_trans(r, b_base + 2 * (k * B_STRIDE + n));",
                     "for (int ni = 0; ni < NI; ++ni) mma_m16n8k16<BF16>(acc[mi][ni], a[mi], b[ni]);")
    starter = (bundle / "exercises" / "05_mma_fragments" / "starter.cu").read_text()
    assert starter.count("// TODO: ") == 3
    assert starter == (bundle / "kernels" / "gemm_tc" / "02_ldmatrix_smem.cu").read_text()
    reference = (REPO / "kernels" / "gemm_tc" / "02_ldmatrix_smem.cu").read_text()
    for line in fragment_code:
        assert line in reference
        assert not [p for p in _files(bundle) if line.encode() in p.read_bytes()], line


def test_leak_check_finds_a_planted_line(tmp_path):
    line = "for (long long v = tid; v < n_vec; v += stride) yv[v] = xv[v];"
    (tmp_path / "notes.md").write_text(f"look:\n    {line}\n")
    found = release.find_leaks(tmp_path)
    assert len(found) == 1 and "notes.md" in found[0] and "copy/03_vectorized.cu" in found[0]


def test_leak_check_finds_a_reference_table_quoted_inside_a_record(tmp_path):
    """Exercise 09's reference quoted in a record (its calibration's "reference") is as much a leak as the file."""
    from lab.grading import exercises

    table = json.loads(exercises.load("09").solution_path.read_text())
    (tmp_path / "record.json").write_text(json.dumps({"provenance": {}, "rounds": [{"reference": table}]}))
    found = release.find_leaks(tmp_path, lines={})
    assert len(found) == 1 and "record.json" in found[0] and "reference table" in found[0]


def test_release_refuses_a_bundle_that_would_leak(tmp_path, monkeypatch):
    kernels = tmp_path / "kernels"
    (kernels / "fam").mkdir(parents=True)
    (kernels / "fam" / "01_answer.cu").write_text(
        "void f(float* y) {\n    // BEGIN SOLUTION: double it.\n    y[0] = 2.0f * y[0] + 1.0f;\n"
        "    // END SOLUTION\n}\n")
    (kernels / "fam" / "02_next.cu").write_text("void g(float* y) {\n    y[0] = 2.0f * y[0] + 1.0f;\n}\n")
    monkeypatch.setattr(release, "KERNELS_DIR", kernels)
    with pytest.raises(LabError, match="02_next.cu"):
        release.release(tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["kernels"]  # no half-built bundle left behind


# ----------------------------------------------------------------------------------------------
# Notebooks and kernels still work
# ----------------------------------------------------------------------------------------------

def test_notebook_outputs_are_cleared(bundle):
    notebooks = sorted((bundle / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        nb = json.loads(path.read_text())
        original = json.loads((REPO / "notebooks" / path.name).read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code), path.name
        assert [c["source"] for c in nb["cells"]] == [c["source"] for c in original["cells"]]
        assert nb["metadata"] == original["metadata"]
    for path in sorted((bundle / "notebooks").glob("*.py")):
        assert path.read_text() == (REPO / "notebooks" / path.name).read_text()


def test_cleared_notebook_keeps_markdown_and_empties_code_cells():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# hi"]},
                    {"cell_type": "code", "execution_count": 3, "metadata": {}, "source": ["1"],
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["secret"]}]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    cleared = json.loads(release.cleared_notebook(json.dumps(nb)))
    assert cleared["cells"][0] == nb["cells"][0]
    assert cleared["cells"][1]["outputs"] == [] and cleared["cells"][1]["execution_count"] is None


@pytest.mark.parametrize("rung", all_rungs(), ids=[f"{r.family}/{r.key}" for r in all_rungs()])
def test_every_stripped_kernel_in_the_bundle_compiles(bundle, rung):
    shipped = bundle / "kernels" / rung.spec.source
    plugin = str(bundle / "kernels" / rung.spec.plugin) if rung.spec.plugin else ""  # the bundle's (a starter)
    spec = KernelSpec(str(shipped), rung.spec.entry, rung.spec.knobs, rung.spec.min_arch, rung.spec.arch_suffix,
                      plugin)
    compiled = build.compile_cubin(spec, 90)
    assert compiled.lowered_name == rung.spec.entry


def test_the_bundle_s_lab_finds_its_own_exercises_without_hidden_checks(bundle):
    code = ("import lab, lab.grading.exercises as e; "
            "print(lab.__file__); "
            "print([(x.id, len(x.hidden_checks()), x.max_points(True)) for x in e.all_exercises()]); "
            "print(e.load('01').starter_text() == e.load('01').starter_path.read_text())")
    env = dict(os.environ, PYTHONPATH=str(bundle))
    out = subprocess.run([sys.executable, "-c", code], cwd=bundle, env=env, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == str(bundle / "lab" / "__init__.py")
    assert out[1] == ("[('01_vectorized_copy', 0, 10.0), ('02_tiled_transpose', 0, 8.0), "
                      "('03_smem_tiled_gemm', 0, 10.0), ('04_register_tiled_gemm', 0, 10.0), "
                      "('05_mma_fragments', 0, 10.0), ('06_tile_order', 0, 10.0), ('07_split_k', 0, 10.0), "
                      "('08_epilogue_functor', 0, 10.0), ('10_online_softmax', 0, 10.0)]")
    assert out[2] == "True"


# ----------------------------------------------------------------------------------------------
# Where it writes
# ----------------------------------------------------------------------------------------------

def test_refuses_a_non_empty_directory(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old_solution.cu").write_text("y[i] = x[i];\n")
    with pytest.raises(LabError, match="not empty"):
        release.release(out)
    assert [p.name for p in out.iterdir()] == ["old_solution.cu"]


def test_refuses_a_file_and_the_repository_itself(tmp_path):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(LabError, match="is a file"):
        release.release(tmp_path / "a_file")
    with pytest.raises(LabError):
        release.release(REPO)


def test_an_existing_empty_directory_is_used(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert release.release(out) == out.resolve()
    assert (out / "exercises" / "01_vectorized_copy" / "starter.cu").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # the temporary build folder is gone


# ----------------------------------------------------------------------------------------------
# The student's first hour: the README, run.sh, and what the tour says
# ----------------------------------------------------------------------------------------------

def test_the_bundle_readme_is_the_student_one(bundle):
    text = (bundle / "README.md").read_text()
    for step in ("bash run.sh setup", ".venv/bin/lab check 01", "bash run.sh notebooks", "bash run.sh check",
                 "starter.cu", "--exercise 01"):
        assert step in text, step
    for ex in exercises.all_exercises():
        assert f"| `{ex.id}` | {ex.title} | {ex.max_points(False):g} | {ex.performance.target_of_ceiling:.2f}x" in text
    for nb in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert f"`{nb.name}`" in text
    # nothing about the instructor's commands or files the bundle does not have
    for absent in ("lab grade", "lab release", "lab leaderboard", "hidden-seed", "hidden.json", "tests/", "scripts/",
                   "{exercise_table}", "{notebook_list}"):
        assert absent not in text, absent


def test_the_exercises_readme_keeps_the_students_part_only(bundle):
    assert release.INSTRUCTORS_HEADING in (REPO / "exercises" / "README.md").read_text()
    text = (bundle / "exercises" / "README.md").read_text()
    assert "lab check" in text and "starter.cu" in text
    for absent in (release.INSTRUCTORS_HEADING, "hidden.json", "lab release", "python -m lab.grading.exercises"):
        assert absent not in text, absent


def test_the_grading_evidence_stays_out(bundle):
    assert (REPO / "results" / "h200" / "grading").is_dir()  # there is something to leave out
    assert not [p for p in (bundle / "results").rglob("*") if "grading" in p.parts]
    assert (bundle / "results" / "h200" / "copy.json").is_file()


def test_the_bundle_says_which_kernels_are_starters(bundle):
    stripped = release.stripped_kernels(bundle)
    assert {ex.reference_file for ex in exercises.all_exercises()} <= set(stripped)
    assert release.stripped_kernels(REPO) == []  # the development tree has no bundle.json
    code = "from lab.cli.tour import stripped_note; print(stripped_note())"
    env = dict(os.environ, PYTHONPATH=str(bundle))
    note = subprocess.run([sys.executable, "-c", code], cwd=bundle, env=env, capture_output=True, text=True,
                          check=True).stdout
    assert "student bundle" in note and "copy/03_vectorized.cu" in note and "complete kernels" in note


def test_a_live_tour_in_a_bundle_leaves_the_starters_out(bundle):
    """On a GPU, the tour checks and times the rungs it can: the starters would fail their checks and stop it."""
    code = ("from lab.cli.tour import stripped_note, without_starters; from lab.families import families\n"
            "print(stripped_note(live=True))\n"
            "for f in families().values(): print(f.name, *[r.spec.source for r in without_starters(f).rungs])\n"
            "print('full', *[r.spec.source for f in families().values() for r in f.rungs])")
    env = dict(os.environ, PYTHONPATH=str(bundle))
    lines = subprocess.run([sys.executable, "-c", code], cwd=bundle, env=env, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert "leaves these out" in lines[0]
    kept = {source for line in lines[1:-1] for source in line.split()[1:]}  # a family's rungs may live elsewhere
    every = set(lines[-1].split()[1:])
    stripped = set(release.stripped_kernels(bundle)) & every
    assert kept and stripped and not kept & stripped
    assert kept | stripped == every  # every other rung is still checked and timed


@pytest.fixture
def offline_venv(tmp_path, bundle):
    """A stand-in for the bundle's .venv (run.sh's set-up needs PyPI): `python` and `lab` run this
    interpreter on the bundle's own lab package; run.sh is told to install nothing (LAB_OFFLINE=1)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, run in (("python", ""), ("lab", " -m lab")):
        script = venv / "bin" / name
        script.write_text(f'#!/bin/sh\nPYTHONPATH="{bundle}" exec "{sys.executable}"{run} "$@"\n')
        script.chmod(0o755)
    env = dict(os.environ, LAB_OFFLINE="1", LAB_VENV=str(venv), CUDA_VISIBLE_DEVICES="", COLUMNS="200")
    return venv, env


def _sh(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_readme_s_first_commands_work_in_a_fresh_bundle(tmp_path, offline_venv):
    venv, env = offline_venv
    student = release.release(tmp_path / "student")  # a bundle of its own: this test edits it
    setup = _sh(["bash", "run.sh", "setup"], student, env)
    assert setup.returncode == 0, setup.stderr
    first = _sh([str(venv / "bin" / "lab"), "check", "01"], student, env)
    assert first.returncode == 2 and "copy" in first.stdout and "starter.cu" in first.stdout, first.stdout
    assert "Traceback" not in first.stdout + first.stderr
    # `bash run.sh test` before any kernel exercise is started: the table exercise is checked (nothing graded here,
    # no GPU), with one sentence on how to start a kernel exercise, not "no tests/"
    test = _sh(["bash", "run.sh", "test"], student, env)
    assert test.returncode == 3 and "No kernel exercise is started yet" in test.stderr, test.stderr
    folder = student / "exercises" / "01_vectorized_copy"
    (folder / "kernel.cu").write_text((folder / "starter.cu").read_text())  # the README's `cp`
    again = _sh([str(venv / "bin" / "lab"), "check", "01"], student, env)
    assert again.returncode == 3, again.stdout + again.stderr  # no GPU here: nothing graded, not a pass
    assert "Nothing was graded" in again.stdout and "starter as released" in again.stdout
    for verb in (["check"], ["test"]):
        run = _sh(["bash", "run.sh", *verb], student, env)
        assert run.returncode == 3 and "Nothing was graded" in run.stdout, run.stdout + run.stderr


def test_run_sh_refuses_an_unknown_verb_and_an_offline_venv_without_lab(tmp_path, bundle):
    env = dict(os.environ, LAB_OFFLINE="1", LAB_VENV=str(tmp_path / "none"))
    assert "usage: bash run.sh" in _sh(["bash", "run.sh", "frobnicate"], bundle, env).stderr
    run = _sh(["bash", "run.sh", "check"], bundle, env)
    assert run.returncode == 1 and "bash run.sh setup" in run.stderr


def test_jupyterlab_is_an_extra_and_a_run_sh_verb():
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("jupyterlab") for dep in extras["notebooks"])
    script = (REPO / "run.sh").read_text()
    assert 'notebooks) extras="inspect,notebooks"' in script and "jupyter\" lab notebooks/" in script
