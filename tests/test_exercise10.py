"""CPU: exercise 10 (the online-softmax step of FlashAttention-2 as a plugin of a copy of attention rung 02) loads
with its template, solution and baseline; its starter is the stripped solution and compiles, with the template and
the step harness, for sm_80 and sm_90 through NVRTC; the solution builds the same kernel as rung 02; the template
is rung 02 but for the step; hidden cases differ from the visible ones; the step harness's expected values follow
the README's step and its messages name what is wrong. GPU grading: tests/test_gpu_exercise10.py."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from lab.core import build
from lab.core.errors import CompileError, LabError
from lab.families import get_family
from lab.grading import exercises, online_softmax_numerics, release
from lab.grading.exercises import solution_regions, strip_solution

ID = "10_online_softmax"
TEMPLATE = "exercises/10_online_softmax.cu"
SOLUTION = "exercises/10_online_softmax_step.cuh"
STEP = "lab_online_softmax_step"
# The variants the checks build: fp16 and bf16, causal and not, D 64 and 128 (the launcher's knobs).
VARIANTS = [{"BF16": b, "CAUSAL": c, "HEAD_DIM": d} for b, c, d in ((0, 0, 64), (1, 1, 128), (0, 1, 128), (1, 0, 64))]


@pytest.fixture(scope="module")
def ex() -> exercises.Exercise:
    return exercises.load("10")


def _cases(groups) -> list[dict]:
    return [c for g in groups for c in g.cases]


# ----------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["10", ID, "online_softmax"])
def test_the_exercise_loads_by_number_folder_and_topic(name):
    assert exercises.load(name).id == ID


def test_the_reference_is_the_template_with_the_solution_as_its_plugin(ex):
    attention = get_family("attention")
    assert (ex.family, ex.rung, ex.entry, ex.kind, ex.student_file) == (
        "attention", "02_flash_mma", "attention_flash_mma", "kernel", "kernel.cu")
    spec, rung02 = ex.reference_spec(), attention.rung("02").spec
    assert (spec.source, spec.plugin) == (TEMPLATE, SOLUTION)
    assert (spec.entry, spec.knobs, spec.min_arch) == (rung02.entry, rung02.knobs, rung02.min_arch)
    assert ex.reference_rung().key == "02_flash_mma" and ex.reference_rung().launch == "flash_tiles"
    assert ex.reference_file == SOLUTION and ex.reference_path == build.KERNELS_DIR / SOLUTION
    student = ex.student_spec(ex.starter_path)
    assert student.source == TEMPLATE and student.plugin_path == ex.starter_path.resolve()
    assert set(ex.allowed_headers()) >= {"lab_mma.cuh", build.PLUGIN_HEADER}


def test_speed_is_graded_against_rung_02_itself(ex):
    attention = get_family("attention")
    assert ex.baseline_rung == "02_flash_mma"
    assert "rung 02_flash_mma" in ex.ceiling_title and attention.rung("02").title in ex.ceiling_title
    assert getattr(ex.launch_ceiling(), "__func__", None) is not type(attention).launch_ceiling  # not SDPA
    other = exercises.load("08")  # an exercise without a baseline keeps its family's ceiling
    assert other.baseline_rung == "" and other.ceiling_title == other.family_object().ceiling_title
    assert other.launch_ceiling().__func__ is type(other.family_object()).launch_ceiling


def _copy_exercises(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "exercises"
    shutil.copytree(exercises.EXERCISES_DIR, root)
    monkeypatch.setattr(exercises, "EXERCISES_DIR", root)
    return root


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(template={"source": TEMPLATE}), "template must be"),
    (lambda d: d.update(template={"source": TEMPLATE, "plugin": "exercises/nothing.cuh"}), "two files under kernels"),
    (lambda d: d.update(baseline_rung="07_nonexistent"), "07_nonexistent"),
    (lambda d: d["checks"][1].update(harness="no_such_harness"), "no_such_harness"),
    (lambda d: d["checks"][0]["cases"].append({"B": 1, "S_q": 4, "dtype": "float32"}), "dtype"),
])
def test_a_broken_exercise_json_is_one_clear_sentence(tmp_path, monkeypatch, change, words):
    root = _copy_exercises(tmp_path, monkeypatch)
    path = root / ID / "exercise.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(LabError, match=words):
        exercises.load("10")


# ----------------------------------------------------------------------------------------------
# Check sets
# ----------------------------------------------------------------------------------------------

def test_hidden_groups_are_extra_and_differ_from_the_visible_ones(ex):
    hidden = ex.hidden_checks()
    assert len(hidden) == 3 and all(g.hidden and g.points > 0 for g in hidden)
    assert not {g.name for g in hidden} & {g.name for g in ex.checks}
    visible = _cases(ex.checks)
    assert not [c for c in _cases(hidden) if c in visible], "a hidden case that is also visible"
    assert not [c for c in _cases(hidden) if c in ex.performance.params]
    assert ex.max_points(include_hidden=True) == ex.max_points(False) + sum(g.points for g in hidden)


def test_the_visible_cases_cover_what_the_step_gets_wrong(ex):
    cases = _cases(ex.checks)
    lengths = {c["S_q"] for c in cases} | {c["S_k"] for c in cases}
    assert {1, 17, 1000} <= lengths
    assert {c["causal"] for c in cases} == {0, 1}
    assert {c["dtype"] for c in cases} == {"float16", "bfloat16"} and {c["D"] for c in cases} == {64, 128}
    assert any(c.get("H_kv", c["H"]) < c["H"] for c in cases)  # grouped-query attention
    assert {c["H"] // c.get("H_kv", c["H"]) for c in cases} >= {2, 4, 8}
    assert any(c.get("large_logits") for c in cases)
    assert any(c["causal"] and c["S_q"] > c["S_k"] for c in cases)  # rows that see no key
    block_n = dict(get_family("attention").rung("02").spec.knobs)["BLOCK_N"]
    assert any(c["S_k"] > 8 * block_n for c in cases)  # rows of many tiles: the rescale matters
    assert all(c["D"] in (64, 128) for c in cases + _cases(ex.hidden_checks()) + ex.performance.params)
    harnessed = [g for g in ex.checks if g.harness]
    assert [g.harness for g in harnessed] == ["online_softmax_step"]
    assert all(c["dtype"] in ("float16", "bfloat16") for c in ex.performance.params)


def _pairs(case: dict) -> int:
    """Query-key pairs of one case over all heads: what the float64 reference and its bound cost on the CPU."""
    return case.get("B", 1) * case.get("H", 1) * case["S_q"] * case["S_k"]


def test_the_float64_references_stay_moderate(ex):
    # The reference and its error bound take ~1 s per 4 M pairs on one CPU core, three distributions per case.
    for group in ex.checks + ex.hidden_checks():
        assert sum(_pairs(c) for c in group.cases) <= 15_000_000, group.name
        assert len(group.cases) <= 12, group.name
    assert sum(_pairs(p) for p in ex.performance.params) <= 150_000_000  # one reference: under check_timeout_s


# ----------------------------------------------------------------------------------------------
# The solution, the starter and the template
# ----------------------------------------------------------------------------------------------

def test_the_starter_is_the_stripped_solution(ex):
    assert ex.starter_path.is_file(), f"run `python -m lab.grading.exercises` to write {ex.starter_path}"
    assert ex.starter_path.read_text() == strip_solution(ex.reference_source()) == ex.starter_text(), (
        f"{ex.starter_path} is stale: run `python -m lab.grading.exercises` to regenerate it")


def _body(text: str) -> str:
    """The step's body: from its signature's opening brace to the end of the file."""
    start = text.index(f"void {STEP}(")
    return text[text.index("{", start):]


def test_the_starter_s_step_is_not_the_solution(ex):
    solution, starter = ex.reference_source(), ex.starter_text()
    regions = solution_regions(solution)
    assert len(regions) == 2 and starter.count("// TODO: ") == 2
    assert _body(starter) != _body(solution)
    for region in regions:
        for line in (ln for ln in region.splitlines() if len(ln.strip()) > 12 and "pragma" not in ln):
            assert line not in starter, line
    # What the starter leaves: no weight, no rescale (every output 0, every check failed), and it still compiles.
    assert "p[k] = 0;" in starter and "m = m_next;" in starter
    for name in ("fmaxf(m, tile_max * c)", "o[j] *= alpha", "half_bits_to_float"):
        assert name in solution and name not in _body(starter), name


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("which", ["solution", "starter"])
def test_the_kernel_compiles_through_nvrtc_with_the_solution_and_the_starter(ex, arch, which):
    path = ex.reference_path if which == "solution" else ex.starter_path
    spec = ex.student_spec(path)
    for knobs in VARIANTS:
        compiled = build.compile_cubin(spec.with_knobs(**knobs), arch)
        assert compiled.lowered_name == ex.entry and compiled.cubin, knobs


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("which", ["solution", "starter"])
def test_the_step_harness_compiles_with_the_solution_and_the_starter(ex, arch, which):
    path = ex.reference_path if which == "solution" else ex.starter_path
    for bf16 in (0, 1):
        spec = online_softmax_numerics.harness_spec(path, "kernel.cu", bf16, ex.allowed_headers())
        compiled = build.compile_cubin(spec, arch)
        assert compiled.lowered_name == online_softmax_numerics.HARNESS_ENTRY and compiled.cubin


@pytest.mark.parametrize("knobs", VARIANTS, ids=lambda k: "-".join(f"{n}{v}" for n, v in k.items()))
def test_the_solution_builds_the_kernel_rung_02_builds(ex, knobs):
    # The step moved into a __forceinline__ function over arrays that unrolled loops index with constants: the
    # same instructions as rung 02's inline step, no spills, no stack (local memory), registers within one
    # allocation unit (8 a thread) of rung 02's: ptxas's choices move by one or two between the two sources.
    ours = build.compile_report(ex.reference_spec().with_knobs(**knobs), 90)
    rung02 = build.compile_report(get_family("attention").rung("02").spec.with_knobs(**knobs), 90)
    assert ours.spill_store_bytes == ours.spill_load_bytes == ours.stack_frame_bytes == 0
    assert ours.registers <= rung02.registers + 8 and ours.smem_static_bytes == rung02.smem_static_bytes
    if ours.sass_available and rung02.sass_available:
        assert ours.instructions == rung02.instructions


def _opcodes(spec: build.KernelSpec) -> Counter:
    """Every SASS opcode (without its modifiers) of the entry for sm_90, counted."""
    compiled = build.compile_cubin(spec, 90)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.cubin)
        f.flush()
        listing = subprocess.run([build.find_nvdisasm(), "-c", f.name], capture_output=True, text=True,
                                 check=True).stdout
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", listing)
    return Counter(op.split(".")[0] for op in ops)


@pytest.mark.parametrize("knobs", VARIANTS, ids=lambda k: "-".join(f"{n}{v}" for n, v in k.items()))
def test_the_solution_s_kernel_has_every_instruction_of_rung_02_and_no_other(ex, knobs):
    # Stronger than the notable mix: the whole opcode histogram. The solution converts its probabilities in pairs,
    # as rung 02 does, so ptxas packs each pair with one conversion (one at a time would add a PRMT and an F2FP
    # per pair in fp16).
    if build.find_nvdisasm() is None:
        pytest.skip("nvdisasm is not installed (the `inspect` extra)")
    rung02 = get_family("attention").rung("02").spec
    assert _opcodes(ex.reference_spec().with_knobs(**knobs)) == _opcodes(rung02.with_knobs(**knobs))


def _code_without_the_step(text: str) -> list[str]:
    """The kernel's lines from its first #include on, without the per-row step block (from the online-softmax
    comment to the P V comment), rung 02's fast_exp2 helper and the plugin include."""
    lines = text[text.index("#include"):].splitlines()
    start = next(i for i, ln in enumerate(lines) if "// --- online softmax" in ln)
    end = next(i for i, ln in enumerate(lines) if "// --- O += P V" in ln)
    kept = lines[:start] + lines[end:]
    if any("float fast_exp2(" in ln for ln in kept):
        helper = next(i for i, ln in enumerate(kept) if "float fast_exp2(" in ln)
        kept = kept[:helper - 1] + kept[helper + 6:]  # its comment, the function and the blank line after it
    return [ln for ln in kept if build.PLUGIN_HEADER not in ln]


def test_the_template_is_rung_02_but_for_the_step():
    rung02 = (build.KERNELS_DIR / get_family("attention").rung("02").spec.source).read_text()
    template = (build.KERNELS_DIR / TEMPLATE).read_text()
    assert _code_without_the_step(template) == _code_without_the_step(rung02), (
        f"kernels/{TEMPLATE} is no longer rung 02 outside the step: copy rung 02's change into it")
    assert f"{STEP}<BF16>(" in template and f'#include "{build.PLUGIN_HEADER}"' in template
    assert "arXiv:2307.08691" in template  # FlashAttention-2, cited where the idea comes from


def test_no_solution_line_ships_in_the_kernels_or_the_starter(ex):
    # lab release ships rung 02, the template and the harness whole: none may hold a line of the step's solution.
    lines = {line for line, origin in release.solution_lines().items() if origin == SOLUTION}
    assert lines
    shipped = [ex.starter_text(), (build.KERNELS_DIR / TEMPLATE).read_text(),
               (build.KERNELS_DIR / online_softmax_numerics.HARNESS_SOURCE).read_text(),
               (build.KERNELS_DIR / get_family("attention").rung("02").spec.source).read_text(),
               (ex.path / "README.md").read_text()]
    for line in lines:
        assert not any(line in text for text in shipped), line


def test_a_student_file_may_not_redefine_the_kernel_s_knobs(ex, tmp_path):
    text = ex.starter_text().replace("#pragma once", "#pragma once\n#define HEAD_DIM 32", 1)
    (tmp_path / "kernel.cu").write_text(text)
    with pytest.raises(CompileError, match="HEAD_DIM"):
        build.compile_cubin(ex.student_spec(tmp_path / "kernel.cu"), 90)


def test_a_compile_error_names_the_student_s_file_and_line(ex, tmp_path):
    (tmp_path / "kernel.cu").write_text(ex.starter_text().replace("// TODO:", "not C++; // TODO:", 1))
    with pytest.raises(CompileError) as err:
        build.compile_cubin(ex.student_spec(tmp_path / "kernel.cu"), 90)
    assert "kernel.cu:" in str(err.value) and "not C++" in str(err.value)


# ----------------------------------------------------------------------------------------------
# The step harness: its expected values and its messages (no GPU: the outputs are made up here)
# ----------------------------------------------------------------------------------------------

def _expected_outputs(bf16: int) -> tuple[np.ndarray, np.ndarray]:
    rows = [r.expected(bf16) for r in online_softmax_numerics.ROWS]
    return (np.array([v for v, _ in rows], dtype=np.float32), np.array([b for _, b in rows], dtype=np.uint16))


def test_the_harness_rows_follow_the_readme_s_step():
    N = online_softmax_numerics
    no_key = N.ROWS[0]
    values, bits = no_key.expected(0)
    assert values[0] == -math.inf and values[1:] == [0.0, 0.0, 0.0] and bits == [0] * N.KEYS
    for row in N.ROWS:
        assert len(row.o) == N.COLS and len(row.s) == N.KEYS and row.c > 0
        for bf16 in (0, 1):
            values, bits = row.expected(bf16)
            assert not any(math.isnan(v) for v in values) and N.POISON_P not in bits
            assert np.float32(values[1]) == values[1]  # l exact in fp32
    # A tile that raises the max scales l and o by 2^(m - m_new); the first tile's weights are powers of two.
    moved = next(r for r in N.ROWS if "raises" in r.what)
    assert moved.expected(0)[0] == [3.0, 0.75 + 0.25 + 1.0 + 0.125, 1.0, -2.0]
    large = next(r for r in N.ROWS if "large logits" in r.what)
    assert large.expected(0)[1][2] == 0 and large.expected(1)[1][2] != 0  # 2^-50: below fp16, a bf16 value


@pytest.mark.parametrize("bf16", [0, 1])
def test_the_harness_accepts_the_exact_outputs_and_names_the_first_wrong_one(bf16):
    N = online_softmax_numerics
    values, bits = _expected_outputs(bf16)
    assert N.first_wrong(values, bits, bf16) is None
    nan_l = values.copy()
    nan_l[0, 1] = np.nan  # the no-key row shifted by -inf
    why = N.first_wrong(nan_l, bits, bf16)
    assert why.startswith(f"{STEP}") and "has seen no key" in why and "l became nan, must be 0" in why
    assert "shift by 0" in why and ("BF16=1" in why) == bool(bf16)
    moved = next(i for i, r in enumerate(N.ROWS) if "raises" in r.what)
    no_rescale = values.copy()
    no_rescale[moved, 2:] = N.ROWS[moved].o  # o left as it was
    why = N.first_wrong(no_rescale, bits, bf16)
    assert "raises the row's max" in why and "o[0] became 4, must be 1" in why and "alpha" in why
    unwritten = bits.copy()
    unwritten[1, 0] = N.POISON_P
    assert "(left unwritten)" in N.first_wrong(values, unwritten, bf16)
    nearly = values.copy()
    nearly[moved, 1] *= np.float32(1 + 2.0 ** -22)  # an ex2 a few ulps off on an integer: still right
    assert N.first_wrong(nearly, bits, bf16) is None


# ----------------------------------------------------------------------------------------------
# The grade worker's part (no GPU: the launches are recorded instead of run)
# ----------------------------------------------------------------------------------------------

def test_the_step_check_runs_before_the_cases_and_its_sentence_is_the_group_s_output(ex, monkeypatch):
    from lab.grading import grade_worker

    seen = []
    why = "lab_online_softmax_step on a row: l became nan, must be 0; shift by 0."

    def fake_check(kernel, shown, headers):
        seen.append((Path(kernel).name, shown, headers))
        return False, why

    monkeypatch.setattr(online_softmax_numerics, "check_step_numerics", fake_check)
    group = next(g for g in ex.checks if g.harness == "online_softmax_step")
    result = grade_worker.run_group(ex, ex.starter_path, group, seed=0, shown="kernel.cu")
    assert result == {"passed": False, "score": 0.0, "cuda_error": False, "output": why}
    assert seen[0] == ("starter.cu", "kernel.cu", ex.allowed_headers())


def test_the_performance_check_times_rung_02_itself_and_names_it(ex, monkeypatch):
    from lab.families.attention import AttentionFamily
    from lab.grading import grade_worker

    launched = []
    monkeypatch.setattr(AttentionFamily, "array_module", np)  # host problems: nothing here needs a GPU
    monkeypatch.setattr(AttentionFamily, "launch", lambda self, rung, problem, out, set_index=0: launched.append(
        (rung.key, rung.spec.source, rung.spec.plugin)))

    def no_sdpa(self, problem, out, set_index=0):
        raise AssertionError("the performance check of exercise 10 timed SDPA, not rung 02")

    monkeypatch.setattr(AttentionFamily, "launch_ceiling", no_sdpa)
    times = iter([2.0, 2.5])  # rung 02 first, then the student's kernel, as run_performance times them
    monkeypatch.setattr(grade_worker, "time_fresh",
                        lambda family, problem, launch, seed, check=True: (launch(problem, None), next(times))[1:]
                        + ((True if check else None),))
    monkeypatch.setattr(ex, "performance", exercises.Performance(3.0, [{"B": 1, "H": 1, "S_q": 64, "D": 64}], 0.9))
    result = grade_worker.run_performance(ex, ex.starter_path, seed=0)
    rung02 = get_family("attention").rung("02").spec
    assert launched == [("02_flash_mma", rung02.source, ""), ("02_flash_mma", TEMPLATE, str(ex.starter_path.resolve()))]
    assert result["ratio_of_ceiling"] == pytest.approx(0.8) and result["score"] == 1.5
    assert "0.800x of attention rung 02_flash_mma" in result["output"] and "same run" in result["output"]
