"""The terminal tables the tour prints: one row per size, names that fold instead of being cut, dates as recorded."""

from __future__ import annotations

from rich.console import Console

from lab.cli.tour import recorded_on
from lab.measure.records import Record, RecordSet
from lab.studies import report


def _row(rung: str, n: int, value: float) -> Record:
    return Record("gemm_tc", rung, "headline", {"M": n, "N": n, "K": n}, 0, "cold", 1.0, 0.9, 1.1, 5,
                  metric="TFLOP/s", value=value, ceiling="cublas_gemm", ceiling_value=700.0)


def _text(table, width: int = 80) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    return console.export_text()


def test_the_terminal_table_keeps_the_fastest_rung_per_size_and_whole_names():
    rs = RecordSet({"device": "GPU", "arch": "sm_90", "date": "2026-12-01"},
                   [_row("05_warp_specialized", 4096, 600.0), _row("06_persistent", 4096, 650.0),
                    _row("05_warp_specialized", 8192, 640.0), _row("06_persistent", 8192, 630.0),
                    _row("cublas_gemm", 4096, 700.0)], replayed=True)
    text = _text(report.best_table(rs, "gemm_tc"))
    assert text.count("06_persistent") == 1 and "0.929x" in text  # 650 / 700 at 4096
    assert "0.914x" in text and "cublas_gemm)" in text  # 640 / 700 at 8192: rung 05 there
    assert "…" not in text, "a name was cut off"
    assert "warp_specialize" in text.replace("\n", "").replace("│", "").replace(" ", "")


def test_a_tour_of_records_from_several_days_says_so():
    one = recorded_on([{"device": "NVIDIA H200", "date": "2026-11-29T10:00:00"}] * 2)
    assert one == "results recorded on NVIDIA H200 on 2026-11-29"
    two = recorded_on([{"device": "NVIDIA H200", "date": "2026-11-29T10:00:00"},
                       {"device": "NVIDIA H200", "date": "2026-12-01T09:00:00"}])
    assert "from 2026-11-29 to 2026-12-01 (each section gives its own date)" in two
    assert recorded_on([]) == "no recorded results"
