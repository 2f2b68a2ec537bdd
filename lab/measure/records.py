"""Measurements as JSON records with provenance, and replay of recorded reference-GPU results.

A record file holds one run: {"schema": 1, "provenance": {...}, "records": [...]}. Provenance says
where and when (GPU, arch, driver, CUDA, CuPy, NVRTC, commit, date); each record carries its own
ceiling, measured in the same run. Plots and tables read records, never literals.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.core.build import REPO_ROOT
from lab.core.errors import LabError

SCHEMA = 1
RESULTS_DIR = REPO_ROOT / "results"
REFERENCE_GPU_DIR = RESULTS_DIR / "h200"  # the committed reference-GPU records, replayed without a GPU


@dataclass
class Record:
    family: str
    rung: str  # "01_naive", or a baseline's name such as "cupy_copy"
    kind: str  # "sweep" | "tail" | "headline" | "profile"
    params: dict  # n / rows / cols / offsets: what was run
    bytes_moved: int
    l2: str  # "cold" | "warm"
    median_ms: float
    p10_ms: float
    p90_ms: float
    reps: int
    metric: str = "GB/s"
    value: float = 0.0  # in `metric`, from the median
    ceiling: str = ""  # name of the ceiling measured in the same run
    ceiling_value: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.value / self.ceiling_value if self.ceiling_value else float("nan")

    def as_dict(self) -> dict:
        return asdict(self)


def format_value(value: float, metric: str) -> str:
    """A throughput as tables and plots print it: whole GB/s, TFLOP/s to one decimal (two under 10)."""
    if metric == "GB/s":
        return f"{value:.0f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def format_bytes(b: float) -> str:
    """A byte count in binary units, labelled as such: "512 B", "60 MiB", "4 GiB" (1 KiB = 1024 B).
    The one formatter for sizes in tables, plot labels and lessons."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(b) < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}"
        b /= 1024
    raise AssertionError("unreachable")


# Parameters that follow from the others (leading dimensions = width + pad) or sit at their default.
_DERIVED_PARAMS = {"lda", "ldb", "ldc"}
_DEFAULT_PARAMS = {"alpha": 1, "beta": 0, "pad": 0, "x_offset": 0, "y_offset": 0}


def describe_params(params: dict) -> str:
    """"n=67108864", "rows=8192, cols=8192", "M=4096, N=4096, K=4096": what was run, without the
    parameters that follow from the others or sit at their defaults."""
    return ", ".join(f"{k}={v}" for k, v in params.items()
                     if k not in _DERIVED_PARAMS and not (k in _DEFAULT_PARAMS and v == _DEFAULT_PARAMS[k]))


def tail_key(records: list[Record]) -> str:
    """The parameter a tail sweep steps: "n" (copy), "cols" (square transposes), else the one that varies."""
    params = [r.params for r in records]
    for key in ("n", "cols"):
        if params and key in params[0]:
            return key
    for key in params[0] if params else ():
        if key not in _DERIVED_PARAMS and len({p.get(key) for p in params}) > 1:
            return key
    return next(iter(params[0])) if params else "n"


def git_commit() -> str:
    if os.environ.get("LAB_COMMIT"):
        return os.environ["LAB_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance() -> dict:
    """Where and when a measurement was made. Needs a GPU."""
    import cupy
    import numpy

    from lab import __version__
    from lab.core import device, nvrtc

    gpu = device.current()
    return {
        "device": gpu.name,
        "arch": gpu.sm,
        "sm_count": gpu.sm_count,
        "l2_bytes": gpu.l2_bytes,
        "driver_cuda": gpu.driver_cuda,
        "runtime_cuda": gpu.runtime_cuda,
        "cupy": cupy.__version__,
        "numpy": numpy.__version__,
        "nvrtc": ".".join(map(str, nvrtc.version())),
        "lab": __version__,
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
    }


@dataclass
class RecordSet:
    provenance: dict
    records: list[Record]
    replayed: bool = False  # True when loaded from a file rather than measured now

    def where(self, **conditions) -> list[Record]:
        return [r for r in self.records if all(getattr(r, k) == v for k, v in conditions.items())]

    def label(self) -> str:
        p = self.provenance
        tag = "REPLAYED" if self.replayed else "measured"
        return f"{tag} on {p.get('device', '?')} ({p.get('arch', '?')}), {p.get('date', '?')[:10]}"


def save(path: Path | str, records: RecordSet) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"schema": SCHEMA, "provenance": records.provenance,
               "records": [r.as_dict() for r in records.records]}
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def write_json(path: Path | str, payload: dict) -> Path:
    """Write a record (indented, one line per key; values JSON cannot hold as text) with its folder; returns the
    path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return path


def read_json(path: Path | str, missing: str, what: str = "record file") -> dict:
    """A JSON file's object, or LabError in one sentence: `missing` (what to run to make it) when it is absent, that
    it is not a valid `what` when it does not parse or is not an object."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError:
        raise LabError(missing) from None
    except json.JSONDecodeError as exc:
        raise LabError(f"{path} is not a valid {what} ({exc}).") from None
    if not isinstance(payload, dict):
        raise LabError(f"{path} is not a valid {what} (it holds a {type(payload).__name__}, not an object).")
    return payload


def load(path: Path | str) -> RecordSet:
    path = Path(path)
    payload = read_json(path, f"No record file at {path}; run `lab bench FAMILY --json {path}` on a GPU first.")
    if payload.get("schema") != SCHEMA:
        raise LabError(f"{path} has record schema {payload.get('schema')}, this lab reads {SCHEMA}.")
    return RecordSet(payload["provenance"], [Record(**r) for r in payload["records"]], replayed=True)


def measured_or_reference(live: bool, measure, filename: str) -> RecordSet | None:
    """For a notebook: `measure()` now (live), else the reference GPU's records in `filename` (None if absent)."""
    if live:
        return measure()
    try:
        return load(reference_dir() / filename)
    except LabError:
        return None


def reference_records(family: str) -> RecordSet:
    """The committed reference-GPU records of a family, for replay where no GPU is present."""
    return load(reference_dir() / f"{family}.json")


def reference_dir() -> Path:
    """Where replayed records are read from; LAB_REFERENCE_RESULTS overrides it (tests, other GPUs)."""
    return Path(os.environ.get("LAB_REFERENCE_RESULTS", REFERENCE_GPU_DIR))


def study_record_paths(filename: str) -> list[Path]:
    """Where a committed study record may be: the reference GPU's folder (results/h200) and an H100's beside it
    (results/h100), for a run that landed on one; each record's provenance names its GPU."""
    return [reference_dir() / filename, reference_dir().parent / "h100" / filename]


def read_study_record(path: Path, row_keys: set) -> dict | None:
    """A committed study record at `path` if it is one (a provenance, and a summary of rows that each hold
    `row_keys`); None for a missing, unreadable or malformed file."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    summary = record.get("summary") if isinstance(record, dict) else None
    if not isinstance(summary, list) or not isinstance(record.get("provenance"), dict):
        return None
    if not all(isinstance(s, dict) and set(row_keys) <= s.keys() for s in summary):
        return None
    return record


def newest_study_record(filename: str, row_keys: set) -> tuple[dict, Path] | None:
    """The newest (by its provenance's date) of the committed records in study_record_paths(filename), with its
    path."""
    found = [(r, p) for p in study_record_paths(filename) if (r := read_study_record(p, row_keys)) is not None]
    return max(found, key=lambda f: str(f[0]["provenance"].get("date", "")), default=None)
