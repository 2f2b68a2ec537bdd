"""GPU: every way of running small items (lab.families.work_queue) against float64, and the queue launch after
launch."""

import numpy as np
import pytest

from lab.families import work_queue

pytestmark = pytest.mark.gpu

TABLES = {
    "len1": lambda: work_queue.uniform_table(300, 1),
    "len255": lambda: work_queue.uniform_table(300, 255),
    "len256": lambda: work_queue.uniform_table(300, 256),
    "len257": lambda: work_queue.uniform_table(300, 257),
    "len4099": lambda: work_queue.uniform_table(200, 4099),
    "odd_mix_unaligned": lambda: work_queue.item_table([1, 255, 257, 4099, 3, 1024, 7] * 40, align=1),
    "skewed": lambda: work_queue.skewed_table(500, 1000, seed=5),
    "skewed_unaligned": lambda: work_queue.skewed_table(300, 300, seed=6, align=1),
}


def _stream():
    import cupy as cp

    return cp.cuda.Stream(non_blocking=True)  # graph capture needs a stream other than the legacy default


@pytest.mark.parametrize("name", list(TABLES))
def test_every_path_matches_float64_with_guards_intact(name):
    table = TABLES[name]()
    p = work_queue.make_problem(table, seed=100 + list(TABLES).index(name))
    stream = _stream()
    graph = work_queue.capture_graph(p, stream)
    with stream:
        for variant, path in enumerate(work_queue.PATHS):
            assert work_queue.check_path(p, path, graph, variant=variant) == []


def test_a_single_item_and_fewer_items_than_blocks():
    p = work_queue.make_problem(work_queue.uniform_table(1, 4099), seed=21)
    assert p.queue_blocks == 1
    for path in ("launch", "per_block", "queue"):
        assert work_queue.check_path(p, path) == []
    p = work_queue.make_problem(work_queue.uniform_table(3, 100), seed=22, blocks_per_sm=8)
    assert p.queue_blocks == 3
    assert work_queue.check_path(p, "queue") == []


def test_queue_stays_correct_launch_after_launch_with_no_host_reset():
    p = work_queue.make_problem(work_queue.skewed_table(2000, 512, seed=7), seed=23)
    for launch in range(6):
        assert work_queue.check_path(p, "queue", variant=launch) == [], f"launch {launch}"
        assert p.queue.get().tolist() == [0, 0]


def test_queue_replayed_from_a_graph_stays_correct():
    """The counter resets itself, so a graph of queue launches (fixed parameters) replays correctly."""
    import cupy as cp

    p = work_queue.make_problem(work_queue.uniform_table(1500, 257), seed=24)
    stream = _stream()
    with stream:
        stream.begin_capture()
        try:
            for _ in range(4):
                work_queue.launch_queue(p)
        finally:
            graph = stream.end_capture()
        for replay in range(3):
            ref = work_queue.reference(p)
            p.out.poison(replay)
            before = p.out.output_bits()
            graph.launch(stream)
            stream.synchronize()
            assert not p.out.problems(must_write=ref.valid, before=before)
            assert bool(cp.all(~ref.valid | (cp.abs(p.y.astype(cp.float64) - ref.value) <= ref.bound)))
            assert p.queue.get().tolist() == [0, 0]


@pytest.mark.parametrize("blocks_per_sm", [1, 4, None])
def test_every_item_is_taken_exactly_once_launch_after_launch(blocks_per_sm):
    p = work_queue.make_problem(work_queue.skewed_table(5000, 64, seed=8), seed=25, blocks_per_sm=blocks_per_sm)
    for _ in range(4):
        visits = work_queue.visit_counts(p)
        assert visits.shape == (5000,)
        assert (visits == 1).all(), f"items taken 0 or 2+ times: {np.flatnonzero(visits != 1)[:10].tolist()}"
        assert p.queue.get().tolist() == [0, 0]


def test_the_check_catches_a_stale_queue_counter():
    """A counter that was not reset (here: set by hand) makes the queue skip items; the check must say so."""
    import cupy as cp

    p = work_queue.make_problem(work_queue.uniform_table(400, 256), seed=26)
    p.queue[...] = cp.asarray([100, 0], dtype=cp.uint64)
    found = work_queue.check_path(p, "queue")
    assert any("unwritten" in f for f in found), found
    p.queue[...] = 0  # leave it usable


def test_the_check_catches_a_wrong_element_and_a_write_into_the_padding(monkeypatch):
    table = work_queue.uniform_table(50, 101)  # rows padded to 104 elements: 3 padding elements after each
    p = work_queue.make_problem(table, seed=27)
    original = work_queue.launch_per_block

    def wrong(problem):
        original(problem)
        problem.y[int(problem.table.offsets[7]) + 3] *= 1.001

    def into_padding(problem):
        original(problem)
        problem.y[int(problem.table.offsets[1]) - 1] = 1.0

    def past_the_end(problem):
        original(problem)
        problem.out.raw[problem.out.start + problem.table.total] = 1.0

    for fake, words in ((wrong, "outside their error bound"), (into_padding, "must leave alone"),
                        (past_the_end, "guard zone AFTER")):
        monkeypatch.setattr(work_queue, "launch_per_block", fake)
        found = work_queue.check_path(p, "per_block")
        assert any(words in f for f in found), (fake.__name__, found)


def test_measure_produces_a_row_per_table_with_every_path():
    rows = work_queue.measure([256], n_items=300, skewed=[256])
    assert [r["mix"] for r in rows] == ["uniform", "skewed"]
    for r in rows:
        assert r["checked"] and r["n_items"] == 300 and r["bytes_per_item"] > 0
        for name in (*work_queue.PATHS, "alone"):
            assert r[f"{name}_us"] > 0 and np.isfinite(r[f"{name}_us"])
            lo, hi = r["spread_us"][name]
            assert lo <= r[f"{name}_us"] <= hi
        assert r["queue_blocks"] <= 300
