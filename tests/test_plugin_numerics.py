"""CPU: the chosen-value harness of exercise 08's functor (kernels/epilogue/plugin_numerics.cu,
lab/grading/plugin_numerics.py).

The harness compiles through NVRTC for sm_90a with the lab's plugin, the starter and deliberately wrong plugins; it
sees the macros and headers rung 06 gives a plugin; its table's codes are what the exercise's README promises (ties
to even, saturation, NaN -> 0) on values where GELU is exact in fp32; and its sentences name the wrong value. The
launches themselves are tests/test_gpu_epilogue.py's.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from lab.core import build, source_guard
from lab.core.build import KERNELS_DIR, PLUGIN_HEADER
from lab.core.errors import CompileError, LabError
from lab.families import get_family
from lab.families.epilogue import quantize_int8
from lab.grading import exercises
from lab.grading import plugin_numerics as P

PLUGIN = KERNELS_DIR / "common" / PLUGIN_HEADER
CVT = 'asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(code) : "f"(scaled));'
# Wrong functors, made from the lab's by string replacement (tests/test_gpu_epilogue.py runs the same two).
ROUND_HALF_AWAY = "code = scaled != scaled ? 0 : (int)fminf(fmaxf(roundf(scaled), -128.0f), 127.0f);"
NAN_TO_127 = CVT + "\n    if (scaled != scaled) code = 127;"


def _wrong_plugin(tmp_path, replacement: str, name: str):
    text = PLUGIN.read_text()
    assert CVT in text
    path = tmp_path / name
    path.write_text(text.replace(CVT, replacement))
    return path


@pytest.mark.parametrize("bf16", [0, 1])
def test_the_harness_compiles_for_sm_90a_with_the_lab_s_plugin(bf16):
    spec = P.harness_spec(PLUGIN, "kernel.cu", bf16)
    assert (spec.source, spec.entry, spec.min_arch, spec.arch_suffix) == (P.HARNESS_SOURCE, P.HARNESS_ENTRY, 90, "a")
    compiled = build.compile_cubin(spec, 90)
    assert compiled.lowered_name == P.HARNESS_ENTRY and compiled.cubin
    assert dict(spec.knobs)["BF16"] == bf16 and dict(spec.knobs)["EPI_QROW"] == 1


@pytest.mark.parametrize("replacement", [ROUND_HALF_AWAY, NAN_TO_127], ids=["round-half-away", "nan-to-127"])
def test_the_harness_compiles_with_a_wrong_plugin_into_another_binary(tmp_path, replacement):
    wrong = _wrong_plugin(tmp_path, replacement, "wrong.cu")
    compiled = build.compile_cubin(P.harness_spec(wrong, "wrong.cu"), 90)
    assert compiled.lowered_name == P.HARNESS_ENTRY
    assert compiled.cubin != build.compile_cubin(P.harness_spec(PLUGIN, "kernel.cu"), 90).cubin


def test_the_harness_compiles_with_the_starter():
    # The starter compiles in rung 06 (it stores nothing): it compiles here too, and the harness sees no code.
    starter = exercises.load("08").starter_path
    assert build.compile_cubin(P.harness_spec(starter, "kernel.cu"), 90).cubin


def test_a_plugin_without_the_functor_is_one_compile_error_naming_the_file(tmp_path):
    path = tmp_path / "kernel.cu"
    path.write_text(PLUGIN.read_text().replace("lab_plugin_store_pair", "lab_plugin_store_two"))
    with pytest.raises(CompileError) as err:
        build.compile_cubin(P.harness_spec(path, "ex/kernel.cu"), 90)
    assert "lab_plugin_store_pair" in str(err.value)
    assert issubclass(CompileError, LabError)  # check_int8_numerics turns it into (False, its sentence)


def _before_the_plugin(text: str) -> str:
    """A source's text up to the line that includes the plugin header."""
    return text[:text.index(f'#include "{PLUGIN_HEADER}"')]


def test_the_harness_gives_a_plugin_what_rung_06_gives_it():
    family = get_family("gemm_tc_epilogue")
    rung = family.rung(family.PLUGIN_RUNG).spec
    harness = P.harness_spec(PLUGIN, "kernel.cu")
    rung_text, harness_text = build.read_source(rung), build.read_source(harness)
    # the same lab headers, in the same order, before the plugin
    includes = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
    assert includes.findall(_before_the_plugin(harness_text)) == includes.findall(_before_the_plugin(rung_text))
    # the same macros defined before it, with the same knob values (EPI_QROW: one scale per row)
    before = source_guard.defined_macros(_before_the_plugin(rung_text)) - {"__CUDA_ARCH_FEAT_SM90_ALL"}
    assert source_guard.defined_macros(_before_the_plugin(harness_text)) == before
    assert dict(harness.knobs) == dict(rung.knobs) | {"EPI_QROW": 1}
    # no name a plugin may define in rung 06 is refused here
    assert build._host_macros(harness) <= build._host_macros(rung)


def test_a_plugin_s_macro_is_refused_here_only_where_rung_06_refuses_it(tmp_path):
    ok = tmp_path / "ok.cu"
    ok.write_text(PLUGIN.read_text() + "\n#define MY_HELPER_SCALE 1.0f\n")
    assert build.compile_cubin(P.harness_spec(ok, "ok.cu"), 90).cubin
    bad = tmp_path / "bad.cu"
    bad.write_text(PLUGIN.read_text() + "\n#define BN 128\n")
    with pytest.raises(CompileError, match="may not #define BN"):
        build.compile_cubin(P.harness_spec(bad, "bad.cu"), 90)


# --- the chosen values -------------------------------------------------------------------------------------

def test_gelu_leaves_every_chosen_value_exact_in_fp32():
    for c in P.CHOSEN:
        v = np.float32(c.value)
        assert np.isfinite(v) or np.isnan(v), c  # no infinities: GELU(inf) depends on the arrangement
        if np.isnan(v):
            assert np.isnan(c.gelu)
        elif v >= 10:
            assert c.gelu == v, c
            # the lab's own fp32 arrangement: tanh of its argument is exactly 1 in fp32, so 0.5 v + 0.5 v tanh = v
            with np.errstate(over="ignore", invalid="ignore"):
                arg = v * (np.float32(0.0356774081) * v * v + np.float32(0.7978845608))
                assert np.tanh(arg) == np.float32(1.0), c
        else:
            assert v <= -10 and c.gelu == 0, c


def test_the_chosen_codes_are_ties_to_even_saturation_and_nan_to_zero():
    kinds = {c.kind for c in P.CHOSEN}
    assert kinds == {"tie", "fraction", "saturation", "NaN", "GELU 0"}
    for c in P.CHOSEN:
        scaled = np.float32(c.gelu) * np.float32(c.q_scale)
        if c.kind == "tie":
            assert abs(scaled) % 1 == 0.5 and abs(scaled) < 127, c  # an exact tie in fp32, inside the range
            assert c.code % 2 == 0 and abs(c.code - scaled) == 0.5, c  # to the even neighbour
        elif c.kind == "saturation":
            assert c.code == (127 if scaled > 0 else -128) and abs(scaled) >= 127.5, c
        elif c.kind in ("NaN", "GELU 0"):
            assert c.code == 0, c
        else:
            assert c.code == np.rint(scaled) and abs(scaled) % 1 not in (0.0, 0.5), c
    ties = [c for c in P.CHOSEN if c.kind == "tie"]
    assert any(c.value * c.q_scale > 0 for c in ties) and any(c.value * c.q_scale < 0 for c in ties)
    assert any(abs(c.q_scale) != 1 for c in ties)  # scales that make ties
    assert {c.code for c in P.CHOSEN if c.kind == "saturation"} == {127, -128}
    assert {c.q_scale for c in P.CHOSEN if c.kind == "NaN"} >= {1.0, -1.0}
    assert P.POISON not in {c.code for c in P.CHOSEN}  # an unwritten byte never looks right
    want = P.expected_codes()
    assert want.shape == (len(P.ROWS), 2) and want.dtype == np.int8
    assert all(a.q_scale == b.q_scale for a, b in P.ROWS)  # a row shares its scale (one per row)


def test_the_readme_s_examples_are_in_the_table():
    readme = (exercises.load("08").path / "README.md").read_text()
    for text, value, q_scale, code in (("10.5 -> 10", 10.5, 1.0, 10), ("11.5 -> 12", 11.5, 1.0, 12),
                                       ("-10.5 -> -10", 10.5, -1.0, -10), ("-11.5 -> -12", 11.5, -1.0, -12)):
        assert text in readme
        assert any(c.value == value and c.q_scale == q_scale and c.code == code for c in P.CHOSEN), text
        assert int(quantize_int8(np.float32(value), np.float32(q_scale))) == code


# --- the verdicts, with the launch replaced (no GPU) --------------------------------------------------------

def _first(kind: str, q_sign: float = 1.0) -> tuple[int, int]:
    return next((r, i) for r, row in enumerate(P.ROWS) for i, c in enumerate(row)
                if c.kind == kind and np.sign(c.q_scale) == q_sign)


@pytest.mark.parametrize("kind, got, words", [
    ("tie", None, ["a tie", "ties to even"]),
    ("NaN", 127, ["NaN", "code 0", "gave code 127"]),
    ("saturation", 126, ["saturates to 127"]),
    ("GELU 0", 1, ["exactly 0"]),
    ("fraction", None, ["round to nearest gives"]),
])
def test_a_wrong_code_is_one_sentence_naming_the_value(monkeypatch, kind, got, words):
    want = P.expected_codes()
    r, i = _first(kind)
    codes = want.copy()
    codes[r, i] = got if got is not None else want[r, i] + 1
    monkeypatch.setattr(P, "_run", lambda spec, rows: (codes, 0, 0))
    ok, message = P.check_int8_numerics(PLUGIN, "kernel.cu")
    assert not ok and message.startswith(f"lab_plugin_store_pair gave code {codes[r, i]} for ")
    assert "\n" not in message and all(w in message for w in words), message
    if kind == "tie":
        value = P.ROWS[r][i]
        assert f"{value.value:g} x q_scale {value.q_scale:g}" in message and f"gives {want[r, i]}" in message


def test_right_codes_pass_and_guards_unwritten_bytes_and_bf16_builds_are_named(monkeypatch):
    want = P.expected_codes()
    monkeypatch.setattr(P, "_run", lambda spec, rows: (want, 0, 0))
    assert P.check_int8_numerics(PLUGIN, "kernel.cu") == (
        True, f"ties, saturation and NaN: all {len(P.CHOSEN)} chosen values exact")
    monkeypatch.setattr(P, "_run", lambda spec, rows: (want, 0, 3))
    ok, message = P.check_int8_numerics(PLUGIN, "kernel.cu")
    assert not ok and "outside q_out" in message and "3 byte(s) after it" in message
    unwritten = np.full_like(want, P.POISON)
    monkeypatch.setattr(P, "_run", lambda spec, rows: (unwritten, 0, 0))
    ok, message = P.check_int8_numerics(PLUGIN, "kernel.cu")
    assert not ok and "unwritten" in message and "0x5A" in message
    wrong_in_bf16 = want.copy()
    wrong_in_bf16[0, 0] += 1
    monkeypatch.setattr(P, "_run", lambda spec, rows: (want if dict(spec.knobs)["BF16"] == 0 else wrong_in_bf16, 0,
                                                       0))
    ok, message = P.check_int8_numerics(PLUGIN, "kernel.cu")
    assert not ok and "(built with BF16=1)" in message


def test_a_build_error_is_the_verdict_s_sentence(monkeypatch):
    def refuse(spec, rows):
        raise CompileError("kernel.cu:3: error: identifier \"x\" is undefined")

    monkeypatch.setattr(P, "_run", refuse)
    assert P.check_int8_numerics(PLUGIN, "kernel.cu") == (False, "kernel.cu:3: error: identifier \"x\" is undefined")


def test_the_module_imports_without_cupy():
    code = "import sys, lab.grading.plugin_numerics as P; P.expected_codes(); assert 'cupy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=build.REPO_ROOT)
