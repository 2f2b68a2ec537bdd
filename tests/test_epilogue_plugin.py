"""CPU: plugin headers (KernelSpec.plugin) and exercise 08, the epilogue functor plugged into gemm_tc rung 06.

A spec's plugin is handed to NVRTC as lab_epilogue_plugin.cuh in place of the lab's own: it is part of the cache
key, checked by the source guard like a source, and its compile errors name it. Exercise 08's solution is that
header (kernels/common/lab_epilogue_plugin.cuh); the student's file replaces it, the rung's source stays.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import shutil
from pathlib import Path

import pytest

from lab.cli import tour
from lab.core import build
from lab.core.build import PLUGIN_HEADER, KernelSpec
from lab.core.errors import CompileError, LabError
from lab.core.ladder import Problem
from lab.families import get_family
from lab.grading import exercises, release
from lab.grading.exercises import solution_regions, strip_solution

FAMILY = get_family("gemm_tc_epilogue")
PLUGIN_RUNG = FAMILY.rung("08_functor_plugin")
PLUGIN_FILE = "common/lab_epilogue_plugin.cuh"

USES_PLUGIN = """#include "lab_epilogue_plugin.cuh"

extern "C" __global__ void uses_plugin(float* y) { y[0] = lab_tiny_value(); }
"""
TINY_PLUGIN = "#pragma once\n__device__ __forceinline__ float lab_tiny_value() { return 2.0f; }\n"


@pytest.fixture
def tiny(tmp_path) -> tuple[KernelSpec, Path]:
    """A kernel that calls a function only a plugin defines, and that plugin (both absolute paths)."""
    (tmp_path / "uses_plugin.cu").write_text(USES_PLUGIN)
    plugin = tmp_path / "tiny_plugin.cuh"
    plugin.write_text(TINY_PLUGIN)
    return KernelSpec(str(tmp_path / "uses_plugin.cu"), "uses_plugin", plugin=str(plugin)), plugin


# ----------------------------------------------------------------------------------------------
# The build layer
# ----------------------------------------------------------------------------------------------

def test_a_plugin_replaces_the_lab_s_header(tiny):
    spec, plugin = tiny
    assert build.compile_headers(spec)[PLUGIN_HEADER] == TINY_PLUGIN
    assert build.compile_headers(dataclasses.replace(spec, plugin=""))[PLUGIN_HEADER] == (
        build.COMMON_DIR / PLUGIN_HEADER).read_text()
    assert build.compile_cubin(spec, 90).lowered_name == "uses_plugin"
    with pytest.raises(CompileError, match="lab_tiny_value"):  # the lab's own header does not define it
        build.compile_cubin(dataclasses.replace(spec, plugin=""), 90)


def test_the_plugin_s_text_is_part_of_the_cache_key(tiny):
    spec, plugin = tiny
    before = build.cache_key(spec, 90)
    assert build.cache_key(spec, 90) == before
    assert build.cache_key(dataclasses.replace(spec, plugin=""), 90) != before
    plugin.write_text(TINY_PLUGIN.replace("2.0f", "3.0f"))
    assert build.cache_key(spec, 90) != before
    copy = plugin.with_name("copy.cuh")  # same text elsewhere: same binary, same key
    copy.write_text(TINY_PLUGIN)
    assert build.cache_key(dataclasses.replace(spec, plugin=str(copy)), 90) == before


@pytest.mark.parametrize("line, words", [
    ('#include "/etc/passwd"', "is not allowed"),
    ("#if __has_include(<cstdio>)\n#endif", "__has_include"),
    ('#include "../../exercises/08_epilogue_functor/hidden.json"', "is not allowed"),
])
def test_a_plugin_may_include_only_the_lab_s_headers(tiny, line, words):
    spec, plugin = tiny
    plugin.write_text(f"{line}\n{TINY_PLUGIN}")
    with pytest.raises(CompileError, match=words) as err:
        build.compile_cubin(spec, 90)
    message = str(err.value)
    assert message.startswith("tiny_plugin.cuh:1: ") and "\n" not in message  # one sentence, naming the plugin
    assert "root:" not in message


def test_a_plugin_s_compile_error_names_the_plugin_and_its_line(tiny):
    spec, plugin = tiny
    plugin.write_text(TINY_PLUGIN + "__device__ float broken() { return undeclared_in_plugin; }\n")
    with pytest.raises(CompileError) as err:
        build.compile_cubin(spec, 90)
    message = str(err.value)
    assert message.startswith("uses_plugin.cu with tiny_plugin.cuh failed to compile for sm_90")
    assert "tiny_plugin.cuh:3: error: " in message and "undeclared_in_plugin" in message
    marked = [ln for ln in message.splitlines() if ln.lstrip().startswith(">>")]
    assert len(marked) == 1 and " 3 |" in marked[0] and "undeclared_in_plugin" in marked[0]
    assert PLUGIN_HEADER not in message  # the name NVRTC was given stays inside the build layer
    labelled = dataclasses.replace(spec, label="my/kernel.cu")  # the student's path as typed names the plugin
    with pytest.raises(CompileError, match=r"my/kernel\.cu:3: error: "):
        build.compile_cubin(labelled, 90)


def test_a_plugin_is_read_as_a_source_is(tiny):
    spec, plugin = tiny
    plugin.write_bytes(TINY_PLUGIN.encode() + "// caf\u00e9\n".encode("latin-1"))  # a Latin-1 comment: read as Latin-1
    assert build.compile_cubin(spec, 90).cubin
    plugin.write_bytes(TINY_PLUGIN.encode("utf-16"))
    with pytest.raises(CompileError, match="NUL byte"):
        build.compile_cubin(spec, 90)
    plugin.unlink()
    with pytest.raises(LabError, match="does not exist"):
        build.compile_cubin(spec, 90)


def test_rung_06_without_epi_plugin_never_reads_the_plugin(tmp_path):
    # The default build (every epilogue knob 0) and the fused chain take no part of the plugin: a plugin that
    # cannot compile changes nothing there.
    broken = tmp_path / "broken.cuh"
    broken.write_text("#error this plugin must not be compiled\n")
    plain = get_family("gemm_tc").rung("06").spec
    for spec in (plain, FAMILY.rungs[0].spec.with_knobs(EPI_OP1=1, EPI_OP2=5, EPI_OUT=1)):
        with_broken = dataclasses.replace(spec, plugin=str(broken))
        assert build.compile_cubin(with_broken, 90).cubin == build.compile_cubin(spec, 90).cubin
    with pytest.raises(CompileError, match="must not be compiled"):
        build.compile_cubin(dataclasses.replace(PLUGIN_RUNG.spec, plugin=str(broken)), 90)


# ----------------------------------------------------------------------------------------------
# The family's plugin rung
# ----------------------------------------------------------------------------------------------

def _problem(**params) -> Problem:
    """A problem with only its params (what variant reads): no arrays, so no GPU."""
    base = {"M": 8, "N": 8, "K": 8, "layout": "TN", "dtype": "float16", "epilogue": "bias+gelu_tanh", "out": "same",
            "q_per_row": False}
    return Problem("params only", {}, (8, 8), 0, params=base | params)


def test_the_plugin_rung_follows_rung_06():
    assert [r.key for r in FAMILY.rungs] == ["06_persistent", "08_functor_plugin"]  # rungs[0] stays rung 06
    plain = FAMILY.rungs[0].spec
    spec = PLUGIN_RUNG.spec
    assert (spec.source, spec.entry, spec.min_arch, spec.arch_suffix) == (plain.source, plain.entry, 90, "a")
    assert spec.plugin == PLUGIN_FILE and dict(spec.knobs) == dict(plain.knobs) | {"EPI_PLUGIN": 1, "EPI_OUT": 1}
    assert PLUGIN_RUNG.key in FAMILY.PERSISTENT_RUNGS  # one block per SM, as rung 06
    assert "EPI_PLUGIN" in build.knob_names(spec)


@pytest.mark.parametrize("params, applies", [
    ({"epilogue": "bias+gelu_tanh", "out": "int8"}, True),
    ({"epilogue": "bias+gelu_tanh", "out": "int8", "q_per_row": True}, True),
    ({"epilogue": "bias+gelu_tanh"}, False),
    ({"epilogue": "bias+relu", "out": "int8"}, False),
    ({"epilogue": "gelu_tanh", "out": "int8"}, False),
    ({"epilogue": "bias+gelu_tanh", "out": "e4m3"}, False),
    ({}, False),
])
def test_the_plugin_rung_is_timed_and_built_only_where_its_functor_applies(params, applies):
    assert FAMILY.plugin_applies(params) is applies
    for kind in ("headline", "sweep", "tail"):
        keys = [r.key for r in FAMILY.rungs_for(kind, params)]
        assert keys == (["06_persistent", "08_functor_plugin"] if applies else ["06_persistent"])
    built = FAMILY.variant(PLUGIN_RUNG, _problem(**params)).spec
    assert built.entry == PLUGIN_RUNG.spec.entry
    if applies:  # the functor, with the problem's output knobs
        assert built.plugin == PLUGIN_FILE and dict(built.knobs)["EPI_PLUGIN"] == 1
        assert dict(built.knobs)["EPI_QROW"] == int(params.get("q_per_row", False))
    else:  # anywhere else the rung is rung 06 with its own chain, so every check case runs on every rung
        assert built == FAMILY.variant(FAMILY.rungs[0], _problem(**params)).spec
        assert not built.plugin and "EPI_PLUGIN" not in dict(built.knobs)


# ----------------------------------------------------------------------------------------------
# Exercise 08
# ----------------------------------------------------------------------------------------------

def test_the_epilogue_functor_is_the_issue_s_exercise():
    e = exercises.load("08")
    assert e.id == "08_epilogue_functor"
    assert (e.family, e.rung, e.entry, e.student_file) == ("gemm_tc_epilogue", "08_functor_plugin",
                                                            "gemm_tc_persistent", "kernel.cu")
    assert e.reference_file == PLUGIN_FILE and e.reference_path == build.KERNELS_DIR / PLUGIN_FILE
    assert [(g.name, g.points) for g in e.checks] == [("friendly", 2), ("tails", 3), ("saturation_and_rows", 2)]
    groups = e.checks + e.hidden_checks()
    for group in groups:  # every case is the functor's problem, in both layouts and both types
        assert all((c["epilogue"], c["out"]) == ("bias+gelu_tanh", "int8") for c in group.cases), group.name
        assert {(c["layout"], c["dtype"]) for c in group.cases} == {(lay, dt) for lay in ("TN", "NN")
                                                                    for dt in ("float16", "bfloat16")}, group.name
        assert not any(c.get("beta") for c in group.cases)
    friendly, tails, saturation = (g.cases for g in e.checks)
    assert all(c["M"] % 128 == 0 and c["N"] % 256 == 0 and c["K"] % 64 == 0 and not c.get("pad")
               and not c.get("q_per_row") for c in friendly)
    assert {1, 3, 17, 33, 255, 257} <= {c["N"] for c in tails}
    assert any(c["M"] == 1 for c in tails) and any(c["M"] % 4 and c["M"] > 1 for c in tails)
    assert any(c["M"] % 16 and c["M"] % 4 == 0 for c in tails)
    # padded rows starting at odd addresses, also where the row's pairs are all inside N
    assert any(c.get("pad") and (c["N"] + c["pad"]) % 2 and c["N"] % 2 == 0 and c["M"] > 1 for c in tails)
    assert any(c.get("q_per_row") for c in saturation) and any(not c.get("q_per_row") for c in saturation)
    assert any(c.get("alpha", 1) >= 4 for c in saturation) and any(c.get("alpha", 1) < 0 for c in saturation)
    assert {g.name for g in e.hidden_checks()} == {"primes", "long_k", "row_scales"}
    assert all(c["K"] >= 4096 for c in next(g for g in e.hidden_checks() if g.name == "long_k").cases)
    assert e.performance.params == [{"M": 4096, "N": 4096, "K": 4096, "layout": "TN", "dtype": "float16",
                                     "epilogue": "bias+gelu_tanh", "out": "int8", "q_per_row": True}]
    assert e.performance.target_of_ceiling == 0.65 and "calibrated on the H200" in (e.path / "README.md").read_text()
    assert (e.time_limit_s, e.check_timeout_s) == (400, 150)
    assert e.max_points(include_hidden=False) == 10


def test_the_starter_is_the_plugin_with_exactly_its_solution_regions_taken_out():
    e = exercises.load("08")
    reference, starter = e.reference_source(), e.starter_text()
    assert reference == (build.KERNELS_DIR / PLUGIN_FILE).read_text()
    assert starter == e.starter_path.read_text() == strip_solution(reference)
    regions = solution_regions(reference)
    assert len(regions) == 3 and starter.count("// TODO: ") == 3
    removed = [ln[2:] for ln in difflib.ndiff(reference.splitlines(), starter.splitlines()) if ln.startswith("- ")]
    added = [ln[2:] for ln in difflib.ndiff(reference.splitlines(), starter.splitlines()) if ln.startswith("+ ")]
    body = [ln for region in regions for ln in region.splitlines()]
    assert [ln for ln in removed if "SOLUTION" not in ln] == body
    assert len([ln for ln in removed if "BEGIN SOLUTION" in ln]) == 3 == len(added)
    assert all(ln.strip().startswith("// TODO: ") for ln in added)
    for name in ("lab_plugin_store_pair", "lab_plugin_gelu", "lab_plugin_int8"):  # the signatures stay
        assert name in starter


@pytest.mark.parametrize("which", ["starter", "reference"])
def test_the_starter_and_the_reference_compile_for_sm_90a(which):
    e = exercises.load("08")
    path = e.starter_path if which == "starter" else e.reference_path
    spec = e.student_spec(path)
    compiled = build.compile_cubin(spec, 90)
    assert compiled.lowered_name == e.entry and compiled.cubin
    if which == "starter":  # it compiles to rung 06 that stores nothing: the checks see wrong codes, no crash
        assert compiled.cubin != build.compile_cubin(e.reference_spec(), 90).cubin


@pytest.mark.parametrize("bf16, qrow", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_the_reference_solution_compiles_without_spills(bf16, qrow):
    e = exercises.load("08")
    rep = build.compile_report(e.reference_spec().with_knobs(BF16=bf16, TN=1, EPI_QROW=qrow), 90)
    assert rep.arch == "sm_90a" and rep.registers > 0
    assert not rep.spills and rep.stack_frame_bytes == 0, rep
    if rep.sass_available:  # pairs as 2-byte stores, the tails as bytes
        assert rep.instructions.get("STG.U16", 0) > 0 and rep.instructions.get("STG.U8", 0) > 0


def test_student_spec_swaps_the_plugin_not_the_source(tmp_path, monkeypatch):
    e = exercises.load("08")
    (tmp_path / "kernel.cu").write_text(e.starter_text())
    monkeypatch.chdir(tmp_path)
    spec, ref = e.student_spec(Path("kernel.cu")), e.reference_spec()
    assert spec.source == ref.source and spec.plugin == str(tmp_path / "kernel.cu")
    assert (spec.entry, spec.knobs, spec.min_arch, spec.arch_suffix) == (ref.entry, ref.knobs, ref.min_arch,
                                                                         ref.arch_suffix)
    assert spec.shown == ref.source and spec.plugin_shown == "kernel.cu"
    assert dataclasses.replace(spec, label="ex/kernel.cu").plugin_shown == "ex/kernel.cu"
    assert e.student_rung(tmp_path / "kernel.cu").key == "08_functor_plugin"
    (tmp_path / "kernel.cu").write_text(e.reference_source())  # the reference's text: the reference's binary
    given = dataclasses.replace(ref, headers=e.allowed_headers())  # the headers a submission is given
    assert build.cache_key(spec, 90) == build.cache_key(given, 90)


def test_a_student_s_broken_functor_is_reported_in_their_file(tmp_path):
    e = exercises.load("08")
    text = e.starter_text().replace("    float g = 0.0f;\n", "    float g = 0.0f;\n    g = not_a_gelu(v);\n", 1)
    (tmp_path / "kernel.cu").write_text(text)
    line = text.splitlines().index("    g = not_a_gelu(v);") + 1
    with pytest.raises(CompileError) as err:
        build.compile_cubin(dataclasses.replace(e.student_spec(tmp_path / "kernel.cu"), label="kernel.cu"), 90)
    assert f"kernel.cu:{line}: error: " in str(err.value) and "not_a_gelu" in str(err.value)


def _copy_exercises(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "exercises"
    shutil.copytree(exercises.EXERCISES_DIR, root)
    monkeypatch.setattr(exercises, "EXERCISES_DIR", root)
    return root


@pytest.mark.parametrize("case, words", [
    ({"M": 4, "N": 4, "K": 4, "layout": "TN", "dtype": "float16", "epilogue": "bias+relu", "out": "int8"},
     "not a problem rung 08_functor_plugin's plugin computes"),
    ({"M": 4, "N": 4, "K": 4, "layout": "TN", "dtype": "float16", "epilogue": "bias+gelu_tanh"},
     "not a problem rung 08_functor_plugin's plugin computes"),
    ({"M": 4, "N": 4, "K": 4, "layout": "TN", "dtype": "float16", "epilogue": "bias+gelu_tanh", "out": "int8",
      "q_per_row": 1}, "true or false for q_per_row"),
])
def test_exercise_08_cases_must_be_the_functor_s_problems(tmp_path, monkeypatch, case, words):
    root = _copy_exercises(tmp_path, monkeypatch)
    spec = root / "08_epilogue_functor" / "exercise.json"
    data = json.loads(spec.read_text())
    data["checks"][0]["cases"].append(case)
    spec.write_text(json.dumps(data))
    with pytest.raises(LabError, match=words):
        exercises.load("08")


# ----------------------------------------------------------------------------------------------
# A student bundle: the plugin ships stripped, the tour leaves its rung out, rung 06 still builds
# ----------------------------------------------------------------------------------------------

def test_a_bundle_ships_the_plugin_stripped_and_rung_06_still_compiles(tmp_path, monkeypatch):
    kernels = tmp_path / "kernels"
    stripped = release._write_kernels(build.KERNELS_DIR, kernels)
    assert PLUGIN_FILE in stripped
    assert (kernels / PLUGIN_FILE).read_text() == exercises.load("08").starter_text()
    assert release.find_leaks(kernels) == []
    # compile against the bundle's headers (its stripped plugin among them), as a student's machine does
    monkeypatch.setattr(build, "KERNELS_DIR", kernels)
    monkeypatch.setattr(build, "COMMON_DIR", kernels / "common")
    for spec in (FAMILY.rungs[0].spec, FAMILY.rungs[0].spec.with_knobs(EPI_OP1=1, EPI_OP2=5, EPI_OUT=1),
                 PLUGIN_RUNG.spec):
        assert build.compile_cubin(spec, 90).lowered_name == spec.entry


def test_a_live_tour_leaves_the_plugin_rung_out_where_the_plugin_is_a_starter(monkeypatch):
    monkeypatch.setattr(release, "stripped_kernels", lambda root=None: [PLUGIN_FILE])
    assert [r.key for r in tour.without_starters(FAMILY).rungs] == ["06_persistent"]
    assert [r.key for r in FAMILY.rungs] == ["06_persistent", "08_functor_plugin"]  # the family itself unchanged
    monkeypatch.setattr(release, "stripped_kernels", lambda root=None: ["gemm_tc/06_persistent.cu"])
    assert tour.without_starters(FAMILY).rungs == ()
    monkeypatch.setattr(release, "stripped_kernels", lambda root=None: [])
    assert tour.without_starters(FAMILY).rungs == FAMILY.rungs
