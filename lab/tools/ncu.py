"""Nsight Compute (`ncu`): finding it, the command around a target program, running it, reading its CSV.

ncu profiles a whole process, so every study that reads hardware counters (lab.studies.profile, lab.studies.scheduling,
lab.studies.checklist, the split-K records of lab.lessons.underfill) wraps a small target program in the same way and
reads
the same `--csv` output. That is done here, once:

- the command leaves the GPU's clocks alone (`--clock-control none`): ncu's default locks them to base, and the lab
  measures the clocks the GPU really runs at. Caches are flushed before each profiled kernel (`--cache-control all`,
  ncu's default, written out);
- the CSV is read by column name, never by position: ncu's columns change with its version and its options;
- every value is converted to ncu's base units (bytes, nanoseconds, per second) here, so no caller ever sees
  "Mbyte", "usecond" or a thousands separator.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lab.core.errors import LabError

# The header ncu prints above its --csv rows. Records that kept the rows without it are read with these names.
COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
           "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
_HEADER = {"ID", "Metric Name", "Metric Value"}  # the header row holds these, wherever they stand
_OWN_COLUMNS = {"ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"}  # read into Launch itself

# Unit -> factor to ncu's base unit: bytes, nanoseconds, hertz, and rates per second. ncu scales its output for
# reading ("Mbyte", "usecond"; recent versions write "us", "Gbyte/s", "Ghz"). Percentages stay in percent, and a
# unit not listed (cycle, inst, sector, warp, or none) is a count: factor 1.
_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
UNITS = {"%": 1.0, **_NS,
         **{f"{p}byte": f for p, f in _SI.items()}, **{f"{p}B": f for p, f in _SI.items() if p},
         **{f"{p}byte/{t}": f * (1e9 / ns) for p, f in _SI.items() for t, ns in _NS.items()},
         **{f"{p}byte/block": f for p, f in _SI.items()},
         **{f"{p}hz": f for p, f in _SI.items()}, **{f"cycle/{t}": 1e9 / ns for t, ns in _NS.items()}}

REPLAY_MODES = ("kernel", "application", "range", "app-range")


def find_ncu() -> str | None:
    """The ncu binary on PATH, else the CUDA toolkit's usual place; None when neither has it."""
    found = shutil.which("ncu")
    if found:
        return found
    candidate = Path("/usr/local/cuda/bin/ncu")
    return str(candidate) if candidate.exists() else None


def missing(instead: str = "") -> LabError:
    """The sentence for an absent ncu; `instead` says what to do without it ("skip the profile step")."""
    return LabError("Nsight Compute (ncu) is not installed here; install it with the CUDA toolkit to read hardware "
                    f"counters{', or ' + instead if instead else ''}.")


def command(target_argv: Sequence[str], metrics: Iterable[str], *, binary: str | None = None,
            kernel_name: str | None = None, kernel_regex: str | None = None, launch_skip: int | None = None,
            launch_count: int | None = None, nvtx_include: str | None = None, replay: str = "kernel",
            cache_control: str = "all", clock_control: str = "none") -> list[str]:
    """ncu around `target_argv`, printing `metrics` as CSV.

    kernel_name / kernel_regex: only kernels of that name (or matching that regular expression) are profiled;
    launch_skip / launch_count: of those, skip the first n and profile the next n; nvtx_include: only kernels inside
    that NVTX range ("name/" for a push/pop range); replay: ncu's --replay-mode ("range" replays the whole NVTX
    range as one result). `binary` is found with find_ncu() when not given.
    """
    if kernel_name is not None and kernel_regex is not None:
        raise ValueError("give kernel_name or kernel_regex, not both")
    if replay not in REPLAY_MODES:
        raise ValueError(f"replay must be one of {', '.join(REPLAY_MODES)}, not {replay!r}")
    if binary is None:
        binary = find_ncu()
        if binary is None:
            raise missing()
    cmd = [binary, "--clock-control", clock_control, "--cache-control", cache_control, "--csv"]
    if launch_skip is not None:
        cmd += ["--launch-skip", str(launch_skip)]
    if launch_count is not None:
        cmd += ["--launch-count", str(launch_count)]
    if kernel_name is not None or kernel_regex is not None:
        cmd += ["--kernel-name", kernel_name if kernel_regex is None else f"regex:{kernel_regex}"]
    if nvtx_include is not None:
        cmd += ["--nvtx", "--nvtx-include", nvtx_include]
    cmd += ["--metrics", ",".join(metrics)]
    if replay != "kernel":
        cmd += ["--replay-mode", replay]
    return cmd + list(target_argv)


def run(cmd: Sequence[str], timeout: float) -> str:
    """What ncu printed (its CSV among its own ==PROF== lines); LabError when it cannot start, fails or runs over."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LabError(f"ncu took longer than {timeout:g} s and was stopped.") from None
    except OSError as exc:
        raise LabError(f"ncu could not be started: {exc}.") from None
    if proc.returncode != 0:
        raise LabError(f"ncu failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-600:]}")
    return proc.stdout


@dataclass
class Launch:
    """One profiled result: a kernel launch (or a whole NVTX range in range replay)."""
    id: int
    kernel: str
    metrics: dict[str, float] = field(default_factory=dict)  # ncu metric name -> value in base units
    columns: dict[str, str] = field(default_factory=dict)  # the row's other columns ("Grid Size", "Stream", ...)

    def named(self, names: Mapping[str, str]) -> dict[str, float]:
        """{our name: value} for `names` ({our name: ncu metric name}), leaving out metrics ncu did not print."""
        return {ours: self.metrics[metric] for ours, metric in names.items() if metric in self.metrics}


def value(text: str, unit: str = "") -> float:
    """One "Metric Value" in base units: "1,015,808" -> 1015808.0, ("268.44", "Mbyte") -> 268.44e6; empty -> nan."""
    try:
        number = float(text.replace(",", "").strip() or "nan")
    except ValueError:  # "n/a" and the like
        number = float("nan")
    return number * UNITS.get(unit.strip(), 1.0)


def parse(text: str | Iterable[str], columns: Sequence[str] | None = None) -> list[Launch]:
    """ncu --csv output -> one Launch per profiled result, in ID order.

    Lines before the header row (ncu's ==PROF== lines, the target's own output) are skipped, and so is anything
    after it that is not a quoted CSV row. Rows stored without their header are read with `columns` (COLUMNS for
    the rows of ncu's default output); with neither a header nor `columns` there is nothing to read: [].
    """
    lines = text.splitlines() if isinstance(text, str) else list(text)
    header, start = None, 0
    for i, line in enumerate(lines):
        fields = next(csv.reader([line]), [])
        if _HEADER <= set(fields):
            header, start = fields, i + 1
            break
    if header is None:
        if columns is None:
            return []
        header = list(columns)
    launches: dict[int, Launch] = {}
    rows = csv.DictReader((line for line in lines[start:] if line.startswith('"')), fieldnames=header)
    for row in rows:
        metric = row.get("Metric Name")
        try:
            launch_id = int(row.get("ID") or "")
        except ValueError:  # a repeated header, or not a row of ncu's
            continue
        if not metric:
            continue
        launch = launches.get(launch_id)
        if launch is None:
            kernel = row.get("Kernel Name") or row.get("Range Name") or ""
            others = {k: v for k, v in row.items() if k not in _OWN_COLUMNS and isinstance(k, str) and v is not None}
            launch = launches[launch_id] = Launch(launch_id, kernel, columns=others)
        launch.metrics[metric] = value(row.get("Metric Value") or "", row.get("Metric Unit") or "")
    return [launches[k] for k in sorted(launches)]
