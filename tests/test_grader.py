"""CPU tests of the grading machinery: a fake worker stands in for the GPU one and misbehaves on
purpose (crashes, hangs, fails to compile), so the parent's handling is checked without a GPU.
The real kernels' fault suite is tests/test_gpu_grader.py."""

import csv
import dataclasses
import json
import os
import textwrap
import time

import pytest

from lab.cli import main
from lab.core import build
from lab.grading import classroom, grader
from lab.grading.exercises import load

FAKE_WORKER = textwrap.dedent('''
    """Fake grade worker: behaves as the kernel file's FAKE lines say."""
    import argparse, json, os, sys, time

    p = argparse.ArgumentParser()
    for a in ("--exercise", "--kernel", "--events", "--checks", "--seed", "--shown"):
        p.add_argument(a)
    p.add_argument("--hidden", action="store_true")
    p.add_argument("--no-perf", action="store_true")
    args = p.parse_args()
    text = open(args.kernel, encoding="latin-1").read()
    rules = [line.split()[1:] for line in text.splitlines() if line.startswith("FAKE")]

    def emit(**ev):
        with open(args.events, "a") as f:
            f.write(json.dumps(ev) + "\\n")

    if ["brokenworker"] in rules:  # the grader's own failure, before any check starts
        sys.stderr.write("ModuleNotFoundError: No module named 'cupy'\\n")
        sys.exit(1)
    for name in args.checks.split(","):
        emit(event="start", check=name, pid=os.getpid())
        for rule in rules:
            if rule[-1] == name and rule[0] == "crash":
                sys.stderr.write("cupy_backends.cuda.api.runtime.CUDARuntimeError: "
                                 "cudaErrorIllegalAddress: an illegal memory access was encountered\\n")
                os._exit(1)
            if rule[-1] == name and rule[0] == "hang":
                time.sleep(3600)
        for rule in rules:
            if rule[0] == "slow":  # FAKE slow SECONDS: every check takes this long (a batch that runs a while)
                time.sleep(float(rule[1]))
        failed = ["fail", name] in rules or (name == "performance" and args.no_perf)
        if name == "compile" and ["nocompile"] in rules:
            emit(event="done", check=name, passed=False, score=0.0,
                 output="kernel.cu failed to compile for sm_90:\\nkernel.cu:3: error: expected a ';'")
            sys.exit(0)
        why = "not timed: performance counts only when every correctness check passes" if name == "performance" \
            else "failed on n=1025"
        emit(event="done", check=name, passed=not failed, score=0.0 if failed else 99.0,
             output=why if failed else "ok", gpu=os.environ.get("CUDA_VISIBLE_DEVICES", ""))
''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    pkg = tmp_path / "fakeworker"
    pkg.mkdir()
    (pkg / "fake_grade_worker.py").write_text(FAKE_WORKER)
    monkeypatch.setenv("PYTHONPATH", f"{pkg}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(grader, "WORKER_MODULE", "fake_grade_worker")
    exercise = dataclasses.replace(load("01"), check_timeout_s=1.5, time_limit_s=20)
    return exercise


def _submission(root, name, *fake_lines, filename="kernel.cu"):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / filename).write_text("\n".join(["// a kernel", *fake_lines, ""]))
    return folder


def test_a_clean_submission_gets_every_point_and_no_more(fake, tmp_path):
    result = grader.grade_submission(fake, _submission(tmp_path, "ok"), include_hidden=False)
    assert all(c.passed for c in result.checks)
    assert result.score == result.max_score == fake.max_points(False)  # the fake claims 99 per check
    assert [c.name for c in result.checks] == ["compile", "friendly", "tails", "misaligned", "performance"]


def test_a_crash_costs_only_the_crashing_check(fake, tmp_path):
    result = grader.grade_submission(fake, _submission(tmp_path, "crash", "FAKE crash tails"), include_hidden=False)
    tails = result.check("tails")
    assert not tails.passed and tails.score == 0 and "illegal memory access" in tails.output
    assert result.check("friendly").passed and result.check("misaligned").passed  # ran in a fresh process
    assert not result.check("performance").passed and "correctness" in result.check("performance").output


def test_a_hang_is_killed_at_the_time_limit_and_the_rest_still_runs(fake, tmp_path):
    result = grader.grade_submission(fake, _submission(tmp_path, "hang", "FAKE hang friendly"), include_hidden=False)
    friendly = result.check("friendly")
    assert not friendly.passed and "time limit" in friendly.output
    assert result.check("tails").passed and result.check("misaligned").passed
    assert result.seconds < 15


def test_a_compile_failure_zeroes_everything_with_the_compiler_message(fake, tmp_path):
    result = grader.grade_submission(fake, _submission(tmp_path, "bad", "FAKE nocompile"), include_hidden=False)
    assert result.score == 0
    assert "expected a ';'" in result.check("compile").output
    assert all("did not compile" in c.output for c in result.checks[1:])


@pytest.mark.parametrize("setup, reason", [
    (lambda d: d.mkdir(), "empty"),
    (lambda d: (d.mkdir(), (d / "kernel.cu").write_text("x" * (grader.MAX_KERNEL_BYTES + 1))), "too large"),
    (lambda d: (d.mkdir(), (d / "a.cu").write_text("1"), (d / "b.cu").write_text("2")), "no kernel.cu"),
])
def test_broken_submission_folders_get_a_reason_and_zero(fake, tmp_path, setup, reason):
    folder = tmp_path / "sub"
    setup(folder)
    result = grader.grade_submission(fake, folder, include_hidden=False)
    assert result.score == 0 and all(reason in c.output for c in result.checks)


def test_extra_files_are_noted_and_ignored(fake, tmp_path):
    folder = _submission(tmp_path, "extra")
    (folder / "notes.txt").write_text("hi")
    result = grader.grade_submission(fake, folder, include_hidden=False)
    assert result.score == result.max_score - 0 or all(c.passed for c in result.checks)
    assert any("notes.txt" in n for n in result.notes)


def test_hidden_checks_are_graded_and_marked_after_published(fake, tmp_path):
    result = grader.grade_submission(fake, _submission(tmp_path, "ok"), include_hidden=True)
    hidden = [c for c in result.checks if c.hidden]
    assert hidden and all(c.passed for c in hidden)
    payload = grader.gradescope_json(result)
    vis = {t["name"]: t["visibility"] for t in payload["tests"]}
    assert all(vis[c.name] == "after_published" for c in hidden)
    assert vis["friendly"] == "visible"


def test_gradescope_schema(fake, tmp_path):
    result = grader.grade_submission(fake, _submission(tmp_path, "s", "FAKE fail tails"), include_hidden=False)
    payload = grader.gradescope_json(result)
    assert set(payload) >= {"score", "execution_time", "tests", "output"}
    for t in payload["tests"]:
        assert set(t) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed")
    assert payload["score"] == pytest.approx(sum(t["score"] for t in payload["tests"]))
    assert grader.result_from_json(json.loads(json.dumps(payload))).score == result.score


def _batch(root):
    subs = root / "subs"
    _submission(subs, "alice")
    _submission(subs, "bob", "FAKE crash friendly")
    _submission(subs, "carol", "FAKE nocompile")
    (subs / "dave").mkdir()
    return subs


def test_batch_writes_results_csv_and_report_and_resumes(fake, tmp_path):
    subs, out = _batch(tmp_path), tmp_path / "out"
    seen = []
    results = classroom.grade_batch(fake, subs, out, include_hidden=False, on_done=lambda r, c: seen.append(c))
    assert [r.submission for r in results] == ["alice", "bob", "carol", "dave"] and seen == [False] * 4
    for name in ("alice", "bob", "carol", "dave"):
        assert json.loads((out / name / "results.json").read_text())["extra_data"]["submission"] == name
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert [r["submission"] for r in rows] == ["alice", "bob", "carol", "dave"]
    assert "illegal memory access" in (out / "report.md").read_text()

    # A rerun regrades nothing; an interrupted batch (one result missing) regrades only that one.
    (out / "bob" / "results.json").unlink()
    seen.clear()
    again = classroom.grade_batch(fake, subs, out, include_hidden=False,
                                  on_done=lambda r, c: seen.append((r.submission, c)))
    assert sorted(seen) == [("alice", True), ("bob", False), ("carol", True), ("dave", True)]
    assert [r.score for r in again] == [r.score for r in results]


def test_a_changed_submission_is_regraded(fake, tmp_path):
    subs, out = _batch(tmp_path), tmp_path / "out"
    classroom.grade_batch(fake, subs, out, include_hidden=False)
    (subs / "carol" / "kernel.cu").write_text("// fixed\n")
    seen = []
    classroom.grade_batch(fake, subs, out, include_hidden=False, on_done=lambda r, c: seen.append((r.submission, c)))
    assert ("carol", False) in seen and ("alice", True) in seen


def test_one_worker_per_gpu(fake, tmp_path):
    subs = tmp_path / "subs"
    for i in range(4):
        _submission(subs, f"s{i}")
    results = classroom.grade_batch(fake, subs, tmp_path / "out", include_hidden=False, gpus=["0", "1"])
    used = {r.check("friendly").extra.get("gpu") for r in results}
    assert used <= {"0", "1"} and len(results) == 4


def test_cli_grade_and_leaderboard_need_a_gpu_and_say_so(tmp_path, monkeypatch, capsys):
    from lab.core import device

    monkeypatch.setattr(device, "_probe", lambda: "the CUDA driver sees no GPU")
    _batch(tmp_path)
    for cmd in (["grade", str(tmp_path / "subs"), "--exercise", "01"],
                ["leaderboard", str(tmp_path / "subs"), "--exercise", "01"]):
        assert main(cmd) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().out


def test_cli_rejects_bad_gpu_lists_and_unknown_exercises(tmp_path, capsys):
    _batch(tmp_path)
    assert main(["grade", str(tmp_path / "subs"), "--exercise", "01", "--gpus", "zero"]) == 2
    assert "--gpus" in capsys.readouterr().out
    assert main(["grade", str(tmp_path / "subs"), "--exercise", "99"]) == 2


def test_cli_check_without_a_gpu_compiles_and_says_what_it_could_not_do(tmp_path, monkeypatch, capsys):
    from lab.core import device

    monkeypatch.setattr(device, "_probe", lambda: "the CUDA driver sees no GPU")
    exercise = load("01")
    good = tmp_path / "mine.cu"
    good.write_text(exercise.reference_source())
    assert main(["check", "01", str(good)]) == 3  # not 0: nothing was graded
    out = capsys.readouterr().out
    assert "Nothing was graded: there is no GPU here" in out and "run only on a CUDA GPU" in out
    assert "mine.cu" in out and "regs" in out  # the compile report of the student's kernel
    if build.find_nvdisasm() is not None:
        assert "16-byte global loads/stores: LDG.128 x" in out and "STG.128 x" in out
    bad = tmp_path / "bad.cu"
    bad.write_text(exercise.starter_text().replace("{", "{ int x = ;", 1))
    assert main(["check", "01", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "error" in out and ">>" in out
    assert main(["check", "01", str(tmp_path / "missing.cu")]) == 2


def _alive(pid: int) -> bool:
    """Running (a zombie, killed but not yet reaped by whoever inherited it, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_an_interrupted_grading_kills_the_worker(fake, tmp_path, monkeypatch):
    # Ctrl-C while a kernel hangs: the worker runs in its own session, so nothing else would kill it.
    real, pids = grader._read_events, []

    def read(path):
        events = real(path)
        pids.extend(ev["pid"] for ev in events if ev.get("check") == "friendly" and ev["event"] == "start")
        if pids:
            raise KeyboardInterrupt
        return events

    monkeypatch.setattr(grader, "_read_events", read)
    with pytest.raises(KeyboardInterrupt):
        grader.grade_submission(fake, _submission(tmp_path, "hang", "FAKE hang friendly"), include_hidden=False)
    assert pids and not _alive(pids[0])


def test_a_stopped_batch_kills_its_worker_and_records_nothing(fake, tmp_path):
    import threading

    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    with pytest.raises(grader.GradingStopped):
        grader.grade_submission(fake, _submission(tmp_path, "hang", "FAKE hang friendly"), include_hidden=False,
                                stop=stop)


def test_a_worker_that_dies_before_any_check_is_the_graders_failure_not_a_zero(fake, tmp_path):
    from lab.core.errors import LabError

    subs, out = _batch(tmp_path), tmp_path / "out"
    _submission(subs, "eve", "FAKE brokenworker")
    with pytest.raises(LabError, match="before it ran any check.*No module named 'cupy'"):
        grader.grade_submission(fake, subs / "eve", include_hidden=False)
    with pytest.raises(LabError, match="resumes"):
        classroom.grade_batch(fake, subs, out, include_hidden=False)
    assert not (out / "eve" / "results.json").exists()  # no zero recorded, so a rerun grades eve


def test_editing_the_hidden_checks_or_the_exercise_regrades(fake, tmp_path):
    import shutil

    folder = tmp_path / "ex"
    shutil.copytree(fake.path, folder)
    exercise = dataclasses.replace(fake, path=folder)
    sub = _submission(tmp_path, "s")
    before = grader.fingerprint(exercise, sub, 0, True)
    (folder / "hidden.json").write_text((folder / "hidden.json").read_text().replace('"points": ', '"points": 1'))
    assert grader.fingerprint(exercise, sub, 0, True) != before
    before = grader.fingerprint(exercise, sub, 0, False)
    (folder / "exercise.json").write_text((folder / "exercise.json").read_text().replace('"points": ', '"points": 1'))
    assert grader.fingerprint(exercise, sub, 0, False) != before


def test_the_report_shows_the_compiler_error_not_just_its_heading(fake, tmp_path):
    subs, out = _batch(tmp_path), tmp_path / "out"
    classroom.grade_batch(fake, subs, out, include_hidden=False)
    carol = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| carol"))
    assert "expected a ';'" in carol


def test_grades_inside_the_submissions_folder_are_refused(fake, tmp_path):
    from lab.core.errors import LabError

    subs = _batch(tmp_path)
    with pytest.raises(LabError, match="inside"):
        classroom.grade_batch(fake, subs, subs / "graded", include_hidden=False)


def test_cli_grade_of_the_current_folder(tmp_path, monkeypatch):
    from lab.core import device

    subs, seen = _batch(tmp_path), []
    monkeypatch.setattr(device, "current", lambda: None)
    monkeypatch.setattr(classroom, "grade_batch", lambda ex, s, out, **kw: seen.append(out) or [])
    monkeypatch.chdir(subs)
    assert main(["grade", ".", "--exercise", "01"]) == 0
    assert seen == [tmp_path.resolve() / "subs-graded"]


def test_a_worker_without_a_usable_gpu_stops_before_any_check(tmp_path, monkeypatch):
    from lab.grading import grade_worker

    def no_gpu():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    monkeypatch.setattr(grade_worker, "warm_up", no_gpu)
    events = tmp_path / "ev.jsonl"
    kernel = _submission(tmp_path, "s") / "kernel.cu"
    code = grade_worker.main(["--exercise", "01", "--kernel", str(kernel), "--events", str(events),
                              "--checks", "compile,friendly"])
    assert code == grade_worker.EXIT_NO_GPU and not events.exists()  # the parent calls it the grader's failure


@pytest.mark.parametrize("line", ['#include "/etc/passwd"', '#include "../hidden.json"', "#include </work/x.cu>",
                                  '  #  include "notes.txt"'])
def test_a_submission_cannot_include_files_outside_the_lab_headers(fake, tmp_path, line):
    folder = _submission(tmp_path, "sneaky", line)
    result = grader.grade_submission(fake, folder, include_hidden=False)
    assert result.score == 0 and all("may include only" in c.output for c in result.checks)


def test_the_lab_headers_may_be_included(fake, tmp_path):
    result = grader.grade_submission(fake, _submission(tmp_path, "ok", '#include "lab_memory.cuh"'),
                                     include_hidden=False)
    assert all(c.passed for c in result.checks)


# ----------------------------------------------------------------------------------------------
# The worker's performance path, for any family (the GPU half is tests/test_gpu_exercises.py)
# ----------------------------------------------------------------------------------------------

def test_every_family_names_its_ceiling_for_the_performance_output():
    from lab.families import families, get_family
    from lab.grading import grade_worker

    assert not hasattr(grade_worker, "CEILING_WORDS")  # the words live with the family, not in a table
    assert all(f.ceiling_title and f.ceiling_title != f.ceiling_name for f in families().values())
    assert get_family("copy").ceiling_title == "the device copy"
    assert get_family("gemm_fp32").ceiling_title == "cuBLAS SGEMM"


def test_timed_runs_start_from_out_init_when_the_output_is_also_an_input():
    import numpy as np

    from lab.core.ladder import Problem
    from lab.grading import grade_worker

    c0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.full((2, 3), 7.0, dtype=np.float32)  # what the previous (timed or warm-up) launch left
    grade_worker._reset_output(Problem("beta != 0", {}, (2, 3), 0, out_init=c0), out)
    assert np.array_equal(out, c0)
    out[...] = 7.0
    grade_worker._reset_output(Problem("beta == 0", {}, (2, 3), 0), out)  # nothing to restore: untouched
    assert (out == 7.0).all()


def test_a_refill_of_bit_patterns_shuffles_them_instead_of_casting_floats():
    # gemm_tc keeps bf16 in uint16: floats cast to integers would be 0..3, subnormal bf16 patterns. A
    # refill must keep the family's own values (and draw a new order every time). The float path draws
    # on the GPU (random_array), so only the integer path runs here, on NumPy arrays.
    import numpy as np

    from lab.core.ladder import Problem
    from lab.families.gemm_tc import round_to_bfloat16_bits
    from lab.grading import grade_worker

    values = round_to_bfloat16_bits(np.random.default_rng(0).standard_normal((64, 40)).astype(np.float32))
    a, b = values.copy(), values[:, :24].copy()
    problem = Problem("bf16", {"A": [a], "B": [b]}, (64, 24), 0)
    grade_worker._refill(problem, seed=5)
    first = a.copy()
    assert a.dtype == np.uint16 and a.shape == (64, 40) and not np.array_equal(a, values)
    assert np.array_equal(np.sort(a, axis=None), np.sort(values, axis=None))  # the same values, moved
    assert np.array_equal(np.sort(b, axis=None), np.sort(values[:, :24], axis=None))
    grade_worker._refill(problem, seed=5)  # the same seed again: still a new order
    assert not np.array_equal(a, first)


# ----------------------------------------------------------------------------------------------
# Hardening: links, includes, encodings, the seed
# ----------------------------------------------------------------------------------------------

SECRET = "SECRET_of_another_student_4c1d"


@pytest.fixture
def secret_file(tmp_path):
    other = tmp_path / "elsewhere" / "kernel.cu"
    other.parent.mkdir()
    other.write_text(f"#error {SECRET}\n// FAKE nocompile\n")
    return other


def _assert_refused_without_reading(result, secret_text, fragment):
    payload = json.dumps(grader.gradescope_json(result))
    assert result.score == 0 and secret_text not in payload
    assert all(fragment in c.output for c in result.checks), [c.output for c in result.checks]


def test_a_kernel_that_is_a_symlink_is_refused(fake, tmp_path, secret_file):
    folder = tmp_path / "subs" / "mallory"
    folder.mkdir(parents=True)
    (folder / "kernel.cu").symlink_to(secret_file)
    result = grader.grade_submission(fake, folder, include_hidden=False)
    _assert_refused_without_reading(result, SECRET, "symbolic link (kernel.cu)")


def test_a_link_to_the_hidden_checks_is_refused_and_not_named(fake, tmp_path):
    folder = tmp_path / "subs" / "mallory"
    folder.mkdir(parents=True)
    (folder / "kernel.cu").symlink_to(fake.path / "hidden.json")
    result = grader.grade_submission(fake, folder, include_hidden=False)
    _assert_refused_without_reading(result, "hidden.json", "symbolic link")


def test_a_linked_folder_or_a_linked_submission_is_refused(fake, tmp_path, secret_file):
    folder = _submission(tmp_path / "subs", "mallory")
    (folder / "more").symlink_to(secret_file.parent, target_is_directory=True)
    _assert_refused_without_reading(grader.grade_submission(fake, folder, include_hidden=False), SECRET,
                                    "symbolic link (more)")
    (tmp_path / "subs" / "eve").symlink_to(secret_file.parent, target_is_directory=True)
    result = grader.grade_submission(fake, tmp_path / "subs" / "eve", include_hidden=False)
    _assert_refused_without_reading(result, SECRET, "is a symbolic link")


@pytest.mark.parametrize("trick", [
    '#define F "{path}"\n#include F',
    '#inc\\\nlude "{path}"',
    '#/* a comment */include "{path}"',
    "#define STR(x) #x\n#define XSTR(x) STR(x)\n#include XSTR({path})",
    '#include "{path}"',
    "#include <{path}>",
], ids=["macro_path", "backslash_newline", "comment_after_hash", "stringizing_macro", "absolute", "absolute_angle"])
def test_no_include_trick_gets_another_file_into_the_grade(fake, tmp_path, secret_file, trick):
    folder = _submission(tmp_path, "sneaky", trick.format(path=secret_file))
    result = grader.grade_submission(fake, folder, include_hidden=False)
    _assert_refused_without_reading(result, SECRET, "may include only the lab's headers")
    assert all(c.output.startswith("kernel.cu:") for c in result.checks)  # names the file and the line


def test_a_latin1_kernel_is_graded_with_a_note(fake, tmp_path):
    folder = tmp_path / "latin"
    folder.mkdir()
    (folder / "kernel.cu").write_bytes(b"// r\xe9sum\xe9: a comment from a Windows editor\n")
    result = grader.grade_submission(fake, folder, include_hidden=False)
    assert all(c.passed for c in result.checks)  # graded, not lost
    assert any("kernel.cu is not UTF-8 (byte 4)" in n for n in result.notes)
    assert "not UTF-8" in grader.gradescope_json(result)["output"]


def test_a_utf16_kernel_gets_one_sentence_and_zero_not_a_traceback(fake, tmp_path):
    folder = tmp_path / "utf16"
    folder.mkdir()
    (folder / "kernel.cu").write_bytes("// a kernel\n".encode("utf-16"))
    result = grader.grade_submission(fake, folder, include_hidden=False)
    assert result.score == 0 and all("NUL byte" in c.output and "UTF-8" in c.output for c in result.checks)
    assert not any("Traceback" in c.output for c in result.checks)


def test_a_latin1_kernel_compiles_as_the_worker_builds_it(tmp_path):
    # The worker builds exercise.student_spec through lab.core.build: no UnicodeDecodeError for any encoding.
    kernel = tmp_path / "kernel.cu"
    kernel.write_bytes(b"// caf\xe9\n" + load("01").reference_source().encode())
    assert build.compile_cubin(load("01").student_spec(kernel), 90).lowered_name == "copy_vectorized"
    assert build.cache_key(load("01").student_spec(kernel), 90)  # the worker's cache key reads it too


def test_without_a_seed_a_secret_one_is_drawn_recorded_and_reused(fake, tmp_path):
    subs, out = _batch(tmp_path), tmp_path / "out"
    first = classroom.grade_batch(fake, subs, out, include_hidden=True)
    recorded = json.loads((out / classroom.SEED_FILE).read_text())["seed"]
    assert recorded != 0 and {r.seed for r in first} == {recorded}
    assert json.loads((out / "alice" / "results.json").read_text())["extra_data"]["seed"] == recorded
    assert f"seed {recorded}" in (out / "report.md").read_text()
    seen = []
    classroom.grade_batch(fake, subs, out, include_hidden=True, on_done=lambda r, c: seen.append(c))
    assert seen == [True] * 4  # the resumed run used the recorded seed: nothing regraded
    assert classroom.batch_seed(tmp_path / "elsewhere", None)[1] == "drawn now"
    assert classroom.batch_seed(out, 5) == (5, "given")


def test_cli_grade_of_a_missing_folder_says_so_before_asking_for_a_gpu(monkeypatch, capsys):
    from lab.core import device

    monkeypatch.setattr(device, "_probe", lambda: "the CUDA driver sees no GPU")
    assert main(["grade", "/nonexistent/subs", "--exercise", "01"]) == 2
    out = capsys.readouterr().out
    assert "/nonexistent/subs does not exist" in out and "GPU" not in out


def test_cli_grade_without_a_seed_draws_one_and_says_where_it_is(tmp_path, monkeypatch, capsys):
    from lab.core import device

    subs, seen = _batch(tmp_path), []
    monkeypatch.setattr(device, "current", lambda: None)
    monkeypatch.setattr(classroom, "grade_batch", lambda ex, s, out, **kw: seen.append(kw["seed"]) or [])
    assert main(["grade", str(subs), "--exercise", "01"]) == 0
    assert seen[0] != 0 and f"seed {seen[0]} (drawn now" in capsys.readouterr().out
    assert main(["grade", str(subs), "--exercise", "01", "--hidden-seed", "77"]) == 0 and seen[1] == 77


# ----------------------------------------------------------------------------------------------
# On a GPU: the real worker names the student's file and reads any encoding
# ----------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_check_names_the_given_file_and_grades_a_latin1_kernel(tmp_path, monkeypatch, capsys):
    from rich.console import Console

    from lab import cli

    monkeypatch.setattr(cli, "console", Console(soft_wrap=True, width=200, color_system=None, highlight=False))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "bad.cu").write_text(load("01").starter_text().replace("{", "{ int x = ;", 1))
    assert main(["check", "01", "path/bad.cu", "--seed", "3"]) == 1
    out = capsys.readouterr().out
    assert "path/bad.cu:" in out and "kernel.cu" not in out, out
    (tmp_path / "latin.cu").write_bytes(b"// caf\xe9\n" + load("01").reference_source().encode())
    assert main(["check", "01", "latin.cu", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "is not UTF-8 (byte 6)" in out and "friendly" in out


def test_a_refill_shuffles_named_operands_and_forgets_the_cached_reference():
    # The fused-epilogue family keeps its chain's operands in a dict (inputs["epilogue"]) and caches its
    # reference in problem.derived: both must follow a refill, or the timed run's output is judged against stale
    # values.
    import numpy as np

    from lab.core.ladder import Problem
    from lab.grading import grade_worker

    bias = np.arange(1, 65, dtype=np.float32)
    codes = np.arange(64, dtype=np.uint16).reshape(8, 8)
    problem = Problem("epi", {"A": [codes], "epilogue": {"bias": bias}}, (8, 8), 0)
    problem.derived["expected"] = "stale"
    grade_worker._refill(problem, seed=3)
    assert not np.array_equal(bias, np.arange(1, 65)) and np.array_equal(np.sort(bias), np.arange(1, 65))
    assert problem.derived == {}


def test_a_file_name_that_is_not_utf8_stops_nobody(fake, tmp_path):
    """A zip made on another system can leave names that are not UTF-8: the fingerprint hashes the name as the file
    system holds it, and the batch grades every submission, that one included."""
    subs = tmp_path / "subs"
    _submission(subs, "alice")
    odd = _submission(subs, "bob")
    with open(os.path.join(os.fsencode(odd), b"r\xe9sum\xe9.txt"), "wb") as f:
        f.write(b"notes")
    assert grader.fingerprint(fake, odd, 0, False) != grader.fingerprint(fake, subs / "alice", 0, False)
    results = classroom.grade_batch(fake, subs, tmp_path / "out", include_hidden=False)
    assert [r.submission for r in results] == ["alice", "bob"]
    assert (tmp_path / "out" / "grades.csv").is_file() and (tmp_path / "out" / "report.md").is_file()


CHILD_BATCH = '''
import dataclasses, sys
from pathlib import Path
from lab.grading import classroom, grader
from lab.grading.exercises import load
grader.WORKER_MODULE = "fake_grade_worker"
exercise = dataclasses.replace(load("01"), check_timeout_s=600, time_limit_s=600)
with classroom.sigterm_as_interrupt():
    classroom.grade_batch(exercise, Path(sys.argv[1]), Path(sys.argv[2]), include_hidden=False)
'''


def test_sigterm_to_a_batch_ends_its_workers(fake, tmp_path):
    """SIGTERM (a scheduler's kill) is handled like Ctrl-C: the parent kills the grading process it started
    before it exits, so no worker is left on the GPU, and nothing half-done is recorded."""
    import signal
    import subprocess
    import sys
    import time

    subs = tmp_path / "subs"
    _submission(subs, "hang", "FAKE hang friendly")
    events = tmp_path / "child.py"
    events.write_text(CHILD_BATCH)
    child = subprocess.Popen([sys.executable, str(events), str(subs), str(tmp_path / "out")], env=os.environ.copy())

    def workers():
        found = []
        for pid in os.listdir("/proc"):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if pid.isdigit() and b"fake_grade_worker" in cmd and str(subs).encode() in cmd:
                found.append(int(pid))
        return found

    deadline = time.time() + 60
    while not workers() and time.time() < deadline:
        time.sleep(0.1)
    started = workers()
    assert started, "the grading process never started"
    time.sleep(0.5)  # the worker is inside its hanging check
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=60)
    time.sleep(0.5)
    left = {pid: open(f"/proc/{pid}/cmdline", "rb").read()[:300] for pid in started if _alive(pid)}
    assert not left, left
    assert not (tmp_path / "out" / "hang" / "results.json").exists()


# ----------------------------------------------------------------------------------------------
# Nothing in one submission stops, slows or changes another's grading
# ----------------------------------------------------------------------------------------------

FAKE_PRECHECK = textwrap.dedent('''
    """The real file reader, except that a file saying STALL_THE_READER stalls it and CRASH_THE_READER crashes it."""
    import sys, time

    from lab.grading import grade_precheck

    text = open(sys.argv[sys.argv.index("--file") + 1], encoding="latin-1").read()
    if "STALL_THE_READER" in text:
        time.sleep(3600)
    if "CRASH_THE_READER" in text:
        raise MemoryError("the reader ran out of memory")
    sys.exit(grade_precheck.main())
''')


@pytest.fixture
def fake_reader(fake, tmp_path, monkeypatch):
    (tmp_path / "fakeworker" / "fake_precheck.py").write_text(FAKE_PRECHECK)
    monkeypatch.setattr(grader, "PRECHECK_MODULE", "fake_precheck")
    monkeypatch.setattr(grader, "PRECHECK_LIMIT_S", 2.0)
    return fake


def test_a_file_that_stalls_or_crashes_the_reader_costs_only_its_own_grade(fake_reader, tmp_path):
    subs = tmp_path / "subs"
    _submission(subs, "alice")
    _submission(subs, "bob", "// STALL_THE_READER")
    _submission(subs, "carol", "// CRASH_THE_READER")
    _submission(subs, "dave")
    start = time.monotonic()
    results = {r.submission: r for r in classroom.grade_batch(fake_reader, subs, tmp_path / "out",
                                                              include_hidden=False)}
    assert time.monotonic() - start < 30
    assert results["alice"].score == results["dave"].score == results["alice"].max_score > 0
    bob, carol = results["bob"].check("compile"), results["carol"].check("compile")
    assert results["bob"].score == 0 and "took longer than 2 s" in bob.output and "\n" not in bob.output
    assert results["carol"].score == 0 and "could not read kernel.cu" in carol.output
    assert "Traceback" not in carol.output and "MemoryError" in carol.output
    report = (tmp_path / "out" / "report.md").read_text()
    assert "took longer than" in report and "could not read" in report


def test_a_folder_of_too_many_files_gets_a_sentence_and_the_batch_goes_on(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(grader, "MAX_FILES", 50)
    subs = tmp_path / "subs"
    crowded = _submission(subs, "alice")
    for i in range(60):
        (crowded / f"note{i}.txt").write_text("x")
    _submission(subs, "bob")
    results = {r.submission: r for r in classroom.grade_batch(fake, subs, tmp_path / "out", include_hidden=False)}
    assert results["alice"].score == 0 and "more than 50 files" in results["alice"].check("compile").output
    assert results["bob"].score == results["bob"].max_score > 0


def test_an_unreadable_submission_is_its_own_sentence(fake, tmp_path, monkeypatch):
    """A folder the grader may not read (its permissions; faked here, since root reads everything) is that
    submission's sentence, and the batch goes on."""
    subs = tmp_path / "subs"
    locked = _submission(subs, "alice")
    _submission(subs, "bob")
    walk = grader._walk

    def guarded(folder):
        if folder == locked:
            raise PermissionError(13, "Permission denied", str(folder))
        return walk(folder)

    monkeypatch.setattr(grader, "_walk", guarded)
    results = {r.submission: r for r in classroom.grade_batch(fake, subs, tmp_path / "out", include_hidden=False)}
    assert results["alice"].score == 0 and "could not read the submission alice" in \
        results["alice"].check("compile").output
    assert results["bob"].score == results["bob"].max_score > 0


def test_a_fingerprint_never_raises(fake, tmp_path, monkeypatch):
    sub = _submission(tmp_path, "alice")
    monkeypatch.setattr(grader, "MAX_FILES", 0)
    assert len(grader.fingerprint(fake, sub, 0, False)) == 20
