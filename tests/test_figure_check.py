"""The legibility check every notebook figure passes in CI (lab.lessons.figure_check)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from lab.lessons import figure_check  # noqa: E402


def _figure():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1, 2], [1, 3, 2])
    ax.set_title("a readable figure")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    return fig, ax


def test_a_plain_figure_passes():
    fig, _ = _figure()
    assert figure_check.problems(fig) == []
    plt.close(fig)


def test_small_text_is_named():
    fig, ax = _figure()
    ax.text(1, 2, "tiny bar label", fontsize=5)
    found = figure_check.problems(fig)
    assert len(found) == 1 and "'tiny bar label' is 5.0 pt" in found[0]
    plt.close(fig)


def test_labels_drawn_over_each_other_are_named():
    fig, ax = _figure()
    ax.text(1, 2, "first label", fontsize=9)
    ax.text(1.02, 2.01, "second label", fontsize=9)
    found = figure_check.problems(fig)
    assert found == ["texts 'first label' and 'second label' overlap"]
    plt.close(fig)


def test_labels_side_by_side_pass():
    fig, ax = _figure()
    ax.text(0.1, 2, "left", fontsize=9)
    ax.text(1.6, 2, "right", fontsize=9)
    assert figure_check.problems(fig) == []
    plt.close(fig)


def test_installed_check_stops_a_savefig(tmp_path, monkeypatch):
    monkeypatch.setattr(figure_check, "_installed", False)
    from matplotlib.backend_bases import FigureCanvasBase

    monkeypatch.setattr(FigureCanvasBase, "print_figure", FigureCanvasBase.print_figure)  # restored afterwards
    figure_check.install()
    fig, ax = _figure()
    fig.savefig(tmp_path / "ok.png")
    ax.text(1, 2, "tiny", fontsize=4)
    with pytest.raises(figure_check.FigureProblem, match="a readable figure.*'tiny' is 4.0 pt"):
        fig.savefig(tmp_path / "bad.png")
    plt.close(fig)


def test_tick_labels_outside_the_view_are_not_counted():
    fig, ax = _figure()
    ax.set_yscale("log")
    ax.set_ylim(1.5, 2.5)  # a log axis keeps minor ticks (and their labels) outside this view
    assert figure_check.problems(fig) == []
    plt.close(fig)
