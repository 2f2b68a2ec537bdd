"""The base types of a ladder: Rung, Problem and Family (the catalogue of families is lab.families).

A family knows how to make a problem of a given size, launch any of its rungs on it, compute the
float64 reference, and run the ceiling it is measured against (in the same run). The checking and
benchmarking drivers (lab.measure.verify, lab.measure.bench) work on any family through this interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError


@dataclass(frozen=True)
class Rung:
    family: str
    key: str  # "03_vectorized": the file's stem, which orders the ladder
    spec: KernelSpec
    title: str
    # How the family launches it: the name of one of the family's launch schemes (Family.launches: "tiles",
    # "persistent", ...), which the family maps to the grid, the block, the shared memory and the arguments, so that
    # no launcher asks which rung it was given. "" for a family that launches every rung one way.
    launch: str = ""

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
    flops: int = 0  # for TFLOP/s
    # What a family computed from the inputs (a cached reference): whoever changes the inputs in place clears it.
    derived: dict = field(default_factory=dict)


class Family:
    name: str = ""
    array_module = None  # None: CuPy. Tests give a NumPy family to check the checking logic itself.
    title: str = ""
    metric: str = "GB/s"
    ceiling_name: str = "cupy_device_copy"
    ceiling_title: str = "the device copy"  # the ceiling in a sentence: "0.85x of the device copy"
    rungs: tuple[Rung, ...] = ()
    # Rungs built and compile-checked that join `rungs` once their GPU tests pass on the reference GPU: `rung(key)`
    # finds them (for the tests, studies and scripts that check and time them), the ladder's walks (the tour, the
    # notebooks, the README) do not.
    candidate_rungs: tuple[Rung, ...] = ()
    # The launch schemes its rungs may name (Rung.launch); () for a family that launches every rung one way.
    launches: tuple[str, ...] = ()
    # What the family's figures are: the sweep's ("bandwidth": GB/s against bytes moved, cold and warm
    # L2; "throughput": the metric against the problem's side), and the Nsight Compute figure its lesson
    # needs ("bank_conflicts", "dram_bytes", or None for no profile).
    sweep_figure: str = "bandwidth"
    profile_figure: str | None = None

    def rung(self, key: str) -> Rung:
        for r in self.rungs + self.candidate_rungs:
            if key in (r.key, str(r.number), f"{r.number:02d}", r.key.split("_", 1)[1]):
                return r
        raise LabError(f"{self.name} has no rung {key!r}; its rungs are {', '.join(r.key for r in self.rungs)}.")

    def launch_scheme(self, rung: Rung) -> str:
        """The rung's launch scheme (Rung.launch), one of this family's (`launches`): a rung that names none of them
        gets one sentence instead of some other rung's launch."""
        if not self.launches or rung.launch in self.launches:
            return rung.launch
        raise LabError(f"{self.name} rung {rung.key} names the launch scheme {rung.launch!r}, which {self.name} does "
                       f"not define; its schemes are {', '.join(self.launches)} (set the Rung's launch where the "
                       "family defines its rungs).")

    # --- to implement per family -------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        raise NotImplementedError

    def make_problem(self, seed: int = 0, dist: str = "normal", **params) -> Problem:
        raise NotImplementedError

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        """Run `rung` on the problem's input set `set_index` (modulo the sets it has) into `out`."""
        raise NotImplementedError

    def reference(self, problem: Problem) -> np.ndarray:
        raise NotImplementedError

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray | float:
        """Each output element's allowed |error| against the float64 reference (lab.measure.bounds): 0, i.e.
        bit-exact, for data movement; a reduction family derives it from each element's own inputs."""
        return 0.0

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        raise NotImplementedError

    def output_values(self, out):
        """The output's values as the checks compare them (the array itself, unless a family stores a type the
        array module lacks, as gemm_tc stores bf16 in uint16)."""
        return out

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

    def dynamic_smem_bytes(self, rung: Rung) -> int:
        """Dynamic shared memory a rung is launched with at its knobs (none unless a family says so): the
        compile report adds it to the static shared memory that ptxas reports."""
        return 0

    def block_resources(self, rung: Rung) -> tuple[int, int] | None:
        """(threads per block, dynamic shared memory bytes per block) the launcher uses for this rung at
        its default knobs, for occupancy arithmetic; None when the family does not say."""
        return None

    def in_readme(self, params: dict) -> bool:
        """Whether a headline problem gets a row in the README's results table (all of them by default; a
        family with many variants of one size shows a representative few)."""
        return True

    def baselines(self) -> dict:
        """Extra library baselines timed beside the ceiling: name -> launch(problem, out, set_index)."""
        return {}

    def reproducible(self, rung: Rung) -> bool:
        """Whether `rung` gives the same bits on every run of the same inputs (the checks call a difference a
        race). False only for a rung whose summation order depends on timing by design (fp32 atomics): each of
        its runs is still checked against the bound."""
        return True

    def baselines_for(self, params: dict) -> dict:
        """The baselines that apply to a problem of these params (all of them unless a family says otherwise:
        cuBLAS's batched call, say, only serves a group of equal shapes)."""
        return self.baselines()

    def companion_entries(self, rung: Rung) -> tuple[str, ...]:
        """Entry points of the rung's source besides its own that its launches also use (split-K's reduction
        kernel): a grader's compile check builds them too, so a file without one gets one sentence up front."""
        return ()

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        """What a record of `rung` on `problem` should say about how it ran (the path a launcher chose for
        the shape, say), stored in the record's `extra`; nothing unless a family says so."""
        return {}


def runnable_rungs(rungs, arch: int) -> tuple[list[Rung], list[str]]:
    """The rungs that run on a GPU of `arch`, and one sentence for each that cannot (an sm_90a rung on an
    sm_86 GPU, say): drivers skip those with the sentence instead of failing on them."""
    from lab.core.build import arch_refusal

    keep, skipped = [], []
    for rung in rungs:
        why = arch_refusal(rung.spec, arch)
        if why:
            skipped.append(f"{rung.family}/{rung.key} skipped: it {why} (`lab inspect {rung.family}` still "
                           "compiles it).")
        else:
            keep.append(rung)
    return keep, skipped
