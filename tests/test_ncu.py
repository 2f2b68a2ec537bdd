import csv
import json
from pathlib import Path

from lab.lessons import underfill

RECORD = Path(__file__).resolve().parents[1] / "results" / "h200" / "split_k_ncu.json"
_OLD = {"gpu__time_duration.sum": "us", "dram__bytes_read.sum": "read", "dram__bytes_write.sum": "write",
        "lts__t_sector_hit_rate.pct": "l2_hit_pct"}


def _old_positional(rows):
    kernels = {}
    for fields in csv.reader(rows):
        if len(fields) < 15 or fields[12] not in _OLD:
            continue
        k = kernels.setdefault(fields[0], {"name": fields[4], "grid": fields[8]})
        value = float(fields[14].replace(",", ""))
        k[_OLD[fields[12]]] = value / 1e3 if fields[12].startswith("gpu__time") else value
    return [kernels[i] for i in sorted(kernels, key=int)]


def test_old_vs_new_on_the_record(monkeypatch):
    payload = json.loads(RECORD.read_text())
    old = _old_positional(payload["rows"])
    assert underfill._ncu_kernels(payload["rows"]) == old
    monkeypatch.setattr(underfill, "_ncu_kernels", _old_positional)
    old_launches = underfill.ncu_launches(payload)
    monkeypatch.undo()
    assert underfill.ncu_launches(payload) == old_launches and len(old_launches) == 6
