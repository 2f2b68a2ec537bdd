"""The README's results table is generated from the committed records, never typed in."""

from lab.core.build import REPO_ROOT
from lab.studies import report


def test_readme_results_table_matches_the_committed_records():
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index(report.README_BEGIN) + len(report.README_BEGIN)
    table = text[start:text.index(report.README_END)].strip()
    expected = report.readme_results(report.reference_sets()).strip()
    assert table == expected, "README table is stale or hand-edited: run `python -m lab.studies.report`"


def test_readme_names_the_two_commands_that_ci_runs():
    text = (REPO_ROOT / "README.md").read_text()
    assert "bash run.sh tour" in text and "bash run.sh test" in text
    assert "bash run.sh test" in (REPO_ROOT / ".ci" / "run").read_text()


def _gemm_row(n: int, baseline: float, value: float = 400.0):
    from lab.measure.records import Record

    return Record("gemm_tc", "06_persistent", "headline", {"M": n, "N": n, "K": n, "dtype": "float16", "layout": "TN"},
                  0, "cold", 1.0, 1.0, 1.0, 1, metric="TFLOP/s", value=value, ceiling="torch_mm",
                  ceiling_value=baseline)


def test_a_baseline_off_its_alignment_cliff_is_named_with_both_rates():
    from lab.studies import report

    text = report.alignment_cliff_sentence("gemm_tc", [_gemm_row(4096, 750.0), _gemm_row(4095, 120.0)])
    assert "4095x4095x4095 float16/TN: 120.0 against 750.0 TFLOP/s at 4096x4096x4096" in text
    assert "not a faster main loop" in text
    # An odd size where the library holds its rate is no cliff, and aligned sizes are never one.
    assert report.alignment_cliff_sentence("gemm_tc", [_gemm_row(4096, 750.0), _gemm_row(4095, 600.0)]) == ""
    assert report.alignment_cliff_sentence("gemm_tc", [_gemm_row(4096, 750.0), _gemm_row(8192, 100.0)]) == ""
