"""Exercise 07's reference timed three ways on one problem (256 x 256 x 65536 fp16): the host time of one launch,
lab.measure.timing.measure as `lab bench` uses it, and the grader's time_fresh (fresh inputs every launch), for the
family's
rung and for the same file compiled as a student's. A launch whose host time exceeds the spin kernel in front of it
shows up only in the grader's figure (seen on the H200: ~130 us of host work per launch made the graded time 3x the
bench's until the launcher's plans were cached). Run on a GPU: python3 scripts/exercise07_timing.py"""
import time

import cupy as cp

from lab.families import get_family
from lab.grading import exercises
from lab.grading.grade_worker import time_fresh
from lab.measure import timing

fam = get_family("gemm_split_k")
ex = exercises.load("07")
ref = fam.rung("08_split_k")
student = ex.student_rung(ex.reference_rung().spec.path)
problem = fam.make_problem(seed=1, M=256, N=256, K=65536, layout="TN", dtype="float16")
out = cp.empty(problem.out_shape, problem.dtype)
for name, rung in (("reference", ref), ("student_file", student)):
    fam.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        fam.launch(rung, problem, out)
    host_us = (time.perf_counter() - t0) / 50 * 1e6
    cp.cuda.get_current_stream().synchronize()
    plain = timing.measure(lambda i, r=rung: fam.launch(r, problem, out), l2="cold", flusher=timing.L2Flusher())
    fresh, _ = time_fresh(fam, problem, lambda p, o, r=rung: fam.launch(r, p, o), 1, check=False)
    print(f"{name}: host {host_us:.1f} us per launch, measure {plain.median_ms * 1e3:.1f} us, "
          f"time_fresh {fresh * 1e3:.1f} us, spec {rung.spec.source} {dict(rung.spec.knobs)}")
ceil, _ = time_fresh(fam, problem, fam.launch_ceiling, 1, check=False)
print(f"cublas time_fresh {ceil * 1e3:.1f} us")
