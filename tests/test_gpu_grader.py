"""GPU: the grader's fault suite. A batch of good and deliberately broken submissions
(tests/grading/submissions, described in tests/grading/manifest.json) is graded end to end; every
fault must get its reason and its zero, and nothing else in the batch may be lost."""

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from lab.grading import classroom
from lab.grading.exercises import load

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).parent / "grading"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())
SEED = 4242
PASSING = {"pass", "extra_files_pass"}
# Graded a second time to show grading is deterministic: good, crashing, hanging, non-compiling,
# out-of-bounds and gaming submissions (not the racy one, whose answer is nondeterministic by design).
TWICE = ["good_reference", "illegal_address", "infinite_loop", "compile_error", "oob_write", "skip_repeated_launches"]


def _exercise():
    # Short limits keep the hanging submissions cheap; the limits' handling is what is tested.
    return dataclasses.replace(load("01"), check_timeout_s=6, time_limit_s=12)


def _copy_batch(dest: Path, names) -> Path:
    for name in names:
        entry = MANIFEST[name]
        target = dest / name
        if entry.get("generated"):
            target.mkdir(parents=True)
            spec = entry["generate"]
            text = (ROOT / "submissions" / spec["from"] / "kernel.cu").read_text()
            filler = "// padding to make the file too large to grade\n"
            text += filler * (spec["min_bytes"] // len(filler) + 1)
            (target / "kernel.cu").write_text(text)
        else:
            shutil.copytree(ROOT / "submissions" / name, target)
    return dest


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("grading")
    batch = _copy_batch(root / "all", MANIFEST)
    start = time.monotonic()
    # Visible checks only on the GPU (device time is scarce); hidden groups go through the same code
    # path and are covered by tests/test_grader.py and tests/test_exercises.py.
    results = classroom.grade_batch(_exercise(), batch, root / "out1", seed=SEED, include_hidden=False)
    wall = time.monotonic() - start
    def first_line(text: str) -> str:
        return text.splitlines()[0][:160] if text else ""

    summary = {"wall_s": wall, "submissions": len(results),
               "results": {r.submission: {"score": r.score, "max": r.max_score, "seconds": r.seconds,
                                          "checks": {c.name: [c.score, first_line(c.output)] for c in r.checks}}
                           for r in results}}
    if os.environ.get("LAB_GRADER_SUMMARY"):
        Path(os.environ["LAB_GRADER_SUMMARY"]).write_text(json.dumps(summary, indent=1))
    return {r.submission: r for r in results}, root


def test_the_batch_is_large_and_mixed(graded):
    results, _ = graded
    assert len(results) >= 20
    assert sum(MANIFEST[n]["expect"] in PASSING for n in results) >= 3


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_each_submission_gets_its_expected_outcome(graded, name):
    results, _ = graded
    r, entry = results[name], MANIFEST[name]
    expect, keyword = entry["expect"], entry["reason_keyword"].lower()
    correctness = [c for c in r.checks if c.name not in ("compile", "performance")]
    text = " | ".join(f"{c.name}: {c.output}" for c in r.checks).lower()
    if expect in PASSING:
        assert all(c.passed for c in r.checks), text
        assert r.score == r.max_score
    elif expect == "slow_pass":
        assert all(c.passed for c in correctness), text
        assert r.check("performance").score < r.check("performance").max_score, text
    elif expect in ("compile_error", "missing_kernel"):
        assert not r.check("compile").passed and r.score == 0
        assert keyword in r.check("compile").output.lower(), text
    elif expect in ("no_submission", "too_large"):
        assert r.score == 0 and keyword in text
    else:
        assert r.score < r.max_score, text
        failed = [c for c in r.checks if not c.passed]
        accepted = [keyword] + [k.lower() for k in entry.get("also_accept", [])]
        assert any(k in c.output.lower() for c in failed for k in accepted), text
        if entry.get("check"):
            first = r.check(entry["check"])
            assert first is not None and not first.passed, text


def test_a_crash_or_hang_loses_nothing_else(graded):
    results, _ = graded
    for name in ("illegal_address", "infinite_loop"):
        assert results[name].check("compile").passed  # graded, not lost
    # the submissions after the faulty ones in the batch were graded normally
    assert results["good_unrolled"].score == results["good_unrolled"].max_score


def test_grading_twice_gives_the_same_grades(graded):
    results, root = graded
    batch = _copy_batch(root / "twice", TWICE)
    again = {r.submission: r for r in classroom.grade_batch(_exercise(), batch, root / "out2", seed=SEED,
                                                             include_hidden=False)}
    assert {n: [c.score for c in again[n].checks] for n in TWICE} == \
        {n: [c.score for c in results[n].checks] for n in TWICE}


def test_a_rerun_regrades_nothing(graded):
    _, root = graded
    seen = []
    classroom.grade_batch(_exercise(), root / "all", root / "out1", seed=SEED, include_hidden=False,
                          on_done=lambda r, cached: seen.append(cached))
    assert seen and all(seen)
    assert (root / "out1" / "grades.csv").is_file() and (root / "out1" / "report.md").is_file()


def test_leaderboard_ranks_only_correct_submissions(graded):
    _, root = graded
    names = ["good_reference", "good_scalar", "slow_chunked", "illegal_address"]
    batch = _copy_batch(root / "board", names)
    rows = classroom.leaderboard(_exercise(), batch, root / "board-out", seed=SEED)
    ranked = [r["submission"] for r in rows if r["ranked"]]
    assert set(ranked) == {"good_reference", "good_scalar", "slow_chunked"}
    assert ranked[-1] == "slow_chunked"
    speedups = [r["geomean_speedup"] for r in rows if r["ranked"]]
    assert speedups == sorted(speedups, reverse=True)
    for f in ("leaderboard.csv", "leaderboard.png", "leaderboard.json"):
        assert (root / "board-out" / f).is_file()
    if os.environ.get("LAB_GRADER_SUMMARY"):
        Path(os.environ["LAB_GRADER_SUMMARY"]).with_name("leaderboard.json").write_text(json.dumps(rows, indent=1))
