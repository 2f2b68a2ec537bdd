"""What lab.ops decided, counted per process: calls, decision-cache hits and misses, prepared launches recorded and
replayed, fallbacks (with their reasons), paths taken, autotune runs, and the kernels the build layer compiled or
found on disk (in all, and per path where a path counts its own: lab.ops.attention's rungs). `stats()` returns
them; `save()` adds this process's counts to a stats file beside the tune cache (at exit, too), which `lab ops
stats` shows."""

from __future__ import annotations

import atexit
import os
import time
import weakref
from collections import Counter
from pathlib import Path

COUNTS: Counter = Counter()
PATHS: Counter = Counter()  # "matmul:persistent", "rmsnorm:kernel", ...
FALLBACKS: Counter = Counter()  # reason -> calls
FAMILIES: Counter = Counter()  # shape family -> calls (counted at decision time, once per distinct call shape)
COMPILES_BY_PATH: Counter = Counter()  # "attention:02_flash_mma compiled" / "... from_disk": kernels a path's first
# recording built with NVRTC or found in the build cache (COMPILES, from lab.core.build, is the process's total)
_STARTED = time.time()
# Replays count themselves (Replay.calls, one attribute increment on lab.ops's fast path); fold() moves those
# counts into COUNTS and PATHS for every runtime still alive, and a runtime folds a recording before it drops it.
_RUNTIMES: weakref.WeakSet = weakref.WeakSet()


def track(runtime) -> None:
    _RUNTIMES.add(runtime)


def tracked_runtimes() -> tuple:
    """The lab.ops runtimes still alive."""
    return tuple(_RUNTIMES)


def fold_replay(replay) -> None:
    if replay.calls:
        COUNTS["replays"] += replay.calls
        PATHS[replay.path_key] += replay.calls
        replay.calls = 0


def fold() -> None:
    for runtime in list(_RUNTIMES):
        for replay in list(runtime.recordings.values()):
            if hasattr(replay, "calls"):
                fold_replay(replay)
STATS_KIND = "lab.ops stats"
STATS_SCHEMA = 1


def stats() -> dict:
    """This process's counters (the build layer's compile counts included)."""
    from lab.core.build import COMPILES

    fold()
    return {"counts": dict(COUNTS), "paths": dict(PATHS), "fallbacks": dict(FALLBACKS), "families": dict(FAMILIES),
            "compiles": dict(COMPILES), "compiles_by_path": dict(COMPILES_BY_PATH), "pid": os.getpid(),
            "since": _STARTED}


def reset_stats() -> None:
    from lab.core.build import COMPILES

    fold()
    for c in (COUNTS, PATHS, FALLBACKS, FAMILIES, COMPILES, COMPILES_BY_PATH):
        c.clear()


def stats_path() -> Path:
    from lab.core.build import cache_dir

    return cache_dir() / "ops" / "stats.json"


def save(path: Path | None = None) -> None:
    """Add this process's counters to the stats file (locked read-merge-write) and reset them, so a second save
    adds only what happened since."""
    from lab.ops.store import locked_update

    mine = stats()
    if not (mine["counts"] or mine["compiles"]):
        return

    def merge(payload: dict) -> None:
        totals = payload.setdefault("totals", {})
        for section in ("counts", "paths", "fallbacks", "families", "compiles", "compiles_by_path"):
            merged = Counter(totals.get(section, {}))
            merged.update(mine[section])
            totals[section] = dict(merged)
        runs = payload.setdefault("processes", [])
        runs.append({"pid": mine["pid"], "since": mine["since"], "saved": time.time(), "counts": mine["counts"],
                     "fallbacks": mine["fallbacks"]})
        del runs[:-20]  # the last 20 processes

    locked_update(path or stats_path(), merge, kind=STATS_KIND, schema=STATS_SCHEMA)
    reset_stats()


def load(path: Path | None = None) -> dict:
    """The stats file's contents ({} when none was saved yet)."""
    from lab.ops.store import locked_update

    path = path or stats_path()
    if not path.is_file():
        return {}
    return locked_update(path, lambda payload: None, kind=STATS_KIND, schema=STATS_SCHEMA)


def _save_at_exit() -> None:
    if COUNTS:
        try:
            save()
        except Exception:  # noqa: BLE001 - a stats file must never turn a clean exit into a traceback
            pass


atexit.register(_save_at_exit)
