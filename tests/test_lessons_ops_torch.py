"""lab.lessons.ops_torch (notebook 08, section 11: lab.ops against PyTorch) and its figure,
lab.lessons.plots.ops_torch_ratios.
CPU only.

Most tests read the real records in results/h200 (ops_sweep, ops_host_cost, ops_vs_torch_*, rowops_study, made on an
H200) and check that what the lesson prints agrees with the records' raw numbers, recomputed here; none of them
types a measured number. One writer (write_synthetic_ops_torch) builds records of the same structure with made-up
values, through the studies' own summarizing functions, for tests/test_notebooks.py's synthetic replay; it never
writes under results/.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from lab.lessons import ops as ops_lesson  # noqa: E402
from lab.lessons import ops_torch as lesson  # noqa: E402
from lab.lessons import plots  # noqa: E402
from lab.ops import rules  # noqa: E402
from lab.studies import ops_compare, ops_sweep, rowops_study

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "results" / "h200"
PROVENANCE = {"device": "SYNTHETIC TEST DATA (not a measurement)", "arch": "sm_90", "sm_count": 132,
              "l2_bytes": 50 * 2**20, "date": "2000-01-01T00:00:00+00:00", "commit": "synthetic"}


# ----------------------------------------------------------------------------------------------
# Synthetic records (the studies' structure, made-up values)
# ----------------------------------------------------------------------------------------------

def _fake_ratio(name: str) -> float:
    """Made-up PyTorch / lab.ops ratios per class: shapes of a result, not a result."""
    return {"decode": 1.2, "unaligned_large": 3.0, "unaligned": 2.0}.get(name, 1.0)


def synthetic_sweep(provenance: dict = PROVENANCE) -> dict:
    choices, samples, summary = [], [], []
    for name, _, _, shapes in ops_sweep.CLASSES:
        lab_path = {"decode": "decode", "unaligned_large": "persistent", "unaligned": "persistent"}.get(name, "cublas")
        config = {"BN": 256, "GROUP_M": 8} if lab_path == "persistent" else {}
        choices.append({"class": name, "method": lab_path, "path": lab_path, "config": config,
                        "score": _fake_ratio(name), "scores": {"cublas": 1.0, lab_path: _fake_ratio(name)},
                        "losses": []})
        for s in shapes:
            samples.append({"sample": s.label, "params": dict(s.__dict__), "class": name})
            r = _fake_ratio(name)
            summary.append({"sample": s.label, "decision": f"{lab_path} (rule {len(choices)})",
                            "lab_tflops": 500.0 * r, "torch_tflops": 500.0, "ratio_cold": [r, r * 1.01, r * 0.99],
                            "ratio_b2b": [r, r, r], "lab_check": None,
                            "torch_check": "10 of 1000 elements outside the bound" if r > 1.5 else None})
    table = ops_sweep.table_from(choices, "synthetic/ops_sweep.json", "synthetic")
    final = [{"sample": s["sample"], "params": s["params"]} for s in samples]
    return {"provenance": provenance, "library": "cublasLt", "torch": "synthetic", "rounds": 3, "back_to_back": 20,
            "win_margin": 1.02, "samples": samples, "choices": choices, "table": table, "final": final,
            "summary": summary}


def synthetic_host(provenance: dict = PROVENANCE) -> dict:
    rows = []
    for m, n, k in ops_sweep.HOST_SHAPES:
        for method, us in (("lab_ops:cublas", 10.0), ("lab_ops:decode", 10.0), ("lab_ops:persistent", 15.0),
                           ("torch.mm", 11.0), ("F.linear", 12.0)):
            if method == "lab_ops:decode" and m > 64:
                continue
            rows.append({"shape": [m, n, k], "method": method, "median": us, "min": us * 0.9, "max": us * 1.2,
                         "with_gpu_median": us})
    for method in ("lab_ops:rmsnorm", "F.rms_norm"):
        rows.append({"shape": [16, 4096], "method": method, "median": 9.0, "min": 8.0, "max": 10.0,
                     "with_gpu_median": 9.0})
    return {"provenance": provenance, "calls": 1000, "trials": 5, "rows": rows}


def synthetic_trace(model: str, dtype: str, provenance: dict = PROVENANCE) -> dict:
    rounds = [{"lab_eager": 40.0 + i, "torch_eager": 46.0 + i, "lab_graph": 38.0 + i, "torch_graph": 40.0 + i}
              for i in range(3)]
    counts = {1: 100, 128: 5}
    per_op = [{"kind": kind, "M": m, "lab_us": 10.0, "torch_us": 11.0} for kind in ops_compare.KINDS for m in counts]
    host = [{"op": "qkv M=1", "kind": "qkv", "M": 1,
             "lab": {"wall_us": 12.0, "gpu_us": 10.0, "bottleneck": "gpu"},
             "torch": {"wall_us": 14.0, "gpu_us": 10.0, "bottleneck": "host"}}]
    return {"provenance": provenance, "model": {"name": model}, "dtype": dtype, "trace": {"steps": 105},
            "rounds": [{"totals_ms": r} for r in rounds], "summary": ops_compare.summarize_rounds(rounds),
            "per_kind": ops_compare.per_kind_totals(per_op, counts), "host_cost": host,
            "torch_residual_form": "addmm", "torch_residual_forms": {"addmm": "torch.addmm(h, x, W.t())"},
            "timing": {"ops_alone": "synthetic"}}


def synthetic_rowops(provenance: dict = PROVENANCE) -> dict:
    cases, rows = [], []
    for op, n in (("rmsnorm", 4096), ("softmax", 8192)):
        case = f"{op} float16 1024x{n}"
        cases.append({"case": case, "n": n, "bytes_moved": 4 * 1024 * n * 64})
        for r in range(3):
            for method in rowops_study.METHODS:
                fraction = 1.0 if method == "copy" else 0.5 if method.startswith("torch_") else 0.95
                if method == lesson.AFTER_IDLE:
                    fraction = 0.5 + 0.1 * r
                rows.append({"case": case, "method": method, "round": r, "fraction": fraction,
                             "gbps": 4000.0 * fraction})
    study = {"rounds": 3, "varies_threshold": rowops_study.VARIES, "l2_bytes": provenance["l2_bytes"], "cases": cases,
             "summary": rowops_study.summarize(rows)}
    return {"schema": 1, "provenance": provenance, "records": [], "study": study}


def write_synthetic_ops_torch(directory: Path, provenance: dict = PROVENANCE) -> list[str]:
    """Every record section 11 reads, in `directory` (never results/); returns the names written."""
    directory = Path(directory)
    if directory.resolve().is_relative_to((REPO / "results").resolve()):
        raise ValueError("synthetic records must never be written under results/")
    directory.mkdir(parents=True, exist_ok=True)
    payloads = {lesson.SWEEP: synthetic_sweep(provenance), lesson.HOST: synthetic_host(provenance),
                lesson.ROWOPS: synthetic_rowops(provenance)}
    for name in lesson.TRACES:
        payloads[name] = synthetic_trace(*lesson._trace_args(name), provenance)
    for name, payload in payloads.items():
        (directory / f"{name}.json").write_text(json.dumps(payload, default=str))
    return list(payloads)


# ----------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------

@pytest.fixture
def real(monkeypatch):
    """The real records in results/h200 (the default reference folder)."""
    monkeypatch.delenv("LAB_REFERENCE_RESULTS", raising=False)
    absent = [name for name in lesson.FILES if not (REAL / f"{name}.json").is_file()]
    # The records are committed: one that is missing is a defect of the repository, not a reason to skip.
    assert not absent, f"results/h200 lacks {', '.join(absent)}: " + "; ".join(lesson.recorded_by(n) for n in absent)
    return lesson.replayed()


@pytest.fixture
def empty(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    return tmp_path


def _raw(name: str) -> dict:
    return json.loads((REAL / f"{name}.json").read_text())


# ----------------------------------------------------------------------------------------------
# The real records
# ----------------------------------------------------------------------------------------------

def test_every_record_loads_replayed_with_its_provenance(real):
    text = lesson.sources(real)
    assert text.count("REPLAYED from NVIDIA H200") == len(lesson.FILES) and "NO RECORDS" not in text
    for name in lesson.FILES:
        assert real[name]["replayed"] and f"results/h200/{name}.json" in text


def test_the_sweeps_choices_are_the_records_one_row_per_class(real):
    record = real[lesson.SWEEP]
    text = str(lesson.sweep_choices(record))
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| class")]
    assert [r.split(" | ")[0].strip("| ") for r in rows] == [c["class"] for c in record["choices"]]
    for c, row in zip(record["choices"], rows, strict=True):
        assert f"{c['score']:.2f}x" in row
        assert ops_lesson.candidate_label(c["path"], c["config"]) in row
        assert (row.rstrip(" |").endswith("none")) == (not c["losses"])
        for loss in c["losses"]:
            assert loss["sample"] in row and loss["faster"] in row
    # the rule conditions come from the record's own table
    for rule in record["table"]["rules"]:
        assert "`" + (", ".join(f"{k}={v}" for k, v in rules.parse({"rules": [rule]}).rules[0].when) or "any shape")\
            + "`" in text


def test_the_table_in_force_is_compared_rule_for_rule(real):
    record = real[lesson.SWEEP]
    text = lesson.table_in_force(record)
    same = rules.parse(record["table"]).rules == rules.DEFAULT.rules
    assert ("holds the sweep's table" in text) == same and ("DIFFERS" in text) == (not same)
    assert lesson.table_in_force(record | {"table": rules.DEFAULT.to_json()}).endswith(
        f"the same {len(rules.DEFAULT.rules)} rules.")


def test_per_sample_ratios_are_the_records_per_round_ratios(real):
    record = _raw(lesson.SWEEP)
    # the record's summary is lab.studies.ops_sweep.summarize of its own final rounds
    assert ops_sweep.summarize(record["final"]) == record["summary"]
    text = str(lesson.per_sample(real[lesson.SWEEP]))
    classes = {s["sample"]: s["class"] for s in record["samples"]}
    for s in record["summary"]:
        line = next(row for row in text.splitlines() if f"| {s['sample']} |" in row)
        assert line.startswith(f"| {classes[s['sample']]} |")
        assert " / ".join(f"{v:.2f}" for v in s["ratio_cold"]) in line
        assert ("PyTorch: " in line) == bool(s["torch_check"])
        if s["torch_check"]:
            bad, total = map(int, re.match(r"(\d+) of (\d+)", s["torch_check"]).groups())
            assert f"{bad / total:.1%} of the elements" in line


def test_the_class_summary_pools_every_round_of_its_samples(real):
    record = real[lesson.SWEEP]
    rows = lesson.sample_rows(record)
    text = str(lesson.class_summary(record))
    for cls in dict.fromkeys(r["class"] for r in rows):
        pooled = [v for r in rows if r["class"] == cls for v in r["ratio_cold"]]
        line = next(row for row in text.splitlines() if row.startswith(f"| {cls} |"))
        assert f"{statistics.median(pooled):.2f}x ({min(pooled):.2f}-{max(pooled):.2f})" in line


def test_targets_agree_with_the_records(real):
    text = lesson.targets(real)
    lines = text.splitlines()
    assert len(lines) == 1 + 3 + 1 + 2 + 3 and "NO RECORDS" not in text
    assert all(line.endswith(("met", "MISSED")) or " -> met;" in line or " -> MISSED;" in line for line in lines[1:])
    rows = lesson.sample_rows(real[lesson.SWEEP])
    worst = min(statistics.median(r["ratio_cold"]) for r in rows)
    verdict = "met" if worst >= lesson.TARGETS["every_sample"] else "MISSED"
    assert lines[1].startswith("every sample:") and lines[1].endswith(verdict)
    unaligned = [r for r in rows if r["params"]["M"] == r["params"]["N"] == r["params"]["K"]
                 and r["params"]["M"] in (4095, 4097)]
    assert len(unaligned) >= 2 and f"of {len(unaligned)} below" in lines[2]
    decode = [r for r in rows if r["params"]["M"] <= 8 and r["params"]["N"] == r["params"]["K"] >= 4096]
    assert decode and f"of {len(decode)} below" in lines[3]
    low = min(statistics.median(r["ratio_cold"]) for r in decode)
    assert lines[3].endswith("met" if low >= lesson.TARGETS["decode"] else "MISSED")
    for pair, line in (("eager", lines[5]), ("graph", lines[6])):
        meds = [real[n]["summary"]["ratios"][pair]["median"] for n in lesson.TRACES]
        key = "trace_eager" if pair == "eager" else "trace_graph"
        assert line.endswith("met" if min(meds) >= lesson.TARGETS[key] else "MISSED")


def test_host_rows_take_the_path_the_sweeps_table_picks(real):
    host, sweep = real[lesson.HOST], real[lesson.SWEEP]
    rows = lesson.host_rows(host, sweep)
    table = rules.parse(sweep["table"])
    assert [r["shape"] for r in rows] == [tuple(s) for s in ops_sweep.HOST_SHAPES]
    for r in rows:
        shape = ops_sweep.gemm_shape(ops_sweep.Sample(*r["shape"]))
        assert r["path"] == ops_lesson.table_decision(table, shape, 90)[0]
        assert r["lab_us"] == r["methods"][f"lab_ops:{r['path']}"]["median"]
    text = str(lesson.host_table(host, sweep))
    assert "rmsnorm, 16×4096" in text and "F.rms_norm" in text
    host_line = lesson.targets(real).splitlines()[4]
    ok = all(r["lab_us"] <= r["torch_mm_us"] for r in rows)
    assert host_line.startswith("host time per replayed call") and host_line.endswith("met" if ok else "MISSED")


def test_the_traces_table_has_every_model_and_type_and_names_the_residual(real):
    text = str(lesson.trace_table(real))
    for name in lesson.TRACES:
        record = real[name]
        line = next(row for row in text.splitlines() if row.startswith(f"| {record['model']['name']} "
                                                                         f"{record['dtype']} |"))
        eager = record["summary"]["ratios"]["eager"]["torch_over_lab"]
        assert " / ".join(f"{v:.2f}" for v in eager) in line
        assert record["torch_residual_forms"][record["torch_residual_form"]] in line
    kinds = str(lesson.per_kind_table(real))
    assert all(f"| {kind} |" in kinds for kind in ops_compare.KINDS) and "| all |" in kinds
    hosts = str(lesson.trace_host_table(real))
    assert hosts.count("\n|") == 1 + sum(len(real[n]["host_cost"]) for n in lesson.TRACES)


def test_the_row_op_reading_counts_what_varied(real):
    record = real[lesson.ROWOPS]
    summary = record["study"]["summary"]
    text = lesson.rowops_reading(record)
    idle_only = sum(1 for s in summary.values() if s["varying"] == [lesson.AFTER_IDLE])
    assert f"only the single call after idle varied in {idle_only} of {len(summary)} cases" in text
    for case, s in summary.items():
        for m in set(s["varying"]) - {lesson.AFTER_IDLE}:
            assert case in text and m in text
    table = str(lesson.rowops_table(record))
    assert table.count("\n| ") == 1 + len(summary)
    rows = lesson.rowop_rows(record)
    for r in rows:
        steady = [m for m in summary[r["case"]]["methods"] if m.startswith("lab_ops_") and m != lesson.AFTER_IDLE]
        assert r["lowest"][0] == min(min(summary[r["case"]]["methods"][m]["fractions"]) for m in steady)


def test_the_figure_from_the_real_records(real, tmp_path):
    rows = lesson.ratio_rows(real[lesson.SWEEP])
    assert len(rows) == len(real[lesson.SWEEP]["summary"])
    fig = plots.ops_torch_ratios(rows, source=lesson.label(real[lesson.SWEEP]))
    ax = fig.axes[0]
    assert "REPLAYED on NVIDIA H200" in ax.get_title()
    values = [v for r in rows for v in r["ratios"]]
    assert (ax.get_yscale() == "log") == (max(values) > plots.RATIO_LOG_SPAN * min(values + [1.0]))
    fig.canvas.draw()
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text() and t.get_visible()]
    assert min(t.get_fontsize() for t in texts) >= 7
    renderer = fig.canvas.get_renderer()
    for axis in (ax.get_xticklabels(), ax.get_yticklabels()):
        boxes = [t.get_window_extent(renderer) for t in axis if t.get_text()]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    out = plots.ops_torch_ratios(rows, path=tmp_path / "r.png")
    assert out == tmp_path / "r.png" and out.stat().st_size > 0
    assert plots.ops_torch_ratios([]) is None


# ----------------------------------------------------------------------------------------------
# Missing records
# ----------------------------------------------------------------------------------------------

def test_missing_records_say_which_and_the_command(empty, capsys):
    files = lesson.replayed()
    assert all(v is None for v in files.values())
    commands = {lesson.SWEEP: f"lab tune --table --out {empty} --write",
                lesson.HOST: f"python -m lab.studies.ops_sweep {empty} --host",
                lesson.ROWOPS: f"python -m lab.studies.rowops_study {empty}",
                "ops_vs_torch_qwen25_7b_bfloat16": f"python -m lab.studies.ops_compare {empty} --model qwen25_7b "
                                                   "--dtype bfloat16"}
    for name, command in commands.items():
        line = lesson.missing(name)
        assert line.startswith(f"NO RECORDS for {name}:") and f"`{command}`" in line and "\n" not in line
    text = lesson.sources(files)
    assert text.count("NO RECORDS for") == len(lesson.FILES) and "NO RECORDED RESULTS" not in text
    for fn, name in ((lesson.sweep_choices, lesson.SWEEP), (lesson.per_sample, lesson.SWEEP),
                     (lesson.class_summary, lesson.SWEEP), (lesson.host_table, lesson.HOST),
                     (lesson.rowops_table, lesson.ROWOPS), (lesson.rowops_reading, lesson.ROWOPS),
                     (lesson.table_in_force, lesson.SWEEP)):
        assert str(fn(None)) == lesson.missing(name), fn.__name__
    assert str(lesson.trace_table(files)).count("NO RECORDS for ops_vs_torch_") == len(lesson.TRACES)
    assert str(lesson.per_kind_table(files)) == lesson.missing(lesson.TRACES[0])
    targets = lesson.targets(files)
    assert all(f"NO RECORDS for {name}:" in targets for name in lesson.FILES)
    assert lesson.ratio_rows(None) is None
    lesson.show(plots.ops_torch_ratios, None, lesson.SWEEP)
    out = capsys.readouterr().out
    assert out.strip() == lesson.missing(lesson.SWEEP) and "(nothing to plot" not in out


def test_one_trace_missing_leaves_the_others(empty):
    write_synthetic_ops_torch(empty)
    (empty / f"{lesson.TRACES[1]}.json").unlink()
    (empty / f"{lesson.HOST}.json").write_text("{not json")
    files = lesson.replayed()
    assert files[lesson.HOST] is None and files[lesson.TRACES[1]] is None
    text = str(lesson.trace_table(files))
    assert text.count("NO RECORDS for") == 1 and text.count("\n| ") == 1 + len(lesson.TRACES) - 1
    assert lesson.missing(lesson.HOST) in lesson.targets(files)


# ----------------------------------------------------------------------------------------------
# Synthetic records
# ----------------------------------------------------------------------------------------------

def test_synthetic_records_are_never_written_under_results():
    with pytest.raises(ValueError):
        write_synthetic_ops_torch(REPO / "results" / "h200")


def test_every_cell_reads_the_synthetic_records(empty):
    write_synthetic_ops_torch(empty)
    files = lesson.replayed()
    texts = [lesson.sources(files), lesson.sweep_choices(files[lesson.SWEEP]), lesson.per_sample(files[lesson.SWEEP]),
             lesson.class_summary(files[lesson.SWEEP]), lesson.host_table(files[lesson.HOST], files[lesson.SWEEP]),
             lesson.trace_table(files), lesson.per_kind_table(files), lesson.trace_host_table(files),
             lesson.rowops_table(files[lesson.ROWOPS]), lesson.rowops_reading(files[lesson.ROWOPS]),
             lesson.targets(files)]
    joined = "\n".join(map(str, texts))
    assert "NO RECORDS" not in joined and "REPLAYED from SYNTHETIC TEST DATA" in joined
    assert "holds the sweep's table" in joined or "DIFFERS" in joined
    assert "only the single call after idle varied in 2 of 2 cases" in joined
    assert plots.ops_torch_ratios(lesson.ratio_rows(files[lesson.SWEEP])) is not None
