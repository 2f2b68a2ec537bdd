"""lab.lessons.ops (notebook 08: specialization and dispatch) and its figures in lab.lessons.plots, on synthetic
records.
CPU only.

The writers below (write_synthetic_ops) build records with the structure lab.studies.ops_study writes (ops_trace.json,
ops_tune.json, ops_latency.json, ops_overhead.json), from the real trace (lab.studies.serving_trace) and the real
dispatch
table, with made-up times; tests/test_notebooks.py's synthetic replay can use them too. Never written under results/.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from lab.lessons import (
    Mode,  # noqa: E402
    ops_records,  # noqa: E402
    plots,  # noqa: E402
)
from lab.lessons import ops as lesson  # noqa: E402
from lab.ops import rules  # noqa: E402
from lab.ops.shapes import GemmShape, bucket, family, m_bucket  # noqa: E402
from lab.studies import ops_study
from lab.studies import serving_trace as st  # noqa: E402

PROVENANCE = {"device": "SYNTHETIC TEST DATA (not a measurement)", "arch": "sm_90", "sm_count": 132,
              "l2_bytes": 50 * 2**20, "date": "2000-01-01T00:00:00+00:00", "commit": "synthetic"}
REPLAY = Mode(False, "no GPU here (test)")
REPO = Path(__file__).resolve().parent.parent
ARCH, SMS = 90, 132

# Made-up speeds (shapes of curves, not results): one GEMM's time from its bytes and flops, and each method as a
# multiple of lab.ops's time.
FAKE_TFLOPS, FAKE_TBS, FAKE_LAUNCH_US = 600.0, 4.0, 3.0
FACTORS = {"lab_ops": 1.0, "cublas": 1.2, "generic": 1.6, "persistent": 1.35, "lab_ops_table": 1.04}
BOUNDARY = {"decode": (40.0, 4.0), "persistent": (70.0, 0.0), "split_k": (80.0, 0.0), "cublas": (60.0, 0.5)}


def gemm_us(m: int, n: int, k: int) -> float:
    flops_us = 2 * m * n * k / (FAKE_TFLOPS * 1e12) * 1e6
    bytes_us = 2 * (n * k + m * k + m * n) / (FAKE_TBS * 1e12) * 1e6
    return max(flops_us, bytes_us) + FAKE_LAUNCH_US


def step_us(m: int) -> float:
    return sum(gemm_us(m, n, k) for _, n, k, _ in st.GEMMS) + 2 * FAKE_LAUNCH_US


# ----------------------------------------------------------------------------------------------
# Synthetic records (lab.studies.ops_study's structure)
# ----------------------------------------------------------------------------------------------

def _trace_steps(steps: int = ops_study.TRACE_STEPS) -> list:
    return st.make_trace(ops_study.TRACE_SEED, steps)


def _decisions(steps: list) -> list[dict]:
    """As serving_trace.decisions_table writes them: the real table's choice (via the lesson's own evaluation),
    'tuned' for the decode buckets, as a tune cache would have them."""
    rows = []
    for m in sorted({s.M for s in steps}):
        for name, n, k, epi in st.GEMMS:
            shape = GemmShape(m, n, k, "float16", "TN", True, epi, SMS)
            path, config, source = lesson.table_decision(rules.DEFAULT, shape, ARCH)
            rows.append({"M": m, "gemm": name, "family": family(shape), "bucket": bucket(shape), "path": path,
                         "config": config, "source": "tuned" if m <= 8 else source})
    return rows


def synthetic_trace(provenance: dict = PROVENANCE, steps: int = ops_study.TRACE_STEPS) -> dict:
    trace = _trace_steps(steps)
    distinct = sorted(set(trace), key=lambda s: (s.kind, s.M))
    hot_m = Counter(s.M for s in trace).most_common(1)[0][0]
    times = {meth: {(s.kind, s.M): step_us(s.M) * f for s in distinct} for meth, f in FACTORS.items()}
    times["hot_forced"] = {(s.kind, s.M): times["lab_ops"][(s.kind, s.M)] if s.M == hot_m
                           else times["cublas"][(s.kind, s.M)] * 1.02 for s in distinct}
    totals = st.totals(trace, times)
    base = totals["lab_ops"]["total_us"]
    decisions = _decisions(trace)
    per_m = Counter(s.M for s in trace)
    # As lab.ops counts a run whose every shape and address was seen before: a replayed call counts as a replay only;
    # a cuBLAS call (nothing to replay) goes through the runtime, which counts its path.
    paths = Counter({"rmsnorm:kernel": 2 * len(trace)})
    for d in decisions:
        if d["path"] == "cublas":
            paths["matmul:cublas"] += per_m[d["M"]]
    counters = {"counts": {"calls": 7 * len(trace), "replays": 7 * len(trace) - paths["matmul:cublas"]},
                "paths": dict(paths), "fallbacks": {}, "families": {}, "compiles": {}, "pid": 1, "since": 0.0}
    checks = [{"M": d["M"], "N": n, "K": k, "gemm": d["gemm"], "epilogue": epi, "bad": 0, "path": d["path"]}
              for d, (_, n, k, epi) in zip(decisions, [g for _ in range(len(decisions) // 5) for g in st.GEMMS],
                                           strict=True)]
    boundary = {"gemm": "qkv", "N": st.QKV, "K": st.HIDDEN, "M": list(ops_study.BOUNDARY_M),
                "us": {p: [round(a + b * m, 3) for m in ops_study.BOUNDARY_M] for p, (a, b) in BOUNDARY.items()}}
    boundary["us"]["split_k"][0] = None  # a path that could not serve one M (the study writes None)
    per_step = [{"kind": kind, "M": m, **{meth: round(times[meth][(kind, m)], 3) for meth in times}}
                for (kind, m) in sorted(times["lab_ops"])]
    return {"provenance": provenance,
            "trace": {"seed": ops_study.TRACE_SEED, **st.summarize(trace)},
            "model": {"hidden": st.HIDDEN, "intermediate": st.INTERMEDIATE, "qkv": st.QKV, "gemms": st.GEMMS},
            "methods": {"lab_ops": "lab.ops, tuned (its tune cache)", "lab_ops_table": "lab.ops, its table alone",
                        "cublas": "cuBLAS + one CuPy elementwise kernel per epilogue, CuPy rmsnorm",
                        "generic": "gemm_tc rung 03 for every GEMM, epilogue after",
                        "persistent": "gemm_tc rung 06 (128x256) for every GEMM, epilogue fused",
                        "hot_forced": "the hot shape's choice everywhere: decode {}"},
            "totals_us": totals, "time_over_lab_ops": {m: round(t["total_us"] / base, 4) for m, t in totals.items()},
            "per_step_us": per_step, "decisions": decisions, "counters": counters, "checks": checks,
            "checks_failed": 0, "hot_M": hot_m, "boundary": boundary}


def synthetic_tune(provenance: dict = PROVENANCE) -> dict:
    from lab.ops.tune import candidates

    seen, rows = set(), []
    for m in sorted({s.M for s in _trace_steps()}):
        for _, n, k, epi in st.GEMMS:
            shape = GemmShape(m, n, k, "float16", "TN", True, epi, SMS)
            if bucket(shape) in seen:
                continue
            seen.add(bucket(shape))
            top = m_bucket(m)
            cands = []
            paths = candidates(GemmShape(top, n, k, "float16", "TN", True, epi, SMS), ARCH)
            for i, (path, config) in enumerate(paths):
                if path == "split_k" and top == 2:
                    cands.append({"path": path, "config": config, "rejected": "3 of 12288 elements outside the bound"})
                else:  # a different winner as M grows
                    slower = 1 + 0.1 * ((i + top.bit_length()) % len(paths))
                    cands.append({"path": path, "config": config, "us": round(gemm_us(top, n, k) * slower, 3)})
            best = min((c for c in cands if "us" in c), key=lambda c: c["us"])
            rows.append({"bucket": bucket(shape), "M": m, "path": best["path"], "config": best["config"],
                         "us": best["us"], "tuned_M": top, "candidates": cands, "seconds": 1.5,
                         "tuned_at": "2000-01-01T00:00:00+00:00"})
    return {"provenance": provenance, "buckets": rows, "wins": dict(Counter(r["path"] for r in rows)),
            "seconds": 1.5 * len(rows), "environment": "SYNTHETIC sm_90 nvrtc 0 driver 0 kernels synthetic"}


def _latency_child(first_ms: float, compiled: int, warm: dict | None) -> dict:
    before_first = compiled + (warm or {}).get("compiled", 0)
    return {"requests": 200, "first_ms": first_ms, "p50_ms": 0.4, "p99_ms": 0.9, "max_ms": first_ms,
            "process_start_to_first_result_s": 2.5 + first_ms / 1e3 + (warm or {}).get("seconds", 0),
            "compiles_total": {"compiled": before_first, "cache_hits": 3, "compile_ms": 900.0 * before_first},
            "compiles_before_requests": {"compiled": (warm or {}).get("compiled", 0)},
            "compiles_by_first_request": {"compiled": compiled, "cache_hits": 3}, "warmup": warm, "max_M": 512,
            "first_request_M": 1}


def synthetic_latency(provenance: dict = PROVENANCE, warm_first_ms: float = 12.0, warm_compiled: int = 0) -> dict:
    scenarios = {"empty_caches": _latency_child(4000.0, 6, None),
                 "warm_caches": _latency_child(warm_first_ms, warm_compiled, None),
                 "empty_caches_with_manifest": _latency_child(11.0, 0, {"shapes": 60, "seconds": 6.5, "compiled": 6,
                                                                        "from_disk": 0})}
    return {"provenance": provenance, "requests": 200, "manifest_shapes": 60, "scenarios": scenarios}


def synthetic_overhead(provenance: dict = PROVENANCE, overhead: float = 1.5) -> dict:
    def timed(median: float) -> dict:
        return {"median": median, "min": median * 0.97, "max": median * 1.1}

    paths = {}
    for path, shape, raw in (("generic", (64, 64, 64), 4.0), ("persistent", (128, 256, 64), 5.0),
                             ("decode", (1, 1024, 1024), 4.5)):
        paths[path] = {"raw_replay": timed(raw), "lab_ops": timed(raw + overhead),
                       "lab_ops_alloc": timed(raw + overhead + 2), "cupy_matmul": timed(9.0),
                       "overhead_us": overhead, "shape": dict(zip("MNK", shape, strict=True)), "launches_per_call": 1}
    return {"provenance": provenance, "calls_per_trial": 2000, "trials": 7, "paths": paths}


def synthetic_gemms_only(provenance: dict = PROVENANCE) -> dict:
    """ops_trace_gemms.json: the trace's totals less two RMSNorms per step (a fixed share of each method's time)."""
    trace = synthetic_trace(provenance)
    totals = {m: {"total_us": trace["totals_us"][m]["total_us"] * share} for m, share in (("lab_ops", 0.95),
                                                                                         ("cublas", 0.85))}
    return {"provenance": provenance, "trace": trace["trace"], "totals_us": totals,
            "cublas_over_lab_ops": totals["cublas"]["total_us"] / totals["lab_ops"]["total_us"], "per_step_us": []}


def test_gemm_share_splits_the_whole_layer_ratio():
    text = lesson.gemm_share(synthetic_gemms_only(), synthetic_trace())
    assert "on the GEMMs alone" in text and "of the whole-layer saving" in text
    assert lesson.gemm_share(None, None).startswith("NO RECORDS") or "missing" in lesson.gemm_share(None, None)


def write_synthetic_ops(directory: Path, provenance: dict = PROVENANCE) -> list[str]:
    """Every ops_*.json notebook 08 reads, in `directory` (never results/); returns the names written. The compile
    study's record is the repository's own (results/cpu), a CPU measurement."""
    directory = Path(directory)
    if directory.resolve().is_relative_to((REPO / "results").resolve()):
        raise ValueError("synthetic records must never be written under results/")
    directory.mkdir(parents=True, exist_ok=True)
    payloads = {lesson.TRACE: synthetic_trace(provenance), lesson.TUNE: synthetic_tune(provenance),
                lesson.LATENCY: synthetic_latency(provenance), lesson.OVERHEAD: synthetic_overhead(provenance),
                lesson.GEMMS_ONLY: synthetic_gemms_only(provenance)}
    for name, payload in payloads.items():
        (directory / f"{name}.json").write_text(json.dumps(payload, default=str))
    return list(payloads)


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ops_records")
    write_synthetic_ops(directory)
    return directory


@pytest.fixture
def replay_dir(synthetic_dir, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(synthetic_dir))
    return synthetic_dir


@pytest.fixture
def files(replay_dir):
    return lesson.replayed()


@pytest.fixture
def empty_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


# ----------------------------------------------------------------------------------------------
# Loading, provenance, missing records
# ----------------------------------------------------------------------------------------------

def test_synthetic_records_are_never_written_under_results():
    with pytest.raises(ValueError):
        write_synthetic_ops(REPO / "results" / "h200")


def test_records_load_replayed_with_their_provenance(files):
    for name in lesson.PAYLOADS:
        assert files[name] is not None and files[name]["replayed"], name
        assert "REPLAYED from SYNTHETIC TEST DATA" in lesson.source(files[name], name)
    text = lesson.banner(REPLAY, files)
    assert "REPLAY MODE" in text and "NO RECORDED RESULTS" not in text
    assert text.count("REPLAYED from SYNTHETIC TEST DATA") == len(lesson.PAYLOADS)


def test_missing_records_say_so_and_name_the_command(empty_dir):
    files = lesson.replayed()
    assert all(files[name] is None for name in lesson.PAYLOADS)
    text = lesson.banner(REPLAY, files)
    assert text.count("NO RECORDED RESULTS") == len(lesson.PAYLOADS)  # the compile record is the repository's
    for name in lesson.PAYLOADS:
        line = lesson.missing(name)
        assert f"NO RECORDS for {name}:" in line and "missing: run `python -m lab.studies.ops_study" in line
        assert line.splitlines()[1].startswith("missing: run ")
    trace = lesson.trace_of(None)
    assert trace.matches is None and len(trace.steps) == ops_study.TRACE_STEPS
    for fn in (lesson.decisions_by_family, lesson.hot_cold_table):
        assert f"NO RECORDS for {lesson.TRACE}" in str(fn(None, trace))
    assert f"NO RECORDS for {lesson.TRACE}" in str(lesson.counters_table(None, trace))
    for fn, name in ((lesson.decision_map, lesson.TRACE),
                     (lesson.totals_table, lesson.TRACE), (lesson.trace_targets, lesson.TRACE),
                     (lesson.speedup_reading, lesson.TRACE), (lesson.boundary_reading, lesson.TRACE),
                     (lesson.tune_table, lesson.TUNE), (lesson.tune_wins, lesson.TUNE),
                     (lesson.latency_table, lesson.LATENCY), (lesson.latency_target, lesson.LATENCY),
                     (lesson.overhead_table, lesson.OVERHEAD)):
        assert f"NO RECORDS for {name}" in str(fn(None)), fn.__name__
    assert lesson.bucket_times(None, trace) is None and f"NO RECORDS for {lesson.TRACE}" in str(lesson.time_table(None))
    checklist = str(lesson.checklist(files, trace))
    assert checklist.count("NO RECORDS for") >= 6 and "distinct M values" in checklist


def test_show_prints_the_missing_line_instead_of_a_figure(empty_dir, capsys):
    lesson.show(plots.first_request_latency, lesson.latency_rows(None), lesson.LATENCY)
    out = capsys.readouterr().out
    assert "NO RECORDS for ops_latency" in out and "(nothing to plot" not in out


def test_unreadable_record_counts_as_missing(empty_dir):
    (empty_dir / "ops_trace.json").write_text("{not json")
    (empty_dir / "ops_tune.json").write_text(json.dumps({"no": "provenance"}))
    assert lesson.load(lesson.TRACE) is None and lesson.load(lesson.TUNE) is None


def test_compile_record_missing_and_present(monkeypatch, tmp_path):
    real = lesson.load(lesson.COMPILE)
    if real is not None:  # the repository's own CPU record
        text = lesson.compile_summary(real)
        assert lesson.CPU_LABEL.upper() in text and "variants built" in text and "median" in text
        share = lesson.compile_share(real, ("attention", "attention_decode"))
        assert share.startswith("On sm_90, attention and attention_decode:") and "beside gemm_tc" in share
    monkeypatch.setattr(ops_records, "compile_record_path", lambda: tmp_path / "absent.json")
    assert lesson.load(lesson.COMPILE) is None
    line = lesson.missing(lesson.COMPILE)
    assert "NO RECORDS for compile_variants" in line and "python -m lab.studies.compile_study" in line
    assert "no GPU" in line


def test_compile_share_sums_one_arch_of_the_named_families():
    """Made-up rows (test data): two attention variants and one gemm_tc variant at sm_90, one gemm_tc at sm_80."""
    rows = [{"family": "attention", "arch": 90, "compile_s": 1.5, "entry_bytes": 2_000_000},
            {"family": "attention", "arch": 90, "compile_s": 2.5, "entry_bytes": 1_000_000},
            {"family": "gemm_tc", "arch": 90, "compile_s": 4.0, "entry_bytes": 500_000},
            {"family": "gemm_tc", "arch": 80, "compile_s": 9.0, "entry_bytes": 9_000_000}]
    text = lesson.compile_share({"rows": rows}, ("attention",))
    assert text == ("On sm_90, attention: 2 variants, 4.0 s of compiling, 3.00 MB; beside gemm_tc in the same grid: "
                    "1 variant, 4.0 s of compiling, 0.50 MB.")
    assert "no attention_decode variants for sm_80" in lesson.compile_share({"rows": rows}, ("attention_decode",), 80)
    assert "NO RECORDS" in lesson.compile_share(None, ("attention",))


def test_compile_figures_show_one_familys_series():
    """Made-up growth steps and rows (test data), one gemm_tc and one attention series: each figure holds only the
    families asked for, and its title names them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def steps(family, rung):
        return [{"family": family, "series": rung, "step": step, "variants": n, "compile_s": 0.5 * n,
                 "cache_bytes": 40_000 * n} for step, n in (("1 variant", 1), ("x dtypes", 2))]

    record = {"growth": steps("gemm_tc", "06_persistent") + steps("attention", "04_wgmma_ws"),
              "rows": [{"family": "attention", "rung": "04_wgmma_ws", "target": "sm_90a", "compile_s": 0.4,
                        "hit_s": 0.001}], "provenance": {"device": "a CPU"}}
    view = lesson.compile_view(record, ("attention",))
    assert [g["series"] for g in view["growth"]] == ["04_wgmma_ws"] * 2 and len(view["rows"]) == 1
    assert len(record["growth"]) == 4  # the record itself is left whole
    fig = lesson.compile_figure(record, ("attention", "attention_decode"))
    title = fig.axes[0].get_title()
    assert title.startswith("attention, attention_decode: compile time") and "gemm_tc" not in title
    assert [t.get_text() for t in fig.axes[0].texts] == ["1 variant", "x dtypes"]  # one series' labels
    plt.close(fig)
    strip = lesson.compile_figure(record, ("attention",), strip=True)
    assert strip.axes[0].get_title().startswith("attention: seconds per variant")
    plt.close(strip)
    assert lesson.compile_figure(None, ("attention",)) is None
    assert lesson.compile_figure(record, ("attention_decode",), strip=True) is None  # no rows of that family


def test_gpu_is_the_records_or_the_reference(files, empty_dir):
    assert lesson.gpu_of(files) == lesson.Gpu(90, 132, "the provenance of ops_trace.json")
    fallback = lesson.gpu_of({})
    assert fallback.arch == 90 and fallback.sm_count == 132 and "reference" in fallback.where


# ----------------------------------------------------------------------------------------------
# The trace
# ----------------------------------------------------------------------------------------------

def test_trace_is_regenerated_and_checked_against_the_record(files):
    trace = lesson.trace_of(files[lesson.TRACE])
    assert trace.matches is True and "matches" in trace.note
    assert len(trace.steps) == files[lesson.TRACE]["trace"]["steps"]
    changed = json.loads(json.dumps(files[lesson.TRACE]))
    changed["trace"]["decode_share"] = 0.5
    other = lesson.trace_of(changed)
    assert other.matches is False and "DOES NOT MATCH" in other.note
    summary = lesson.trace_summary(trace)
    assert "decode batch M quantiles: p50 = " in summary and "prefill steps per sequence bucket" in summary


def test_bucket_times_weigh_each_step_by_its_count(files):
    trace = lesson.trace_of(files[lesson.TRACE])
    buckets = lesson.bucket_times(files[lesson.TRACE], trace)
    assert sum(b["decode_steps"] + b["prefill_steps"] for b in buckets) == len(trace.steps)
    assert abs(sum(b["share"] for b in buckets) - 1.0) < 1e-9
    total = sum(b["us"]["lab_ops"] for b in buckets)
    assert abs(total - files[lesson.TRACE]["totals_us"]["lab_ops"]["total_us"]) < 1e-6 * total
    hot = lesson.hot_buckets(buckets)
    held = sum(b["share"] for b in hot)
    assert held >= lesson.HOT_TIME_SHARE and held - hot[-1]["share"] < lesson.HOT_TIME_SHARE  # the fewest
    assert [b["share"] for b in hot] == sorted((b["share"] for b in hot), reverse=True)
    assert "share of lab.ops time" in str(lesson.time_table(buckets))


# ----------------------------------------------------------------------------------------------
# The dispatch table and the decisions
# ----------------------------------------------------------------------------------------------

def test_rule_reasons_are_the_notes_of_each_rule():
    reasons = lesson.rule_reasons()
    assert len(reasons) == len(rules.DEFAULT.rules) and all(reasons)
    table = rules.parse({"rules": [{"when": {}, "path": "decode", "note": "one two"},
                                   {"when": {"max_m": 4}, "path": "cublas"}]}, "x")
    assert lesson.rule_reasons(table) == ["one two", ""]


def test_table_decision_is_the_runtimes(files):
    from lab.ops.dispatch import Runtime

    rt = Runtime(rules.DEFAULT)
    rt._arch = ARCH  # no GPU: the arch the lesson evaluates the table for
    trace = lesson.trace_of(files[lesson.TRACE])
    for shape, _, _ in lesson.trace_shapes(trace, lesson.gpu_of(files)):
        path, config, source = lesson.table_decision(rules.DEFAULT, shape, ARCH)
        d = rt.rule_decision(shape)
        assert (path, config) == (d.path, d.settings) and (source == "fallback") == d.source.startswith("fallback")


def test_dispatch_table_lists_every_rule_and_its_share(files):
    trace = lesson.trace_of(files[lesson.TRACE])
    text = str(lesson.dispatch_table(trace, lesson.gpu_of(files)))
    lines = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| #")]
    assert len(lines) == len(rules.DEFAULT.rules)
    assert sum(float(ln.rsplit("|", 2)[-2].strip().rstrip("%")) for ln in lines) == pytest.approx(100, abs=0.5)
    assert "`max_m=8, min_n=1024, min_k=1024`" in text and "ops_sweep.json" in text


def test_decisions_are_weighted_by_the_trace(files):
    trace = lesson.trace_of(files[lesson.TRACE])
    rows = lesson.decision_rows(files[lesson.TRACE], trace)
    assert sum(r["calls"] for r in rows) == len(st.GEMMS) * len(trace.steps)
    text = str(lesson.decisions_by_family(files[lesson.TRACE], trace))
    assert "| decode | decode |" in text and "tuned" in text
    assert "M<=1 |" in str(lesson.decision_map(files[lesson.TRACE]))
    counters = str(lesson.counters_table(files[lesson.TRACE], trace))
    decode_calls = sum(r["calls"] for r in rows if r["path"] == "decode")
    assert f"| matmul:decode | 0 | {decode_calls} |" in counters and "No shape was decided" in counters
    uncounted = sum(r["calls"] for r in rows if r["path"] != "cublas")
    assert f"{uncounted} GEMM calls are not counted per path" in counters
    assert lesson.fallback_share(files[lesson.TRACE], trace) == 0.0
    assert lesson.path_share(files[lesson.TRACE], trace, "decode") == decode_calls / sum(r["calls"] for r in rows)
    assert 0.0 < lesson.path_share(files[lesson.TRACE], trace, "cublas") < 1.0


# ----------------------------------------------------------------------------------------------
# Autotune
# ----------------------------------------------------------------------------------------------

def test_bucket_strings_parse_back():
    shape = GemmShape(5, 14336, 4096, "float16", "TN", True, "silu")
    fields = lesson.parse_bucket(bucket(shape))
    assert fields == {"M": 8, "N": 14336, "K": 4096, "dtype": "float16", "layout": "TN", "aligned": True,
                      "epilogue": "silu"}
    assert lesson.gemm_name(14336, 4096, "silu") == "gate" and lesson.parse_bucket("not a bucket") is None


def test_tune_rows_and_table(files):
    rows = lesson.tune_rows(files[lesson.TUNE])
    assert len(rows) == len(files[lesson.TUNE]["buckets"])
    for r in rows:
        assert r["winner_us"] == min(r["candidates"].values())
    rejected = [r for r in rows if r["rejected"]]
    assert rejected and all(r["m_bucket"] == 2 for r in rejected)
    text = str(lesson.tune_table(files[lesson.TUNE]))
    assert "split_k splits=0: 3 of 12288 elements outside the bound" in text and "| qkv | M<=1 |" in text
    wins = lesson.tune_wins(files[lesson.TUNE])
    assert f"{len(rows)} buckets tuned" in wins and "environment key" in wins


# ----------------------------------------------------------------------------------------------
# Latency, the trace's result, hot versus cold, the boundary, overhead
# ----------------------------------------------------------------------------------------------

def test_latency_rows_and_the_warm_target(files):
    rows = {r["scenario"]: r for r in lesson.latency_rows(files[lesson.LATENCY])}
    manifest = rows["empty_caches_with_manifest"]
    assert manifest["compiled_first"] == 6 and manifest["compiled_in_first"] == 0  # the manifest's, not the request's
    assert "the warm-cache target: MET" in lesson.latency_target(files[lesson.LATENCY])
    slow = synthetic_latency(warm_first_ms=80.0)
    assert "warm-cache target: MISSED" in lesson.latency_target(slow)
    compiling = synthetic_latency(warm_compiled=1)
    assert "(target 0: MISSED)" in lesson.latency_target(compiling)
    assert lesson.warm_target(compiling)["met"] is False
    failed = synthetic_latency()
    failed["scenarios"]["warm_caches"] = {"error": "Traceback\nRuntimeError: boom"}
    assert "not in the record (failed: RuntimeError: boom)" in lesson.latency_target(failed)
    assert "failed: RuntimeError: boom" in str(lesson.latency_table(failed))


def test_trace_targets_are_computed_from_the_ratios(files):
    text = lesson.trace_targets(files[lesson.TRACE])
    assert "generic / lab_ops = 1.60x -> target >= 1.3: met" in text
    assert "persistent / lab_ops = 1.35x -> target >= 1.3: met" in text
    assert "cublas / lab_ops = 1.20x -> target >= 1.1: met" in text
    worse = json.loads(json.dumps(files[lesson.TRACE]))
    worse["time_over_lab_ops"]["cublas"] = 1.05
    assert "target >= 1.1: MISSED" in lesson.trace_targets(worse)
    assert "0 with elements outside the bound" in str(lesson.totals_table(files[lesson.TRACE]))


def test_speedups_per_step(files):
    rows = lesson.speedup_rows(files[lesson.TRACE])
    assert len(rows) == len(files[lesson.TRACE]["per_step_us"])
    assert all(r["over_cublas"] == pytest.approx(1.2, rel=1e-3) for r in rows)
    assert "slower than cublas at 0 of" in lesson.speedup_reading(files[lesson.TRACE])


def test_hot_versus_cold(files):
    trace = lesson.trace_of(files[lesson.TRACE])
    hc = lesson.hot_cold(files[lesson.TRACE], trace)
    hot, cold = hc["groups"]["hot"], hc["groups"]["cold"]
    assert hot["hot_forced"] == pytest.approx(hot["lab_ops"]) and cold["hot_forced"] > cold["lab_ops"]
    assert hc["steps"]["hot"] + hc["steps"]["cold"] == len(trace.steps)
    assert f"M = {files[lesson.TRACE]['hot_M']}" in str(lesson.hot_cold_table(files[lesson.TRACE], trace))


def test_boundary_says_where_decode_stops_paying(files):
    text = lesson.boundary_reading(files[lesson.TRACE])
    assert "decode pays up to M = 4; from M = 6 another path is faster" in text  # 40 + 4M against 60 + M/2
    assert "sends M <= 8 to decode" in text and "past M = 6 where the sweep has another path faster" in text
    assert lesson.decode_limit(files[lesson.TRACE]) == (4, 6)
    agree = json.loads(json.dumps(files[lesson.TRACE]))
    agree["boundary"]["us"]["decode"] = [30.0 + 3.0 * m for m in agree["boundary"]["M"]]  # pays up to M = 8
    assert lesson.decode_limit(agree) == (8, 12) and "agrees with the sweep" in lesson.boundary_reading(agree)
    never = json.loads(json.dumps(files[lesson.TRACE]))
    never["boundary"]["us"]["decode"] = [500.0] * len(never["boundary"]["M"])
    assert "decode beats every other path at no M" in lesson.boundary_reading(never)


def test_boundary_names_the_first_loss_and_every_win_after_it(files):
    """A sweep where decode loses at one M and wins again later: the reading says the first M another path is faster
    (not the last win), and where decode wins again; the checklist and the table comparison agree with it."""
    dip = json.loads(json.dumps(files[lesson.TRACE]))
    ms = dip["boundary"]["M"]
    rival = [min(v[i] for p, v in dip["boundary"]["us"].items() if p != "decode" and v[i] is not None)
             for i in range(len(ms))]
    wins_at = {ms[0], ms[1], ms[3]}  # wins, wins, loses, wins again, then loses for good
    dip["boundary"]["us"]["decode"] = [r * (0.9 if m in wins_at else 1.1) for m, r in zip(ms, rival, strict=True)]
    runs = lesson.decode_runs(dip)
    assert (runs["pays_up_to"], runs["first_loss"]) == (ms[1], ms[2]) == lesson.decode_limit(dip)
    assert [m for m, _ in runs["wins_again"]] == [ms[3]] and runs["loses_again_from"] == ms[4]
    text = lesson.boundary_reading(dip)
    assert f"decode pays up to M = {ms[1]}; from M = {ms[2]} another path is faster" in text
    assert f"decode is the fastest again at M = {ms[3]}" in text and f"from M = {ms[4]} another path" in text
    assert f"pays up to M = {ms[3]}" not in text
    rows = {r[0]: r for r in lesson.checklist_rows(files | {lesson.TRACE: dip}, lesson.trace_of(dip))}
    number = rows["The specialization's boundary is measured and written down, a generic fallback behind it"][1]
    assert f"fastest up to M = {ms[1]}, slower from M = {ms[2]}, fastest again at M = {ms[3]}" in number


def test_the_h200_boundary_reading_agrees_with_its_own_numbers():
    """The reference record: decode is slower than cuBLAS at M = 12 and 16, faster again at M = 24."""
    assert (REPO / "results" / "h200" / "ops_trace.json").is_file(), "the committed ops_trace.json is missing"
    record = lesson.load(lesson.TRACE)
    assert record is not None and record.get("boundary"), "the committed ops_trace.json has no decode boundary"
    for m, ok, ratio in lesson.decode_wins(record):
        assert ok == (ratio > 1), m
    last, first_loss = lesson.decode_limit(record)
    assert all(ok for m, ok, _ in lesson.decode_wins(record) if m <= last)
    assert not next(ok for m, ok, _ in lesson.decode_wins(record) if m == first_loss)
    assert f"decode pays up to M = {last}; from M = {first_loss} another path is faster" in \
        lesson.boundary_reading(record)


def test_the_tune_loop_replays_one_bucket_and_the_table_is_held_against_it(files):
    rec = files[lesson.TUNE]
    first = rec["buckets"][0]
    assert lesson.recorded_candidates(rec, first["bucket"]) == first["candidates"]
    assert lesson.recorded_candidates(rec, "no such bucket") is None and lesson.recorded_candidates(None, "x") is None
    text = lesson.table_against_tune(rec, ARCH, SMS)
    assert f"of {len(rec['buckets'])} buckets" in text
    assert lesson.table_against_tune(None, ARCH, SMS).startswith("NO RECORDS for ops_tune")


def test_the_first_request_profile(files):
    assert "keeps no profile" in lesson.first_request_profile(files[lesson.LATENCY])
    rec = json.loads(json.dumps(files[lesson.LATENCY]))
    rec["scenarios"]["warm_caches"]["first_request_profile"] = [
        {"function": "serving_trace.py:1 step", "cumulative_ms": 12.0, "calls": 1},
        {"function": "api.py:50 matmul", "cumulative_ms": 9.5, "calls": 5}]
    text = lesson.first_request_profile(rec)
    assert "12.0 ms" in text and "x5" in text and "api.py:50 matmul" in text
    assert lesson.first_request_profile(None).startswith("NO RECORDS for ops_latency")


def test_overhead_against_the_target(files):
    assert "target <= 3 us: met" in str(lesson.overhead_table(files[lesson.OVERHEAD]))
    assert "target <= 3 us: MISSED" in str(lesson.overhead_table(synthetic_overhead(overhead=4.0)))


def test_checklist_fills_every_point_with_numbers(files):
    trace = lesson.trace_of(files[lesson.TRACE])
    rows = lesson.checklist_rows(files, trace)
    assert len(rows) == 9 and not any("NO RECORDS" in " ".join(r) for r in rows)
    text = str(lesson.checklist(files, trace))
    for phrase in ("of lab.ops's GPU time", "in the hot buckets: cuBLAS / lab.ops", "M buckets; tune cache entries",
                   "trace-layers", "first request with empty caches", "fallback decisions: 0.0%", "decided for cuBLAS",
                   "lab.ops's time there", "fastest up to M = 4, slower from M = 6", "decode steps"):
        assert phrase in text, phrase


def test_checklist_readings_follow_the_numbers(files):
    trace = lesson.trace_of(files[lesson.TRACE])
    rows = {r[0]: r for r in lesson.checklist_rows(files, trace)}
    hot = rows["The operation is a hot spot, its shapes clustered on a few"][2]
    cold = rows["Specializing for the hot shape does not hurt the cold ones"][2]
    assert "costs the cold steps 22% more time" in cold and "(decode)" in cold
    # Every step as costly as any other: the buckets by count are the buckets by time.
    flat = json.loads(json.dumps(files[lesson.TRACE]))
    for r in flat["per_step_us"]:
        r.update({m: 100.0 for m in lesson.METHODS})
    flat_rows = {r[0]: r for r in lesson.checklist_rows(files | {lesson.TRACE: flat}, trace)}
    assert "also hold most of the time" in flat_rows["The operation is a hot spot, its shapes clustered on a few"][2]
    assert "no slower on the cold steps" in flat_rows["Specializing for the hot shape does not hurt the cold ones"][2]
    # The synthetic prefill steps cost more per step, so the buckets that hold half the time are not those that hold
    # half the steps.
    assert "most of the steps are in M<=1, M<=4, M<=2, M<=8: where the steps are is not where the time is" in hot


def test_hot_choice_reads_the_methods_description(files):
    assert lesson.hot_choice(files[lesson.TRACE]) == "decode"
    tuned = {"methods": {"hot_forced": 'the hot shape\'s choice everywhere: persistent {"BN": 128}'}}
    assert lesson.hot_choice(tuned) == 'persistent {"BN": 128}'
    structured = {"hot_choice": {"path": "persistent", "config": {"BN": 128, "GROUP_M": 8}}}
    assert lesson.hot_choice(structured) == "persistent BN=128 GROUP_M=8"


def test_stats_text_lists_every_section():
    text = lesson.stats_text({"counts": {"calls": 3, "decision_misses": 1}, "paths": {"matmul:decode": 3},
                              "fallbacks": {}, "families": {"decode": 1}, "compiles": {"compiled": 2}})
    assert "calls=3" in text and "matmul:decode=3" in text and "fallbacks  (none)" in text and "compiled=2" in text


def test_targets_are_stated_from_the_constants():
    text = lesson.targets_text()
    for key in ("x_generic", "x_cublas", "warm_first_ms", "overhead_us"):
        assert f"{lesson.TARGETS[key]:g}" in text, key


@pytest.mark.gpu
def test_section_one_runs_lab_ops_live():
    import cupy as cp

    import lab.ops as ops

    x, w, h = lesson.usage_inputs()
    y = ops.matmul(x, w, layout="TN", residual=h)
    cp.cuda.get_current_stream().synchronize()
    text = lesson.usage_report(x, w, h, y, ops.stats())
    assert "decision for this shape:" in text and "lab.ops.stats():" in text
    ref = x.astype(cp.float32) @ w.astype(cp.float32).T + h.astype(cp.float32)
    assert float(cp.abs(y.astype(cp.float32) - ref).max()) < 0.05 * float(cp.abs(ref).max())


# ----------------------------------------------------------------------------------------------
# Figures draw (Agg)
# ----------------------------------------------------------------------------------------------

def test_plots_draw(files):
    import matplotlib.pyplot as plt

    trace = lesson.trace_of(files[lesson.TRACE])
    rec = files[lesson.TRACE]
    figures = [
        plots.trace_shapes(lesson.shape_rows(rec, trace), lesson.bucket_times(rec, trace), source=lesson.label(rec)),
        plots.trace_shapes(lesson.shape_rows(None, trace)),
        plots.autotune_candidates(lesson.tune_rows(files[lesson.TUNE])),
        plots.first_request_latency(lesson.latency_rows(files[lesson.LATENCY]), lesson.TARGETS["warm_first_ms"]),
        plots.trace_speedups(lesson.speedup_rows(rec)),
        plots.decode_boundary(rec["boundary"], 8),
        plots.dispatch_overhead(lesson.overhead_rows(files[lesson.OVERHEAD]), lesson.TARGETS["overhead_us"]),
    ]
    for fig in figures:
        assert fig is not None and fig.axes
        plt.close(fig)
    assert len(figures[0].axes) == 2 and len(figures[1].axes) == 1
    for fn in (plots.trace_shapes, plots.autotune_candidates, plots.first_request_latency, plots.trace_speedups,
               plots.dispatch_overhead):
        assert fn([]) is None, fn.__name__
    assert plots.decode_boundary({}) is None


def test_the_figures_are_legible(files):
    """No text under 7 pt and no labels over each other (lab.lessons.figure_check), the scenario names included."""
    import matplotlib.pyplot as plt

    from lab.lessons import figure_check
    from lab.lessons.plots import ops as ops_plots

    rec = files[lesson.TRACE]
    figures = [plots.first_request_latency(lesson.latency_rows(files[lesson.LATENCY]), lesson.TARGETS["warm_first_ms"]),
               plots.autotune_candidates(lesson.tune_rows(files[lesson.TUNE])),
               plots.decode_boundary(rec["boundary"], 8)]
    for fig in figures:
        assert figure_check.problems(fig) == []
        plt.close(fig)
    assert ops_plots.scenario_label("empty_caches_with_manifest") == "empty caches\nwith manifest"


def test_plot_to_file(files, tmp_path):
    out = plots.decode_boundary(files[lesson.TRACE]["boundary"], path=tmp_path / "b.png")
    assert out == tmp_path / "b.png" and out.stat().st_size > 0
