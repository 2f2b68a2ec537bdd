"""CPU: compute-sanitizer's summaries parsed, its command line built, and a run judged (with a fake sanitizer)."""

import stat
import sys
import time

import pytest

from lab.tools import sanitizer

# What compute-sanitizer prints around a target: its banner, the target's own output, its summary.
MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
checked 4 cases
LAB-SANITIZE-RESULT {"tool": "memcheck", "checks": 4, "failed": []}
========= ERROR SUMMARY: 0 errors
"""
MEMCHECK_ERRORS = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at gemm_tc_ldmatrix_smem+0x1c70
=========     by thread (31,0,0) in block (1,0,0)
=========     Address 0x7f3a00000210 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a00000000 of size 527 bytes
LAB-SANITIZE-RESULT {"tool": "memcheck", "checks": 4, "failed": []}
========= ERROR SUMMARY: 25 errors
========= ERROR SUMMARY: 5 errors were not printed
"""
RACECHECK_HAZARDS = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at gemm_tc_swizzled_multistage+0x9a0
=========     and Read access at gemm_tc_swizzled_multistage+0xb10 [128 hazards]
========= Warning: Race reported between Read access at gemm_tc_swizzled_multistage+0x400
=========     and Write access at gemm_tc_swizzled_multistage+0x9a0 [64 hazards]
LAB-SANITIZE-RESULT {"tool": "racecheck", "checks": 4, "failed": []}
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
VERSION_TEXT = """\
NVIDIA (R) Compute Sanitizer
Copyright (c) 2020-2025 NVIDIA Corporation
Version 2025.3.1.0 (build 36398583) (public-release)
"""


@pytest.mark.parametrize("text,tool,expected", [
    (MEMCHECK_CLEAN, "memcheck", sanitizer.Summary(True, 0)),
    (MEMCHECK_ERRORS, "memcheck", sanitizer.Summary(True, 25)),  # the total, not the "were not printed" line
    ("========= ERROR SUMMARY: 1 error\n", "synccheck", sanitizer.Summary(True, 1)),
    (RACECHECK_HAZARDS, "racecheck", sanitizer.Summary(True, errors=1, hazards=2, warnings=1)),
    ("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", "racecheck",
     sanitizer.Summary(True, 0, 0, 0)),
    ("========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n", "racecheck",
     sanitizer.Summary(True, 1, 1, 0)),
    ("========= ERROR SUMMARY: 0 errors\n", "racecheck", sanitizer.Summary(True, 0)),  # hazard-mode report
    ("========= Error: Device not supported\n", "memcheck", sanitizer.Summary(False)),
    ("", "racecheck", sanitizer.Summary(False)),
])
def test_parse_summary(text, tool, expected):
    assert sanitizer.parse_summary(text, tool) == expected


def test_summaries_of_several_processes_add_up():
    text = "========= ERROR SUMMARY: 2 errors\n========= ERROR SUMMARY: 3 errors\n"
    assert sanitizer.parse_summary(text, "memcheck").errors == 5


def test_target_result_takes_the_last_tagged_line():
    text = 'LAB-SANITIZE-RESULT {"checks": 1}\nnoise\n========= LAB-SANITIZE-RESULT {"checks": 2}\n'
    assert sanitizer.target_result(text) == {"checks": 2}
    assert sanitizer.target_result("LAB-SANITIZE-RESULT {not json\n") is None
    assert sanitizer.target_result("no result here") is None


def test_emit_result_round_trips(capsys):
    sanitizer.emit_result({"tool": "memcheck", "failed": ["FAIL x"]})
    assert sanitizer.target_result(capsys.readouterr().out) == {"tool": "memcheck", "failed": ["FAIL x"]}


def test_judge_passes_a_clean_run_only():
    assert sanitizer.judge("memcheck", 0, MEMCHECK_CLEAN, 1.0).passed
    run = sanitizer.judge("memcheck", 0, MEMCHECK_ERRORS, 1.0)
    assert run.problems == ["25 memcheck error(s)"] and "out of bounds" in run.output_tail
    assert sanitizer.judge("racecheck", 0, RACECHECK_HAZARDS, 1.0).problems == ["1 racecheck error(s)"]


def test_judge_a_warning_alone_is_recorded_but_passes():
    text = RACECHECK_HAZARDS.replace("(1 error, 1 warning)", "(0 errors, 1 warning)").replace("2 hazards", "1 hazard")
    run = sanitizer.judge("racecheck", 0, text, 1.0)
    assert run.passed and run.summary.warnings == 1


def test_judge_a_clean_summary_after_a_crash_is_a_failure():
    # A target that died early can leave "0 hazards" behind: the exit status and the missing result say so.
    text = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    run = sanitizer.judge("racecheck", -11, text, 3.0)
    assert run.problems == ["exit status -11", "the target reported no result"]


def test_judge_failed_checks_and_a_timeout():
    text = 'LAB-SANITIZE-RESULT {"failed": ["FAIL gemm_tc/02 [M=1]: wrong"]}\n========= ERROR SUMMARY: 0 errors\n'
    assert sanitizer.judge("memcheck", 0, text, 1.0).problems == ["1 check(s) failed"]
    run = sanitizer.judge("memcheck", None, "", 60.0)
    assert run.problems == ["timed out", "no memcheck summary in the output", "the target reported no result"]
    assert run.as_dict()["passed"] is False


def test_sanitizer_command():
    cmd = sanitizer.sanitizer_command("/cuda/bin/compute-sanitizer", "racecheck", ["python3", "t.py", "--child"])
    assert cmd[0] == "/cuda/bin/compute-sanitizer"
    assert cmd[cmd.index("--tool") + 1] == "racecheck"
    assert cmd[cmd.index("--report-api-errors") + 1] == "no"  # CuPy's deliberate API errors are not findings
    assert cmd[-3:] == ["python3", "t.py", "--child"]  # the target last, as given
    with pytest.raises(ValueError, match="unknown sanitizer tool"):
        sanitizer.sanitizer_command("cs", "initchek", ["x"])


def _fake(tmp_path, name: str, body: str):
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_run_under_runs_the_tool_around_the_target(tmp_path):
    fake = _fake(tmp_path, "compute-sanitizer", f'printf "%s\\n" "$@" > "{tmp_path}/argv.txt"\n'
                 'echo \'LAB-SANITIZE-RESULT {"checks": 3, "failed": []}\'\n'
                 'echo "========= ERROR SUMMARY: 0 errors"\n')
    run = sanitizer.run_under(fake, "synccheck", [sys.executable, "target.py", "--child", "synccheck", "03"], 30)
    assert run.passed and run.result == {"checks": 3, "failed": []} and run.returncode == 0
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[:2] == ["--tool", "synccheck"] and argv[-5:] == [sys.executable, "target.py", "--child", "synccheck",
                                                                 "03"]


def test_run_under_ends_the_sanitizer_and_its_target_at_the_timeout(tmp_path):
    # The target (a sleep started by the fake sanitizer) holds the output pipe: returning at all means the
    # whole process group was ended, not only the sanitizer.
    fake = _fake(tmp_path, "compute-sanitizer", "sleep 60 &\nwait\n")
    start = time.monotonic()
    run = sanitizer.run_under(fake, "memcheck", ["target"], timeout_s=1)
    assert time.monotonic() - start < 20
    assert run.returncode is None and "timed out" in run.problems


def test_find_sanitizer_and_its_version(tmp_path, monkeypatch):
    fake = _fake(tmp_path, "compute-sanitizer", "".join(f"echo '{line}'\n" for line in VERSION_TEXT.splitlines()))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sanitizer.find_sanitizer() == fake
    assert sanitizer.sanitizer_version(fake) == "2025.3.1.0"
    assert sanitizer.sanitizer_version(_fake(tmp_path, "other", "echo nothing\n")).startswith("unknown")
