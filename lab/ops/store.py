"""The on-disk autotune cache: the winning configuration per (environment, bucket), kept across runs.

Design, in short:
- JSON, not SQLite: the file is small (one entry per bucket), a person can read and diff it, and a learner can
  delete it; one file per cache keeps "rebuild it" a rename.
- Writers serialise on fcntl.flock over a sibling lock file (never deleted, so two processes can never lock two
  different files), and each writer re-reads the file under the lock and merges its entries in: several processes
  tuning at once therefore never lose each other's entries, which a plain "write what I hold" would.
- Each write goes to a temp file in the same directory, fsync'd, then os.replace'd onto the target: a reader (who
  takes no lock) sees the old file or the new one, never half of one, and a crash mid-write leaves the old file.
- Readers keep the parsed file in memory and re-read it only when its (mtime_ns, size, inode) changed, so get()
  is a stat. (Two replacements within one mtime tick that reuse an inode and give the same size would go unseen
  until the next change; the cost is a redundant re-tune, never a wrong file.)
- A corrupt or foreign file is moved aside (kept, never deleted), the cache continues empty, and the store says
  so once. Without fcntl (Windows) there is no lock: writes stay atomic, but two processes writing at the same
  moment can drop each other's entries (the last writer wins), which only costs a re-tune.
locked_update() is the generic piece (lock, load or rebuild, mutate, atomic write); other files (the counters'
stats) reuse it with their own kind and schema.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lab.core.errors import LabError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; see the module docstring
    fcntl = None

SCHEMA = 1
KIND = "lab.ops tune cache"
_OPS_DIR = str(Path(__file__).resolve().parent)

Signature = tuple[int, int, int]  # (st_mtime_ns, st_size, st_ino): changes whenever the file is replaced


class CacheFileWarning(UserWarning):
    """A cache file was corrupt or foreign; it was moved aside and rebuilt empty."""


class TuneCacheWarning(CacheFileWarning):
    """The autotune cache was corrupt, foreign or from a newer lab; it was moved aside and rebuilt empty."""


@dataclass
class _Snapshot:
    payload: dict
    signature: Signature | None  # None: no file on disk


# ----------------------------------------------------------------------------------------------
# The generic piece: lock, load (or rebuild), mutate, write atomically
# ----------------------------------------------------------------------------------------------

def locked_update(path: str | Path, mutate: Callable[[dict], None], *, kind: str, schema: int,
                  check: Callable[[dict], str | None] | None = None, fresh: Callable[[], dict] | None = None,
                  on_bad: Callable[[str], None] | None = None) -> dict:
    """Lock `path`, load it, call mutate(payload) to change it in place, write it back atomically; return it.

    The file is a JSON object {"schema": schema, "kind": kind, ...}. A file that is not (bad JSON, another kind,
    another schema, or one `check` finds a problem in: it returns a phrase such as "has entries that are not
    objects") is moved aside to <name>.corrupt-<unix time>, and mutate gets a fresh payload (`fresh()`'s fields
    plus schema and kind); on_bad gets the one-sentence explanation (default: a CacheFileWarning).
    """
    return _update(Path(path), mutate, kind=kind, schema=schema, check=check, fresh=fresh, on_bad=on_bad).payload


def _update(path: Path, mutate: Callable[[dict], None] | None, *, kind: str, schema: int,
            check: Callable[[dict], str | None] | None, fresh: Callable[[], dict] | None,
            on_bad: Callable[[str], None] | None) -> _Snapshot:
    """locked_update, returning the signature of the file written too; mutate=None only repairs a bad file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(path):
            snap, problem = _read_snapshot(path, kind, schema, check, fresh)
            if problem:
                aside = _move_aside(path)
                (on_bad or _warn_default)(f"The {kind} at {path} {problem}; it was rebuilt empty and the bad file "
                                          f"moved to {aside}.")
            if mutate is None:
                return snap
            mutate(snap.payload)
            snap.payload.update(schema=schema, kind=kind)
            return _Snapshot(snap.payload, _write_atomic(path, snap.payload))
    except OSError as exc:
        raise LabError(f"Cannot write the {kind} at {path} ({exc.strerror or exc}); fix the directory's "
                       "permissions or set LAB_CACHE_DIR to a directory you can write.") from None


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _read_snapshot(path: Path, kind: str, schema: int, check: Callable[[dict], str | None] | None,
                   fresh: Callable[[], dict] | None) -> tuple[_Snapshot, str | None]:
    """The file's payload and signature, or a fresh payload and what was wrong with the file (None: nothing)."""
    empty = _Snapshot({**(fresh() if fresh else {}), "schema": schema, "kind": kind}, None)
    try:
        with open(path, "rb") as f:
            signature = _signature(os.fstat(f.fileno()))  # of the file we read, even if it is replaced meanwhile
            data = f.read()
    except FileNotFoundError:
        return empty, None
    except OSError as exc:
        raise LabError(f"Cannot read the {kind} at {path} ({exc.strerror or exc}); fix its permissions or set "
                       "LAB_CACHE_DIR to a directory you can read and write.") from None
    payload, problem = _parse(data, kind, schema, check)
    return (empty, problem) if problem else (_Snapshot(payload, signature), None)


def _parse(data: bytes, kind: str, schema: int, check: Callable[[dict], str | None] | None) -> tuple[dict, str | None]:
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, absurd nesting
        return {}, "is not valid JSON"
    if not isinstance(payload, dict):
        return {}, f"holds a JSON {type(payload).__name__}, not an object"
    if payload.get("kind") != kind:
        return {}, f"is not a {kind} (its kind is {payload.get('kind')!r})"
    found = payload.get("schema")
    if isinstance(found, bool) or not isinstance(found, int):
        return {}, "has no whole-number schema version"
    if found > schema:
        return {}, f"was written by a newer lab (schema {found}; this lab reads schema {schema})"
    if found != schema:
        return {}, f"has schema {found}, which this lab does not read (it reads schema {schema})"
    problem = check(payload) if check else None
    return payload, problem


def _move_aside(path: Path) -> Path:
    """Rename a bad file to <name>.corrupt-<unix time> (with a counter if that exists): kept, never deleted."""
    stem = f"{path.name}.corrupt-{int(time.time())}"
    aside, n = path.with_name(stem), 1
    while aside.exists():
        aside, n = path.with_name(f"{stem}-{n}"), n + 1
    os.replace(path, aside)
    return aside


def _write_atomic(path: Path, payload: dict) -> Signature:
    """Write to a temp file beside `path`, fsync, os.replace: readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if hasattr(os, "fchmod"):
                os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would hide the cache from a shared LAB_CACHE_DIR
            json.dump(payload, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
            signature = _signature(os.fstat(f.fileno()))  # a rename keeps inode, size and mtime
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return signature


def _signature(st: os.stat_result) -> Signature:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _warn_default(sentence: str) -> None:
    warnings.warn(sentence, CacheFileWarning, stacklevel=_stacklevel_outside_ops())


def _stacklevel_outside_ops() -> int:
    """The stacklevel that points a warning at the first caller outside lab/ops (the code that called lab.ops)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_OPS_DIR):
        frame, level = frame.f_back, level + 1
    return level


# ----------------------------------------------------------------------------------------------
# The autotune store
# ----------------------------------------------------------------------------------------------

def default_path() -> Path:
    """The cache's file under the lab's cache directory (LAB_CACHE_DIR, or ~/.cache/cupy-kernel-lab)."""
    from lab.core.build import (
        cache_dir,  # lab.core.build is light (no CuPy); imported here so the store stays stand-alone
    )

    try:
        return cache_dir() / "ops" / "tune.json"
    except OSError as exc:
        raise LabError(f"Cannot create the lab's cache directory ({exc.strerror or exc}); set LAB_CACHE_DIR to a "
                       "directory you can write.") from None


def _check_environments(payload: dict) -> str | None:
    envs = payload.get("environments")
    if not isinstance(envs, dict):
        return "has no \"environments\" object"
    for entries in envs.values():
        if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
            return "has environments that are not objects of entry objects"
    return None


def _fresh_environments() -> dict:
    return {"environments": {}}


class TuneStore:
    """The autotune cache: entries (small JSON objects) by environment key and bucket key, in one JSON file.

    get() answers from memory and re-reads the file only when it changed on disk; put(), put_many() and clear()
    lock the file, merge into what is on disk now, and replace it atomically. The dicts returned are copies.
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_path()
        self._snapshot: _Snapshot | None = None
        self._warned = False
        self._mutex = threading.Lock()  # one thread at a time updates this instance's snapshot

    def get(self, env: str, key: str) -> dict | None:
        entry = self._environments().get(env, {}).get(key)
        return _copy_json(entry) if entry is not None else None

    def entries(self, env: str | None = None) -> dict:
        """One environment's entries {key: entry}, or, with env=None, all of them {env: {key: entry}}."""
        envs = self._environments()
        return _copy_json(envs.get(env, {}) if env is not None else envs)

    def put(self, env: str, key: str, entry: dict) -> None:
        self.put_many(env, {key: entry})

    def put_many(self, env: str, entries: dict[str, dict]) -> None:
        _check_key(env, "environment key")
        clean = {}
        for key, entry in entries.items():
            _check_key(key, "bucket key")
            clean[key] = _as_stored(entry, key)
        self._update(lambda payload: payload["environments"].setdefault(env, {}).update(clean))

    def clear(self, env: str | None = None) -> None:
        """Forget one environment's entries, or every entry with env=None (the file stays, empty)."""
        if env is None:
            self._update(lambda payload: payload["environments"].clear())
        else:
            self._update(lambda payload: payload["environments"].pop(env, None))

    def size_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _environments(self) -> dict:
        try:
            signature = _signature(self.path.stat())
        except FileNotFoundError:
            signature = None
        except OSError as exc:
            raise LabError(f"Cannot read the {KIND} at {self.path} ({exc.strerror or exc}); fix its permissions or "
                           "set LAB_CACHE_DIR to a directory you can read and write.") from None
        snap = self._snapshot
        if snap is not None and snap.signature == signature:
            return snap.payload["environments"]
        with self._mutex:
            snap, problem = _read_snapshot(self.path, KIND, SCHEMA, _check_environments, _fresh_environments)
            if problem:  # re-checked under the file lock, where the bad file is moved aside
                snap = self._run(None)
            self._snapshot = snap
        return snap.payload["environments"]

    def _update(self, mutate: Callable[[dict], None]) -> None:
        with self._mutex:
            self._snapshot = self._run(mutate)

    def _run(self, mutate: Callable[[dict], None] | None) -> _Snapshot:
        return _update(self.path, mutate, kind=KIND, schema=SCHEMA, check=_check_environments,
                       fresh=_fresh_environments, on_bad=self._warn_once)

    def _warn_once(self, sentence: str) -> None:
        # One warning per store: a process that keeps meeting bad files still keeps every one of them aside.
        if not self._warned:
            self._warned = True
            warnings.warn(sentence, TuneCacheWarning, stacklevel=_stacklevel_outside_ops())

    def __repr__(self) -> str:
        return f"TuneStore({str(self.path)!r})"


def _check_key(key, what: str) -> None:
    if not isinstance(key, str) or not key:
        raise LabError(f"The autotune cache's {what} must be a non-empty string; got {key!r}.")


def _copy_json(value):
    """A copy of JSON data (dicts, lists, scalars): a caller changing what get() returned leaves the cache alone.
    Cheaper than copy.deepcopy (no memo, no dispatch on types JSON cannot hold), for a get() on a dispatch path."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


def _as_stored(entry, key: str) -> dict:
    """The entry as it will read back from the file (tuples become lists): what get() returns, before and after."""
    if not isinstance(entry, dict):
        raise LabError(f"The autotune cache's entry for {key!r} must be a dict; got {type(entry).__name__}.")
    try:
        return json.loads(json.dumps(entry))
    except (TypeError, ValueError) as exc:
        raise LabError(f"The autotune cache's entry for {key!r} cannot be stored as JSON ({exc}).") from None
