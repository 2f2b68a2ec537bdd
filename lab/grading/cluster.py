"""Grading a class on a Dask cluster: `lab grade ... --cluster local` (dask-cuda's LocalCUDACluster, one worker
per GPU of this host) or `--scheduler ADDRESS` (a running Dask scheduler whose workers may sit on other hosts).

Dask only places the work. Each task grades one submission exactly as `lab grade` does on one host
(lab.grading.grader.grade_submission: one fresh worker process per check group, time limits, a crash confined to its
check), and returns the Gradescope JSON. The client writes each results.json the moment its task finishes, so
an interrupted batch loses nothing and a rerun resumes (lab.grading.classroom's fingerprints). A worker or host lost
mid-batch: Dask runs its tasks again on the workers left; the client keeps one result per submission, so none
is lost and none is counted twice. The grading processes of a lost worker die with it (`python -m lab.grading.cluster`
below), so no orphaned student kernel keeps a GPU busy while its submission is graded again elsewhere.

The leaderboard runs the same way (lab.grading.classroom.leaderboard_task, handed to leaderboard_on): each
submission's speed-up is timed against the reference by one grading process on one worker's GPU, and the row names
that GPU.

Every worker needs this lab installed at the same version and the submissions folder at the same path (a
shared file system): tasks carry paths, not files. The optional extra `cupy-kernel-lab[cluster]` installs
Dask's `distributed` and `dask-cuda`; without it these options say what to install.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from lab.core.errors import LabError

INSTALL = "pip install 'cupy-kernel-lab[cluster]' (Dask's distributed and dask-cuda)"
CHILD_MODULE_ENV = "LAB_CLUSTER_CHILD_MODULE"  # the grading module a worker's processes run (lab.grading.grade_worker)
PARENT_ENV = "LAB_CLUSTER_WORKER_PID"  # the Dask worker they must not outlive
PR_SET_PDEATHSIG = 1  # linux/prctl.h
WRAPPER = "lab.grading.cluster"  # what a Dask worker's grading processes run: this module, then the grading module


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
        import dask
        from dask_cuda import LocalCUDACluster
    except ImportError:
        raise LabError(f"--cluster local starts one worker per GPU with dask-cuda: {INSTALL}.") from None
    # Saturation 1.0: a worker holds only the task it runs, so no submission waits behind a slow one (a hang
    # lasts a whole time limit) while another GPU is idle. Dask's default (1.1) queues one more per worker.
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):
        return Client(LocalCUDACluster(threads_per_worker=1))


def limits_of(exercise) -> dict:
    """The exercise's time limits as the client has them: a worker loads the exercise by its id, and must grade
    with the same limits (a test or a measurement may shorten them) or the grades would differ."""
    return {"time_limit_s": exercise.time_limit_s, "check_timeout_s": exercise.check_timeout_s}


def worker_exercise(exercise_id: str, worker_module: str, limits: dict | None):
    """On a Dask worker: the exercise with the client's limits, and the grading processes tied to this worker."""
    import dataclasses

    from lab.grading import exercises

    _tie_grading_processes_to_this_worker(worker_module)
    return dataclasses.replace(exercises.load(exercise_id), **(limits or {}))


def worker_identity() -> dict:
    return {"host": os.uname().nodename, "pid": os.getpid(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


def grade_task(exercise_id: str, submission: str, seed: int, include_hidden: bool, worker_module: str,
               limits: dict | None = None) -> dict:
    """What a Dask worker runs for one submission: the single-host grading, on the GPU this worker was given
    (dask-cuda puts it first in CUDA_VISIBLE_DEVICES, which the grading processes inherit). `worker_module`
    is the grading worker the client uses (tests swap in a fake one), so both sides grade alike."""
    from lab.grading import grader

    exercise = worker_exercise(exercise_id, worker_module, limits)
    result = grader.grade_submission(exercise, Path(submission), seed, include_hidden, gpu=None)
    result.device = grader.gpu_identity()
    payload = grader.gradescope_json(result)
    payload["extra_data"]["dask_worker"] = worker_identity()
    return payload


def leaderboard_on(client, exercise, todo: list[Path], seed: int, record, task: Callable) -> None:
    """grade_on for the leaderboard: one `task` per submission (lab.grading.classroom.leaderboard_task, which a worker
    runs as task(exercise_id, submission, seed, worker_module, limits)), each row recorded as it arrives."""
    from lab.grading import grader

    _run_each(client, todo, lambda sub: (task, exercise.id, str(sub.resolve()), seed,
                                         grader.WORKER_MODULE, limits_of(exercise)), record)


def _run_each(client, todo: list[Path], task_for: Callable[[Path], tuple], record) -> None:
    from distributed import KilledWorker, as_completed

    # pure=False: every task its own key, so two classes graded at once on one scheduler never share a result.
    futures = {client.submit(*task_for(sub), pure=False): sub.name for sub in todo}
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


# ----------------------------------------------------------------------------------------------
# A lost worker takes its grading processes with it
# ----------------------------------------------------------------------------------------------
# A grading process runs in its own session (lab.grading.grader kills its whole process group at a time limit), so
# nothing ends it when the Dask worker that started it is killed: a hanging student kernel would keep that
# GPU busy forever while Dask grades the submission again elsewhere. On a Dask worker, lab.grading.grader starts
# `python -m lab.grading.cluster ...` instead; it asks Linux to SIGKILL it when its parent dies (PR_SET_PDEATHSIG),
# then runs the real grading module in the same process, with the same arguments.

def _tie_grading_processes_to_this_worker(worker_module: str) -> None:
    from lab.grading import grader

    if worker_module != WRAPPER:  # a worker inside the client's process hands on what it was given
        os.environ[CHILD_MODULE_ENV] = worker_module
    os.environ[PARENT_ENV] = str(os.getpid())
    grader.WORKER_MODULE = WRAPPER


def die_with_parent(parent_pid: int) -> bool:
    """Have this process killed when its parent dies; False where that cannot be asked (not Linux) or the
    parent is already gone."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    return os.getppid() == parent_pid  # the worker died before the request took effect: nobody will kill us


def _run_grading_child() -> None:
    module = os.environ.get(CHILD_MODULE_ENV)
    if not module or module == WRAPPER:
        sys.exit(f"python -m {WRAPPER} runs a Dask worker's grading process; {CHILD_MODULE_ENV} must name the "
                 "grading module (lab.grading.grade_worker)")
    parent = int(os.environ.get(PARENT_ENV, "0") or 0)
    if not die_with_parent(parent) and parent and os.getppid() != parent:
        sys.exit(f"the Dask worker {parent} that started this grading process is gone")
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _run_grading_child()
