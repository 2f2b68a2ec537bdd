"""Grading that no student kernel can break: one process per submission, a time limit per check,
fresh processes after a crash, results written as each submission completes.

A submission is a folder holding the exercise's kernel file (or, for a dispatch_rules exercise, its
table: JSON, parsed here before any worker starts and never executed). `grade_submission` validates the
folder, then drives lab.grading.grade_worker processes through the checks (the gate: compile, or parse for a
table; each correctness group; performance). If a worker dies (an illegal address kills its CUDA
context) or a check outlives its time limit (an infinite loop, a deadlock), that check scores zero
with the reason, the process group is killed, and a new worker carries on with the remaining
checks. Nothing a kernel does can lose another check's grade, another submission's, or the batch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab import __version__
from lab.core import source_guard
from lab.core.build import decode_source
from lab.core.errors import LabError
from lab.grading.exercises import DISPATCH_RULES, Exercise

MAX_KERNEL_BYTES = 1 << 20  # a kernel source past 1 MiB is refused, not compiled
WORKER_MODULE = "lab.grading.grade_worker"  # the process that runs a student's kernel (tests swap in a fake)
POLL_S = 0.05


@dataclass
class CheckOutcome:
    name: str
    score: float
    max_score: float
    passed: bool
    output: str
    hidden: bool = False
    extra: dict = field(default_factory=dict)


@dataclass
class SubmissionResult:
    submission: str
    exercise: str
    checks: list[CheckOutcome]
    notes: list[str]
    seconds: float
    fingerprint: str
    seed: int | None = None  # the inputs' seed: recorded with the grade, so that it can be reproduced
    device: dict | None = None  # the GPU the checks ran on (gpu_identity): model, uuid, host

    @property
    def score(self) -> float:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.checks)

    def check(self, name: str) -> CheckOutcome | None:
        return next((c for c in self.checks if c.name == name), None)


# ----------------------------------------------------------------------------------------------
# The submission folder
# ----------------------------------------------------------------------------------------------

MAX_FILES = 10_000  # entries a submission folder may hold: the walk over it is bounded, like every other step
MAX_HASHED_BYTES = 64 * MAX_KERNEL_BYTES  # file contents a fingerprint reads; larger files count by size and time
PRECHECK_LIMIT_S = 30.0  # reading one submission's file (a linear scan: milliseconds); a stall is the file's fault
PRECHECK_MODULE = "lab.grading.grade_precheck"


class TooManyFiles(LabError):
    pass


def _walk(folder: Path) -> tuple[list[str], list[Path]]:
    """The folder's symbolic links (relative paths) and its regular files, hidden ones left out; links never
    followed. Raises TooManyFiles past MAX_FILES entries, so that no submission makes the walk unbounded."""
    links, files, seen = [], [], 0
    for root, dirs, names in os.walk(folder, followlinks=False):
        seen += len(dirs) + len(names)
        if seen > MAX_FILES:
            raise TooManyFiles(f"the submission holds more than {MAX_FILES} files and folders; submit the "
                               "exercise's file on its own")
        for name in dirs + names:
            if os.path.islink(os.path.join(root, name)):
                links.append(Path(root, name).relative_to(folder).as_posix())
        dirs[:] = [d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(root, d))]
        files += [Path(root, f) for f in names if not f.startswith(".") and not os.path.islink(os.path.join(root, f))
                  and os.path.isfile(os.path.join(root, f))]
    return sorted(links), sorted(files)


def find_kernel(exercise: Exercise, folder: Path, shown: str | None = None) -> tuple[Path | None, list[str]]:
    """The kernel file to grade, or None with the reason; notes about anything else in the folder.

    A symbolic link anywhere in the submission is refused, and so is anything that resolves outside the
    folder: otherwise a link named kernel.cu would have the grader read and compile any file on its host
    (another student's kernel, the instructor's hidden.json). `shown` names the kernel in messages.
    A folder the grader cannot read (permissions, a file removed while it looks) is that submission's sentence."""
    try:
        return _find_kernel(exercise, folder, shown)
    except (OSError, ValueError) as exc:
        return None, [f"the grader could not read the submission {shown_name(folder.name)} ({type(exc).__name__}: "
                      f"{shown_name(str(exc))[:200]}); check that its files are readable"]


def _find_kernel(exercise: Exercise, folder: Path, shown: str | None) -> tuple[Path | None, list[str]]:
    if folder.is_symlink():
        return None, [f"the submission {folder.name} is a symbolic link; submit a folder of plain files"]
    if not folder.is_dir():
        return None, [f"{folder} is not a folder"]
    try:
        links, files = _walk(folder)
    except TooManyFiles as exc:
        return None, [str(exc)]
    if links:
        return None, [f"the submission holds a symbolic link ({shown_name(links[0])}); submit the files themselves, "
                      "not links"]
    if not files:
        return None, ["the submission is empty: it has no files (expected "
                      f"{exercise.student_file})"]
    wanted = folder / exercise.student_file
    if not wanted.is_file():
        sources = [p for p in files if p.suffix == Path(exercise.student_file).suffix]
        if len(sources) != 1:
            return None, [f"no {exercise.student_file} in the submission (found: "
                          f"{', '.join(shown_name(p.name) for p in files[:8])})"]
        wanted = sources[0]
    if not wanted.resolve().is_relative_to(folder.resolve()):
        return None, [f"{wanted.name} resolves outside the submission folder; submit the file itself"]
    notes = []
    extra = [shown_name(p.relative_to(folder).as_posix()) for p in files if p != wanted]
    if extra:
        notes.append(f"ignored extra files: {', '.join(extra[:10])}")
    size = wanted.stat().st_size
    if size > MAX_KERNEL_BYTES:
        return None, notes + [f"{wanted.name} is too large to grade ({size} bytes; the limit is "
                              f"{MAX_KERNEL_BYTES} bytes)"]
    shown = shown or shown_name(wanted.name)
    if not wanted.read_bytes().strip():
        return None, notes + [f"{shown} is empty: start from the exercise's {exercise.starter_path.name}"]
    ok, text = check_content_in_child(exercise, wanted, shown)
    if not ok:  # one sentence, before any worker starts (a CompileError, a table's LabError, a stall)
        return None, notes + [text]
    return wanted, notes + ([text] if text else [])


def check_content(kind: str, path: Path, shown: str, allowed_headers: set[str]) -> str | None:
    """What can be checked of the file without a GPU: a kernel's text and includes, or a whole dispatch table
    (lab.ops.rules.load: its one-sentence LabError, naming the file as the student knows it). Returns a note."""
    if kind == DISPATCH_RULES:
        from lab.ops import rules

        try:
            rules.load(path)
        except LabError as exc:
            raise LabError(str(exc).replace(str(path), shown)) from None
        return None
    source, note = decode_source(path.read_bytes(), shown)
    source_guard.check_includes(source, shown, allowed_headers)
    return note


def check_content_in_child(exercise: Exercise, path: Path, shown: str, python: str = sys.executable
                           ) -> tuple[bool, str | None]:
    """check_content in a short child process under a time limit: (True, a note or None), or (False, the one
    sentence). Whatever the file makes the reader do (a stall, a crash, an exhausted stack) stays in that process and
    becomes this submission's sentence; the batch and every other submission go on."""
    allowed = ",".join(exercise.allowed_headers()) if exercise.kind != DISPATCH_RULES else ""
    cmd = [python, "-m", PRECHECK_MODULE, "--kind", exercise.kind, "--file", str(path), "--shown", shown,
           "--allowed", allowed]
    limit_s = PRECHECK_LIMIT_S
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, env=child_env(),
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return False, (f"reading {shown} took longer than {limit_s:g} s (the grader reads a file in milliseconds), so "
                       "it was stopped; submit the exercise's file as the starter lays it out")
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
        return bool(answer["ok"]), answer["text"]
    except (IndexError, KeyError, ValueError, TypeError):
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])[:200]
        return False, f"the grader could not read {shown} (exit code {proc.returncode}: {tail or 'no message'})"


def shown_name(name: str) -> str:
    """A file name as text any report can hold: bytes that are not UTF-8 (kept by Python as surrogates) shown as
    the replacement character, so a CSV, JSON or Markdown writer never fails on a submission's odd name."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def fingerprint(exercise: Exercise, folder: Path, seed: int, include_hidden: bool) -> str:
    """What a grade depends on, hashed: the exercise's grading files, the seed, the lab's version and the
    submission's files. Never raises: a folder that cannot be read (or holds too much) hashes as such, so that one
    submission cannot stop the batch; its grading then says why."""
    h = hashlib.sha256(f"{exercise.id}|{seed}|{include_hidden}|{__version__}".encode())
    # The exercise's checks and points are part of the grade: editing exercise.json or hidden.json
    # (a new case, other points, other limits) regrades every submission on the next run.
    # A table exercise's reference solution too: the performance is timed against it.
    for path in exercise.grading_files(include_hidden):
        h.update(path.read_bytes() if path is not None and path.is_file() else b"-")
    try:
        _hash_folder(h, folder)
    except (OSError, LabError, ValueError) as exc:
        h.update(f"unreadable:{type(exc).__name__}:{exc}".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:20]


def _hash_folder(h, folder: Path) -> None:
    if not folder.is_dir():
        return
    links, files = _walk(folder)
    # Names as the file system holds them (os.fsencode): a name that is not UTF-8, as a zip made on another
    # system can leave, hashes like any other instead of stopping the batch.
    for link in links:  # hashed by name only: a link is never followed
        h.update(b"link:" + os.fsencode(str(link)))
    budget = MAX_HASHED_BYTES
    for p in files:
        h.update(os.fsencode(p.relative_to(folder).as_posix()))
        st = p.stat()
        if st.st_size <= min(budget, MAX_KERNEL_BYTES):
            budget -= st.st_size
            h.update(hashlib.sha256(p.read_bytes()).digest())
        else:  # a file no grade reads whole: its size and time tell a change
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())


# ----------------------------------------------------------------------------------------------
# Driving the worker processes
# ----------------------------------------------------------------------------------------------

def child_env(gpu: str | None = None) -> dict[str, str]:
    """The environment every grading process starts with: this one's, pinned to `gpu` where one is given."""
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env.setdefault("LAB_CACHE_DIR", str(Path(tempfile.gettempdir()) / "lab-grader-cache"))
    return env


# Run by a short child process: what device 0 is under the grading processes' environment.
GPU_PROBE = """
import json
try:
    from cupy.cuda import runtime
    p = runtime.getDeviceProperties(0)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    raw = bytes(p.get("uuid", b""))
    h = raw.hex()
    uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}" if len(raw) == 16 else None
    print(json.dumps({"model": name, "uuid": uuid, "arch": f"sm_{p['major']}{p['minor']}"}))
except Exception as exc:
    print(json.dumps({"model": None, "why": (str(exc).splitlines() or [type(exc).__name__])[0][:200]}))
"""


def gpu_identity(gpu: str | None = None, python: str = sys.executable) -> dict:
    """The GPU that grading processes started with `gpu` run on: {"model", "uuid", "arch", "host"}, or "model"
    None with "why" where no GPU can be read. A short child process with the grading processes' own
    environment reads device 0, so it names the GPU they use (whatever CUDA_VISIBLE_DEVICES or
    CUDA_DEVICE_ORDER say) while the grader's process never opens a CUDA context. Read once per setting."""
    env = child_env(gpu)
    found = _probe_gpu(env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER"), python)
    return {**found, "host": os.uname().nodename}


@functools.cache
def _probe_gpu(visible: str | None, order: str | None, python: str) -> dict:
    env = child_env()
    for name, value in (("CUDA_VISIBLE_DEVICES", visible), ("CUDA_DEVICE_ORDER", order)):
        env.pop(name, None)
        if value is not None:
            env[name] = value
    try:
        proc = subprocess.run([python, "-c", GPU_PROBE], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"model": None, "why": f"the GPU probe could not run ({exc})"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])[:200]
        return {"model": None, "why": f"the GPU probe failed (exit code {proc.returncode}"
                                      + (f": {tail})" if tail else ")")}


def _read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut off by a killed process
            pass
    return events


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class GradingStopped(Exception):
    """The batch was interrupted: the running worker was killed and its submission must not be recorded."""


def _why_it_died(returncode: int, stderr: str) -> str:
    text = stderr.lower()
    if "illegal" in text or "misaligned" in text or "cudaerror" in text or "cuda_error" in text:
        line = next((ln.strip() for ln in reversed(stderr.splitlines()) if "rror" in ln), "")
        return f"the kernel crashed the CUDA context ({line[:200]})"
    if returncode < 0:
        return f"the process was killed by signal {-returncode}"
    tail = " | ".join(stderr.strip().splitlines()[-3:])[:300]
    return f"the grading process died with exit code {returncode} ({tail or 'no message'})"


def run_checks(exercise: Exercise, kernel: Path, names: list[str], seed: int, include_hidden: bool,
               gpu: str | None = None, python: str = sys.executable, stop=None, shown: str | None = None
               ) -> dict[str, dict]:
    """Run checks in worker processes until each has an outcome; returns name -> done-event.

    `stop` (a threading.Event), once set, kills the running worker and raises GradingStopped. A worker
    that dies before it starts any check never ran the student's code: that is the grader's failure,
    raised as a LabError, not a grade."""
    done: dict[str, dict] = {}
    deadline = time.monotonic() + exercise.time_limit_s
    env = child_env(gpu)
    attempts, last_death = 0, "the grader could not reach this check"
    with tempfile.TemporaryDirectory(prefix="lab-grade-") as tmp:
        while True:
            pending = [n for n in names if n not in done]
            if not pending or attempts > len(names) + 1:
                break
            attempts += 1
            events_path = Path(tmp) / f"events{attempts}.jsonl"
            no_perf = any(not d["passed"] for n, d in done.items() if n not in (exercise.gate, "performance"))
            cmd = [python, "-m", WORKER_MODULE, "--exercise", exercise.id, "--kernel", str(kernel),
                   "--events", str(events_path), "--checks", ",".join(pending), "--seed", str(seed)]
            cmd += ["--hidden"] if include_hidden else []
            cmd += ["--shown", shown] if shown else []
            cmd += ["--no-perf"] if no_perf else []
            stderr_path = Path(tmp) / f"stderr{attempts}.txt"
            killed = False
            with open(stderr_path, "w") as stderr:
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                        start_new_session=True)  # its own process group, killed as one
                try:
                    current, started = None, time.monotonic()
                    while proc.poll() is None:
                        time.sleep(POLL_S)
                        if stop is not None and stop.is_set():
                            raise GradingStopped()
                        for ev in _read_events(events_path):
                            if ev["event"] == "start" and ev["check"] != current and ev["check"] not in done:
                                current, started = ev["check"], time.monotonic()
                            elif ev["event"] == "done":
                                done.setdefault(ev["check"], ev)
                                if ev["check"] == current:
                                    current = None
                        now = time.monotonic()
                        if current and now - started > exercise.check_timeout_s:
                            _kill(proc)
                            killed = True
                            done[current] = _failed(current, f"killed at the time limit of "
                                                             f"{exercise.check_timeout_s:g} s for one check: "
                                                             "an infinite loop or a deadlock?")
                        elif now > deadline:
                            _kill(proc)
                            killed = True
                            for n in names:
                                done.setdefault(n, _failed(n, f"not run: the submission used up its time limit "
                                                              f"({exercise.time_limit_s:g} s)"))
                finally:
                    if proc.poll() is None:  # interrupted (Ctrl-C, a stop): never leave a kernel on the GPU
                        _kill(proc)
            events = _read_events(events_path)
            for ev in events:
                if ev["event"] == "done":
                    done.setdefault(ev["check"], ev)
            started_checks = [ev["check"] for ev in events if ev["event"] == "start"]
            crashed = [n for n in started_checks if n not in done]
            if proc.returncode not in (0, None) and not killed:
                last_death = _why_it_died(proc.returncode, stderr_path.read_text())
                if crashed:
                    done[crashed[-1]] = _failed(crashed[-1], last_death)
            if not events and not killed:
                tail = " | ".join(stderr_path.read_text().strip().splitlines()[-3:])[:300]
                raise LabError(f"The grading worker stopped (exit code {proc.returncode}) before it ran any check, "
                               f"so this is the grader's failure, not the submission's: {tail or 'no message'}")
            if exercise.gate in done and not done[exercise.gate]["passed"]:
                for n in names:
                    done.setdefault(n, _failed(n, f"not run: {exercise.gate_failed}"))
    for n in names:
        done.setdefault(n, _failed(n, f"not run: {last_death}"))
    return done


def _failed(name: str, output: str) -> dict:
    return {"event": "done", "check": name, "passed": False, "score": 0.0, "output": output}


def grade_submission(exercise: Exercise, folder: Path, seed: int = 0, include_hidden: bool = True,
                     gpu: str | None = None, with_performance: bool = True, stop=None,
                     shown: str | None = None) -> SubmissionResult:
    """Grade one submission folder; `shown` names its kernel in every message (`lab check`: the path the
    student typed)."""
    start = time.monotonic()
    folder = Path(folder)
    groups = list(exercise.checks) + (exercise.hidden_checks() if include_hidden else [])
    names = [exercise.gate] + [g.name for g in groups] + (["performance"] if with_performance else [])
    max_scores = {exercise.gate: 0.0, "performance": float(exercise.performance.points)}
    max_scores |= {g.name: float(g.points) for g in groups}
    hidden = {g.name for g in groups if g.hidden}
    kernel, notes = find_kernel(exercise, folder, shown)
    if kernel is None:
        outcomes = {n: _failed(n, notes[-1]) for n in names}
    else:
        outcomes = run_checks(exercise, kernel, names, seed, include_hidden, gpu, stop=stop, shown=shown)
    # A worker's score is capped at the check's points: no process can award more than the exercise gives.
    checks = [CheckOutcome(n, min(float(outcomes[n].get("score", 0.0)), max_scores[n]), max_scores[n],
                           bool(outcomes[n]["passed"]),
                           outcomes[n].get("output", ""), n in hidden,
                           {k: v for k, v in outcomes[n].items()
                            if k not in ("event", "check", "passed", "score", "output", "max_score", "t")})
              for n in names]
    return SubmissionResult(folder.name, exercise.id, checks, notes, time.monotonic() - start,
                            fingerprint(exercise, folder, seed, include_hidden), seed)


# ----------------------------------------------------------------------------------------------
# Gradescope's results.json
# ----------------------------------------------------------------------------------------------

def gradescope_json(result: SubmissionResult) -> dict:
    """Gradescope autograder schema: https://gradescope-autograders.readthedocs.io (results.json)."""
    tests = []
    for c in result.checks:
        tests.append({"name": c.name, "score": round(c.score, 3), "max_score": c.max_score,
                      "status": "passed" if c.passed else "failed", "output": c.output,
                      "visibility": "after_published" if c.hidden else "visible"})
    return {
        "score": round(result.score, 3),
        "execution_time": round(result.seconds, 2),
        "output": "; ".join(result.notes) if result.notes else "graded",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"exercise": result.exercise, "submission": result.submission,
                       "fingerprint": result.fingerprint, "max_score": result.max_score, "seed": result.seed,
                       "checks": [asdict(c) for c in result.checks],
                       **({"device": result.device} if result.device is not None else {})},
    }


def result_from_json(payload: dict) -> SubmissionResult:
    extra = payload["extra_data"]
    checks = [CheckOutcome(**c) for c in extra["checks"]]
    notes = [] if payload.get("output") == "graded" else payload.get("output", "").split("; ")
    return SubmissionResult(extra["submission"], extra["exercise"], checks, notes, payload["execution_time"],
                            extra["fingerprint"], extra.get("seed"), extra.get("device"))


def write_json_atomic(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    os.replace(tmp, path)
