"""CPU: grading on a Dask cluster (lab.cluster) with the fake grading worker of tests/test_grader.py: the grades
match the single-host path, a rerun resumes, and a Dask worker killed mid-batch loses nothing and counts nothing
twice. Skipped where Dask's distributed (the [cluster] extra) is not installed."""

import json
import os
import signal
import time

import pytest

from lab import classroom, cluster
from lab.cli import main
from lab.errors import LabError

distributed = pytest.importorskip("distributed", reason="Dask's distributed is not installed (the [cluster] extra)")

from test_grader import _submission, fake  # noqa: E402,F401  (the fake worker fixture and helper)


@pytest.fixture
def client(fake):  # noqa: F811
    """Two single-threaded worker processes, started after `fake` set PYTHONPATH so they import the fake worker."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        yield c


def _class(tmp_path, n=6, slow=None):
    subs = tmp_path / "subs"
    for i in range(n):
        lines = ["FAKE fail tails"] if i % 3 == 1 else ["FAKE crash tails"] if i % 3 == 2 else []
        if slow:
            lines.append(f"FAKE slow {slow}")
        _submission(subs, f"s{i}", *lines)
    return subs


def _grades(out):
    return {p.parent.name: json.loads(p.read_text())["score"] for p in sorted(out.glob("*/results.json"))}


def test_grades_on_the_cluster_match_the_single_host_path(fake, client, tmp_path):  # noqa: F811
    subs = _class(tmp_path)
    here = classroom.grade_batch(fake, subs, tmp_path / "here", seed=5, include_hidden=False)
    there = classroom.grade_batch(fake, subs, tmp_path / "there", seed=5, include_hidden=False, client=client)
    assert [(r.submission, r.score, [c.passed for c in r.checks]) for r in here] == \
        [(r.submission, r.score, [c.passed for c in r.checks]) for r in there]
    assert _grades(tmp_path / "here") == _grades(tmp_path / "there")
    assert (tmp_path / "there" / "grades.csv").is_file() and (tmp_path / "there" / "report.md").is_file()
    workers = {json.loads(p.read_text())["extra_data"]["dask_worker"]["pid"]
               for p in (tmp_path / "there").glob("*/results.json")}
    assert len(workers) >= 1 and os.getpid() not in workers  # graded in the workers, not in the client


def test_a_rerun_on_the_cluster_grades_nothing_again(fake, client, tmp_path):  # noqa: F811
    subs, out = _class(tmp_path, n=4), tmp_path / "out"
    classroom.grade_batch(fake, subs, out, seed=3, include_hidden=False, client=client)
    cached = []
    classroom.grade_batch(fake, subs, out, seed=3, include_hidden=False, client=client,
                          on_done=lambda r, c: cached.append(c))
    assert cached == [True] * 4


def test_a_worker_killed_mid_batch_loses_no_submission_and_counts_none_twice(fake, client, tmp_path):  # noqa: F811
    subs = _class(tmp_path, n=6, slow=1)
    reference = classroom.grade_batch(fake, subs, tmp_path / "here", seed=9, include_hidden=False)
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


def test_cluster_options_say_what_is_wrong_in_one_sentence():
    with pytest.raises(LabError, match="not both"):
        cluster.client_for("local", "tcp://x:1")
    with pytest.raises(LabError, match="takes 'local'"):
        cluster.client_for("slurm")
    with pytest.raises(LabError, match="No Dask scheduler answered"):
        cluster.client_for(scheduler="tcp://127.0.0.1:1", timeout_s=1)


def test_gpus_and_a_cluster_do_not_mix(tmp_path, capsys):
    subs = tmp_path / "subs"
    _submission(subs, "a")
    assert main(["grade", str(subs), "--exercise", "01", "--gpus", "0", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "leave --gpus out" in capsys.readouterr().out
