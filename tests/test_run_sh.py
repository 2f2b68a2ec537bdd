"""run.sh on the CPU with a stand-in .venv: the set-up runs pip only when what it installs from has changed, and
`bash run.sh check` checks the dispatch-table exercise (whose rules.json is the student's file from the start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"  # pip calls are logged, not run; anything else runs on this interpreter
    python.write_text(f'#!/bin/sh\nif [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "pip $*" >> "{log}"; exit 0; fi\n'
                      f'exec "{sys.executable}" "$@"\n')
    lab = venv / "bin" / "lab"  # a check that cannot grade (no GPU): exit 3, as `lab check` does without one
    lab.write_text(f'#!/bin/sh\necho "lab $*" >> "{log}"\nexit 3\n')
    for script in (python, lab):
        script.chmod(0o755)
    return venv, log


def _run(args: list[str], venv: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, LAB_VENV=str(venv))
    return subprocess.run(["bash", str(ROOT / "run.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_set_up_runs_pip_once_until_what_it_installs_from_changes(tmp_path):
    venv, log = _venv(tmp_path)
    first = _run(["setup"], venv)
    assert first.returncode == 0, first.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "setting up" in first.stderr  # pip itself, then the wheels and the lab
    second = _run(["setup"], venv)
    assert second.returncode == 0 and "setting up" not in second.stderr
    assert log.read_text().splitlines() == calls
    (venv / ".lab-setup").write_text("an older set-up\n")
    _run(["setup"], venv)
    assert len(log.read_text().splitlines()) == 4


def test_check_includes_the_dispatch_table_exercise(tmp_path):
    venv, log = _venv(tmp_path)
    (venv / ".lab-setup").write_text("")  # the set-up itself is the other test's
    done = _run(["check"], venv)
    checked = [line for line in log.read_text().splitlines() if line.startswith("lab check")]
    assert "lab check 09_dispatch_rules" in checked, (checked, done.stderr)
    assert done.returncode == 3  # nothing could be graded without a GPU
