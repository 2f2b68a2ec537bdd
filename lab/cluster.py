"""Grading a class on a Dask cluster: `lab grade ... --cluster local` (dask-cuda's LocalCUDACluster, one worker
per GPU of this host) or `--scheduler ADDRESS` (a running Dask scheduler whose workers may sit on other hosts).

Dask only places the work. Each task grades one submission exactly as `lab grade` does on one host
(lab.grader.grade_submission: one fresh worker process per check group, time limits, a crash confined to its
check), and returns the Gradescope JSON. The client writes each results.json the moment its task finishes, so
an interrupted batch loses nothing and a rerun resumes (lab.classroom's fingerprints). A worker or host lost
mid-batch: Dask runs its tasks again on the workers left; the client keeps one result per submission, so none
is lost and none is counted twice.

Every worker needs this lab installed at the same version and the submissions folder at the same path (a
shared file system): tasks carry paths, not files. The optional extra `cupy-kernel-lab[cluster]` installs
Dask's `distributed` and `dask-cuda`; without it these options say what to install.
"""

from __future__ import annotations

import os
from pathlib import Path

from lab.errors import LabError

INSTALL = "pip install 'cupy-kernel-lab[cluster]' (Dask's distributed and dask-cuda)"


def client_for(cluster: str | None = None, scheduler: str | None = None, timeout_s: int = 30):
    """A dask.distributed Client for `--cluster local` or `--scheduler ADDRESS`; a LabError sentence otherwise."""
    if cluster and scheduler:
        raise LabError("Give either --cluster local or --scheduler ADDRESS, not both.")
    if cluster not in (None, "local"):
        raise LabError(f"--cluster takes 'local' (one Dask worker per GPU of this host), not {cluster!r}; "
                       "for workers on other hosts, start a scheduler and pass --scheduler ADDRESS.")
    try:
        from distributed import Client
    except ImportError:
        raise LabError(f"Grading on a Dask cluster needs Dask's distributed: {INSTALL}.") from None
    if scheduler:
        try:
            return Client(scheduler, timeout=timeout_s)
        except OSError as exc:
            raise LabError(f"No Dask scheduler answered at {scheduler} within {timeout_s} s ({exc}); start one "
                           "with `dask scheduler` and point --scheduler at the address it prints.") from None
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        raise LabError(f"--cluster local starts one worker per GPU with dask-cuda: {INSTALL}.") from None
    return Client(LocalCUDACluster(threads_per_worker=1))


def grade_task(exercise_id: str, submission: str, seed: int, include_hidden: bool, worker_module: str) -> dict:
    """What a Dask worker runs for one submission: the single-host grading, on the GPU this worker was given
    (dask-cuda puts it first in CUDA_VISIBLE_DEVICES, which the grading processes inherit). `worker_module`
    is the grading worker the client uses (tests swap in a fake one), so both sides grade alike."""
    from lab import exercises, grader

    grader.WORKER_MODULE = worker_module
    exercise = exercises.load(exercise_id)
    result = grader.grade_submission(exercise, Path(submission), seed, include_hidden, gpu=None)
    payload = grader.gradescope_json(result)
    payload["extra_data"]["dask_worker"] = {"host": os.uname().nodename, "pid": os.getpid(),
                                            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    return payload


def grade_on(client, exercise, todo: list[Path], seed: int, include_hidden: bool, record) -> None:
    """Submit one task per submission in `todo` and hand each finished one to `record(name, payload)` as it
    completes. On any exception (Ctrl-C included) the tasks still pending are cancelled; what was recorded
    stays recorded."""
    from distributed import KilledWorker, as_completed

    from lab import grader

    # pure=False: every task its own key, so two classes graded at once on one scheduler never share a result.
    futures = {client.submit(grade_task, exercise.id, str(sub.resolve()), seed, include_hidden, grader.WORKER_MODULE,
                             pure=False): sub.name for sub in todo}
    try:
        for future in as_completed(futures):
            try:
                payload = future.result()
            except KilledWorker:
                raise LabError(f"Dask workers died each time they graded {futures[future]} (Dask gives up after a "
                               "few tries); look at that submission and the workers' logs.") from None
            record(futures[future], payload)
    except BaseException:
        client.cancel(list(futures))
        raise
