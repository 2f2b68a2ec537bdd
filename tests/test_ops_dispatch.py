"""CPU: lab.ops's dispatch table format, shape families and buckets, and the decisions a Runtime makes from its
table and its tune store (no GPU: the runtime is given the arch and the environment key)."""

import json

import pytest

from lab.core.errors import LabError
from lab.ops import manifest, rules
from lab.ops.dispatch import Runtime
from lab.ops.shapes import GemmShape, bucket, family, m_bucket
from lab.ops.store import TuneStore


def shape(m, n, k, aligned=True, epilogue="none", layout="TN", dtype="float16"):
    return GemmShape(m, n, k, dtype, layout, aligned, epilogue, 132)


def runtime(table=None, store=None, arch=90) -> Runtime:
    rt = Runtime(table, store)
    rt._arch, rt._env = arch, "test-env"
    return rt


def test_default_table_round_trips_through_json():
    again = rules.parse(json.loads(json.dumps(rules.DEFAULT.to_json())))
    assert again.rules == rules.DEFAULT.rules


@pytest.mark.parametrize("payload, phrase", [
    ([], "JSON object"),
    ({"rules": []}, "between 1 and"),
    ({"rules": [{"when": {}, "path": "magic"}]}, "path 'magic'"),
    ({"rules": [{"when": {"max_q": 3}, "path": "generic"}]}, "unknown condition 'max_q'"),
    ({"rules": [{"when": {"max_m": -1}, "path": "generic"}]}, "whole number"),
    ({"rules": [{"when": {"max_m": True}, "path": "generic"}]}, "whole number"),
    ({"rules": [{"when": {"aligned": 1}, "path": "generic"}]}, "true or false"),
    ({"rules": [{"when": {"dtype": "float32"}, "path": "generic"}]}, "dtype must be one of"),
    ({"rules": [{"when": {}, "path": "persistent", "config": {"BN": 96}}]}, "BN must be one of"),
    ({"rules": [{"when": {}, "path": "generic", "config": {"BN": 128}}]}, "has no setting 'BN'"),
    ({"rules": [{"when": {}, "path": "split_k", "config": {"splits": 1000}}]}, "0..256"),
    ({"rules": [{"when": {}, "path": "generic", "extra": 1}]}, "a rule is an object"),
    ({"rules": [{"when": {}, "path": "generic"}] * 65}, "between 1 and 64"),
])
def test_bad_tables_get_one_sentence(payload, phrase):
    with pytest.raises(LabError) as err:
        rules.parse(payload, "my.json")
    assert phrase in str(err.value) and "\n" not in str(err.value)


def test_load_reports_bad_json_with_its_position(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text('{"rules": [')
    with pytest.raises(LabError, match="not valid JSON"):
        rules.load(path)
    with pytest.raises(LabError, match="Cannot read"):
        rules.load(tmp_path / "missing.json")


def test_conditions_hold_as_documented():
    s = shape(100, 300, 5000)  # tiles: 1 x 3 = 3; K / max(M, N) = 16.7
    table = rules.parse({"rules": [{"when": {"min_m": 100, "max_m": 100, "max_tiles": 3, "min_k_over_mn": 16.0,
                                             "aligned": True, "epilogue": False, "layout": "TN",
                                             "dtype": "float16"}, "path": "generic"}]})
    assert table.rules[0].matches(s)
    for change in ({"M": 101}, {"K": 4000}, {"aligned": False}, {"epilogue": "silu"}, {"layout": "NN"}):
        import dataclasses

        assert not table.rules[0].matches(dataclasses.replace(s, **change)), change


def test_shape_families_and_buckets():
    assert family(shape(1, 4096, 4096)) == "decode"
    assert family(shape(64, 64, 64)) == "small"
    assert family(shape(512, 512, 512, aligned=False)) == "unaligned"
    assert family(shape(256, 256, 65536)) == "k_heavy"
    assert family(shape(4096, 4224, 4096)) == "ragged_wave"
    assert family(shape(4096, 4096, 4096)) == "square"
    assert [m_bucket(m) for m in (1, 2, 3, 8, 9, 256, 257)] == [1, 2, 4, 8, 16, 256, 512]
    assert bucket(shape(5, 4096, 4096)) == bucket(shape(8, 4096, 4096)) != bucket(shape(9, 4096, 4096))
    assert shape(4096, 4096, 1).last_wave == 116 / 132  # 32 x 16 = 512 tiles of 128 x 256: 3 waves and 116 more
    assert shape(128, 256 * 132, 1).last_wave == 1.0  # ...this is: 132 tiles, one full wave


def test_default_table_is_the_sweeps_one_rule_per_class():
    """lab tune --table writes one rule per shape class of lab.studies.ops_sweep, in order: every sample the sweep
    timed is
    decided by its own class's rule on Hopper (or, where that rule's path refuses it, by a later one)."""
    from lab.studies import ops_sweep

    assert len(rules.DEFAULT.rules) == len(ops_sweep.CLASSES)
    for rule, (_, when, _, _) in zip(rules.DEFAULT.rules, ops_sweep.CLASSES, strict=True):
        assert dict(rule.when) == when
    rt = runtime()
    names = [name for name, *_ in ops_sweep.CLASSES]
    for _, _, _, samples in ops_sweep.CLASSES:
        for sample in samples:
            d = rt.decide(ops_sweep.gemm_shape(sample))
            assert d.source.startswith("rule"), (sample, d)
            assert int(d.source.split()[1]) - 1 >= names.index(ops_sweep.class_of(sample)), (sample, d)
    assert rt.decide(shape(4, 4096, 4096, layout="NN")).path != "decode"  # the GEMV reads weights as N x K


def test_paths_that_need_hopper_are_skipped_elsewhere():
    from lab.ops.paths import PATHS

    rt = runtime(arch=80)
    for s in (shape(4096, 4096, 4096), shape(2048, 2048, 2048, aligned=False), shape(256, 256, 65536)):
        assert PATHS[rt.decide(s).path].min_arch <= 80


def test_a_tuned_entry_overrides_the_table_unless_its_path_refuses(tmp_path):
    store = TuneStore(tmp_path / "tune.json")
    s = shape(100, 4096, 4096)
    store.put("test-env", bucket(s), {"path": "cublas", "config": {}, "us": 1.0})
    rt = runtime(store=store)
    d = rt.decide(s)
    assert (d.path, d.source) == ("cublas", "tuned")
    k_heavy = shape(200, 200, 65536, aligned=False)
    store.put("test-env", bucket(k_heavy), {"path": "split_k", "config": {"splits": 8}, "us": 1.0})
    assert runtime(store=store).decide(k_heavy).source.startswith("rule")  # split-K refuses unaligned operands
    other = runtime(store=store)
    other._env = "another GPU"
    assert other.decide(s).source.startswith("rule")  # another environment's entries are never served


def test_manifest_loading(tmp_path):
    good = tmp_path / "m.json"
    good.write_text(json.dumps({"shapes": [{"M": 1, "N": 4096, "K": 4096, "epilogue": "silu"}]}))
    assert manifest.load(good)[0]["epilogue"] == "silu"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"shapes": [{"M": 1, "N": 2}]}))
    with pytest.raises(LabError, match="shape 1"):
        manifest.load(bad)


def test_counters_are_saved_and_merged(tmp_path):
    from lab.ops import counters

    path = tmp_path / "stats.json"
    counters.reset_stats()
    counters.COUNTS["calls"] += 3
    counters.PATHS["matmul:decode"] += 3
    counters.save(path)
    counters.COUNTS["calls"] += 2
    counters.save(path)
    saved = counters.load(path)
    assert saved["totals"]["counts"]["calls"] == 5 and len(saved["processes"]) == 2
    assert counters.stats()["counts"] == {}


# --- tables are read strictly --------------------------------------------------------------------------------

GOOD_RULES = b'{"rules": [{"when": {}, "path": "cublas"}]}'


@pytest.mark.parametrize("data, phrase", [
    (b'{"rules": [{"when": {"min_k_over_mn": NaN}, "path": "cublas"}]}', "NaN"),
    (b'{"rules": [{"when": {"min_k_over_mn": Infinity}, "path": "cublas"}]}', "Infinity"),
    (b'{"rules": [{"when": {}, "path": "generic", "path": "cublas"}]}', "twice"),
    (b"[" * 100_000 + b"]" * 100_000, "levels deep"),
    (b'{"rules": [{"when": {"max_m": ' + b"9" * 5000 + b'}, "path": "cublas"}]}', "5000 digits"),
    (b'{"rules": [{"when": {}, "path": "cublas", "note": "caf\xe9"}]}', "not UTF-8"),
    (b" " * (rules.MAX_TABLE_BYTES + 1), "larger than"),
    (b'{"rules": [', "not valid JSON"),
])
def test_a_table_that_is_not_strict_json_is_one_sentence(tmp_path, data, phrase):
    import time

    path = tmp_path / "rules.json"
    path.write_bytes(data)
    started = time.perf_counter()
    with pytest.raises(LabError) as err:
        rules.load(path)
    message = str(err.value)
    assert phrase in message and "\n" not in message and message.endswith(".")
    assert time.perf_counter() - started < 1.0


def test_a_strict_table_still_loads(tmp_path):
    path = tmp_path / "rules.json"
    path.write_bytes(GOOD_RULES)
    assert rules.load(path).rules[0].path == "cublas"
