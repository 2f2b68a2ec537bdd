"""CPU: the serving trace's shapes and distribution, and how the trace benchmark totals per-step times."""

from collections import Counter

from lab.studies import serving_trace as st


def test_trace_is_deterministic_and_skewed():
    a, b = st.make_trace(3, 2000), st.make_trace(3, 2000)
    assert a == b and st.make_trace(4, 2000) != a
    decode = [s.M for s in a if s.kind == "decode"]
    prefill = [s.M for s in a if s.kind == "prefill"]
    assert all(1 <= m <= st.DECODE_MAX_BATCH for m in decode)
    assert set(prefill) <= set(st.PREFILL_BUCKETS) and prefill
    counts = Counter(decode)
    assert counts[1] > counts[2] > counts[16] > counts.get(200, 0)  # most steps run small batches
    summary = st.summarize(a)
    assert summary["steps"] == 2000 and 0.9 < summary["decode_share"] < 0.99
    assert summary["decode_M_quantiles"][50] <= summary["decode_M_quantiles"][99]


def test_layer_shapes_are_llama_like():
    shapes = {name: (n, k) for name, n, k, _ in st.GEMMS}
    assert shapes["qkv"] == (4096 + 2 * 8 * 128, 4096)
    assert shapes["down"] == (4096, 14336) and shapes["gate"] == (14336, 4096)
    assert {epi for *_, epi in st.GEMMS} == {"none", "residual", "silu"}


def test_totals_weight_each_step_by_its_count():
    trace = [st.Step("decode", 1)] * 3 + [st.Step("prefill", 128)]
    times = {"x": {("decode", 1): 10.0, ("prefill", 128): 100.0}}
    t = st.totals(trace, times)["x"]
    assert t == {"total_us": 130.0, "decode_us": 30.0, "prefill_us": 100.0}
