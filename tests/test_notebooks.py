"""The notebooks execute without a GPU (replay mode) and their .ipynb files match their .py twins.

Replay mode is forced (LAB_NOTEBOOK_MODE=replay), so these tests behave the same on a GPU machine.
Three sources of replayed records:
- the committed reference records (results/h200/), whatever is there: the normal case once they are
  recorded; while they are absent the notebooks must still run and say so;
- none at all (an empty folder): every measurement cell must say so instead of failing;
- SYNTHETIC records written into pytest's tmp_path by this file: they exercise every plotting and
  ratio cell before real records exist. They are test data only, never written under results/.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
SCRIPT = REPO / "scripts" / "execute_notebooks.py"
# The family whose records each notebook replays first (its banner names it; "NO RECORDS for" it when absent).
# Notebook 04 replays JSON payloads, not a family's records; it names its first payload the same way.
# Notebooks 05-08 replay several families (05 its studies too, 06 the checklist study, 08 lab.ops's studies);
# FUSION_FILES lists them all.
FAMILY = {"00_setup_and_method": "copy", "01_memory_bound": "copy", "02_gemm_fp32": "gemm_fp32",
          "03_tensor_cores": "gemm_tc", "04_scheduling": "schedule_orders",
          "05_split_k_decode_grouped": "split_k_factors", "06_epilogue_fusion": "gemm_tc_epilogue",
          "07_softmax_and_norms": "softmax", "08_specialization_and_dispatch": "ops_trace",
          "09_attention": "attention"}
FUSION_FILES = {"05_split_k_decode_grouped": ("split_k_factors", "gemm_split_k", "split_k_ncu", "decode",
                                              "grouped_gemm", "grouped_table_cost", "copy", "gemm_tc"),
                "06_epilogue_fusion": ("gemm_tc_epilogue", "gemm_fp32_epilogue", "checklist"),
                "07_softmax_and_norms": ("softmax", "rmsnorm", "layernorm"),
                "08_specialization_and_dispatch": ("ops_trace", "ops_tune", "ops_latency", "ops_overhead",
                                                   "ops_trace_gemms")}

pytest.importorskip("nbclient", reason="nbclient is not installed: pip install -e '.[test]'")
pytest.importorskip("jupytext", reason="jupytext is not installed: pip install -e '.[test]'")


def _schedule_payloads():
    """tests/test_schedule_plots.py's synthetic scheduling payloads (one source of that test data)."""
    return _test_module("test_schedule_plots")


def _fusion_records():
    """tests/test_lessons_fusion.py's synthetic epilogue, row-ladder and checklist records (notebooks 06 and 07)."""
    return _test_module("test_lessons_fusion")


def _test_module(name: str):
    """Another test file of this folder, imported once by path (its synthetic-data writers are shared)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _script():
    spec = importlib.util.spec_from_file_location("execute_notebooks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["execute_notebooks"] = module
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------------------------
# Synthetic reference records (test data; shaped like lab.measure.records files, values made up)
# ----------------------------------------------------------------------------------------------

SYNTHETIC_L2 = 50 * 2**20
SYNTHETIC_PROVENANCE = {
    "device": "SYNTHETIC TEST DATA (not a measurement)", "arch": "sm_90", "sm_count": 132,
    "l2_bytes": SYNTHETIC_L2, "driver_cuda": "13.0", "runtime_cuda": "13.0", "cupy": "0", "numpy": "0",
    "nvrtc": "13.0", "lab": "0", "commit": "synthetic", "date": "2000-01-01T00:00:00+00:00", "host": "pytest",
    "python": "3",
}
# Fractions of the synthetic ceiling per target: shapes of curves, not results.
_FACTORS = {
    "copy": {"01_naive": 0.9, "02_grid_stride": 0.91, "03_vectorized": 0.95, "04_unrolled": 0.99},
    "transpose": {"cupy_transpose": 0.6, "01_naive": 0.4, "02_smem_tiled": 0.7, "03_padded": 0.9,
                  "04_swizzled": 0.9, "05_sector_aligned": 0.88},
}


def _synthetic_gbs(bytes_moved: int, l2: str, rng: random.Random) -> float:
    hbm, cache, launch_s = 4000.0, 9000.0, 3e-6
    peak = cache if l2 == "warm" and bytes_moved <= SYNTHETIC_L2 else hbm
    return bytes_moved / (bytes_moved / (peak * 1e9) + launch_s) / 1e9 * rng.uniform(0.98, 1.02)


def _synthetic_records(family: str, rng: random.Random) -> list[dict]:
    from lab.families import get_family

    fam = get_family(family)
    jobs = [("headline", p, "cold") for p in fam.headline_params()]
    jobs += [("sweep", p, l2) for p in fam.sweep_params(1 << 32) for l2 in ("cold", "warm")]
    jobs += [("tail", p, "warm") for p in fam.tail_params()]
    out = []
    for kind, params, l2 in jobs:
        if family == "copy":
            params = {"n": params["n"], "x_offset": 0, "y_offset": 0}
            bytes_moved = 8 * params["n"]
        else:
            bytes_moved = 8 * params["rows"] * params["cols"]
        ceiling = _synthetic_gbs(bytes_moved, l2, rng)
        for target, factor in [(fam.ceiling_name, 1.0), *_FACTORS[family].items()]:
            value = ceiling * factor * (rng.uniform(0.97, 1.0) if target != fam.ceiling_name else 1.0)
            if kind == "tail" and target != fam.ceiling_name and params.get("n", 0) % 4:
                value *= 0.97  # a small sawtooth for the tail plot to show
            median_ms = bytes_moved / (value * 1e9) * 1e3
            out.append({"family": family, "rung": target, "kind": kind, "params": params,
                        "bytes_moved": bytes_moved, "l2": l2, "median_ms": median_ms,
                        "p10_ms": median_ms * 0.99, "p90_ms": median_ms * 1.03, "reps": 100,
                        "metric": "GB/s", "value": value, "ceiling": fam.ceiling_name,
                        "ceiling_value": ceiling, "extra": {}})
    return out


# GEMM: fractions of a synthetic cuBLAS curve per rung, and DRAM bytes per rung as multiples of the
# minimum. Shapes of curves, not results.
_GEMM_FACTORS = {"01_naive": 0.008, "02_coalesced": 0.07, "03_smem_tiled": 0.09, "04_register_tile_1d": 0.22,
                 "05_register_tile_2d": 0.4, "06_vectorized": 0.6, "07_warp_tiled": 0.75, "08_multistage": 0.85}
_GEMM_DRAM = {"01_naive": 20.0, "02_coalesced": 8.0, "03_smem_tiled": 3.0, "04_register_tile_1d": 2.0,
              "05_register_tile_2d": 1.3, "06_vectorized": 1.3, "07_warp_tiled": 1.3, "08_multistage": 1.2}


def _synthetic_gemm_records(rng: random.Random) -> list[dict]:
    from lab.families import get_family

    fam = get_family("gemm_fp32")
    jobs = [("headline", p, "cold") for p in fam.headline_params()]
    jobs += [("sweep", p, l2) for p in fam.sweep_params() for l2 in ("cold", "warm")]
    jobs += [("tail", p, "warm") for p in fam.tail_params()]
    out = []
    for kind, shape, l2 in jobs:
        M, N, K = shape["M"], shape["N"], shape["K"]
        params = {"M": M, "N": N, "K": K, "alpha": 1.0, "beta": 0.0, "pad": 0, "lda": K, "ldb": N, "ldc": N}
        flops, bytes_moved = 2 * M * N * K, 4 * (M * K + K * N + M * N)
        side = (M * N * K) ** (1 / 3)
        ceiling = 50.0 * side**3 / (side**3 + 1024**3)
        targets = [(fam.ceiling_name, 1.0)] + [(r.key, _GEMM_FACTORS[r.key]) for r in fam.rungs_for(kind, shape)]
        for target, factor in targets:
            value = ceiling * factor * (rng.uniform(0.97, 1.0) if target != fam.ceiling_name else 1.0)
            if target in fam.VEC_RUNGS and N % 4:
                value *= 0.8  # the scalar path: a sawtooth for the tail plot to show
            median_ms = flops / (value * 1e12) * 1e3
            out.append({"family": "gemm_fp32", "rung": target, "kind": kind, "params": params,
                        "bytes_moved": bytes_moved, "l2": l2, "median_ms": median_ms,
                        "p10_ms": median_ms * 0.99, "p90_ms": median_ms * 1.02, "reps": 20,
                        "metric": "TFLOP/s", "value": value, "ceiling": fam.ceiling_name,
                        "ceiling_value": ceiling, "extra": {}})
    return out


def _synthetic_gemm_tc_records(rng: random.Random) -> list[dict]:
    """gemm_tc records of every kind for every rung the family has (so rungs added later are covered too): each
    rung a fixed fraction of a synthetic cuBLAS curve that grows with the rung's number, a cliff for cuBLAS and
    the element-load path of the 16-byte rungs where N is not a multiple of 8, and the launch path each record
    took (the family's launch_notes)."""
    from lab.families import get_family

    fam = get_family("gemm_tc")
    jobs = [("headline", p, "cold") for p in fam.headline_params()]
    jobs += [("sweep", p, l2) for p in fam.sweep_params() for l2 in ("cold", "warm")]
    jobs += [("tail", p, "warm") for p in fam.tail_params()]
    out = []
    for kind, shape, l2 in jobs:
        M, N, K = shape["M"], shape["N"], shape["K"]
        params = shape | {"alpha": 1.0, "beta": 0.0, "pad": 0, "lda": K, "ldb": K if shape["layout"] == "TN" else N,
                          "ldc": N}
        flops, bytes_moved = 2 * M * N * K, 2 * (M * K + K * N + M * N)
        side = (M * N * K) ** (1 / 3)
        ceiling = 700.0 * side**3 / (side**3 + 1024**3) * (1.0 if N % 8 == 0 else 0.2)
        targets = [(fam.ceiling_name, 1.0, {})]
        for r in fam.rungs_for(kind, shape):
            factor, path = min(0.9, 0.02 * 3.0 ** (r.number - 1)), "fragments from global memory"
            if r.key in fam.VEC_RUNGS:
                path = "16-byte loads" if N % 8 == 0 else "element loads"
                factor *= 1.0 if N % 8 == 0 else 0.2
            elif r.spec.min_arch >= 90:
                path = "tma"
            targets.append((r.key, factor, {"path": path}))
        for target, factor, extra in targets:
            value = ceiling * factor * (rng.uniform(0.97, 1.0) if target != fam.ceiling_name else 1.0)
            median_ms = flops / (value * 1e12) * 1e3
            out.append({"family": "gemm_tc", "rung": target, "kind": kind, "params": params,
                        "bytes_moved": bytes_moved, "l2": l2, "median_ms": median_ms,
                        "p10_ms": median_ms * 0.99, "p90_ms": median_ms * 1.02, "reps": 20,
                        "metric": "TFLOP/s", "value": value, "ceiling": fam.ceiling_name,
                        "ceiling_value": ceiling, "extra": extra})
    return out


def _synthetic_gemm_tc_profile() -> dict:
    """Bank conflicts (plain loads and ldmatrix) and DRAM bytes per gemm_tc rung: made-up values."""
    from lab.families import get_family

    fam = get_family("gemm_tc")
    params = fam.headline_params()[0]
    minimum = fam.min_dram_bytes(params)
    rows = []
    for r in fam.rungs:
        padded_or_swizzled = r.number >= 2
        rows.append({"rung": r.key, "smem_bank_conflicts_ld": 0.0, "smem_wavefronts_ld": 2.0 ** 20,
                     "smem_bank_conflicts_ldsm": 0.0 if padded_or_swizzled else 2.0 ** 24,
                     "smem_wavefronts_ldsm": 2.0 ** 25, "dram_read_bytes": 2.0 * minimum / r.number,
                     "dram_write_bytes": minimum / 4, "l2_hit_rate_pct": 60.0})
    return {"provenance": SYNTHETIC_PROVENANCE, "params": params, "rows": rows}


def write_synthetic_reference(directory: Path) -> Path:
    """Synthetic copy, transpose, gemm_fp32 and gemm_tc records and profiles, the scheduling payloads, and the fusion
    notebooks' records (epilogue GEMMs, softmax and norms, the checklist) in `directory` (never results/)."""
    directory = Path(directory)
    if directory.resolve().is_relative_to((REPO / "results").resolve()):
        raise ValueError("synthetic records must never be written under results/")
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    for family in ("copy", "transpose", "gemm_fp32"):
        records = _synthetic_gemm_records(rng) if family == "gemm_fp32" else _synthetic_records(family, rng)
        payload = {"schema": 1, "provenance": SYNTHETIC_PROVENANCE, "records": records}
        (directory / f"{family}.json").write_text(json.dumps(payload))
    conflicts = {"01_naive": 0, "02_smem_tiled": 2 ** 22, "03_padded": 0, "04_swizzled": 0}
    rows = [{"rung": k, "smem_bank_conflicts_ld": v, "smem_wavefronts_ld": v + 2 ** 17}
            for k, v in conflicts.items()]
    profile = {"provenance": SYNTHETIC_PROVENANCE, "params": {"rows": 8192, "cols": 8192}, "rows": rows}
    (directory / "transpose_profile.json").write_text(json.dumps(profile))
    minimum = 4 * 3 * 4096**2
    rows = [{"rung": k, "dram_read_bytes": 0.9 * v * minimum, "dram_write_bytes": minimum / 3,
             "l2_hit_rate_pct": 50.0} for k, v in _GEMM_DRAM.items()]
    profile = {"provenance": SYNTHETIC_PROVENANCE, "params": {"M": 4096, "N": 4096, "K": 4096}, "rows": rows}
    (directory / "gemm_fp32_profile.json").write_text(json.dumps(profile))
    payload = {"schema": 1, "provenance": SYNTHETIC_PROVENANCE, "records": _synthetic_gemm_tc_records(rng)}
    (directory / "gemm_tc.json").write_text(json.dumps(payload))
    (directory / "gemm_tc_profile.json").write_text(json.dumps(_synthetic_gemm_tc_profile()))
    _schedule_payloads().write_synthetic_payloads(directory, SYNTHETIC_PROVENANCE)
    _fusion_records().write_synthetic_fusion(directory, SYNTHETIC_PROVENANCE)
    _test_module("test_lessons_underfill").write_synthetic_underfill(directory, SYNTHETIC_PROVENANCE)
    _test_module("test_lessons_ops").write_synthetic_ops(directory, SYNTHETIC_PROVENANCE)
    _test_module("test_lessons_ops_torch").write_synthetic_ops_torch(directory, SYNTHETIC_PROVENANCE)
    _test_module("test_lessons_attention").write_synthetic_attention(directory, SYNTHETIC_PROVENANCE)
    _write_synthetic_decode_attention(directory)
    _write_synthetic_hopper_study(directory)
    _write_synthetic_hopper_tile_study(directory)
    _write_synthetic_cluster_rows(directory)
    return directory


def _write_synthetic_cluster_rows(directory: Path) -> None:
    """The cluster-rows study (lab.studies.cluster_rows_study) on its quick cases: the copy, PyTorch, the one-block
    rung, the cluster rung and one probe over three rounds, assembled as the study assembles its record."""
    from lab.studies import cluster_rows_study as study

    rng = random.Random(14)
    rows = []
    for case in study.cases(quick=True):
        shares = {"copy": 1.0, "torch": 0.6, study.PREVIOUS[case["op"]]: 0.85, study.CLUSTER_RUNG[case["op"]]: 0.94,
                  study.CLUSTER_RUNG[case["op"]][:2] + " EXCHANGE=0": 0.92}
        for rnd in range(3):
            for method, share in shares.items():
                ms = 0.13 / (share * rng.uniform(0.98, 1.02))
                rows.append({"shape": case, "method": method, "round": rnd, "median_ms": ms, "p10_ms": ms,
                             "p90_ms": ms, "GB/s": 512e6 / (ms * 1e-3) / 1e9})
    payload = study.assemble(rows, 3, [], {}, SYNTHETIC_PROVENANCE)
    (directory / study.FILENAME).write_text(json.dumps(payload))


def _write_synthetic_hopper_study(directory: Path) -> None:
    """The interleaved Hopper GEMM study (lab.studies.hopper_gemm_study): two shapes, the library calls and rungs
    06 and 09-11 over three rounds, and the fit of time against K."""
    from lab.studies import hopper_gemm_study as study

    rng = random.Random(12)
    rows = []
    for n in (4096, 3072):
        shape = {"M": n, "N": n, "K": n, "layout": "TN", "dtype": "float16"}
        for rnd in range(3):
            for method, share in (("torch_mm", 1.0), ("cublaslt", 0.99), ("06_persistent", 0.9),
                                  ("09_cluster_multicast", 0.9), ("10_tma_store", 0.97), ("11_pingpong", 0.88)):
                ms = 2 * n**3 / (700e12 * share * rng.uniform(0.98, 1.02)) * 1e3
                rows.append({"shape": shape, "method": method, "round": rnd, "median_ms": ms, "p10_ms": ms,
                             "p90_ms": ms, "TFLOP/s": 2 * n**3 / ms / 1e9})
    fixed = [{"rung": r, "M": 4096, "N": 4096, "K": [512, 1024, 2048, 4096], "median_ms": [0.05, 0.08, 0.13, 0.2],
              "fixed_us": 10.0 + i, "us_per_k_tile": 2.8 - 0.01 * i}
             for i, r in enumerate(("06_persistent", "09_cluster_multicast", "10_tma_store", "11_pingpong"))]
    payload = {"provenance": SYNTHETIC_PROVENANCE, "rounds": 3, "cluster_slots": 66, "rows": rows,
               "summary": study.summarize(rows), "failed": [], "fixed_cost": fixed}
    (directory / "hopper_gemm_study.json").write_text(json.dumps(payload))


def _write_synthetic_hopper_tile_study(directory: Path) -> None:
    """The tile study (lab.studies.hopper_tile_study): two shapes, the library calls and rung 10's builds over three
    rounds, assembled as the study assembles its record."""
    from lab.studies import hopper_tile_study as study

    rng = random.Random(13)
    rows, shapes = [], [{"M": n, "N": n, "K": n, "layout": "TN", "dtype": "float16"} for n in (4096, 3072)]
    for shape in shapes:
        for rnd in range(3):
            for method, share in (("torch_mm", 1.0), ("cublaslt", 0.99), (study.build_name(256), 0.97),
                                  (study.build_name(192), 0.93), (study.build_name(128), 0.9)):
                ms = 2 * shape["M"] ** 3 / (700e12 * share * rng.uniform(0.98, 1.02)) * 1e3
                rows.append({"shape": shape, "method": method, "round": rnd, "median_ms": ms, "p10_ms": ms,
                             "p90_ms": ms, "TFLOP/s": 2 * shape["M"] ** 3 / ms / 1e9})
    payload = study.assemble(rows, shapes, 66, 3, [], SYNTHETIC_PROVENANCE)
    (directory / "hopper_tile_study.json").write_text(json.dumps(payload))


def _write_synthetic_decode_attention(directory: Path) -> None:
    """Decode-attention headline records: each rung and the baseline a share of a synthetic 4 TB/s step, with the
    grid a launch records in its notes."""
    from lab.families import get_family

    fam = get_family("attention_decode")
    rng = random.Random(11)
    rows = []
    for params in fam.headline_params():
        bytes_moved = fam.min_dram_bytes(params)
        shares = {"torch_sdpa": 1.0} | {r.key: rng.uniform(0.2, 1.0) for r in fam.rungs_for("headline", params)}
        for rung, share in shares.items():
            value = 4000.0 * share
            median_ms = bytes_moved / (value * 1e9) * 1e3
            grid = list(fam.grid(fam.rung(rung), params)) if rung != "torch_sdpa" else None
            rows.append({"family": fam.name, "rung": rung, "kind": "headline", "params": params,
                         "bytes_moved": bytes_moved, "l2": "cold", "median_ms": median_ms, "p10_ms": median_ms * 0.99,
                         "p90_ms": median_ms * 1.03, "reps": 100, "metric": "GB/s", "value": value,
                         "ceiling": "torch_sdpa", "ceiling_value": 4000.0, "extra": {"grid": grid} if grid else {}})
    payload = {"schema": 1, "provenance": SYNTHETIC_PROVENANCE, "records": rows}
    (directory / "attention_decode.json").write_text(json.dumps(payload))


def test_synthetic_reference_loads_as_records(tmp_path):
    from lab.measure import records

    write_synthetic_reference(tmp_path)
    rs = records.load(tmp_path / "copy.json")
    assert rs.replayed and {r.kind for r in rs.records} == {"headline", "sweep", "tail"}
    assert all(math.isfinite(r.ratio) for r in rs.records)


# ----------------------------------------------------------------------------------------------
# Execution in replay mode
# ----------------------------------------------------------------------------------------------

def _execute(tmp_path: Path, reference_dir: Path | None, monkeypatch) -> dict[str, str]:
    """Execute every notebook into tmp_path; returns each notebook's outputs as one text."""
    monkeypatch.setenv("LAB_NOTEBOOK_MODE", "replay")
    monkeypatch.setenv("LAB_CHECK_FIGURES", "1")  # every figure drawn must be legible (lab.lessons.figure_check)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    if reference_dir is not None:
        monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(reference_dir))
    out_dir = tmp_path / "executed"
    failures = _script().execute_all(NOTEBOOKS, out_dir=out_dir, timeout=600)
    assert not failures, "\n".join(failures)
    texts = {}
    for path in NOTEBOOKS:
        nb = json.loads((out_dir / path.with_suffix(".ipynb").name).read_text())
        texts[path.stem] = "\n".join(_output_text(o) for c in nb["cells"] for o in c.get("outputs", []))
    return texts


def _output_text(output: dict) -> str:
    if "text" in output:
        return "".join(output["text"])
    return "".join(output.get("data", {}).get("text/plain", ""))


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS][:5] == ["00_setup_and_method.py", "01_memory_bound.py", "02_gemm_fp32.py",
                                               "03_tensor_cores.py", "04_scheduling.py"]
    assert set(FAMILY) == {p.stem for p in NOTEBOOKS}, "name the family each new notebook replays in FAMILY"


@pytest.mark.slow
def test_notebooks_execute_replaying_the_committed_reference_records(tmp_path, monkeypatch):
    """Whatever results/h200 holds: real records are replayed; if absent, the notebooks say so and go on."""
    monkeypatch.delenv("LAB_REFERENCE_RESULTS", raising=False)
    texts = _execute(tmp_path, None, monkeypatch)
    for name, text in texts.items():
        assert "REPLAY MODE" in text, f"{name} printed no replay banner"
        if not (REPO / "results" / "h200" / f"{FAMILY[name]}.json").is_file():
            assert "NO RECORDED RESULTS" in text, f"{name} did not say that the records are missing"
            assert f"NO RECORDS for {FAMILY[name]}" in text, name
    # Notebook 03 says which kinds of gemm_tc records, and whether the profile, are not recorded yet.
    tc = texts["03_tensor_cores"]
    reference = REPO / "results" / "h200" / "gemm_tc.json"
    if reference.is_file():
        kinds = {r["kind"] for r in json.loads(reference.read_text())["records"]}
        for kind in ("sweep", "tail"):
            assert (f"{kind:9s} NOT IN THESE RECORDS" in tc) == (kind not in kinds), kind
    assert ("NO PROFILE for gemm_tc" in tc) == (not (REPO / "results" / "h200" / "gemm_tc_profile.json").is_file())
    # Notebook 04 says, file by file, which of its payloads are not recorded yet.
    for stem in ("schedule_orders", "schedule_orders_ncu", "schedule_orders_fp32", "schedule_stream_k", "small_items"):
        absent = not (REPO / "results" / "h200" / f"{stem}.json").is_file()
        assert (f"NO RECORDS for {stem}:" in texts["04_scheduling"]) == absent, stem
    # Notebooks 06 and 07 likewise, file by file.
    for name, stems in FUSION_FILES.items():
        for stem in stems:
            absent = not (REPO / "results" / "h200" / f"{stem}.json").is_file()
            assert (f"NO RECORDS for {stem}:" in texts[name]) == absent, (name, stem)


@pytest.mark.slow
def test_notebooks_execute_with_no_records_at_all(tmp_path, monkeypatch):
    empty = tmp_path / "no_records"
    empty.mkdir()
    texts = _execute(tmp_path, empty, monkeypatch)
    for name, text in texts.items():
        assert "NO RECORDED RESULTS" in text and f"NO RECORDS for {FAMILY[name]}" in text, name
    assert "NO PROFILE for transpose" in texts["01_memory_bound"]
    assert "NO PROFILE for gemm_fp32" in texts["02_gemm_fp32"]
    assert "FP32 peak: unknown here" in texts["02_gemm_fp32"]
    tc = texts["03_tensor_cores"]
    assert "NO PROFILE for gemm_tc" in tc and "no knob probe" in tc and "no bound margins" in tc
    assert "ldmatrix.x4 with the rungs' row addresses delivers exactly the mma A fragment: True" in tc
    sched = texts["04_scheduling"]
    assert sched.count("NO RECORDED RESULTS") == 5 and "(nothing to plot" not in sched
    assert "wave 0 reads" in sched and "x L2" in sched and "assumed" in sched
    for name, stems in FUSION_FILES.items():  # every file named missing; what needs no records still shown
        text = texts[name]
        assert text.count("NO RECORDED RESULTS") == len(stems) and "(nothing to plot" not in text, name
        assert all(f"NO RECORDS for {stem}:" in text for stem in stems), name
    fused = texts["06_epilogue_fusion"]
    assert "fused: bias+gelu_tanh: registers" in fused and "fused: bias+gelu_tanh->int8/row" in fused
    assert "tie: round to even" in fused and "Fused epilogue prediction" in fused and "lab_tanh_approx" in fused
    assert "check cases, each on three input distributions" in fused and "+ one pass" in fused
    dispatch = texts["08_specialization_and_dispatch"]  # section 11 names each of its records missing, with its command
    for stem in ("ops_sweep", "ops_host_cost", "ops_vs_torch_llama3_8b_float16", "rowops_study"):
        assert f"NO RECORDS for {stem}:" in dispatch, stem
    assert "lab tune --table --out" in dispatch and "python -m lab.studies.rowops_study" in dispatch
    rows = texts["07_softmax_and_norms"]
    assert "relative difference" in rows and "E[x^2] - E[x]^2 in fp32" in rows and "| all -inf | all NaN |" in rows
    assert "build every rung from the same files" in rows and "What changed" in rows
    assert "NO RECORDS for cluster_rows_study:" in rows and "EXCHANGE=1 st.async+mbarrier" in rows


@pytest.mark.slow
def test_notebooks_execute_on_synthetic_records(tmp_path, monkeypatch):
    reference = write_synthetic_reference(tmp_path / "synthetic")
    texts = _execute(tmp_path, reference, monkeypatch)
    for name, text in texts.items():
        assert "REPLAYED from SYNTHETIC TEST DATA" in text, name
        assert "NO RECORDS for" not in text and "NO PROFILE for" not in text, name
    assert "smem_bank_conflicts_ld" in texts["01_memory_bound"]
    gemm = texts["02_gemm_fp32"]
    assert "FP32 peak" in gemm and "datasheet boost clock" in gemm
    assert "the prediction's ranges against the records" in gemm and "the minimum" in gemm
    assert "FFMA per LDS instruction" in gemm
    tc = texts["03_tensor_cores"]
    assert "NOT IN THESE RECORDS" not in tc and "(nothing to plot" not in tc
    assert "smem_bank_conflicts_ldsm" in tc and "HMMA per ldmatrix" in tc and "| total / minimum |" in tc
    assert "launch paths, tail records" in tc and "element loads" in tc
    assert "tail sizes by N mod 8" in tc and "is faster than cublas_gemm at" in tc
    assert "against the rung before (same rounds)" in tc and "11_pingpong" in tc and "waves" in tc
    sched = texts["04_scheduling"]
    assert "(nothing to plot" not in sched and sched.count("REPLAYED from SYNTHETIC TEST DATA") >= 5
    assert "the fastest order is" in sched and "its DRAM reads:" in sched and "06 / 05 per round" in sched
    assert "wave-quantized: 07 / 06" in sched and "output elements differ" in sched
    assert "faster per item than one launch per item" in sched and "wave boundaries in the sweep" in sched
    for name in FUSION_FILES:
        assert "(nothing to plot" not in texts[name], name
    fused = texts["06_epilogue_fusion"]
    assert fused.count("REPLAYED from SYNTHETIC TEST DATA") >= 3 and "one extra pass over C" in fused
    assert "fused / plain = " in fused and "cupy_ops / fused = " in fused and "target <= 1.05: met" in fused
    assert "fused int8 time / fused fp16 time" in fused and "cold L2: 1024^3" in fused
    assert "x the minimum" in fused and "library / lab_fused:" in fused and "the lab's fused CUDA epilogue" in fused
    assert "the plain time, measured" in fused
    dispatch = texts["08_specialization_and_dispatch"]
    assert "held against the runtime's targets" in dispatch and "only the single call after idle varied" in dispatch
    rows = texts["07_softmax_and_norms"]
    assert rows.count("of the device copy -> target >= 0.9") >= 3 and rows.count("problems; the lowest") == 3
    assert rows.count("tail sizes by n mod 8") == 3 and "launch paths, tail records" in rows
    assert "measured" in rows and "the range" in rows
    assert "the cluster rung's speed over PyTorch's" in rows and "Reached by the cluster rung on" in rows


# ----------------------------------------------------------------------------------------------
# The .ipynb files are the .py twins' cells
# ----------------------------------------------------------------------------------------------

def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_ipynb_cells_match_the_py_twin(py):
    import jupytext

    ipynb = REPO / "notebooks" / py.with_suffix(".ipynb").name
    assert ipynb.is_file(), f"{ipynb.name} is missing: run `jupytext --to ipynb {py.relative_to(REPO)}`"
    text_nb = jupytext.read(py)
    json_nb = jupytext.read(ipynb)
    assert _cells(json_nb) == _cells(text_nb), (
        f"{ipynb.name} and {py.name} differ: edit the .py, then `python scripts/execute_notebooks.py --sync`")
    formats = json_nb.metadata.get("jupytext", {}).get("formats", "")
    assert "py:percent" in formats and "ipynb" in formats, f"{ipynb.name} is not paired with its .py twin"


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_markdown_types_in_no_measured_numbers(py):
    """Prose may not quote figures: anything like '4.3 TB/s' or '0.93x' must be computed in a cell."""
    import re

    import jupytext

    pattern = re.compile(r"\d[\d.,]*\s*(?:[TGM]B/s|TFLOP/s|GFLOP/s|x\b|%)")
    for cell in jupytext.read(py).cells:
        if cell.cell_type == "markdown":
            found = pattern.findall(cell.source)
            assert not found, f"{py.name}: markdown types in {found}; compute it in a code cell instead"


# ----------------------------------------------------------------------------------------------
# Saved outputs: current, dated, and never "now"
# ----------------------------------------------------------------------------------------------

def _saved_output_text(ipynb: Path) -> str:
    nb = json.loads(ipynb.read_text())
    return "\n".join(_output_text(o) for c in nb["cells"] for o in c.get("outputs", []))


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_saved_outputs_are_newer_than_every_input(py):
    """A notebook's saved outputs were made from the notebook, kernels, families and lessons as they are now: a change
    to any of them (scripts/execute_notebooks.py's notebook_inputs) makes them stale until it is executed again."""
    ipynb = REPO / "notebooks" / py.with_suffix(".ipynb").name
    if not _saved_output_text(ipynb).strip():
        return  # no outputs saved: nothing that could be stale
    run = json.loads(ipynb.read_text()).get("metadata", {}).get(_script().RUN_KEY)
    assert run, f"{ipynb.name} has outputs but no record of the run that made them: execute it again"
    stale = _script().stale_inputs(py, ipynb)
    assert not stale, (
        f"{ipynb.name}'s outputs (made at {run['commit'][:12]}, {run['date']}, {run['mode']}) predate a change to "
        f"{', '.join(stale[:6])}{' and more' if len(stale) > 6 else ''}: execute it again "
        f"(`python scripts/execute_notebooks.py {py.relative_to(REPO)} --inplace`, on a GPU for live outputs)")


def test_a_notebooks_lessons_inputs_are_the_modules_it_imports():
    """Only the lessons modules a notebook imports (and theirs, at any depth) are its inputs: notebook 05's are the
    package __init__, the underfill package and what they import, never notebook 08's ops_* modules; a relative
    import inside the layer is followed too."""
    script = _script()
    lessons = REPO / "lab" / "lessons"
    code = "from lab.lessons import underfill as lesson\nfrom lab.lessons.plots import underfill"
    found = script.lessons_imported(code)
    names = {str(f.relative_to(lessons)) for f in found}
    assert {"__init__.py", "underfill/__init__.py", "underfill/decode.py", "plots/__init__.py", "plots/underfill.py",
            "plots/style.py", "common.py"} <= names, sorted(names)
    assert not any(n.startswith("ops") for n in names), sorted(names)
    assert script.lessons_imported("import numpy as np\n%matplotlib inline") == set()
    inside = script.lessons_imported("def f():\n    from lab.lessons import ops_latency\n")
    assert lessons / "ops_latency.py" in inside and lessons / "__init__.py" in inside


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_saved_outputs_say_when_they_were_made_and_never_now(py):
    import re

    ipynb = REPO / "notebooks" / py.with_suffix(".ipynb").name
    text = _saved_output_text(ipynb)
    if not text.strip():
        return
    found = re.findall(r"[^\n]*\b(?:measured now|right now|measuring now)\b[^\n]*", text, flags=re.IGNORECASE)
    assert not found, f"{ipynb.name}'s saved outputs say 'now': {found[:3]}"
    assert "MEASURED IN THIS RUN on" in text or "REPLAY MODE" in text, f"{ipynb.name} says neither where nor when"


def test_sync_keeps_outputs_only_on_unchanged_code_cells():
    import nbformat

    saved = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("a = 1", outputs=[nbformat.v4.new_output("stream", text="one")]),
        nbformat.v4.new_code_cell("print(2)", outputs=[nbformat.v4.new_output("stream", text="two")]),
    ], metadata={_script().RUN_KEY: {"commit": "abc"}})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("a new heading"),
        nbformat.v4.new_code_cell("print(3)"),  # changed where "print(2)" stood: no output may move onto it
        nbformat.v4.new_code_cell("a = 1"),
    ])
    got = _script().keep_unchanged_outputs(nb, saved)
    assert [c.get("outputs") for c in got.cells if c.cell_type == "code"] == [[], saved.cells[0].outputs]
    assert got.metadata[_script().RUN_KEY] == {"commit": "abc"}


def test_sync_keeps_an_unchanged_cells_id_and_metadata_so_an_unchanged_notebook_is_not_rewritten():
    import nbformat

    saved = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# title"),
                                            nbformat.v4.new_code_cell("a = 1"), nbformat.v4.new_code_cell("b = 2")])
    saved.cells[1].metadata = {"execution": {"iopub.execute_input": "2026-12-02T00:00:00Z"}}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# title"), nbformat.v4.new_code_cell("a = 1"),
                                         nbformat.v4.new_code_cell("b = 3")])
    fresh_id = nb.cells[2].id
    got = _script().keep_unchanged_outputs(nb, saved)
    assert [c.id for c in got.cells[:2]] == [c.id for c in saved.cells[:2]]
    assert got.cells[1].metadata == saved.cells[1].metadata
    assert got.cells[2].id == fresh_id != saved.cells[2].id  # a changed cell keeps nothing of the old one
