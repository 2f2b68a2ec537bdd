"""CPU: lab.lessons.layouts (the tensor-core ladder's index arithmetic that notebook 03 draws) against the
statements of kernels/common/lab_mma.cuh and lab_swizzle.cuh and the rungs' own knobs, and
lab.lessons.diagrams' figures drawn from it."""

import re

import pytest

from lab.core.build import COMMON_DIR
from lab.families import get_family
from lab.lessons import diagrams, layouts

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --- mma.sync m16n8k16 fragments -------------------------------------------------------------------

@pytest.mark.parametrize("operand, shape, per_lane", [("A", (16, 16), 8), ("B", (16, 8), 4), ("C", (16, 8), 4)])
def test_every_fragment_element_is_held_by_exactly_one_lane(operand, shape, per_lane):
    lanes, regs = layouts.mma_fragment(operand)
    assert lanes.shape == shape and (lanes >= 0).all() and (regs >= 0).all()
    for lane in range(32):
        assert len(layouts.lane_elements(operand, lane)) == per_lane


def test_fragments_follow_the_table_in_lab_mma_cuh():
    """lab_mma.cuh: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][..], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8..];
    b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]; c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][..]."""
    text = (COMMON_DIR / "lab_mma.cuh").read_text()
    assert "a[0] = A[g    ][2t, 2t+1]" in text and "b[1] = B[2t+8, 2t+9][g]" in text  # the table tested here
    for lane in range(32):
        g, t = lane // 4, lane % 4
        assert layouts.lane_elements("A", lane) == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1),
                                                    (g, 2 * t + 8), (g, 2 * t + 9), (g + 8, 2 * t + 8),
                                                    (g + 8, 2 * t + 9)]
        assert layouts.lane_elements("B", lane) == [(2 * t, g), (2 * t + 1, g), (2 * t + 8, g), (2 * t + 9, g)]
        assert layouts.lane_elements("C", lane) == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
    with pytest.raises(ValueError, match="A, B or C"):
        layouts.mma_fragment("D")


def test_ldmatrix_x4_with_the_rungs_addresses_is_the_a_fragment():
    lanes, regs = layouts.ldmatrix_x4_a_fragment()
    want_lanes, want_regs = layouts.mma_fragment("A")
    assert (lanes == want_lanes).all() and (regs == want_regs).all()
    plain, trans = layouts.ldmatrix_receivers(), layouts.ldmatrix_receivers(trans=True)
    assert (trans == plain.T).all() and sorted(plain.ravel().tolist()) == sorted(list(range(32)) * 2)
    givers = layouts.ldmatrix_x4_a_addresses()
    assert givers[:, 0].tolist() == list(range(16)) and givers[:, 1].tolist() == list(range(16, 32))


# --- bank groups -----------------------------------------------------------------------------------

def _swizzle_from_header(row: int, chunk: int, row_chunks: int) -> int:
    """lab_swizzle.cuh's comment: physical chunk l ^ ((l / LINE) % 8), l = row * ROW_CHUNKS + chunk,
    LINE = max(ROW_CHUNKS, 8); restated independently of layouts.swizzle_chunk."""
    text = (COMMON_DIR / "lab_swizzle.cuh").read_text()
    assert re.search(r"l \^ key,\s+l = row \* ROW_CHUNKS \+ chunk", text)
    line = max(row_chunks, 8)
    linear = row * row_chunks + chunk
    return linear ^ ((linear // line) % 8)


@pytest.mark.parametrize("row_chunks", [4, 8, 16, 32])
def test_the_swizzle_mirrors_the_header_and_permutes_each_line(row_chunks):
    rows = 32
    phys = [layouts.swizzle_chunk(r, c, row_chunks) for r in range(rows) for c in range(row_chunks)]
    assert phys == [_swizzle_from_header(r, c, row_chunks) for r in range(rows) for c in range(row_chunks)]
    assert sorted(phys) == list(range(rows * row_chunks))
    with pytest.raises(ValueError):
        layouts.swizzle_chunk(0, 0, 6)


def test_wavefronts_of_the_rungs_tile_rows():
    """Rung 02's header: 64-byte rows hit 2 bank groups (4-way), 256-byte rows 1 (8-way); 16 bytes of padding
    or rung 03's swizzle: all 8 groups, one wavefront. Row lengths from the family's knobs."""
    tc = get_family("gemm_tc")
    k02, k03 = dict(tc.rung("02").spec.knobs), dict(tc.rung("03").spec.knobs)
    short, long_ = 2 * k03["BK"], 2 * k03["BN"]
    pad = 2 * k02["PAD"]
    assert layouts.ldmatrix_groups(short, "unpadded") == [0, 4] * 4
    assert layouts.wavefronts(layouts.ldmatrix_groups(short, "unpadded")) == 4
    assert layouts.wavefronts(layouts.ldmatrix_groups(long_, "unpadded")) == 8
    for layout in ("padded", "swizzled"):
        for nbytes in (short, long_):
            for chunk in range(nbytes // 16):
                groups = layouts.ldmatrix_groups(nbytes, layout, chunk, pad)
                assert sorted(groups) == list(range(8)), (layout, nbytes, chunk)
    cells = layouts.row_bank_map(long_, "unpadded")
    assert all(len(chunks) == 2 for row in cells for chunks in row)  # a 256-byte row: two chunks per group
    with pytest.raises(ValueError):
        layouts.chunk_byte_offset(0, 0, 64, "diagonal")


# --- schedules -------------------------------------------------------------------------------------

@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_pipeline_never_refills_a_stage_before_its_tile_is_computed(stages):
    k_tiles = 3 * stages + 1
    schedule = layouts.pipeline_schedule(k_tiles, stages)
    assert [t.computed for t in schedule] == list(range(k_tiles))
    for life in schedule:
        assert life.issued == (-1 if life.tile < stages - 1 else life.tile - stages + 1)
        successor = life.tile + stages  # the next tile in the same stage
        if successor < k_tiles:
            assert schedule[successor].stage == life.stage and schedule[successor].issued > life.computed - 1
    assert max(len(layouts.in_flight(schedule, i)) for i in range(k_tiles)) == stages - 1
    with pytest.raises(ValueError):
        layouts.pipeline_schedule(4, 1)


def test_the_specialized_timeline_obeys_its_barriers():
    stages, k_tiles = 3, 9
    spans = layouts.specialized_timeline(k_tiles, stages, load_time=3.0, mma_time=1.0)
    landed = {s.tile: s.end for s in spans if s.role == "in flight"}
    work = [s for s in spans if s.what.startswith("wgmma")]
    assert len(work) == 2 * k_tiles
    assert all(s.start >= landed[s.tile] for s in work)  # a consumer starts only on a full stage
    finished = {}
    for s in work:
        finished[s.tile] = max(finished.get(s.tile, 0.0), s.end)
    for s in spans:
        if s.what.startswith("TMA") and s.tile >= stages:
            assert s.start >= finished[s.tile - stages]  # the producer refills only an empty stage
    # With the copy shorter than the math of the stages ahead, the consumers never wait after the first tile.
    fast = layouts.specialized_timeline(8, 4, load_time=0.5, mma_time=1.0)
    assert [s.tile for s in fast if s.role.startswith("consumer") and s.what.startswith("wait")] == [0, 0]


# --- figures ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("draw", [diagrams.fragment_figure, diagrams.ldmatrix_figure, diagrams.bank_figure,
                                  diagrams.pipeline_figure, diagrams.roles_figure])
def test_each_diagram_renders(tmp_path, draw):
    import matplotlib.pyplot as plt

    fig = draw()
    path = tmp_path / f"{draw.__name__}.png"
    fig.savefig(path)
    plt.close(fig)
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_the_bank_figure_titles_count_the_wavefronts():
    import matplotlib.pyplot as plt

    fig = diagrams.bank_figure((64, 256), 16)
    titles = [ax.get_title() for ax in fig.axes]
    plt.close(fig)
    assert "unpadded, 64-byte rows: 4 wavefronts" in titles and "unpadded, 256-byte rows: 8 wavefronts" in titles
    assert "padded (+16 B), 64-byte rows: 1 wavefront" in titles and "swizzled, 256-byte rows: 1 wavefront" in titles


@pytest.mark.parametrize("draw", [diagrams.fragment_figure, diagrams.ldmatrix_figure, diagrams.bank_figure,
                                  diagrams.pipeline_figure, diagrams.roles_figure,
                                  lambda: diagrams.roles_figure(k_tiles=10, stages=2),
                                  lambda: diagrams.bank_figure((64, 256), 16)])
def test_each_diagram_is_legible(draw):
    """No text under 7 pt and no two labels over each other (lab.lessons.figure_check, which CI runs on every
    notebook figure)."""
    import matplotlib.pyplot as plt

    from lab.lessons import figure_check

    fig = draw()
    try:
        assert figure_check.problems(fig) == []
    finally:
        plt.close(fig)
