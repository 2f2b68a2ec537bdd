"""CPU: the small-items kernel compiles clean, the item table, input validation, payload and plot
(lab.families.work_queue)."""

import functools
import json

import numpy as np
import pytest

from lab.core import build, headers
from lab.core.errors import LabError
from lab.families import work_queue
from lab.lessons import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NO_NVDISASM = build.find_nvdisasm() is None


@functools.cache
def _report(entry: str, arch: int) -> build.CompileReport:
    return build.compile_report(work_queue.spec(entry), arch)


# ----------------------------------------------------------------------------------------------
# The kernel, compile-only
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("entry", work_queue.ENTRIES)
def test_every_entry_compiles_without_spills_or_stack(entry, arch):
    rep = _report(entry, arch)
    assert rep.registers > 0, "ptxas reported no register count"
    assert not rep.spills and rep.stack_frame_bytes == 0, rep
    assert rep.smem_static_bytes >= 4 * (work_queue.BLOCK_THREADS // 32), "the block reduction's shared memory"


@pytest.mark.skipif(NO_NVDISASM, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
def test_only_the_queue_takes_tickets_with_atomics():
    mix = _report("items_queue", 90).instructions
    assert any(op.startswith("ATOMG") for op in mix), mix
    for entry in ("item_one", "items_per_block"):
        assert not any(op.startswith(("ATOMG", "RED")) for op in _report(entry, 90).instructions)
    assert any(op == "LDG.128" for op in mix), "the aligned body should load float4"


def test_header_states_prediction_requirements_and_the_knob_the_host_runs():
    source = (build.KERNELS_DIR / work_queue.SOURCE).read_text()
    head = headers.header(source)
    for word in ("What it is", "Why", "Prediction", "Requires", "Knobs"):
        assert word in head
    assert headers.stated_knobs(source) == {"BLOCK_THREADS": work_queue.BLOCK_THREADS}
    assert headers.define_defaults(source) == {"BLOCK_THREADS": work_queue.BLOCK_THREADS}
    assert dict(work_queue.spec("items_queue").knobs) == {"BLOCK_THREADS": work_queue.BLOCK_THREADS}


def test_a_different_block_size_still_compiles_and_a_bad_one_is_refused():
    assert _report_with_block(128).registers > 0
    with pytest.raises(LabError, match="BLOCK_THREADS must be a multiple of 32"):
        _report_with_block(100)


def _report_with_block(threads: int) -> build.CompileReport:
    return build.compile_report(work_queue.spec("items_queue").with_knobs(BLOCK_THREADS=threads), 90)


# ----------------------------------------------------------------------------------------------
# The item table
# ----------------------------------------------------------------------------------------------

def test_uniform_table_aligns_every_row_and_rows_never_overlap():
    t = work_queue.uniform_table(5, 257)
    assert t.n_items == 5 and t.mix == "uniform" and t.max_length == 257
    assert t.offsets.tolist() == [0, 260, 520, 780, 1040] and t.total == 1300
    assert t.offsets.dtype == np.int64 and t.lengths.dtype == np.int32
    assert t.bytes_per_item == 12 * 257
    mask = t.element_mask()
    assert mask.sum() == 5 * 257 and not mask[257:260].any()


def test_item_table_with_any_lengths_and_alignment():
    t = work_queue.item_table([1, 255, 4099, 3], align=1)
    assert t.offsets.tolist() == [0, 1, 256, 4355] and t.total == 4358
    assert t.mix == "custom" and t.align == 1
    t4 = work_queue.item_table([1, 255, 4099, 3])
    assert all(o % 4 == 0 for o in t4.offsets) and t4.total == 4 + 256 + 4100 + 4
    ends = t4.offsets + t4.lengths
    assert (ends[:-1] <= t4.offsets[1:]).all() and ends[-1] <= t4.total


def test_skewed_lengths_are_deterministic_varied_and_near_their_mean():
    a = work_queue.skewed_lengths(10_000, 4096, seed=3)
    assert (a == work_queue.skewed_lengths(10_000, 4096, seed=3)).all()
    assert not (a == work_queue.skewed_lengths(10_000, 4096, seed=4)).all()
    assert a.min() >= 1 and a.max() > 4 * 4096 and np.median(a) < 4096
    assert 0.8 * 4096 < a.mean() < 1.2 * 4096
    t = work_queue.skewed_table(1000, 64)
    assert t.mix == "skewed" and "skewed" in t.describe()


def test_fewer_items_for_long_rows():
    assert work_queue.n_items_for(256) == 10_000
    assert work_queue.n_items_for(16384) == 10_000
    assert work_queue.n_items_for(65536) == 2560
    assert work_queue.n_items_for(262144) == 640
    assert work_queue.n_items_for(262144, 100) == 100
    budget = work_queue.ITEM_BUDGET_ELEMENTS
    assert all(work_queue.n_items_for(s) * s <= budget for s in work_queue.SIZES)


def test_queue_grid_is_capped_by_the_items():
    assert work_queue.queue_grid(132, 8, 10_000) == 1056
    assert work_queue.queue_grid(132, 8, 100) == 100


def test_median_item_is_one_of_median_length():
    t = work_queue.item_table([5, 1, 9, 3, 7])
    assert t.lengths[work_queue._median_item(t)] == 5


def test_error_bound_grows_with_the_length_and_the_value():
    ref = np.array([1.0, -2.0, 1.0])
    bound = work_queue.error_bound(ref, np.array([1, 1, 10_000]))
    assert bound[1] == 2 * bound[0] and bound[2] > 10 * bound[0]
    assert bound[2] < 1e-3  # a wrong weight or row (an O(1) error) can never pass


# ----------------------------------------------------------------------------------------------
# Bad input: one sentence, raised before any GPU work
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, words", [
    (lambda: work_queue.uniform_lengths(0, 256), "n_items must be a whole number of at least 1"),
    (lambda: work_queue.uniform_lengths(-3, 256), "n_items must be"),
    (lambda: work_queue.uniform_lengths(2.5, 256), "n_items must be"),
    (lambda: work_queue.uniform_lengths(10, 0), "item length must be a whole number of elements from 1"),
    (lambda: work_queue.uniform_lengths(10, 2**30 + 1), "from 1 to 1073741824"),
    (lambda: work_queue.skewed_lengths(10, 0), "mean item length"),
    (lambda: work_queue.item_table([]), "at least one item"),
    (lambda: work_queue.item_table([[1, 2]]), "at least one item"),
    (lambda: work_queue.item_table([4, 0, 2]), "Item 1 has length 0"),
    (lambda: work_queue.item_table([1.5]), "whole numbers"),
    (lambda: work_queue.item_table([4], align=0), "align must be"),
    (lambda: work_queue.n_items_for(256, 0), "n_items must be"),
    (lambda: work_queue.queue_grid(132, 0, 10), "blocks_per_sm must be"),
    (lambda: work_queue.measure([]), "at least one item length"),
    (lambda: work_queue.measure([256, 0]), "item length must be"),
    (lambda: work_queue.measure([256], n_items=0), "n_items must be"),
    (lambda: work_queue.measure([256], blocks_per_sm=0), "blocks_per_sm must be"),
    (lambda: work_queue.spec("nope"), "has no entry 'nope'"),
])
def test_bad_input_is_one_clear_sentence(call, words):
    with pytest.raises(LabError) as err:
        call()
    message = str(err.value)
    assert words in message and "\n" not in message


def test_load_payload_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(LabError, match="No measurement at"):
        work_queue.load_payload(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(LabError, match="not a valid small-items measurement"):
        work_queue.load_payload(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"schema": 1, "records": []}))
    with pytest.raises(LabError, match="not a small-items measurement"):
        work_queue.load_payload(tmp_path / "other.json")


# ----------------------------------------------------------------------------------------------
# Payload, table and plot from synthetic rows (test data, never written to results/)
# ----------------------------------------------------------------------------------------------

PROVENANCE = {"device": "TEST GPU (synthetic data)", "arch": "sm_90", "sm_count": 132,
              "date": "2026-01-02T03:04:05+00:00", "commit": "test"}


def _row(length: int, mix: str = "uniform") -> dict:
    work = 1e-5 * length  # us of HBM time per item, made up
    times = {"launch": max(6.0, 0.03 * length / 64), "graph": 0.7 + 2.0 + work * 50,
             "per_block": 0.004 + work, "queue": 0.003 + work, "alone": 2.6 + work * 50}
    return {"mix": mix, "length": length, "mean_length": float(length), "max_length": length * (20 if mix != "uniform"
            else 1), "bytes_per_item": 12.0 * length, "n_items": work_queue.n_items_for(length),
            **{f"{k}_us": v for k, v in times.items()}, "alone_length": length,
            "spread_us": {k: [0.95 * v, 1.05 * v] for k, v in times.items()}, "blocks_per_sm": 6,
            "queue_blocks": 792, "graph_launches": {"per_block": 100, "queue": 100, "alone": 500}, "checked": True}


def synthetic_payload() -> dict:
    rows = [_row(s) for s in work_queue.SIZES] + [_row(4096, "skewed")]
    return work_queue.make_payload(rows, PROVENANCE, empty_kernel={"events_us": 4.0, "graph_us": 0.7})


def test_payload_round_trips_through_json_and_is_marked_replayed(tmp_path):
    path = tmp_path / "small_items.json"
    path.write_text(json.dumps(synthetic_payload()))
    loaded = work_queue.load_payload(path)
    assert loaded["replayed"] and loaded["rows"] == synthetic_payload()["rows"]
    assert loaded["paths"] == list(work_queue.PATHS) and loaded["knobs"]["BLOCK_THREADS"] == 256
    assert work_queue.payload_label(loaded).startswith("REPLAYED on TEST GPU")
    assert work_queue.payload_label(synthetic_payload()).startswith("measured on")


def test_summary_has_a_line_per_row_and_every_path():
    text = work_queue.summary(synthetic_payload()["rows"])
    lines = text.splitlines()
    assert len(lines) == 1 + len(work_queue.SIZES) + 1
    for p in (*work_queue.PATHS, "alone"):
        assert f"{p}_us" in lines[0]
    assert "skewed mix" in lines[-1] and "KiB" in text


def test_plot_writes_a_png_from_a_payload(tmp_path):
    out = plots.small_items(synthetic_payload(), tmp_path / "small_items.png")
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_plot_draws_a_line_per_path_on_log_axes_and_says_where_the_numbers_come_from():
    import matplotlib.pyplot as plt

    payload = synthetic_payload() | {"replayed": True}
    fig = plots.small_items(payload)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [line.get_label() for line in ax.get_lines()]
    for name in (*work_queue.PATHS, "alone"):
        assert work_queue.PATH_LABELS[name] in labels
    assert any("skewed" in label for label in labels)
    assert "REPLAYED on TEST GPU" in ax.get_title() and "{" not in ax.get_title()
    plt.close(fig)


def test_plot_returns_none_without_rows(tmp_path):
    assert plots.small_items({"rows": []}, tmp_path / "x.png") is None
