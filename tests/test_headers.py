"""CPU: rung headers state the knob defaults their family runs, and the #ifndef fallbacks they take from their
source or an included knob header (lab.core.headers)."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize("family", ["gemm_fp32", "gemm_fp32_epilogue", "grouped_gemm"])
def test_rungs_with_shared_knob_headers_state_the_knobs_the_family_runs(family):
    """grouped_gemm rung 01 takes its fallbacks from lab_hopper_knobs.cuh: the check follows the include."""
    problems = headers.knob_mismatches(get_family(family))
    assert not problems, "\n".join(problems)


def test_every_header_states_the_fallbacks_its_source_and_included_headers_take():
    """Family or not: a knob a rung's header states with a default has that default as its #ifndef fallback,
    whether the fallback stands in the rung or in a lab header it includes (lab_hopper_knobs.cuh)."""
    from lab.core.build import KERNELS_DIR
    from lab.families import all_rungs

    problems = []
    for source in sorted({rung.spec.source for rung in all_rungs()}):
        text = (KERNELS_DIR / source).read_text()
        stated, taken = headers.stated_knobs(text), headers.fallbacks(text)
        problems += [f"{source}: the header says {name} ({stated[name]}), {taken[name].define(name)}"
                     for name in stated.keys() & taken.keys() if stated[name] != taken[name].value]
    assert not problems, "\n".join(problems)


_FALLBACK_TEXT = re.compile(r"^#ifndef (\w+)\n#define \1 ([^\n]*?)\s*(?://[^\n]*)?$", re.MULTILINE)


def test_the_hopper_rungs_take_their_shared_fallbacks_from_the_knob_header_or_spell_out_the_same():
    """gemm_tc rungs 06 and 07, grouped rung 01 and the plugin harness take the shared defaults from
    lab_hopper_knobs.cuh; rungs 05 and 08, which exercises 06 and 07 start from, spell the same ones out (a starter
    shows its knobs), each `#define` the header's to the letter."""
    from lab.core.build import COMMON_DIR, KERNELS_DIR

    shared = dict(_FALLBACK_TEXT.findall((COMMON_DIR / "lab_hopper_knobs.cuh").read_text()))
    assert set(shared) == {"BF16", "TN", "BM", "BN", "BK", "STAGES", "GROUP_M", "CONSUMERS", "THREADS"}
    for source in ("gemm_tc/06_persistent.cu", "gemm_tc/07_stream_k.cu", "grouped/01_grouped_persistent.cu",
                   "epilogue/plugin_numerics.cu"):
        text = (KERNELS_DIR / source).read_text()
        taken = headers.fallbacks(text)
        assert not set(_FALLBACK_TEXT.findall(text)) & set(shared.items()), source  # none spelled out again
        # THREADS and CONSUMERS are derived (BM / 64); grouped fixes TN = 1.
        expected = set(shared) - {"THREADS", "CONSUMERS"} - ({"TN"} if "grouped" in source else set())
        assert {n for n, f in taken.items() if f.origin == "lab_hopper_knobs.cuh"} == expected, source
        assert "RASTER" in taken and taken["RASTER"].origin == "", source  # the tile order stays each rung's own
    for source in ("gemm_tc/05_warp_specialized.cu", "gemm_tc/08_split_k.cu"):
        text = (KERNELS_DIR / source).read_text()
        spelled = dict(_FALLBACK_TEXT.findall(text))
        # CONSUMERS (BM / 64) is set only by ping-pong (rung 11); a starter leaves it to the header.
        starter = {n: v for n, v in shared.items() if n != "CONSUMERS"}
        assert {n: spelled.get(n) for n in starter} == starter, source
        assert text.index("#ifndef THREADS") < text.index('#include "lab_hopper_knobs.cuh"'), source
        assert not any(f.origin for f in headers.fallbacks(text).values()), source


def test_fallbacks_follow_includes_in_order_and_the_first_definition_wins(tmp_path, monkeypatch):
    (tmp_path / "knobs.cuh").write_text('#pragma once\n#include "inner.cuh"\n#ifndef BM\n#define BM 64\n#endif\n'
                                        "#ifndef BN\n#define BN 256\n#endif\n#ifndef TN\n#define TN 1\n#endif\n")
    (tmp_path / "inner.cuh").write_text("#ifndef BK\n#define BK 32\n#endif\n#ifndef BM\n#define BM 16\n#endif\n")
    monkeypatch.setattr(headers, "COMMON_DIR", tmp_path)
    source = ("// x / rung 09.\n// Knobs: BM (64), BN (128), BK (32), TN (1).\n#ifndef BN\n#define BN 128\n#endif\n"
              '#define TN 0\n#include "knobs.cuh"\n#include "knobs.cuh"\n#include "missing.cuh"\n')
    taken = headers.fallbacks(source)
    assert {name: (f.value, f.origin) for name, f in taken.items()} == {
        "BN": (128, ""), "BK": (32, "inner.cuh"), "BM": (16, "inner.cuh")}  # TN: defined plainly, no fallback
    assert headers.define_defaults(source) == {"BN": 128}  # the text alone
    (tmp_path / "t.cu").write_text(source)
    monkeypatch.setattr(headers, "KERNELS_DIR", tmp_path)
    from lab.core.build import KernelSpec

    rung = Rung("x", "09_test", KernelSpec("t.cu", "k", (("BK", 32), ("BM", 64))), "t")
    problems = "\n".join(headers.rung_mismatches(rung))
    assert "#define BM 16 in inner.cuh, the family runs 64" in problems
    assert "BK" not in problems and "BN" not in problems and "TN" not in problems
