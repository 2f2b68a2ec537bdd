"""CPU: scripts/same_sass.py dumps the same instructions twice for the same source, and sees a changed one."""

import importlib.util
from pathlib import Path

import pytest

from lab.core import build

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "same_sass.py"


@pytest.fixture(scope="module")
def same_sass():
    if build.find_nvdisasm() is None:
        pytest.skip("nvdisasm is not installed (the [inspect] extra)")
    spec = importlib.util.spec_from_file_location("same_sass", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_variants_turn_the_knobs_a_rung_takes(same_sass):
    names = [name for name, _ in same_sass.variants("softmax", 90)]
    assert "softmax_01_three_pass_HALF0" in names and "softmax_01_three_pass_HALF1" in names
    assert {"softmax_05_cluster_HALF1_CLUSTER1", "softmax_05_cluster_HALF1_CLUSTER4"} <= set(names)
    assert not any(name.startswith("softmax_05") for name, _ in same_sass.variants("softmax", 80))  # sm_90 only


def test_a_dump_matches_itself_and_a_change_is_seen(same_sass, tmp_path, capsys):
    spec = next(s for name, s in same_sass.variants("softmax", 80) if name == "softmax_01_three_pass_HALF1")
    first = same_sass.sass(spec, 80)
    assert first == same_sass.sass(spec, 80) and "MUFU.EX2" in first and "/*" not in first
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "k.sass").write_text(first)
    (tmp_path / "b" / "k.sass").write_text(first)
    assert same_sass.compare(tmp_path / "a", tmp_path / "b") == 0
    other = same_sass.sass(spec.with_knobs(THREADS=128), 80)
    assert other != first  # another block size: other instructions
    (tmp_path / "b" / "k.sass").write_text(other)
    (tmp_path / "b" / "only_after.sass").write_text(other)
    assert same_sass.compare(tmp_path / "a", tmp_path / "b") == 1
    out = capsys.readouterr().out
    assert "differs: k.sass" in out and "differs: only_after.sass" in out and "0 of 2 variants" in out
