"""CPU: `lab tour` with no GPU compiles every kernel and replays recorded results, saying so loudly.

The records here are synthetic test data written to a tmp dir that LAB_REFERENCE_RESULTS points at;
nothing is written under results/.
"""

import io

import pytest
from rich.console import Console

from lab.cli import tour
from lab.core import device
from lab.families import get_family
from lab.measure import records
from lab.measure.records import Record, RecordSet

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CEILING = "cupy_device_copy"
PROVENANCE = {
    "device": "TEST GPU (synthetic data)",
    "arch": "sm_90",
    "sm_count": 132,
    "l2_bytes": 50 << 20,
    "date": "2026-01-02T03:04:05+00:00",
    "commit": "test",
}


def _synthetic(family: str) -> RecordSet:
    fam = get_family(family)
    copy = family == "copy"

    def params(size):
        return {"n": size} if copy else {"rows": size, "cols": size}

    def rec(rung, kind, size, l2, value):
        nbytes = 8 * size if copy else 8 * size * size
        ms = nbytes / (value * 1e9) * 1e3
        return Record(
            family, rung, kind, params(size), nbytes, l2, ms, ms, ms, 10, "GB/s", value, CEILING, 4000.0
        )

    names = [CEILING] + [r.key for r in fam.rungs]
    recs = [
        rec(name, "headline", 1 << 26 if copy else 8192, "cold", 4000.0 - 300 * i)
        for i, name in enumerate(names)
    ]
    for size in (1 << 10, 1 << 16, 1 << 22, 1 << 26) if copy else (32, 256, 2048, 8192):
        recs += [
            rec(name, "sweep", size, l2, 1000.0 + i)
            for name in names
            for i, l2 in enumerate(("cold", "warm"))
        ]
    for size in range(1 << 24, (1 << 24) + 5) if copy else range(8184, 8189):
        recs += [rec(name, "tail", size, "warm", 3500.0 + 50 * (size % 4)) for name in names]
    return RecordSet(dict(PROVENANCE), recs)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(device, "_probe", lambda: "no GPU here (simulated by the test)")


@pytest.fixture
def reference_dir(tmp_path, monkeypatch):
    ref = tmp_path / "reference"
    ref.mkdir()
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(ref))
    return ref


def _run(out, **kwargs):
    buf = io.StringIO()
    summary = tour.run(
        out_dir=str(out), console=Console(file=buf, width=200, color_system=None, soft_wrap=True), **kwargs
    )
    return summary, buf.getvalue()


def _results_dir_listing():
    return sorted(p.relative_to(records.RESULTS_DIR) for p in records.RESULTS_DIR.rglob("*"))


def test_replay_writes_a_summary_marked_no_gpu_and_replayed(tmp_path, reference_dir, no_gpu):
    for family in ("copy", "transpose"):
        records.save(reference_dir / f"{family}.json", _synthetic(family))
    before = _results_dir_listing()
    out = tmp_path / "report"
    summary, console_text = _run(out)
    assert summary == out / "summary.md"
    text = summary.read_text()

    first_heading = next(line for line in text.splitlines() if line.startswith("#"))
    assert first_heading.startswith("# ") and "NO GPU" in first_heading and "REPLAYED" in first_heading
    assert str(reference_dir) in text, "the summary must say where the replayed records came from"
    assert "TEST GPU (synthetic data)" in text and "2026-01-02" in text

    # The compile report, made here for sm_90, for every rung of both ladders.
    assert "## Compile report (sm_90, compile-only)" in text
    for family in ("copy", "transpose"):
        for rung in get_family(family).rungs:
            assert f"| {rung.spec.source} | sm_90 |" in text, rung.spec.source
            assert f"| {rung.key} |" in text  # its replayed headline row

    # Each family's section is labelled as replayed, with its figures written and linked.
    assert text.count("REPLAYED on TEST GPU (synthetic data)") == 2
    for family in ("copy", "transpose"):
        for kind in ("ladder", "bandwidth", "tail"):
            png = out / f"{family}_{kind}.png"
            assert png.is_file() and png.read_bytes()[:8] == PNG_MAGIC, png
            assert f"({png.name})" in text

    assert "No GPU here (no GPU here (simulated by the test))" in console_text
    assert "Nothing below was measured on this machine" in console_text
    assert _results_dir_listing() == before, "a replay must not write under results/"


def test_replay_with_no_records_still_succeeds(tmp_path, reference_dir, no_gpu):
    out = tmp_path / "report"
    summary, console_text = _run(out, arch=80, names=["copy"])
    text = summary.read_text()
    assert text.startswith("# Lab tour — NO GPU")
    assert "no recorded results" in text
    assert "## Compile report (sm_80, compile-only)" in text and "| copy/01_naive.cu | sm_80 |" in text
    assert "transpose/" not in text  # only the family asked for
    assert not list(out.glob("*.png"))
    assert f"copy: no recorded results under {reference_dir}" in console_text


def test_replay_with_one_family_recorded(tmp_path, reference_dir, no_gpu):
    records.save(reference_dir / "transpose.json", _synthetic("transpose"))
    out = tmp_path / "report"
    summary, console_text = _run(out)
    text = summary.read_text()
    assert "## " + get_family("transpose").title in text
    assert "## " + get_family("copy").title not in text
    assert (out / "transpose_ladder.png").is_file() and not (out / "copy_ladder.png").exists()
    assert "copy: no recorded results" in console_text


def test_unknown_family_is_refused(tmp_path, no_gpu):
    from lab.core.errors import LabError

    with pytest.raises(LabError, match="Unknown family 'gemm'"):
        tour.run(out_dir=str(tmp_path / "report"), names=["gemm"], console=Console(file=io.StringIO()))


def _synthetic_gemm() -> RecordSet:
    fam = get_family("gemm_fp32")
    names = [fam.ceiling_name] + [r.key for r in fam.rungs]

    def rec(rung, kind, M, N, l2, value):
        params = {"M": M, "N": N, "K": M, "alpha": 1.0, "beta": 0.0, "pad": 0, "lda": M, "ldb": N, "ldc": N}
        ms = 2 * M * N * M / (value * 1e12) * 1e3
        return Record("gemm_fp32", rung, kind, params, 4 * (2 * M * N + M * M), l2, ms, ms, ms, 5, "TFLOP/s",
                      value, fam.ceiling_name, 50.0)

    recs = [rec(name, "headline", 4096, 4096, "cold", 50.0 - 5 * i) for i, name in enumerate(names)]
    recs += [rec(name, "sweep", n, n, "cold", 10.0 + i) for n in (256, 1024, 4096) for i, name in enumerate(names)]
    recs += [rec(name, "tail", 4096, n, "warm", 30.0) for n in range(4094, 4099) for name in names]
    return RecordSet(dict(PROVENANCE), recs)


def test_replay_of_a_tflops_family_draws_sizes_and_dram_figures(tmp_path, reference_dir, no_gpu):
    import json

    records.save(reference_dir / "gemm_fp32.json", _synthetic_gemm())
    rows = [{"rung": r.key, "dram_read_bytes": 4e8, "dram_write_bytes": 7e7} for r in get_family("gemm_fp32").rungs]
    (reference_dir / "gemm_fp32_profile.json").write_text(json.dumps(
        {"provenance": PROVENANCE, "params": {"M": 4096, "N": 4096, "K": 4096}, "rows": rows}))
    out = tmp_path / "report"
    summary, _ = _run(out, names=["gemm_fp32"])
    text = summary.read_text()
    assert "## " + get_family("gemm_fp32").title in text and "TFLOP/s" in text
    for name in ("gemm_fp32_ladder", "gemm_fp32_sizes", "gemm_fp32_tail", "gemm_fp32_dram_bytes"):
        assert (out / f"{name}.png").read_bytes()[:8] == PNG_MAGIC, name
        assert f"({name}.png)" in text
    assert "DRAM / minimum" in text and not (out / "gemm_fp32_bandwidth.png").exists()
