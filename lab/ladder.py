"""The catalogue: families of rungs, each with its launch geometry, reference and ceiling.

A family knows how to make a problem of a given size, launch any of its rungs on it, compute the
float64 reference, and run the ceiling it is measured against (in the same run). The checking and
benchmarking drivers (lab.verify, lab.bench) work on any family through this interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lab.build import KernelSpec
from lab.errors import LabError


@dataclass(frozen=True)
class Rung:
    family: str
    key: str  # "03_vectorized": the file's stem, which orders the ladder
    spec: KernelSpec
    title: str

    @property
    def number(self) -> int:
        return int(self.key.split("_")[0])


@dataclass
class Problem:
    """One concrete input set: the arrays, the output's shape, and how to label it."""

    label: str
    inputs: dict
    out_shape: tuple
    bytes_moved: int
    out_offset: int = 0  # elements by which the output's start is shifted (alignment tests)
    params: dict = field(default_factory=dict)
    dtype: np.dtype = np.dtype(np.float32)
    # For outputs that are also inputs (C = alpha*A@B + beta*C) and outputs with untouchable padding:
    out_init: object = None  # copied into the output before every launch (None: the output stays poisoned)
    write_mask: object = None  # boolean mask of the elements the kernel must write (None: all of them)
    reduction_length: int | None = None  # sets the tolerance (GEMM: K); None: the family's
    flops: int = 0  # for TFLOP/s


class Family:
    name: str = ""
    array_module = None  # None: CuPy. Tests give a NumPy family to check the checking logic itself.
    title: str = ""
    metric: str = "GB/s"
    ceiling_name: str = "cupy_device_copy"
    rungs: tuple[Rung, ...] = ()
    reduction_length: int = 0  # 0: data movement, checked bit-exactly

    def rung(self, key: str) -> Rung:
        for r in self.rungs:
            if key in (r.key, str(r.number), f"{r.number:02d}", r.key.split("_", 1)[1]):
                return r
        raise LabError(f"{self.name} has no rung {key!r}; its rungs are {', '.join(r.key for r in self.rungs)}.")

    # --- to implement per family -------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        raise NotImplementedError

    def make_problem(self, seed: int = 0, dist: str = "normal", **params) -> Problem:
        raise NotImplementedError

    def launch(self, rung: Rung, problem: Problem, out) -> None:
        raise NotImplementedError

    def reference(self, problem: Problem) -> np.ndarray:
        raise NotImplementedError

    def launch_ceiling(self, problem: Problem, out) -> None:
        raise NotImplementedError

    def sweep_params(self, max_bytes: int) -> list[dict]:
        raise NotImplementedError

    def tail_params(self) -> list[dict]:
        raise NotImplementedError

    def headline_params(self) -> list[dict]:
        raise NotImplementedError

    # --- shared -------------------------------------------------------------------------------
    def throughput(self, problem: Problem, median_ms: float) -> float:
        """The problem's rate in `metric` units at this time: GB/s of bytes moved, or TFLOP/s."""
        if self.metric == "TFLOP/s":
            return problem.flops / (median_ms * 1e-3) / 1e12
        return problem.bytes_moved / (median_ms * 1e-3) / 1e9

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple[Rung, ...]:
        """The rungs timed for one benchmark job (all of them unless a family says otherwise); `quick`
        is the plan's, for families that leave slow rungs out of a smoke run's larger sizes."""
        return self.rungs

    def min_dram_bytes(self, params: dict) -> int | None:
        """The fewest DRAM bytes a problem of these params can move (every input read once, every output
        written once), to hold a profile's measured DRAM traffic against; None when a family has none."""
        return None

    def baselines(self) -> dict:
        """Extra library baselines timed beside the ceiling: name -> launch(problem, out)."""
        return {}


def families() -> dict[str, Family]:
    from lab.families.copy import CopyFamily
    from lab.families.gemm import GemmFp32Family
    from lab.families.transpose import TransposeFamily

    return {f.name: f for f in (CopyFamily(), TransposeFamily(), GemmFp32Family())}


def unverified_families() -> dict[str, Family]:
    """Ladders written but not yet checked and measured on a GPU: compiled and tested on the CPU,
    reachable by name (`lab verify NAME`), but left out of the tour and the README until they have
    passed their GPU tests on the reference GPU. None at present: gemm_fp32 passed them on the H200."""
    return {}


def get_family(name: str) -> Family:
    known = families() | unverified_families()
    if name not in known:
        raise LabError(f"Unknown family {name!r}; the ladders are: {', '.join(known)}.")
    return known[name]


def all_rungs() -> list[Rung]:
    return [r for f in (families() | unverified_families()).values() for r in f.rungs]
