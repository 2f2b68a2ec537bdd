"""CPU: the optimization checklist (lab/studies/checklist.py) on NumPy stand-ins: line counting, the reference check,
the
record a run writes, the verdicts read from it, the Triton level without Triton, and the Nsight Compute plumbing with
a fake ncu. One GPU test runs the real levels at a small size."""

import importlib
import json
import stat
import sys
import types

import numpy as np
import pytest

from lab.measure.records import format_bytes
from lab.studies import checklist
from lab.tools import library_gemm, triton_gemm

# --- lines of code -------------------------------------------------------------------------------------------

PY_SOURCE = '''"""Module docstring."""
import os


@decorator
def wanted(x):
    """A docstring
    over two lines."""
    # a comment line
    y = x + 1  # a trailing comment still makes a code line

    return y


def other():
    return 0


TABLE = {
    "a": 1,
}
'''

C_SOURCE = """// header comment
/* a block
   comment */
#pragma once

__device__ float f(float x) {  // trailing comment
    /* inline */ return x;
}
"""


def test_python_code_lines_leave_out_blanks_comments_and_docstrings():
    assert checklist.python_code_lines(PY_SOURCE, "wanted") == 4  # decorator, def, y = ..., return
    assert checklist.python_code_lines(PY_SOURCE, "other") == 2
    assert checklist.python_code_lines(PY_SOURCE, "TABLE") == 3
    assert checklist.python_code_lines(PY_SOURCE) == 1 + 4 + 2 + 3  # the import, then the three definitions


def test_python_code_lines_of_a_missing_definition_is_a_lookup_error():
    with pytest.raises(LookupError, match="nowhere"):
        checklist.python_code_lines(PY_SOURCE, "nowhere")


def test_c_code_lines_leave_out_comments():
    assert checklist.c_code_lines(C_SOURCE) == 4


def test_count_source_lines_reports_missing_pieces_instead_of_failing(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "mod.py").write_text(PY_SOURCE)
    (tmp_path / "k.cuh").write_text(C_SOURCE)
    sources = (checklist.Source("lab/mod.py", "wanted"), checklist.Source("k.cuh"),
               checklist.Source("kernels/common/not_written_yet.cuh"), checklist.Source("lab/mod.py", "absent"))
    got = checklist.count_source_lines(sources, tmp_path)
    assert got["lines"] == 4 + 4 and not got["complete"]
    assert [p["lines"] for p in got["pieces"]] == [4, 4]
    assert [(m["path"], m["name"]) for m in got["missing"]] == [("kernels/common/not_written_yet.cuh", None),
                                                               ("lab/mod.py", "absent")]
    assert "does not exist" in got["missing"][0]["why"]


def test_count_source_lines_when_everything_is_there(tmp_path):
    (tmp_path / "k.cuh").write_text(C_SOURCE)
    got = checklist.count_source_lines((checklist.Source("k.cuh"),), tmp_path)
    assert got == {"lines": 4, "complete": True, "pieces": [{"path": "k.cuh", "name": None, "lines": 4}],
                   "missing": []}


def test_every_level_names_its_sources_and_the_python_ones_exist():
    for level in checklist.LEVELS:
        assert level.sources, level.name
    for name in ("library", "graph_fusion", "triton"):  # written with this study; lab_fused is the maintainer's
        counted = checklist.get_level(name).source_lines()
        assert counted["complete"] and counted["lines"] > 0, (name, counted)
    more = checklist.get_level("graph_fusion").source_lines()["lines"]
    assert more > checklist.get_level("library").source_lines()["lines"], "the elementwise kernel is counted too"


# --- the reference check -------------------------------------------------------------------------------------

SMALL = {"M": 48, "N": 40, "K": 72}


def _small_inputs(seed: int = 0):
    return checklist.make_inputs(SMALL["M"], SMALL["N"], SMALL["K"], np, seed)


def _fused_numpy(A, W, bias, Y):
    """What a fused level computes: the fp32 accumulator, bias and GELU on it, one rounding to fp16."""
    x = A.astype(np.float32) @ W.astype(np.float32).T + bias
    Y[...] = checklist.gelu_tanh(x.astype(np.float64)).astype(np.float32)


def _run(fn, A, W, bias):
    Y = np.full((A.shape[0], W.shape[0]), np.nan, dtype=np.float16)
    fn(A, W, bias, Y)
    return Y


@pytest.mark.parametrize("fn", [checklist.library, _fused_numpy], ids=["library_on_numpy", "fused"])
def test_correct_outputs_pass(fn):
    A, W, bias = _small_inputs()
    ref, bound = checklist.reference(A, W, bias)
    got = checklist.check_output(_run(fn, A, W, bias), ref, bound)
    assert got["passed"] and got["bad_elements"] == 0 and got["worst_error_over_bound"] <= 1, got


def test_one_wrong_element_fails():
    A, W, bias = _small_inputs()
    ref, bound = checklist.reference(A, W, bias)
    Y = _run(_fused_numpy, A, W, bias)
    i, j = np.unravel_index(np.argmax(np.abs(ref)), ref.shape)
    Y.view(np.uint16)[i, j] += 4  # four fp16 ulps off, on the largest element
    got = checklist.check_output(Y, ref, bound)
    assert not got["passed"] and got["bad_elements"] == 1 and got["worst_at"] == [i, j]


def test_an_unwritten_element_fails():
    A, W, bias = _small_inputs()
    ref, bound = checklist.reference(A, W, bias)
    Y = _run(_fused_numpy, A, W, bias)
    Y[3, 2] = np.nan
    got = checklist.check_output(Y, ref, bound)
    assert not got["passed"] and got["bad_elements"] == 1 and got["worst_at"] == [3, 2]


@pytest.mark.parametrize("wrong", ["bias twice", "no bias", "relu"])
def test_wrong_computations_fail(wrong):
    A, W, bias = _small_inputs()
    ref, bound = checklist.reference(A, W, bias)
    x = A.astype(np.float32) @ W.astype(np.float32).T
    y = {"bias twice": checklist.gelu_tanh(x + 2.0 * bias), "no bias": checklist.gelu_tanh(x),
         "relu": np.maximum(x + bias, 0)}[wrong]
    assert not checklist.check_output(y.astype(np.float16), ref, bound)["passed"]


def test_reference_rows_match_the_full_reference():
    A, W, bias = _small_inputs()
    rows = checklist.sample_rows(SMALL["M"], 6)
    full_ref, full_bound = checklist.reference(A, W, bias)
    ref, bound = checklist.reference(A[rows], W, bias)
    np.testing.assert_allclose(ref, full_ref[rows], rtol=1e-12)
    np.testing.assert_allclose(bound, full_bound[rows], rtol=1e-9)


def test_sample_rows_holds_both_edges_and_no_repeats():
    rows = checklist.sample_rows(8192, 32)
    assert len(set(rows.tolist())) == 32 and rows[0] == 0 and rows[-1] == 8191
    assert np.all(np.diff(rows) > 0)
    assert checklist.sample_rows(10, 32).tolist() == list(range(10))


def test_gelu_lipschitz_bounds_the_slope():
    x = np.linspace(-6, 6, 1201)
    h = 1e-6
    slope = np.abs((checklist.gelu_tanh(x + h) - checklist.gelu_tanh(x - h)) / (2 * h))
    assert slope.max() <= checklist.gelu_lipschitz() <= slope.max() * 1.01
    assert checklist.gelu_lipschitz() > 1, "GELU overshoots the identity's slope"


def test_min_dram_bytes():
    M, N, K = 3, 5, 7
    assert checklist.min_dram_bytes(M, N, K) == 2 * M * K + 2 * N * K + 4 * N + 2 * M * N


# --- a run of the study on a NumPy stand-in for the GPU ---------------------------------------------------------

class NumpyBackend:
    """CupyBackend's methods on NumPy: launches run once; times, kernel counts and DRAM bytes are made up."""

    def __init__(self):
        self.timed = 0

    def provenance(self):
        return {"device": "numpy stand-in", "commit": "test"}

    def inputs(self, M, N, K, seed=0):
        return checklist.make_inputs(M, N, K, np, seed)

    def empty(self, M, N):
        return np.empty((M, N), dtype=np.float16)

    def poison(self, Y):
        Y.fill(np.nan)

    def to_host(self, x):
        return np.asarray(x)

    def time(self, launch):
        launch()
        self.timed += 1
        ms = float(self.timed)
        return {"median_ms": ms, "p10_ms": ms, "p90_ms": ms, "min_ms": ms, "reps": 5, "l2": "cold"}

    def count_kernels(self, launch):
        return {"kernels": 1, "nodes": {"KERNEL": 1}}

    def dram(self, level, M, N, K, details):
        return {"bytes": float(checklist.min_dram_bytes(M, N, K)), "kernels": 1}


class Calls:
    def __init__(self, fn):
        self.fn, self.count = fn, 0

    def __call__(self, A, W, bias, Y):
        self.count += 1
        self.fn(A, W, bias, Y)


def _level(name, fn, **kw):
    return checklist.Level(name, name, fn, (checklist.Source("lab/studies/checklist.py", "library"),), **kw)


def _wrong_when_large(A, W, bias, Y):
    _fused_numpy(A, W, bias, Y)
    if A.shape[0] > checklist.CHECK_SHAPE["M"]:
        Y[-1, -1] += 1


def test_a_level_that_fails_is_recorded_and_never_timed():
    wrong_small = Calls(lambda A, W, bias, Y: Y.fill(0))
    wrong_large = Calls(_wrong_when_large)
    backend = NumpyBackend()
    levels = (_level("library", checklist.library), _level("wrong_small", wrong_small),
              _level("wrong_large", wrong_large))
    record = checklist.measure_levels([300], levels=levels, backend=backend, check_rows=8)
    entries = record["sizes"][0]["levels"]
    assert entries["library"]["status"] == "ok"
    assert entries["wrong_small"]["status"] == "failed" and "failed its check on 256 x 384 x 512" in \
        entries["wrong_small"]["reason"]
    assert wrong_small.count == 1, "checked once on the small shape, then never run again"
    assert entries["wrong_large"]["status"] == "failed" and "sampled rows" in entries["wrong_large"]["reason"]
    assert "timing" not in entries["wrong_large"] and wrong_large.count == 2  # small check, sampled-row check
    assert backend.timed == 2, "only the GEMM and the library level were timed"


def test_an_exception_in_a_level_is_a_failure_not_a_crash():
    def broken(A, W, bias, Y):
        raise RuntimeError("no kernel image for this arch")

    record = checklist.measure_levels([64], levels=(_level("broken", broken),), backend=NumpyBackend())
    entry = record["sizes"][0]["levels"]["broken"]
    assert entry["status"] == "failed" and "RuntimeError: no kernel image for this arch" in entry["reason"]


@pytest.fixture
def triton_absent():
    """lab.tools.triton_gemm re-imported as where `import triton` fails."""
    saved = {name: sys.modules.get(name) for name in ("triton", "triton.language")}
    sys.modules["triton"] = sys.modules["triton.language"] = None
    try:
        yield importlib.reload(triton_gemm)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        importlib.reload(triton_gemm)


def test_triton_level_is_not_available_without_triton(triton_absent):
    assert triton_absent.triton is None
    assert triton_absent.unavailable().startswith("triton cannot be imported (ModuleNotFoundError")
    assert triton_absent.best_config() is None
    record = checklist.measure_levels([64], levels=(checklist.get_level("triton"),), backend=NumpyBackend())
    described = record["levels"][0]
    assert described["status"] == "not available"
    assert described["reason"].startswith("not available here: triton cannot be imported")
    assert described["source"]["complete"], "its lines are counted from the source, without importing triton"
    entry = record["sizes"][0]["levels"]["triton"]
    assert entry["status"] == "not available" and "timing" not in entry
    assert any("triton was not timed: not available here" in v for v in checklist.verdicts(record))


def test_lab_fused_is_not_available_without_lab_epilogue(monkeypatch):
    monkeypatch.setitem(sys.modules, "lab.families.gemm_epilogue", None)
    record = checklist.measure_levels([64], levels=(checklist.get_level("lab_fused"),), backend=NumpyBackend())
    assert record["sizes"][0]["levels"]["lab_fused"]["reason"].startswith(
        "not available here: lab.families.gemm_epilogue cannot be imported")


def _fake_epilogue(monkeypatch, fn):
    calls = []

    def fused_matmul(A, W, *, bias=None, activation="none", out=None):
        calls.append(activation)
        fn(A, W, bias, out)

    monkeypatch.setitem(sys.modules, "lab.families.gemm_epilogue", types.SimpleNamespace(fused_matmul=fused_matmul))
    return calls


def test_lab_fused_calls_fused_matmul_with_the_agreed_signature(monkeypatch):
    calls = _fake_epilogue(monkeypatch, _fused_numpy)
    record = checklist.measure_levels([64], levels=(checklist.get_level("lab_fused"),), backend=NumpyBackend())
    assert record["sizes"][0]["levels"]["lab_fused"]["status"] == "ok"
    assert set(calls) == {"gelu_tanh"}


def test_a_wrong_lab_fused_fails_its_check(monkeypatch):
    _fake_epilogue(monkeypatch, lambda A, W, bias, Y: _fused_numpy(A, W, 0 * bias, Y))
    record = checklist.measure_levels([64], levels=(checklist.get_level("lab_fused"),), backend=NumpyBackend())
    assert record["levels"][0]["status"] == "failed"
    assert record["sizes"][0]["levels"]["lab_fused"]["status"] == "failed"


def test_summary_text_is_the_table_and_the_verdicts(monkeypatch):
    """What `lab study checklist` prints once the record is written: every size and level a row, then every verdict."""
    _fake_epilogue(monkeypatch, _fused_numpy)
    monkeypatch.setattr(triton_gemm, "unavailable", lambda: "stand-in")
    record = checklist.measure_levels([64], backend=NumpyBackend(), check_rows=8)
    lines = checklist.summary_text(record).splitlines()
    assert "numpy stand-in" in lines[0] and lines[1].split()[:3] == ["size", "level", "status"]
    rows = [line for line in lines if line.startswith("64x64x64")]
    assert [row.split()[1] for row in rows] == ["gemm", "library", "graph_fusion", "triton", "lab_fused"]
    assert [line[2:] for line in lines if line.startswith("- ")] == checklist.verdicts(record)


def test_run_needs_a_gpu_before_it_measures(tmp_path, monkeypatch):
    from lab.core import device
    from lab.core.errors import LabError

    monkeypatch.setattr(device, "_probe", lambda: "no GPU here (simulated by the test)")
    monkeypatch.setattr(checklist, "measure_levels", lambda *a, **k: pytest.fail("nothing is measured without a GPU"))
    with pytest.raises(LabError, match="needs a CUDA GPU"):
        checklist.run(tmp_path)
    assert not (tmp_path / checklist.STUDY_FILE).exists()


def test_the_record_schema(monkeypatch):
    _fake_epilogue(monkeypatch, _fused_numpy)
    monkeypatch.setattr(triton_gemm, "unavailable", lambda: "stand-in")  # where triton is installed too
    record = checklist.measure_levels([64, {"M": 96, "N": 64, "K": 80}], backend=NumpyBackend(), check_rows=8)
    json.dumps(record)  # JSON as it is, no NumPy scalars
    assert record["schema"] == checklist.SCHEMA and record["study"] == "checklist" and record["l2"] == "cold"
    assert record["provenance"]["device"] == "numpy stand-in"
    assert record["ncu"]["nvtx_range"] == checklist.NVTX_RANGE
    assert [lv["name"] for lv in record["levels"]] == ["library", "graph_fusion", "triton", "lab_fused"]
    for lv in record["levels"]:
        assert set(lv) == {"name", "title", "status", "reason", "check", "source"}
        assert set(lv["source"]) == {"lines", "complete", "pieces", "missing"}
    assert [(s["M"], s["N"], s["K"]) for s in record["sizes"]] == [(64, 64, 64), (96, 64, 80)]
    for size in record["sizes"]:
        assert size["min_dram_bytes"] == checklist.min_dram_bytes(size["M"], size["N"], size["K"])
        assert set(size["gemm"]) == {"timing", "kernels", "dram"}
        assert set(size["levels"]) == {"library", "graph_fusion", "triton", "lab_fused"}
        ok = size["levels"]["library"]
        assert {"status", "check", "timing", "x_gemm", "kernels", "details", "dram"} <= set(ok)
        assert ok["x_gemm"] == ok["timing"]["median_ms"] / size["gemm"]["timing"]["median_ms"]
        assert ok["check"]["passed"] and ok["check"]["checked_elements"] == 8 * size["N"]
        assert size["levels"]["graph_fusion"]["status"] == "failed"  # cupy.matmul refuses NumPy arrays
    rows = checklist.summary_rows(record)
    assert len(rows) == 2 * 5 and rows[0]["level"] == "gemm"
    assert checklist.verdicts(record)


# --- verdicts ------------------------------------------------------------------------------------------------

MIB = 1 << 20


def _timing(ms, spread=0.01):
    return {"median_ms": ms, "p10_ms": ms * (1 - spread), "p90_ms": ms * (1 + spread), "min_ms": ms * (1 - spread),
            "reps": 20, "l2": "cold"}


def _entry(ms, gemm_ms, kernels, dram):
    return {"status": "ok", "check": {"passed": True}, "timing": _timing(ms), "x_gemm": ms / gemm_ms,
            "kernels": {"kernels": kernels}, "details": {}, "dram": {"bytes": dram} if dram is not None else
            {"error": "not measured: --no-ncu"}}


def synthetic_record(gemm=1.0, library=2.0, graph=1.4, triton=1.1, lab=1.05, dram=True, lab_lines=300):
    """Made-up numbers with the shape of a real record (no measurement in them)."""
    size = 4096
    d = (lambda b: b) if dram else (lambda b: None)
    levels = {"library": _entry(library, gemm, 11, d(480 * MIB)), "graph_fusion": _entry(graph, gemm, 2, d(224 * MIB)),
              "triton": _entry(triton, gemm, 1, d(100 * MIB)), "lab_fused": _entry(lab, gemm, 1, d(98 * MIB))}

    def source(lines):
        return {"lines": lines, "complete": True, "pieces": [], "missing": []}

    return {"schema": 1, "provenance": {"device": "synthetic"},
            "levels": [{"name": "library", "source": source(4)}, {"name": "graph_fusion", "source": source(15)},
                       {"name": "triton", "source": source(50)}, {"name": "lab_fused", "source": source(lab_lines)}],
            "sizes": [{"M": size, "N": size, "K": size, "min_dram_bytes": checklist.min_dram_bytes(size, size, size),
                       "gemm": {"timing": _timing(gemm), "kernels": {"kernels": 1}, "dram": {"bytes": 97 * MIB}},
                       "levels": levels}]}


def _find(sentences, text):
    found = [s for s in sentences if text in s]
    assert found, f"no verdict mentions {text!r}: {sentences}"
    return found[0]


def test_verdicts_derive_their_numbers_from_the_record():
    v = checklist.verdicts(synthetic_record())
    lib = _find(v, "the library path")
    assert "launched 11 kernels" in lib and "took 2.000 ms" in lib and "2.00x the plain GEMM (1.000 ms)" in lib
    assert f"{480 * MIB / checklist.min_dram_bytes(4096, 4096, 4096):.2f}x the minimum" in lib
    gf = _find(v, "graph fusion saved")
    assert "saved 30% of the library path's time (2.000 -> 1.400 ms)" in gf
    assert f"removed {format_bytes(256 * MIB)} of DRAM traffic and 9 of 11 kernel launches" in gf
    assert "it still costs 40% over the GEMM alone" in gf
    tr = _find(v, "the Triton kernel")
    assert "removed 75% of the epilogue's cost left after graph fusion" in tr  # (1.4 - 1.1) / (1.4 - 1.0)
    assert f"and {format_bytes(124 * MIB)} of DRAM traffic" in tr
    lab = _find(v, "the lab's fused CUDA epilogue")
    assert "50.0 us" in lab and "faster than the best higher-level path (triton: 1.100 ms, 50 lines)" in lab
    assert "300 lines of code" in lab and "a measured gap, bought with 250 more lines" in lab


def test_verdicts_change_when_the_numbers_do():
    base = checklist.verdicts(synthetic_record())
    slower_graph = checklist.verdicts(synthetic_record(graph=2.1))
    assert base != slower_graph
    _find(slower_graph, "graph fusion did not measurably beat the library path (2.100 against 2.000 ms")
    close = checklist.verdicts(synthetic_record(graph=1.995))  # inside the library path's spread
    _find(close, "graph fusion did not measurably beat")
    slow_triton = checklist.verdicts(synthetic_record(triton=1.6))
    _find(slow_triton, "slower than graph fusion (1.400 ms)")
    slow_lab = checklist.verdicts(synthetic_record(lab=1.2))
    _find(slow_lab, "100.0 us per call slower than the best higher-level path (triton")
    tie = checklist.verdicts(synthetic_record(lab=1.1))
    _find(tie, "within the spread of the best higher-level path")
    assert checklist.verdicts(synthetic_record(lab_lines=900)) != base


def test_verdicts_without_dram_counters_say_so():
    v = checklist.verdicts(synthetic_record(dram=False))
    _find(v, "its DRAM traffic was not measured")
    _find(v, "it removed intermediates and 9 of 11 kernel launches (DRAM traffic not measured)")
    assert "DRAM traffic" not in _find(v, "the Triton kernel").split("graph fusion")[-1]


def test_verdicts_report_levels_that_were_not_timed():
    record = synthetic_record()
    record["sizes"][0]["levels"]["triton"] = {"status": "not available", "reason": "not available here: no triton"}
    v = checklist.verdicts(record)
    _find(v, "At 4096 x 4096 x 4096, triton was not timed: not available here: no triton.")
    assert "graph_fusion" in _find(v, "the best higher-level path (graph_fusion: 1.400 ms")


# --- kernel counts and Nsight Compute --------------------------------------------------------------------------

DOT = """digraph dot {
subgraph cluster_1 {
label="graph_1" graph[style="dashed"];
"graph_1_node_0"[style="bold" shape="record" label="{KERNEL
| {ID | 0 (topoId: 2) | cutlass_gemm\\<\\<\\<128,384,0\\>\\>\\>}
| {cooperative | 0}
}"];
"graph_1_node_1"[style="solid" shape="record" label="{
MEMSET
| {{ID | node handle} | {1 | 0x1}}
}"];
"graph_1_node_2"[style="bold" shape="record" label="{KERNEL
| {ID | 2 (topoId: 0) | lab_checklist_bias_gelu_tanh\\<\\<\\<4096,128,0\\>\\>\\>}
}"];
"graph_1_node_0" -> "graph_1_node_1";
"graph_1_node_1" -> "graph_1_node_2" [headlabel=0];
}
}
"""


def test_parse_graph_dot_counts_nodes_by_type_not_edges():
    assert checklist.parse_graph_dot(DOT) == {"KERNEL": 2, "MEMSET": 1}
    assert checklist.parse_graph_dot("digraph dot {\n}\n") == {}


NCU_CSV = """\
==PROF== Connected to process 7 (/usr/bin/python3)
==PROF== Profiling "gemm" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Metric Name","Metric Unit","Metric Value"
"0","7","python3","h","sm90_gemm","1","7","dram__bytes_read.sum","Mbyte","67.11"
"0","7","python3","h","sm90_gemm","1","7","dram__bytes_write.sum","Mbyte","33.55"
"1","7","python3","h","lab_checklist_bias_gelu_tanh","1","7","dram__bytes_read.sum","Mbyte","33.56"
"1","7","python3","h","lab_checklist_bias_gelu_tanh","1","7","dram__bytes_write.sum","Kbyte","33,554.43"
"""


def test_parse_ncu_results_and_their_sum():
    results = checklist.parse_ncu_results(NCU_CSV)
    assert [r["name"] for r in results] == ["sm90_gemm", "lab_checklist_bias_gelu_tanh"]
    assert results[1]["dram_write_bytes"] == pytest.approx(33_554.43e3)
    got = checklist.summarize_dram(results, "kernel")
    assert got["read_bytes"] == pytest.approx(67.11e6 + 33.56e6)
    assert got["bytes"] == pytest.approx(67.11e6 + 33.55e6 + 33.56e6 + 33_554.43e3)
    assert got["kernels"] == 2
    assert "kernels" not in checklist.summarize_dram(results, "range"), "a range is one result, not one kernel"
    assert checklist.parse_ncu_results("==ERROR== no kernels were profiled\n") == []


def test_ncu_command_profiles_only_the_nvtx_range():
    job = {"level": "triton", "M": 8, "N": 8, "K": 8, "config": {"BLOCK_M": 128}}
    cmd = checklist.ncu_command("/x/ncu", job)
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--nvtx-include") + 1] == checklist.NVTX_RANGE + "/" and "--nvtx" in cmd
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(checklist.NCU_METRICS)
    assert "--replay-mode" not in cmd
    assert cmd[-4:] == ["-m", "lab.studies.checklist", "ncu-target", json.dumps(job)]
    ranged = checklist.ncu_command("/x/ncu", job, "range")
    assert ranged[ranged.index("--replay-mode") + 1] == "range"
    with pytest.raises(ValueError):
        checklist.ncu_command("/x/ncu", job, "application")


def _fake_ncu(tmp_path, body):
    script = tmp_path / "ncu"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_ncu_dram_runs_ncu_and_sums_the_kernels(tmp_path, monkeypatch):
    from lab.studies import profile

    (tmp_path / "out.txt").write_text(NCU_CSV)
    ncu = _fake_ncu(tmp_path, f'printf "%s\\n" "$@" > "{tmp_path}/argv.txt"\ncat "{tmp_path}/out.txt"\n')
    monkeypatch.setattr(profile, "find_ncu", lambda: ncu)
    got = checklist.ncu_dram("graph_fusion", 64, 64, 64)
    assert got["kernels"] == 2 and got["bytes"] == pytest.approx(67.11e6 + 33.55e6 + 33.56e6 + 33_554.43e3)
    assert "--nvtx-include" in got["command"]
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert json.loads(argv[-1]) == {"level": "graph_fusion", "M": 64, "N": 64, "K": 64, "config": None}


def test_ncu_dram_reports_absence_and_failure(tmp_path, monkeypatch):
    from lab.studies import profile

    monkeypatch.setattr(profile, "find_ncu", lambda: None)
    assert "ncu) is not installed" in checklist.ncu_dram("library", 64, 64, 64)["error"]
    ncu = _fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM" >&2\nexit 1\n')
    monkeypatch.setattr(profile, "find_ncu", lambda: ncu)
    got = checklist.ncu_dram("library", 64, 64, 64)
    assert "exit 1" in got["error"] and "ERR_NVGPUCTRPERM" in got["error"] and "bytes" not in got


def test_no_ncu_backend_says_why():
    assert checklist.CupyBackend(ncu=False).dram("library", 8, 8, 8, {}) == {"error": "not measured: --no-ncu"}


# --- on a GPU ------------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_levels_on_the_gpu():
    """The real levels at a small size: checked, timed, their kernels counted from a CUDA graph."""
    backend = checklist.CupyBackend(min_time_ms=2.0, ncu=False)
    record = checklist.measure_levels([512], backend=backend)
    json.dumps(record)
    size = record["sizes"][0]
    lib, gf = size["levels"]["library"], size["levels"]["graph_fusion"]
    assert lib["status"] == "ok" and gf["status"] == "ok", (lib, gf)
    # CuPy refuses cuBLAS inside a capture (CuPy 14): the library level's count is then left to Nsight Compute, and
    # says why; where it is counted, it launches more kernels than graph fusion.
    if lib["kernels"]["kernels"] is None:
        assert "stream capture" in lib["kernels"]["error"], lib["kernels"]
    else:
        assert lib["kernels"]["kernels"] > (gf["kernels"]["kernels"] or 1), (lib["kernels"], gf["kernels"])
    if library_gemm.lt_unavailable() is None:  # cuBLASLt takes the stream as an argument, so it is captured
        gemm_kernels = size["gemm"]["kernels"]["kernels"]
        assert gemm_kernels is not None and gemm_kernels >= 1, size["gemm"]["kernels"]
        assert gf["kernels"]["kernels"] == gemm_kernels + 1, "graph fusion adds one elementwise kernel to the GEMM"
    else:  # cublasGemmEx through CuPy: refused like the library level
        assert "stream capture" in size["gemm"]["kernels"]["error"], size["gemm"]["kernels"]
    triton = size["levels"]["triton"]
    if triton["status"] == "ok":
        assert triton["kernels"]["kernels"] == 1 and triton["details"]["autotune_winner"]["BLOCK_M"] > 0
