"""CPU: every memory-bound rung's header states the knob defaults its family runs (lab.core.headers)."""

from __future__ import annotations

import pytest

from lab.core import headers
from lab.core.ladder import Rung
from lab.families import get_family


@pytest.mark.parametrize("family", ["copy", "transpose"])
def test_headers_and_defines_state_the_knobs_the_family_runs(family):
    problems = headers.knob_mismatches(get_family(family))
    assert not problems, "\n".join(problems)


SOURCE = """// x / rung 09 — a test rung.
//
// Knobs: TILE (64), BLOCK_ROWS (default 4), THREADS (256 = TILE * BLOCK_ROWS), EXTRA (2).
#ifndef TILE
#define TILE 32
#endif
#ifndef EXTRA
#define EXTRA 3
#endif
// TILE (7) after the header is not a statement of the header.
"""


def test_stated_knobs_and_defines_are_parsed():
    assert headers.stated_knobs(SOURCE) == {"TILE": 64, "BLOCK_ROWS": 4, "THREADS": 256, "EXTRA": 2}
    assert headers.define_defaults(SOURCE) == {"TILE": 32, "EXTRA": 3}
    assert headers.stated_knobs("// no knobs here\nint x;") == {}


def test_every_kind_of_drift_is_reported(tmp_path, monkeypatch):
    from lab.core.build import KernelSpec

    (tmp_path / "t.cu").write_text(SOURCE)
    monkeypatch.setattr(headers, "KERNELS_DIR", tmp_path)
    rung = Rung("x", "09_test", KernelSpec("t.cu", "k", (("BLOCK_ROWS", 8), ("MISSING", 1), ("TILE", 64))), "t")
    problems = "\n".join(headers.rung_mismatches(rung))
    assert "says BLOCK_ROWS (4), the family runs 8" in problems
    assert "does not state knob MISSING" in problems
    assert "#define TILE 32, the family runs 64" in problems
    assert "says EXTRA (2), its #define says 3" in problems
    assert "THREADS" not in problems  # stated, neither run nor defined: nothing to disagree with
