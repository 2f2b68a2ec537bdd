"""CPU: scripts/gemm_tc_sanitize.py's plan, cases, child command and JSON, with a fake compute-sanitizer and a
NumPy stand-in for the kernels."""

import dataclasses
import importlib.util
import json
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lab.core import device
from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Rung
from lab.families.gemm_tc import GemmTcFamily, to_storage
from lab.measure import records
from lab.tools import sanitizer

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gemm_tc_sanitize.py"
TC = GemmTcFamily()


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("gemm_tc_sanitize", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hopper_only_rung() -> Rung:
    spec = KernelSpec("gemm_tc/99_wgmma.cu", "gemm_tc_wgmma", min_arch=90, arch_suffix="a")
    return Rung("gemm_tc", "99_wgmma", spec, "a rung that needs sm_90a")


# --- the plan ---------------------------------------------------------------------------------------

def test_plan_covers_every_rung_of_the_family_with_every_tool(script):
    rows = script.plan(TC.rungs, 90)
    assert [(r["tool"], r["rung"]) for r in rows] == [(t, r.key) for t in sanitizer.TOOLS for r in TC.rungs]
    assert not any(r["skip"] for r in rows)
    assert rows[0]["tool"] == "memcheck", "memcheck first: it finishes first when the budget runs short"


def test_plan_skips_rungs_the_gpu_cannot_run_with_the_reason(script):
    rungs = (*TC.rungs, _hopper_only_rung())
    on_ampere = {r["rung"]: r["skip"] for r in script.plan(rungs, 80, ("memcheck",))}
    assert on_ampere["99_wgmma"] == "needs sm_90a or newer; this GPU is sm_80"
    assert all((on_ampere[r.key] is None) == (r.spec.min_arch <= 80) for r in TC.rungs)
    assert script.plan(rungs, 90, ("racecheck",))[-1]["skip"] is None
    assert "sm_90a-only" in script.plan(rungs, 100, ("racecheck",))[-1]["skip"]
    assert all(r["skip"] for r in script.plan(TC.rungs, 75))  # mma.sync for fp16/bf16 needs sm_80


def test_child_command_reruns_this_script_on_one_rung(script):
    assert script.child_command("racecheck", "03_swizzled_multistage") == [
        sys.executable, str(SCRIPT), "--child", "racecheck", "03_swizzled_multistage"]


# --- the cases --------------------------------------------------------------------------------------

def _vec8(case: dict) -> bool:
    """Whether the launcher picks 16-byte loads for this case: every leading dimension a multiple of 8 (the
    pointers are 16-byte aligned on the GPU: cudaMalloc's, and the guard zones' whole vectors)."""
    params = NumpyKernels().make_problem(seed=0, **case).params
    return all(params[ld] % 8 == 0 for ld in ("lda", "ldb", "ldc"))


def test_memcheck_cases_meet_every_layout_type_and_beta_on_every_shape(script):
    cases = script.CASES["memcheck"]
    for shape in script.MEMCHECK_SHAPES:
        mine = [c for c in cases if all(c[k] == v for k, v in shape.items()) and c.get("pad", 0) == shape.get("pad", 0)]
        assert {(c["layout"], c["dtype"]) for c in mine} == set(script.COMBOS)
        assert {c.get("beta", 0) != 0 for c in mine} == {True, False}
    for combo in script.COMBOS:
        assert {c.get("beta", 0) != 0 for c in cases if (c["layout"], c["dtype"]) == combo} == {True, False}
    assert {_vec8(c) for c in cases} == {True, False}, "both the 16-byte and the scalar load paths"


def test_small_cases_wrap_every_multistage_pipeline(script):
    for rung in TC.rungs:
        k = dict(rung.spec.knobs)
        if "STAGES" in k:
            assert max(c["K"] for c in script.SMALL_CASES) >= 2 * k["STAGES"] * k["BK"], rung.key
    cases = script.SMALL_CASES
    assert {c["layout"] for c in cases} == {"TN", "NN"} and {c["dtype"] for c in cases} == {"float16", "bfloat16"}
    assert {c.get("beta", 0) != 0 for c in cases} == {True, False}
    assert {_vec8(c) for c in cases} == {True, False}


# --- the child's checks, on NumPy -------------------------------------------------------------------

class NumpyKernels(GemmTcFamily):
    """gemm_tc on NumPy arrays: 'launch' writes the rounded reference (or, wrong=True, one element off;
    raises=True, a LabError such as a compile error)."""

    array_module = np

    def __init__(self, wrong: bool = False, raises: bool = False, faults: bool = False):
        super().__init__()
        self.wrong, self.raises, self.faults = wrong, raises, faults

    def make_problem(self, *args, **kwargs):
        if self.faults:  # what CuPy raises once a kernel has faulted: the context is lost
            raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
        return super().make_problem(*args, **kwargs)

    def launch(self, rung, problem, out, set_index=0):
        if self.raises:
            raise LabError("gemm_tc/03 failed to compile for sm_90")
        n = problem.params["N"]
        ref = self.reference(problem)[:, :n].astype(np.float32)
        if self.wrong:
            ref[0, 0] += 1 + abs(ref[0, 0])
        out[:, :n] = to_storage(ref, problem.params["dtype"])


def test_check_cases_passes_right_answers(script):
    got = script.check_cases(NumpyKernels(), "03", script.SMALL_CASES)
    assert got["rung"] == "03_swizzled_multistage" and got["checks"] == len(script.SMALL_CASES)
    assert got["failed"] == [] and len(got["cases"]) == len(script.SMALL_CASES)


def test_check_cases_reports_wrong_answers_and_lab_errors_case_by_case(script):
    wrong = script.check_cases(NumpyKernels(wrong=True), "02", script.SMALL_CASES[:2])
    assert len(wrong["failed"]) == 2
    assert all(line.startswith("FAIL gemm_tc/02_ldmatrix_smem") for line in wrong["failed"])
    broken = script.check_cases(NumpyKernels(raises=True), "01", script.SMALL_CASES[:2])
    assert len(broken["failed"]) == 2 and "failed to compile" in broken["failed"][0]
    lost = script.check_cases(NumpyKernels(faults=True), "03", script.SMALL_CASES)
    assert len(lost["failed"]) == 1 and "illegal memory access" in lost["failed"][0], "stops at a lost context"


# --- the parent, end to end with a fake sanitizer ---------------------------------------------------

def _fake_sanitizer(tmp_path, body: str) -> str:
    script = tmp_path / "compute-sanitizer"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.fixture
def cpu_parent(script, monkeypatch):
    """main() without a GPU: an sm_90 device, provenance without CuPy, and SIGTERM left alone."""
    monkeypatch.setattr(device, "current", lambda: SimpleNamespace(arch=90))
    monkeypatch.setattr(records, "provenance", lambda: {"device": "fake"})
    monkeypatch.setattr(script.signal, "signal", lambda *a: None)
    monkeypatch.setattr(script, "MIN_CHILD_S", 0)
    return script


# The fake prints a clean summary and a result naming the rung it was given (the last argument); with
# racecheck on rung 02 it reports a hazard instead.
FAKE_BODY = """\
for last; do :; done
case "$*" in
  *"--tool racecheck"*02_*) echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" ;;
  *"--tool racecheck"*) echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" ;;
  --version) echo "Version 2025.3.1.0 (build 1)"; exit 0 ;;
  *) echo "========= ERROR SUMMARY: 0 errors" ;;
esac
echo "LAB-SANITIZE-RESULT {\\"rung\\": \\"$last\\", \\"checks\\": 4, \\"failed\\": [], \\"worst_ratio\\": 0.1}"
"""


def test_main_writes_one_row_per_tool_and_rung(cpu_parent, tmp_path, monkeypatch):
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: _fake_sanitizer(tmp_path, FAKE_BODY))
    out = tmp_path / "pack" / "gemm_tc_sanitize.json"
    assert cpu_parent.main(out, budget_s=600, tools=sanitizer.TOOLS) == 1  # the planted hazard fails the run
    payload = json.loads(out.read_text())
    assert payload["provenance"] == {"device": "fake"} and payload["sanitizer"]["version"] == "2025.3.1.0"
    rows = {(r["tool"], r["rung"]): r for r in payload["rows"]}
    assert set(rows) == {(t, r.key) for t in sanitizer.TOOLS for r in TC.rungs + TC.candidate_rungs}
    hazard = rows[("racecheck", "02_ldmatrix_smem")]
    assert hazard["status"] == "fail" and hazard["errors"] == 1 and hazard["hazards"] == 1
    assert "1 racecheck error(s)" in hazard["problems"] and "RACECHECK SUMMARY" in hazard["output_tail"]
    clean = rows[("memcheck", "03_swizzled_multistage")]
    assert clean["status"] == "pass" and clean["errors"] == 0 and clean["checks"] == 4 and clean["hazards"] is None
    assert clean["shapes"] == payload["cases"]["memcheck"] and clean["wall_s"] >= 0
    assert payload["counts"] == {"pass": 3 * len(TC.rungs + TC.candidate_rungs) - 1, "fail": 1, "skipped": 0,
                                 "not run": 0}
    assert payload["passed"] is False


def test_main_lists_skipped_rungs_and_what_the_budget_left_out(cpu_parent, tmp_path, monkeypatch):
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: _fake_sanitizer(tmp_path, FAKE_BODY))
    hopper = _hopper_only_rung()
    monkeypatch.setattr(GemmTcFamily, "rungs", (*TC.rungs, hopper))
    monkeypatch.setattr(device, "current", lambda: SimpleNamespace(arch=80))
    monkeypatch.setattr(cpu_parent, "MIN_CHILD_S", 10**6)  # no budget for any child
    out = tmp_path / "s.json"
    assert cpu_parent.main(out, budget_s=180, tools=("memcheck",)) == 1
    rows = {r["rung"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows[hopper.key] == {"tool": "memcheck", "rung": hopper.key, "shapes": rows[hopper.key]["shapes"],
                                "status": "skipped", "reason": "needs sm_90a or newer; this GPU is sm_80"}
    for rung in TC.rungs:
        if rung.spec.min_arch > 80:
            assert rows[rung.key]["status"] == "skipped", rung.key
        else:
            assert rows[rung.key]["status"] == "not run" and "budget" in rows[rung.key]["reason"], rung.key


def test_main_without_a_sanitizer_says_so_in_every_row(cpu_parent, tmp_path, monkeypatch):
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: None)
    out = tmp_path / "s.json"
    assert cpu_parent.main(out, budget_s=180, tools=("synccheck",)) == 1
    payload = json.loads(out.read_text())
    assert payload["sanitizer"] == {"path": None, "version": None}
    assert {r["reason"] for r in payload["rows"]} == {"compute-sanitizer is not installed here"}


def test_arguments(script):
    args = script._args(["out.json", "--tools", "racecheck,memcheck", "--budget", "90"])
    assert args.tools == ("racecheck", "memcheck") and args.budget == 90 and args.child is None
    assert script._args(["--child", "memcheck", "02"]).child == ["memcheck", "02"]
    with pytest.raises(SystemExit):
        script._args(["out.json", "--tools", "initcheck"])
    with pytest.raises(SystemExit):
        script._args([])


def test_a_rung_added_later_is_planned_without_touching_the_script(script, monkeypatch):
    later = dataclasses.replace(TC.rungs[-1], key="09_later")
    monkeypatch.setattr(GemmTcFamily, "rungs", (*TC.rungs, later))
    assert "09_later" in {r["rung"] for r in script.plan(GemmTcFamily().rungs, 90)}


def test_knobs_and_layouts_from_the_parent_build_the_rung_and_pick_the_cases(script, monkeypatch):
    """--knobs and --layouts reach the child through its environment: the rung built with them, only those cases."""
    assert script.parse_knobs("BN=192,STAGES=4") == {"BN": 192, "STAGES": 4} and script.parse_knobs("") == {}
    with pytest.raises(SystemExit, match="NAME=INTEGER"):
        script.parse_knobs("BN=wide")
    seen = []

    class Recording(NumpyKernels):
        def launch(self, rung, problem, out, set_index=0):
            seen.append((dict(rung.spec.knobs)["BN"], problem.params["layout"]))
            super().launch(rung, problem, out, set_index)

    monkeypatch.setenv("LAB_SANITIZE_KNOBS", "BN=192,STAGES=4,C_PARTS=1")
    monkeypatch.setenv("LAB_SANITIZE_LAYOUTS", "TN")
    got = script.check_cases(Recording(), "10", script.SMALL_CASES)
    tn = [c for c in script.SMALL_CASES if c["layout"] == "TN"]
    assert got["checks"] == len(tn) and got["failed"] == []
    assert seen and set(seen) == {(192, "TN")}
