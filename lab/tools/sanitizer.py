"""NVIDIA compute-sanitizer, when present: run a program under one of its tools and read its verdict.

The sanitizer wraps a whole process, so a driver re-runs a small target program under it (one per tool
and kernel, so that one crash hides nothing else) and reads three things back: the tool's summary line,
the target's exit status, and the target's own result, which it prints as one tagged JSON line. All
three are needed: a target that died early can leave a clean summary ("0 hazards") behind it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "synccheck")
RESULT_TAG = "LAB-SANITIZE-RESULT "  # the target's result line: this tag, then one JSON object

# memcheck, synccheck (and initcheck) end with "ERROR SUMMARY: 3 errors"; past --print-limit a second line
# says "ERROR SUMMARY: 7 errors were not printed", which is not the total.
_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?\b(?! were not printed)")
# racecheck (analysis report, its default) ends with "RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)".
_HAZARDS = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_VERSION = re.compile(r"Version\s+(\S+)")


def find_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    candidate = Path("/usr/local/cuda/bin/compute-sanitizer")
    return str(candidate) if candidate.exists() else None


def sanitizer_version(sanitizer: str) -> str:
    """"2025.3.1.0" from `compute-sanitizer --version`, or what went wrong asking."""
    try:
        proc = subprocess.run([sanitizer, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    m = _VERSION.search(proc.stdout + proc.stderr)
    return m.group(1) if m else f"unknown ({(proc.stdout + proc.stderr).strip()[-200:]!r})"


def sanitizer_command(sanitizer: str, tool: str, target: list[str], print_limit: int = 20) -> list[str]:
    """compute-sanitizer's command line for one tool around `target` (a program and its arguments).

    API errors are not reported: CuPy probes the driver in ways that return errors on purpose, and the
    question here is the kernels' own accesses; a failed launch still fails the target's checks."""
    if tool not in TOOLS:
        raise ValueError(f"unknown sanitizer tool {tool!r}; use one of {', '.join(TOOLS)}")
    return [sanitizer, "--tool", tool, "--report-api-errors", "no", "--print-limit", str(print_limit), *target]


@dataclass
class Summary:
    found: bool  # the tool printed its summary line (a killed or refused run prints none)
    errors: int | None = None  # memcheck/synccheck: the ERROR SUMMARY count; racecheck: hazards that are errors
    hazards: int | None = None  # racecheck: hazards displayed (errors + warnings)
    warnings: int | None = None  # racecheck: hazards it rates as warnings (possibly benign)


def parse_summary(text: str, tool: str) -> Summary:
    """The tool's verdict in its output. Several summaries (a target that forks) are added up."""
    if tool == "racecheck":
        races = _HAZARDS.findall(text)
        if races:
            return Summary(True, sum(int(r[1]) for r in races), sum(int(r[0]) for r in races),
                           sum(int(r[2]) for r in races))
    counts = _ERRORS.findall(text)
    if counts:
        return Summary(True, sum(map(int, counts)))
    return Summary(False)


def target_result(text: str) -> dict | None:
    """The last result line the target printed (RESULT_TAG + JSON), or None."""
    for line in reversed(text.splitlines()):
        at = line.find(RESULT_TAG)
        if at >= 0:
            try:
                return json.loads(line[at + len(RESULT_TAG):])
            except json.JSONDecodeError:
                return None
    return None


def emit_result(result: dict) -> None:
    """What a target calls last: its result, on one tagged line of stdout."""
    print(RESULT_TAG + json.dumps(result), flush=True)


@dataclass
class Run:
    """One target run under one tool: the verdict, the target's result and why it failed, if it did."""

    tool: str
    returncode: int | None  # None: killed at the timeout
    wall_s: float
    summary: Summary
    result: dict | None
    output_tail: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed}


def judge(tool: str, returncode: int | None, text: str, wall_s: float, tail_chars: int = 3000) -> Run:
    """A run's verdict from its exit status and output: it passes when the summary is there and clean, the
    target exited 0 and reported a result whose checks all passed (`result["failed"]` empty)."""
    summary = parse_summary(text, tool)
    result = target_result(text)
    problems = []
    if returncode is None:
        problems.append("timed out")
    elif returncode != 0:
        problems.append(f"exit status {returncode}")
    if not summary.found:
        problems.append(f"no {tool} summary in the output")
    elif summary.errors:
        problems.append(f"{summary.errors} {tool} error(s)")
    if result is None:
        problems.append("the target reported no result")
    elif result.get("failed"):
        problems.append(f"{len(result['failed'])} check(s) failed")
    return Run(tool, returncode, round(wall_s, 2), summary, result, text[-tail_chars:] if problems else "", problems)


def run_under(sanitizer: str, tool: str, target: list[str], timeout_s: float, env: dict | None = None) -> Run:
    """Run `target` under `tool` with a time limit, and judge it.

    The sanitizer and its target get a process group of their own, so that a timeout (or this process
    being stopped) ends both: killing the sanitizer alone would leave the target holding the GPU."""
    cmd = sanitizer_command(sanitizer, tool, target)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    returncode = None
    try:
        text, _ = proc.communicate(timeout=timeout_s)
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        text, _ = proc.communicate()
    finally:
        if proc.poll() is None:  # stopped from outside (SIGTERM turned into SystemExit): leave nothing behind
            _kill_group(proc)
    return judge(tool, returncode, text or "", time.perf_counter() - start)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
