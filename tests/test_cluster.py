"""CPU: grading on a Dask cluster (lab.grading.cluster) with the fake grading worker of tests/test_grader.py: the grades
match the single-host path, a rerun resumes, a Dask worker killed mid-batch loses nothing and counts nothing
twice, and its grading processes die with it. The tests that start a Dask cluster skip where Dask's distributed
(the [cluster] extra) is not installed.

Also scripts/cluster_compare.py, the Python half of scripts/cluster_run.sh (the 2-GPU measurement): its batch,
its worker-killing watcher and its comparison, on fake processes and fake results (no Dask needed). Set
LAB_CLUSTER_DRY_RUN=1 to run scripts/cluster_run.sh itself end to end on the CPU (about 30 s): a LocalCluster
stands in for dask-cuda's and the fake worker for the GPU one."""

import dataclasses
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from test_grader import FAKE_WORKER, _submission, fake  # noqa: F401  (the fake worker fixture and helpers)

from lab.cli import main
from lab.core.errors import LabError
from lab.grading import classroom, cluster, grader

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "cluster_compare.py"


def _distributed():
    return pytest.importorskip("distributed", reason="Dask's distributed is not installed (the [cluster] extra)")


@pytest.fixture
def client(fake):  # noqa: F811
    """Two single-threaded worker processes, started after `fake` set PYTHONPATH so they import the fake worker."""
    distributed = _distributed()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        yield c


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("cluster_compare", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _class(tmp_path, n=6, slow=None, folder="subs"):
    subs = tmp_path / folder
    for i in range(n):
        lines = ["FAKE fail tails"] if i % 3 == 1 else ["FAKE crash tails"] if i % 3 == 2 else []
        if slow:
            lines.append(f"FAKE slow {slow}")
        _submission(subs, f"s{i}", *lines)
    return subs


def _grades(out):
    return {p.parent.name: json.loads(p.read_text())["score"] for p in sorted(out.glob("*/results.json"))}


def _wait_for(condition, timeout_s=20.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    return condition()


# ----------------------------------------------------------------------------------------------
# lab.grading.cluster on a Dask LocalCluster
# ----------------------------------------------------------------------------------------------

def test_grades_on_the_cluster_match_the_single_host_path(fake, client, tmp_path):  # noqa: F811
    subs = _class(tmp_path)
    here = classroom.grade_batch(fake, subs, tmp_path / "here", seed=5, include_hidden=False)
    there = classroom.grade_batch(fake, subs, tmp_path / "there", seed=5, include_hidden=False, client=client)
    assert [(r.submission, r.score, [c.passed for c in r.checks]) for r in here] == \
        [(r.submission, r.score, [c.passed for c in r.checks]) for r in there]
    assert _grades(tmp_path / "here") == _grades(tmp_path / "there")
    assert (tmp_path / "there" / "grades.csv").is_file() and (tmp_path / "there" / "report.md").is_file()
    payloads = [json.loads(p.read_text())["extra_data"] for p in (tmp_path / "there").glob("*/results.json")]
    workers = {p["dask_worker"]["pid"] for p in payloads}
    assert len(workers) >= 1 and os.getpid() not in workers  # graded in the workers, not in the client
    assert all(p["device"]["host"] == os.uname().nodename and "model" in p["device"] for p in payloads)


def test_a_rerun_on_the_cluster_grades_nothing_again(fake, client, tmp_path):  # noqa: F811
    subs, out = _class(tmp_path, n=4), tmp_path / "out"
    classroom.grade_batch(fake, subs, out, seed=3, include_hidden=False, client=client)
    cached = []
    classroom.grade_batch(fake, subs, out, seed=3, include_hidden=False, client=client,
                          on_done=lambda r, c: cached.append(c))
    assert cached == [True] * 4


def test_a_worker_killed_mid_batch_loses_no_submission_and_counts_none_twice(fake, client, tmp_path):  # noqa: F811
    subs = _class(tmp_path, n=6, slow=0.4)
    # The same names and faults without the slow lines: the same grades, graded in a fraction of the time.
    reference = classroom.grade_batch(fake, _class(tmp_path, n=6, folder="quick"), tmp_path / "here", seed=9,
                                      include_hidden=False)
    pids = client.run(os.getpid)
    done = []

    def kill_one_worker_after_the_first_grade(result, cached):
        done.append(result.submission)
        if len(done) == 1:
            os.kill(next(iter(pids.values())), signal.SIGKILL)

    start = time.monotonic()
    results = classroom.grade_batch(fake, subs, tmp_path / "there", seed=9, include_hidden=False, client=client,
                                    on_done=kill_one_worker_after_the_first_grade)
    assert sorted(done) == [f"s{i}" for i in range(6)]  # each once
    assert [(r.submission, r.score) for r in results] == [(r.submission, r.score) for r in reference]
    assert time.monotonic() - start < 120


def test_the_workers_grade_with_the_clients_time_limits(fake, client, tmp_path):  # noqa: F811
    # A worker loads the exercise by its id; without the client's limits it would wait the exercise's own 15 s.
    subs = tmp_path / "subs"
    _submission(subs, "hangs", "FAKE hang friendly")
    (result,) = classroom.grade_batch(fake, subs, tmp_path / "out", seed=1, include_hidden=False, client=client)
    assert "time limit of 1.5 s" in result.check("friendly").output
    assert result.check("tails").passed


def test_a_grading_process_dies_with_its_dask_worker(fake, client, tmp_path, script):  # noqa: F811
    hanging = _submission(tmp_path / "subs", "hangs", "FAKE hang friendly")
    address, pid = next(iter(client.run(os.getpid).items()))
    patient = dataclasses.replace(fake, check_timeout_s=60, time_limit_s=120)
    future = client.submit(cluster.grade_task, patient.id, str(hanging), 1, False, grader.WORKER_MODULE,
                           cluster.limits_of(patient), workers=[address], allow_other_workers=False, pure=False)
    children = _wait_for(lambda: script.grading_children(pid))
    assert children, "the worker started no grading process"
    try:
        assert "lab.grading.cluster" in children[0]["cmdline"] and children[0]["submission"] == "hangs"
        os.kill(pid, signal.SIGKILL)
        assert _wait_for(lambda: not script.alive(children[0]["pid"]), timeout_s=5), \
            "the grading process outlived its Dask worker"
    finally:
        client.cancel(future)
        if script.alive(children[0]["pid"]):
            os.kill(children[0]["pid"], signal.SIGKILL)


FAKE_BOARD_WORKER = textwrap.dedent('''
    """Fake grade worker for the leaderboard: every check passes; the leaderboard's speed-up is the kernel file's
    `FAKE speedup X` line."""
    import argparse, json

    p = argparse.ArgumentParser()
    for a in ("--exercise", "--kernel", "--events", "--checks", "--seed", "--shown"):
        p.add_argument(a)
    p.add_argument("--hidden", action="store_true")
    p.add_argument("--no-perf", action="store_true")
    args = p.parse_args()
    speedup = next(float(line.split()[2]) for line in open(args.kernel) if line.startswith("FAKE speedup"))
    with open(args.events, "a") as f:
        for name in args.checks.split(","):
            f.write(json.dumps({"event": "start", "check": name}) + "\\n")
            extra = {"geomean_speedup": speedup, "rows": []} if name == "leaderboard" else {}
            f.write(json.dumps({"event": "done", "check": name, "passed": True, "score": 0.0, "output": "ok",
                                **extra}) + "\\n")
''')


def test_the_leaderboard_on_the_cluster_ranks_as_on_one_host(fake, client, tmp_path, monkeypatch):  # noqa: F811
    # Next to the fake grading worker: a folder on the PYTHONPATH the Dask workers and their processes were given.
    (tmp_path / "fakeworker" / "fake_board_worker.py").write_text(FAKE_BOARD_WORKER)
    monkeypatch.setattr(grader, "WORKER_MODULE", "fake_board_worker")
    subs = tmp_path / "subs"
    for name, speedup in (("a", 0.9), ("b", 1.4), ("c", 1.1)):
        _submission(subs, name, f"FAKE speedup {speedup}")
    (subs / "empty").mkdir()
    here = classroom.leaderboard(fake, subs, tmp_path / "here")
    there = classroom.leaderboard(fake, subs, tmp_path / "there", client=client)
    assert [(r["submission"], r.get("rank"), r["gpu_model"]) for r in there] == \
        [("b", 1, classroom.UNKNOWN_GPU), ("c", 2, classroom.UNKNOWN_GPU), ("a", 3, classroom.UNKNOWN_GPU),
         ("empty", None, "")]
    assert [(r["submission"], r.get("rank")) for r in here] == [(r["submission"], r.get("rank")) for r in there]
    assert all(r["dask_worker"]["pid"] != os.getpid() for r in there if r["ranked"])


def test_cluster_options_say_what_is_wrong_in_one_sentence():
    with pytest.raises(LabError, match="not both"):
        cluster.client_for("local", "tcp://x:1")
    with pytest.raises(LabError, match="takes 'local'"):
        cluster.client_for("slurm")


def test_cluster_local_is_dask_cudas_cluster_with_one_task_per_worker(monkeypatch):
    distributed = _distributed()
    made = []

    def local_cuda_cluster(threads_per_worker):  # dask-cuda's, without GPUs: one in-process worker
        made.append(threads_per_worker)
        return distributed.LocalCluster(n_workers=1, threads_per_worker=threads_per_worker, processes=False,
                                        dashboard_address=None)

    monkeypatch.setitem(sys.modules, "dask_cuda", type(sys)("dask_cuda"))
    monkeypatch.setattr(sys.modules["dask_cuda"], "LocalCUDACluster", local_cuda_cluster, raising=False)
    with cluster.client_for("local") as client:
        assert made == [1]
        # no submission queued behind a running one on a busy worker while another worker could take it
        assert client.cluster.scheduler.WORKER_SATURATION == 1.0
        client.cluster.close()


def test_an_unreachable_scheduler_is_one_sentence():
    _distributed()
    with pytest.raises(LabError, match="No Dask scheduler answered"):
        cluster.client_for(scheduler="tcp://127.0.0.1:1", timeout_s=1)


def test_gpus_and_a_cluster_do_not_mix(tmp_path, capsys):
    subs = tmp_path / "subs"
    _submission(subs, "a")
    assert main(["grade", str(subs), "--exercise", "01", "--gpus", "0", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "leave --gpus out" in capsys.readouterr().out


def test_a_grading_child_without_its_module_says_so():
    env = {k: v for k, v in os.environ.items() if k != cluster.CHILD_MODULE_ENV}
    proc = subprocess.run([sys.executable, "-m", "lab.grading.cluster"], env=env, capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode != 0 and cluster.CHILD_MODULE_ENV in proc.stderr


# ----------------------------------------------------------------------------------------------
# scripts/cluster_compare.py
# ----------------------------------------------------------------------------------------------

def test_the_batch_is_the_fault_suite_and_twenty_more(script, tmp_path):
    batch = script.build_batch(tmp_path / "subs")
    manifest = json.loads((ROOT / "tests" / "grading" / "manifest.json").read_text())
    folders = sorted(p.name for p in (tmp_path / "subs").iterdir())
    assert len(batch) == len(manifest) + 20 == len(folders) and sorted(batch) == folders
    assert set(manifest) <= set(batch)
    assert (tmp_path / "subs" / "huge_file" / "kernel.cu").stat().st_size > grader.MAX_KERNEL_BYTES
    mixed = [n for n in batch if n.startswith("mixed_")]
    assert len(mixed) == 20 and not any("loop" in n or "deadlock" in n or "race" in n for n in mixed)
    from lab.grading.exercises import load

    assert (tmp_path / "subs" / "mixed_01_reference_01" / "kernel.cu").read_text() == load("01").reference_source()
    assert (tmp_path / "subs" / "mixed_04_reference_02" / "kernel.cu").read_text() == load("02").reference_source()
    assert batch["mixed_03_starter_01"]["expect"] == "starter"
    with pytest.raises(SystemExit, match="not empty"):
        script.build_batch(tmp_path / "subs")


def test_the_lines_lab_grade_prints_are_counted(script):
    log = textwrap.dedent("""\
        Dask: 2 workers at tcp://127.0.0.1:40000
        seed 4242 (given; recorded in /x/grading.json and report.md)
        good_reference: 10/10 (5.8 s)
        empty: 0/10 (0.0 s)
        good_reference: 10/10 (already graded)
        2026-12-01 distributed.nanny - WARNING - Restarting worker
        47 graded: per-submission results.json, grades.csv and report.md in /x
        """)
    assert script.graded_lines(log) == Counter({"good_reference": 2, "empty": 1})


def _results(folder, grades, worker_pid=None, model="NVIDIA H200"):
    """results.json files as `lab grade` writes them; grades: name -> {check: (score, passed)}."""
    for name, checks in grades.items():
        outcomes = [grader.CheckOutcome(c, s, 10.0, p, f"took {time.time()} s") for c, (s, p) in checks.items()]
        result = grader.SubmissionResult(name, "01_vectorized_copy", outcomes, [], 1.5, "fp", 4242,
                                         {"model": model, "uuid": "GPU-x", "host": os.uname().nodename})
        payload = grader.gradescope_json(result)
        if worker_pid:
            payload["extra_data"]["dask_worker"] = {"host": os.uname().nodename, "pid": worker_pid, "gpu": "0,1"}
        grader.write_json_atomic(Path(folder) / name / "results.json", payload)


def _run(tmp_path, name, grades, wall_s, announced=None, worker_pid=None):
    folder = tmp_path / name
    _results(folder, grades, worker_pid)
    log = tmp_path / f"{name}.log"
    log.write_text("".join(f"{n}: 1/1 (2.0 s)\n" for n in (announced or grades)))
    wall = tmp_path / f"{name}.wall.json"
    wall.write_text(json.dumps({"start": 1000.0, "end": 1000.0 + wall_s, "exit_code": 0}))
    return {"grades": folder, "log": log, "wall": wall}


GRADES = {"good": {"compile": (0, True), "friendly": (2, True)}, "bad": {"compile": (0, False), "friendly": (0, False)}}
BATCH = {"good": {"origin": "fault suite: good", "expect": "pass"}, "bad": {"origin": "copy of x", "expect": "wrong"}}


def test_identical_runs_compare_identical_and_give_the_ratio(script, tmp_path):
    runs = {"one_gpu": _run(tmp_path, "a", GRADES, 100), "cluster": _run(tmp_path, "b", GRADES, 55, worker_pid=11),
            "cluster_worker_killed": _run(tmp_path, "c", GRADES, 60, worker_pid=12)}
    runs["cluster_worker_killed"]["killed_here"] = True
    kill = {"killed": True, "t_kill": 1020.0, "worker": {"pid": 12, "host": "h", "gpu": "1,0"},
            "in_flight": [{"pid": 99, "submission": "bad"}], "children_died_with_worker": True}
    record = script.compare(BATCH, runs, kill, {"seed": "4242"})
    assert record["identical"] and record["every_run_graded_each_once"] and record["differences"] == []
    assert record["ratio_cluster_over_one_gpu"] == 0.55 and record["meets_target"]
    assert record["runs"]["cluster"]["submissions_per_worker"] == {"11": 2}
    assert record["runs"]["cluster_worker_killed"]["kill"]["t_kill_s_into_run"] == 20.0
    assert record["runs"]["cluster_worker_killed"]["kill"]["in_flight_regraded_by"] == {"bad": 12}
    assert record["scores"]["good"] == {"origin": "fault suite: good", "expect": "pass", "max": 20.0, "one_gpu": 2,
                                        "cluster": 2, "cluster_worker_killed": 2,
                                        "checks": {"compile": [0, True], "friendly": [2, True]}}


def test_a_changed_grade_a_lost_one_or_a_double_count_is_reported(script, tmp_path):
    changed = {**GRADES, "good": {"compile": (0, True), "friendly": (0, False)}}
    runs = {"one_gpu": _run(tmp_path, "a", GRADES, 100),
            "cluster": _run(tmp_path, "b", changed, 70, announced=["good", "bad", "bad"]),
            "cluster_worker_killed": _run(tmp_path, "c", {"good": GRADES["good"]}, 60)}
    record = script.compare(BATCH, runs)
    assert not record["identical"] and not record["meets_target"]
    assert record["differences"] == ["good: one_gpu 2/20, cluster 0/20 (checks friendly)"]
    assert record["runs"]["cluster"]["problems"] == ["bad: announced 2 times"]
    assert record["runs"]["cluster_worker_killed"]["problems"][0] == "bad: no results.json"
    assert not record["every_run_graded_each_once"]


FAKE_DASK_WORKER = textwrap.dedent('''
    """A stand-in Dask worker: starts one grading process, through `python -m lab.grading.cluster` (tied to this worker,
    as lab.grading.cluster.grade_task has it) or not, that says when it is ready and sleeps; then sleeps itself."""
    import os, subprocess, sys, time
    tie, kernel = sys.argv[1] == "tie", sys.argv[2]
    env = {**os.environ, "LAB_CLUSTER_CHILD_MODULE": "sleeper", "LAB_CLUSTER_WORKER_PID": str(os.getpid())}
    subprocess.Popen([sys.executable, "-m", "lab.grading.cluster" if tie else "sleeper", "--kernel", kernel], env=env)
    time.sleep(60)
''')
SLEEPER = "import pathlib, sys, time\npathlib.Path(sys.argv[-1] + '.ready').touch()\ntime.sleep(60)\n"


@pytest.mark.parametrize("tied", [True, False])
def test_the_watcher_kills_a_busy_worker_and_checks_its_grading_process_died(script, tmp_path, tied):
    kernel = _submission(tmp_path / "subs", "in_flight") / "kernel.cu"
    (tmp_path / "fake_dask_worker.py").write_text(FAKE_DASK_WORKER)
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    worker = subprocess.Popen([sys.executable, str(tmp_path / "fake_dask_worker.py"), "tie" if tied else "no",
                               str(kernel)], cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{ROOT}:{tmp_path}"})
    try:
        assert _wait_for(lambda: Path(f"{kernel}.ready").exists())  # the grading process runs the student's code
        _results(tmp_path / "grades", {"done_first": GRADES["good"]}, worker_pid=worker.pid)
        outcome = script.kill_one_worker(tmp_path / "grades", after=1, timeout_s=10, watch_s=3)
        assert outcome["killed"] and outcome["worker"]["pid"] == worker.pid
        assert [c["submission"] for c in outcome["in_flight"]] == ["in_flight"]
        assert outcome["children_died_with_worker"] is tied  # untied: an orphan, reported, then killed
        assert worker.wait(5) == -signal.SIGKILL
        assert not script.leftover_graders(tmp_path / "subs")
    finally:
        for c in script.grading_children(worker.pid) + script.leftover_graders(tmp_path / "subs"):
            os.kill(c["pid"], signal.SIGKILL)
        if worker.poll() is None:
            worker.kill()


def test_leftover_grading_processes_are_found_by_their_kernel(script, tmp_path):
    kernel = _submission(tmp_path / "subs", "stuck") / "kernel.cu"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--kernel", str(kernel)])
    try:
        found = _wait_for(lambda: script.leftover_graders(tmp_path / "subs"))
        assert [(f["pid"], f["submission"]) for f in found] == [(proc.pid, "stuck")]
        assert not script.leftover_graders(tmp_path / "other")
    finally:
        proc.kill()
        proc.wait()


# ----------------------------------------------------------------------------------------------
# scripts/cluster_run.sh end to end on the CPU (opt-in: LAB_CLUSTER_DRY_RUN=1)
# ----------------------------------------------------------------------------------------------

DRY_PATCHES = textwrap.dedent('''
    """Loaded by the dry run's `python -m lab`: the fake grading worker, and a GPU that is not there."""
    from lab.core import device
    from lab.grading import grader

    grader.WORKER_MODULE = "fake_grade_worker"
    device._probe = lambda: device.DeviceInfo("Dry-run GPU", 90, 132, 50 << 20, 227 << 10, 228 << 10, 1 << 30,
                                              1, 1, "13.0", "13.0")
''')
FAKE_DASK_CUDA = textwrap.dedent('''
    """dask_cuda for the dry run: a LocalCluster with two worker processes stands in for one worker per GPU."""
    from distributed import LocalCluster


    def LocalCUDACluster(threads_per_worker=1):
        return LocalCluster(n_workers=2, threads_per_worker=threads_per_worker, processes=True,
                            dashboard_address=None)
''')
FAKE_PYTHON = textwrap.dedent('''\
    #!/usr/bin/env bash
    # `python -m lab ...` with the dry run's patches; anything else as it is.
    if [ "${1:-}" = -m ] && [ "${2:-}" = lab ]; then
      shift 2
      exec "$REAL_PYTHON" -c "import dry_patches, runpy, sys; sys.argv[0] = 'lab'; runpy.run_module('lab', \\
    run_name='__main__', alter_sys=True)" "$@"
    fi
    exec "$REAL_PYTHON" "$@"
''')


@pytest.mark.skipif(os.environ.get("LAB_CLUSTER_DRY_RUN") != "1", reason="the script's CPU dry run takes ~30 s: "
                    "set LAB_CLUSTER_DRY_RUN=1")
def test_cluster_run_script_dry_run(tmp_path):
    _distributed()
    fakes = tmp_path / "fakes"
    (fakes / "dask_cuda").mkdir(parents=True)
    (fakes / "dask_cuda" / "__init__.py").write_text(FAKE_DASK_CUDA)
    (fakes / "dry_patches.py").write_text(DRY_PATCHES)
    (fakes / "fake_grade_worker.py").write_text(FAKE_WORKER)
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": str(python), "REAL_PYTHON": sys.executable, "PYTHONPATH": str(fakes),
           "SKIP_INSTALL": "1", "OUT": str(out), "SCRATCH": str(tmp_path / "scratch"), "KILL_AFTER": "10",
           "BUDGET_S": "480", "LAB_COMMIT": "dry-run"}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "cluster_run.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    subprocess.run(["tar", "-C", str(tmp_path), "-xzf", str(out / "pack.tgz")], check=True)
    record = json.loads((tmp_path / "pack" / "grading" / "cluster_h200x2.json").read_text())
    log = (tmp_path / "pack" / "log.txt").read_text()
    assert record["batch"]["size"] == 47 and record["identical"], log[-3000:]
    assert record["every_run_graded_each_once"], json.dumps(record["runs"], indent=1)
    kill = record["runs"]["cluster_worker_killed"]["kill"]
    assert kill["killed"] and kill["children_died_with_worker"], json.dumps(kill, indent=1)
    assert all(s["wall_s"] and s["exit_code"] == 0 for s in record["runs"].values())
    assert record["settings"]["check_timeout_s"] == "6" and record["provenance"]["commit"] == "dry-run"


def test_runs_that_failed_at_once_do_not_meet_the_target(script, tmp_path):
    """A cluster run that exits in a second (Dask missing) against a one-GPU run that timed out: no speed-up."""
    runs = {"one_gpu": _run(tmp_path, "a", {"good": GRADES["good"]}, 138),
            "cluster": _run(tmp_path, "b", {}, 0.4), "cluster_worker_killed": _run(tmp_path, "c", {}, 0.5)}
    record = script.compare(BATCH, runs)
    assert record["ratio_cluster_over_one_gpu"] < 0.01 and not record["meets_target"]
