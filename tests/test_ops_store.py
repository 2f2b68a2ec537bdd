"""The autotune cache on disk (lab/ops/store.py): round trip, several processes at once, bad files. CPU only."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from lab.core.errors import LabError
from lab.ops import store
from lab.ops.store import SCHEMA, TuneCacheWarning, TuneStore

ENTRY = {"path": "persistent", "config": {"BN": 256, "GROUP_M": 8}, "us": 12.5, "candidates": [], "tuned_at": "t"}


def _asides(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".corrupt-*"))


def test_round_trip_keeps_environments_apart(tmp_path):
    s = TuneStore(tmp_path / "tune.json")
    assert s.get("h200", "M<=64") is None and s.entries() == {} and s.size_bytes() == 0
    s.put("h200", "M<=64", ENTRY)
    s.put_many("a100", {"M<=64": {"path": "cublas"}, "M<=128": {"path": "generic", "config": (1, 2)}})
    assert s.get("h200", "M<=64") == ENTRY
    assert s.get("a100", "M<=64") == {"path": "cublas"}
    assert s.get("a100", "M<=128") == {"path": "generic", "config": [1, 2]}  # as it reads back from JSON
    assert s.get("h200", "M<=128") is None
    assert s.entries("h200") == {"M<=64": ENTRY}
    assert set(s.entries()) == {"h200", "a100"}
    assert s.size_bytes() > 0
    on_disk = json.loads(s.path.read_text())
    assert on_disk["schema"] == SCHEMA == 1 and on_disk["kind"] == "lab.ops tune cache"
    assert on_disk["environments"]["h200"]["M<=64"] == ENTRY
    s.clear("a100")
    assert s.entries() == {"h200": {"M<=64": ENTRY}}
    s.clear()
    assert s.entries() == {} and TuneStore(s.path).entries() == {}


def test_returned_entries_are_copies(tmp_path):
    s = TuneStore(tmp_path / "tune.json")
    s.put("e", "k", ENTRY)
    s.get("e", "k")["config"]["BN"] = 1
    s.entries("e")["k"]["path"] = "x"
    assert s.get("e", "k") == ENTRY


def test_default_path_honours_lab_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    assert TuneStore().path == tmp_path / "cache" / "ops" / "tune.json"


def test_get_sees_another_instance_put(tmp_path):
    first, second = TuneStore(tmp_path / "tune.json"), TuneStore(tmp_path / "tune.json")
    first.put("e", "a", {"v": 1})
    assert first.get("e", "b") is None
    second.put("e", "b", {"v": 2})
    assert first.get("e", "b") == {"v": 2}
    assert first.get("e", "a") == {"v": 1}  # the second writer merged, it did not overwrite
    second.clear("e")
    assert first.get("e", "a") is None


def test_get_rereads_only_when_the_file_changes(tmp_path, monkeypatch):
    s = TuneStore(tmp_path / "tune.json")
    s.put("e", "k", {"v": 1})
    reads = []
    real = store._read_snapshot
    monkeypatch.setattr(store, "_read_snapshot", lambda *a: reads.append(1) or real(*a))
    for _ in range(100):
        assert s.get("e", "k") == {"v": 1}
    assert reads == []  # its own put left it current
    TuneStore(s.path).put("e", "k", {"v": 2})
    reads.clear()  # the other store read the file to merge into it
    assert [s.get("e", "k") for _ in range(10)] == [{"v": 2}] * 10
    assert len(reads) == 1


def test_bad_entries_are_refused(tmp_path):
    s = TuneStore(tmp_path / "tune.json")
    with pytest.raises(LabError, match="must be a dict"):
        s.put("e", "k", ["not", "a", "dict"])
    with pytest.raises(LabError, match="cannot be stored as JSON"):
        s.put("e", "k", {"f": object()})
    with pytest.raises(LabError, match="non-empty string"):
        s.put("", "k", {})
    assert not s.path.exists()


def test_unwritable_location_is_one_lab_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    s = TuneStore(blocker / "ops" / "tune.json")  # its directory cannot be created, even as root
    with pytest.raises(LabError, match="LAB_CACHE_DIR"):
        s.put("e", "k", {})


# ----------------------------------------------------------------------------------------------
# Several processes at once
# ----------------------------------------------------------------------------------------------

_WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from lab.ops.store import TuneStore
    path, worker, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    go = Path(path).with_name("go")
    while not go.exists():  # start together, to interleave as much as possible
        time.sleep(0.001)
    s = TuneStore(path)
    for j in range(50):
        key = f"k{j}" if mode == "same" else f"w{worker}-k{j}"
        s.put("env", key, {"writer": worker, "j": j})
""")


def _run_writers(path: Path, mode: str, n: int = 4) -> None:
    repo = Path(__file__).resolve().parent.parent
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(path), str(i), mode], cwd=repo,
                              stderr=subprocess.PIPE, text=True) for i in range(n)]
    path.with_name("go").touch()
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    path.with_name("go").unlink()


def _only_cache_files_left(path: Path) -> None:
    assert sorted(p.name for p in path.parent.iterdir()) == ["tune.json", "tune.json.lock"]  # no temp files


def test_four_processes_lose_no_entry(tmp_path):
    path = tmp_path / "tune.json"
    _run_writers(path, "distinct")
    payload = json.loads(path.read_text())
    assert payload["schema"] == 1
    expected = {f"w{i}-k{j}": {"writer": i, "j": j} for i in range(4) for j in range(50)}
    assert payload["environments"] == {"env": expected}
    assert TuneStore(path).entries("env") == expected
    _only_cache_files_left(path)


def test_four_processes_writing_the_same_keys_leave_one_written_value_each(tmp_path):
    path = tmp_path / "tune.json"
    _run_writers(path, "same")
    entries = json.loads(path.read_text())["environments"]["env"]
    assert sorted(entries) == sorted(f"k{j}" for j in range(50))
    for key, entry in entries.items():
        assert entry["writer"] in range(4) and entry == {"writer": entry["writer"], "j": int(key[1:])}
    _only_cache_files_left(path)


# ----------------------------------------------------------------------------------------------
# Corrupt and foreign files
# ----------------------------------------------------------------------------------------------

def _valid_bytes() -> bytes:
    return json.dumps({"schema": 1, "kind": "lab.ops tune cache", "environments": {"e": {"k": ENTRY}}}).encode()


BAD_FILES = {
    "truncated": _valid_bytes()[: len(_valid_bytes()) // 2],
    "random bytes": random.Random(0).randbytes(300),
    "a list": b"[1, 2, 3]",
    "wrong kind": json.dumps({"schema": 1, "kind": "something else", "environments": {}}).encode(),
    "schema 0": json.dumps({"schema": 0, "kind": "lab.ops tune cache", "environments": {}}).encode(),
    "schema 999": json.dumps({"schema": 999, "kind": "lab.ops tune cache", "environments": {}}).encode(),
    "no schema": json.dumps({"kind": "lab.ops tune cache", "environments": {}}).encode(),
    "entries not dicts": json.dumps({"schema": 1, "kind": "lab.ops tune cache", "environments": {"e": [1]}}).encode(),
    "empty file": b"",
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_bad_file_is_moved_aside_and_rebuilt_with_one_warning(tmp_path, name):
    path = tmp_path / "tune.json"
    path.write_bytes(BAD_FILES[name])
    s = TuneStore(path)
    with pytest.warns(TuneCacheWarning) as record:
        assert s.get("e", "k") is None
    assert len([w for w in record if issubclass(w.category, TuneCacheWarning)]) == 1
    message = str(record[0].message)
    (aside,) = _asides(path)
    assert aside.read_bytes() == BAD_FILES[name]  # kept, byte for byte
    assert str(path) in message and str(aside) in message and "rebuilt empty" in message
    if name == "schema 999":
        assert "newer lab" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any further warning fails the test
        assert s.get("e", "k") is None
        s.put("e", "k", {"v": 1})
        assert s.get("e", "k") == {"v": 1}
        assert TuneStore(path).get("e", "k") == {"v": 1}
    assert json.loads(path.read_text())["schema"] == 1


def test_bad_file_met_by_put_keeps_only_the_new_entry(tmp_path):
    path = tmp_path / "tune.json"
    path.write_bytes(b"{not json")
    with pytest.warns(TuneCacheWarning, match="not valid JSON"):
        TuneStore(path).put("e", "k", {"v": 1})
    assert json.loads(path.read_text())["environments"] == {"e": {"k": {"v": 1}}}
    assert [p.read_bytes() for p in _asides(path)] == [b"{not json"]


def test_one_warning_per_store_even_for_a_second_bad_file(tmp_path):
    path = tmp_path / "tune.json"
    s = TuneStore(path)
    path.write_bytes(b"garbage")
    with pytest.warns(TuneCacheWarning):
        s.get("e", "k")
    path.write_bytes(b"more garbage")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert s.get("e", "k") is None
    assert sorted(p.read_bytes() for p in _asides(path)) == [b"garbage", b"more garbage"]  # both kept


def test_locked_update_is_reusable_for_another_file(tmp_path):
    path = tmp_path / "stats.json"

    def bump(payload: dict) -> None:
        payload["calls"] = payload.get("calls", 0) + 1

    for _ in range(3):
        written = store.locked_update(path, bump, kind="lab.ops stats", schema=2)
    assert written == {"schema": 2, "kind": "lab.ops stats", "calls": 3}
    assert json.loads(path.read_text()) == written
    with pytest.warns(store.CacheFileWarning, match="is not a lab.ops tune cache"):
        store.locked_update(path, bump, kind="lab.ops tune cache", schema=1)  # a foreign file for this kind
    assert json.loads(path.read_text())["calls"] == 1
