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
