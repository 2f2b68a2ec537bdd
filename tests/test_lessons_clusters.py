"""Notebook 07's cluster section without a GPU: the table, the targets line and the figure from a synthetic record
of lab.studies.cluster_rows_study, and the sentences where there is no record."""

import pytest

from lab.lessons import figure_check
from lab.lessons.fusion import clusters
from lab.studies import cluster_rows_study as study


def _record():
    rows = []
    for case in study.cases(quick=True):
        methods = {"copy": 1.0, "torch": 1.6, study.PREVIOUS[case["op"]]: 1.15, study.CLUSTER_RUNG[case["op"]]: 1.04,
                   study.CLUSTER_RUNG[case["op"]][:2] + " EXCHANGE=0": 1.06}
        for r in range(3):
            for method, ms in methods.items():
                rows.append({"shape": case, "method": method, "round": r, "median_ms": ms * (1 + 0.01 * r),
                             "p10_ms": ms, "p90_ms": ms, "GB/s": 500.0 / ms})
    return study.assemble(rows, 3, ["softmax float16 n=32768 05 BLOCK=128: wrong"], {},
                          {"device": "NVIDIA H200", "commit": "abcdef0", "date": "2026-12-06"})


def test_the_table_shows_every_case_and_method_as_a_fraction_of_the_copy():
    text = clusters.cluster_table(_record())
    assert "REPLAYED from results/h200/cluster_rows_study.json" in text and "NVIDIA H200" in text
    for case in study.cases(quick=True):
        assert f"{case['op']} {case['dtype']} n={case['n']}" in text
    assert "0.96" in text  # the cluster rung: 1.0 / 1.04
    assert "1.54" in text  # over PyTorch: 1.6 / 1.04
    assert "not timed: softmax" in text


def test_the_targets_line_counts_the_cases_that_reach_the_target():
    line = clusters.cluster_targets(_record())
    assert line.startswith("target: 0.90 of the device copy") and f"on {len(study.cases(quick=True))} of" in line


def test_the_figure_passes_the_figure_check_and_leaves_out_the_probes():
    import matplotlib

    matplotlib.use("Agg")
    fig = clusters.cluster_figure(_record())
    figure_check.check(fig)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "torch" in labels and not any("=" in label and "target" not in label for label in labels)


@pytest.mark.parametrize("fn", [clusters.cluster_table, clusters.cluster_targets])
def test_no_record_gets_a_sentence_with_the_command_that_records_it(fn):
    text = fn(None)
    assert text.startswith("NO RECORDS for cluster_rows_study:") and "python -m lab.studies.cluster_rows_study" in text
    assert clusters.cluster_figure(None) is None


def test_the_exchange_source_is_the_headers_struct():
    text = clusters.exchange_source()
    assert "struct ClusterExchange" in text and "st.async" in text and "barrier.cluster.wait.acquire" in text


def test_the_sass_counts_show_the_fence_in_one_exchange_and_the_mbarrier_in_the_other():
    from lab.core import build

    if build.find_nvdisasm() is None:
        assert clusters.exchange_sass().startswith("(nvdisasm is not installed")
        return
    rows = {line.split()[0]: [int(v) for v in line.split()[-5:]] for line in clusters.exchange_sass().splitlines()
            if line.startswith("EXCHANGE=")}
    membar, ivall, arrive, wait, syncs = range(5)
    barrier, mbarrier = rows["EXCHANGE=0"], rows["EXCHANGE=1"]
    assert barrier[membar] > 0 and mbarrier[membar] == 0
    assert barrier[syncs] == 0 and mbarrier[syncs] > 0
    assert barrier[arrive] > mbarrier[arrive] and barrier[ivall] > mbarrier[ivall]


def test_a_record_made_while_layernorm_defaulted_to_one_exchange_shows_the_rung_as_built_now():
    """LayerNorm's "04 STATS=2" row is the cluster rung (its default now) and its "04_cluster" row the STATS=1 probe;
    RMSNorm's rows are read as before."""
    payload = {"summary": [
        {"shape": {"op": "layernorm", "dtype": "float16", "n": 32768}, "method": "04_cluster", "x_copy": 0.80},
        {"shape": {"op": "layernorm", "dtype": "float16", "n": 32768}, "method": "04 STATS=2", "x_copy": 0.91},
        {"shape": {"op": "rmsnorm", "dtype": "float16", "n": 32768}, "method": "04_cluster", "x_copy": 0.97}],
        "provenance": {"commit": study.STATS_1_COMMITS[-1]}}
    by_case = clusters._by_case(payload)
    assert by_case[("layernorm", "float16", 32768)]["cluster"]["x_copy"] == 0.91
    assert by_case[("layernorm", "float16", 32768)]["STATS=1"]["x_copy"] == 0.80
    assert by_case[("rmsnorm", "float16", 32768)]["cluster"]["x_copy"] == 0.97
    assert clusters.roles(payload) == ["STATS=1", "cluster"]
    later = payload | {"provenance": {"commit": "abcdef0"}}  # a record made after the default went back to STATS=2
    assert clusters._by_case(later)[("layernorm", "float16", 32768)]["cluster"]["x_copy"] == 0.80
    assert clusters.roles(later) == ["cluster", "STATS=2"]


def test_the_table_says_when_layernorm_s_probes_are_built_on_the_default_of_their_day():
    payload = {"summary": [
        {"shape": {"op": "layernorm", "dtype": "float16", "n": 32768}, "method": m, "x_copy": x}
        for m, x in (("04_cluster", 0.80), ("04 STATS=2", 0.91), ("04 EXCHANGE=0", 0.85))],
        "provenance": {"device": "NVIDIA H100", "commit": study.STATS_1_COMMITS[-1], "date": "2026-12-06"}}
    text = clusters.cluster_table(payload)
    assert 'the row "04 STATS=2"' in text and "the STATS=1 build with that knob changed" in text
    payload["provenance"]["commit"] = "abcdef0"
    assert "the STATS=1 build" not in clusters.cluster_table(payload)
