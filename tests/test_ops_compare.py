"""lab.studies.ops_compare: the models' widths, the layer's operators and the trace per model, the float64 reference
and the
tolerances (checked against a simulated fp16/bf16 layer on the CPU), the summaries of rounds and op kinds on made-up
timings, argument errors, and (GPU, with PyTorch) a tiny trace end to end."""

import json

import numpy as np
import pytest

from lab.core.errors import LabError
from lab.studies import ops_compare as oc
from lab.studies import serving_trace as st

# --- the models and the layer ------------------------------------------------------------------------------


def test_model_widths():
    for model in (oc.LLAMA3_8B, oc.QWEN25_7B):
        assert model.qkv == model.head_dim * (model.q_heads + 2 * model.kv_heads)
        assert model.attn == model.head_dim * model.q_heads
    assert (oc.LLAMA3_8B.hidden, oc.LLAMA3_8B.intermediate, oc.LLAMA3_8B.qkv, oc.LLAMA3_8B.qkv_bias) == (
        4096, 14336, 6144, False)
    assert (oc.QWEN25_7B.hidden, oc.QWEN25_7B.intermediate, oc.QWEN25_7B.qkv, oc.QWEN25_7B.qkv_bias) == (
        3584, 18944, 4608, True)
    assert oc.QWEN25_7B.attn == oc.QWEN25_7B.hidden and oc.LLAMA3_8B.attn == oc.LLAMA3_8B.hidden
    assert set(oc.MODELS) == {"llama3_8b", "qwen25_7b"}
    with pytest.raises(LabError, match="multiple of kv_heads"):
        oc.Model("odd", 64, 128, 16, 3, 2, False)
    with pytest.raises(LabError, match="positive integers"):
        oc.Model("zero", 0, 128, 16, 4, 2, False)


def test_gemm_lists_per_model():
    assert oc.LLAMA3_8B.gemms() == st.GEMMS  # the Llama layer is serving_trace's, unchanged
    q = {name: (n, k, epi) for name, n, k, epi in oc.QWEN25_7B.gemms()}
    assert q == {"qkv": (4608, 3584, "bias"), "o_proj": (3584, 3584, "residual"), "gate": (18944, 3584, "silu"),
                 "up": (18944, 3584, "none"), "down": (3584, 18944, "residual")}
    assert st.gemms() == st.GEMMS and st.gemms(qkv_bias=True)[0][3] == "bias"
    assert oc.LLAMA3_8B.weight_bytes() == 2 * sum(n * k for _, n, k, _ in st.GEMMS)


@pytest.mark.parametrize("model", [oc.LLAMA3_8B, oc.QWEN25_7B])
def test_the_layer_is_seven_chained_operators(model):
    ops = oc.layer_ops(model)
    assert [op.name for op in ops] == ["norm1", "qkv", "o_proj", "norm2", "gate", "up", "down"]
    assert {op.kind for op in ops} == set(oc.KINDS)
    assert sum(op.kind == "rmsnorm" for op in ops) == oc.CALLS_PER_LAYER["rmsnorm"] == 2
    written = set(oc.INPUTS)
    for op in ops:  # every operator reads what the inputs or an earlier operator wrote
        assert op.src in written and (op.residual is None or op.residual in written)
        written.add(op.dst)
    widths = oc.buffer_widths(model)
    for op in ops:
        assert widths[op.src] == op.K and widths[op.dst] == op.N
        if op.residual:
            assert widths[op.residual] == op.N and op.epilogue == "residual"
    by = {op.name: op for op in ops}
    assert by["qkv"].epilogue == ("bias" if model.qkv_bias else "none") and by["gate"].epilogue == "silu"
    assert (by["o_proj"].residual, by["down"].residual) == ("h", "h1")
    assert oc.kind_op(model, "rmsnorm").name == "norm1"


def test_the_trace_is_serving_traces():
    trace = oc.make_trace(3, 240)
    assert trace == st.make_trace(3, 240, oc.PREFILL_SHARE, oc.SKEW)
    counts = oc.m_counts(trace)
    assert sum(counts.values()) == 240 and list(counts) == sorted(counts)
    picks = oc.check_ms(counts)
    assert picks[0] == min(counts) and picks[-1] == max(counts)
    assert any(m % 2 for m in picks if m not in (min(counts), max(counts)))
    assert oc.check_ms([1, 3, 4]) == [1, 3, 4] and oc.check_ms([2, 4]) == [2, 4] and oc.check_ms([7]) == [7]
    with pytest.raises(LabError):
        oc.check_ms([])


def test_weight_sets_exceed_twice_the_l2_between_uses():
    l2 = 50 << 20
    for model in (oc.LLAMA3_8B, oc.QWEN25_7B):
        sets = oc.weight_sets(l2, model)
        smallest = 2 * min(n * k for _, n, k, _ in model.gemms())
        assert 2 <= sets <= oc.MAX_WEIGHT_SETS
        assert sets == oc.MAX_WEIGHT_SETS or (sets - 1) * smallest >= 2 * l2
    assert oc.weight_sets(1, oc.LLAMA3_8B) == 2 and oc.weight_sets(1 << 40, oc.LLAMA3_8B) == oc.MAX_WEIGHT_SETS


def test_rounds_rotate_the_method_order():
    orders = [oc.rotated(oc.METHODS, r) for r in range(len(oc.METHODS))]
    assert orders[0] == list(oc.METHODS)
    assert [o[0] for o in orders] == list(oc.METHODS)  # each method goes first once
    assert all(sorted(o) == sorted(oc.METHODS) for o in orders)


# --- summaries on made-up timings ----------------------------------------------------------------------------


def test_summarize_rounds():
    rounds = [{"lab_eager": 10.0, "torch_eager": 12.0, "lab_graph": 8.0, "torch_graph": 10.0},
              {"lab_eager": 11.0, "torch_eager": 11.0, "lab_graph": 8.0, "torch_graph": 8.8},
              {"lab_eager": 9.0, "torch_eager": 13.5, "lab_graph": 7.0, "torch_graph": 7.7}]
    s = oc.summarize_rounds(rounds)
    assert list(s["methods"]) == list(oc.METHODS)
    lab = s["methods"]["lab_eager"]
    assert (lab["median_ms"], lab["min_ms"], lab["max_ms"], lab["rounds_ms"]) == (10.0, 9.0, 11.0, [10.0, 11.0, 9.0])
    eager = s["ratios"]["eager"]
    assert eager["torch_over_lab"] == pytest.approx([1.2, 1.0, 1.5])  # per round, not a ratio of medians
    assert (eager["median"], eager["min"], eager["max"]) == pytest.approx((1.2, 1.0, 1.5))
    assert s["ratios"]["graph"]["torch_over_lab"] == pytest.approx([1.25, 1.1, 1.1])
    assert s["graph_gain"]["lab"]["eager_over_graph"] == pytest.approx([1.25, 11 / 8, 9 / 7])
    partial = oc.summarize_rounds([{"lab_eager": 2.0, "torch_eager": 1.0}])
    assert partial["ratios"] == {"eager": {"torch_over_lab": [0.5], "median": 0.5, "min": 0.5, "max": 0.5}}
    assert partial["graph_gain"] == {}
    with pytest.raises(LabError):
        oc.summarize_rounds([])


def _rows():
    rows = []
    for kind in oc.KINDS:
        for m, lab, torch in ((1, 10.0, 12.0), (128, 40.0, 40.0)):
            row = {"kind": kind, "M": m, "lab_us": lab, "torch_us": torch}
            if kind in ("o_proj", "down"):
                row |= {"torch_addmm_us": torch, "torch_linear_add_us": torch + (1.0 if m == 1 else -2.0)}
            rows.append(row)
    return rows


def test_per_kind_totals_weight_each_m_by_its_steps_and_calls():
    counts = {1: 100, 128: 5}
    totals = oc.per_kind_totals(_rows(), counts)
    qkv = totals["kinds"]["qkv"]
    assert qkv["lab_ms"] == pytest.approx((100 * 10 + 5 * 40) / 1e3)
    assert qkv["torch_ms"] == pytest.approx((100 * 12 + 5 * 40) / 1e3)
    assert qkv["torch_over_lab"] == pytest.approx(1400 / 1200)
    norm = totals["kinds"]["rmsnorm"]
    assert norm["calls_per_layer"] == 2 and norm["lab_ms"] == pytest.approx(2 * qkv["lab_ms"])
    assert totals["lab_ms"] == pytest.approx(7 * qkv["lab_ms"])  # six kinds, rmsnorm twice
    assert sum(v["lab_share"] for v in totals["kinds"].values()) == pytest.approx(1.0)


def test_the_residual_form_is_the_faster_over_the_trace():
    rows = _rows()
    assert oc.choose_residual_form(rows, {1: 100, 128: 5}) == "addmm"  # M = 1 dominates: addmm is faster there
    assert oc.choose_residual_form(rows, {1: 1, 128: 100}) == "linear_add"
    with pytest.raises(LabError):
        oc.choose_residual_form([r for r in rows if r["kind"] == "qkv"], {1: 1})


def test_bottleneck():
    assert oc.bottleneck(10.0, 10.0) == "gpu" and oc.bottleneck(10.0, 9.0) == "gpu"
    assert oc.bottleneck(20.0, 5.0) == "host"


def test_format_table_prints_every_method_and_ratio():
    rounds = [{"lab_eager": 10.0, "torch_eager": 12.0, "lab_graph": 8.0, "torch_graph": 10.0}]
    host = {"wall_us": 5.0, "bottleneck": "host"}
    payload = {"model": {"name": "qwen25_7b"}, "dtype": "bfloat16", "trace": {"steps": 4}, "rounds": rounds,
               "summary": oc.summarize_rounds(rounds), "per_kind": oc.per_kind_totals(_rows(), {1: 3, 128: 1}),
               "torch_residual_form": "addmm", "host_cost": [{"op": "qkv M=1", "lab": host, "torch": host}]}
    text = oc.format_table(payload)
    for word in (*oc.METHODS, "torch/lab eager", "torch/lab graph", *oc.KINDS, "qkv M=1"):
        assert word in text


# --- the float64 reference and the tolerances --------------------------------------------------------------

TINY = oc.Model("tiny", 256, 640, 32, 4, 2, True)


def _simulated_layer(model, dtype, m=24, seed=0, corrupt=None):
    """The layer on the CPU the way the GPU runs it: fp32 arithmetic, each op's output rounded to the type and read
    back by the next op; and its float64 reference from the same stored inputs."""
    from lab.families.gemm_tc import to_float32, to_storage

    rng = np.random.default_rng(seed)
    widths = oc.buffer_widths(model)

    def store(x):
        return to_storage(np.asarray(x, np.float32), dtype, np)

    def f32(x):
        return to_float32(x, dtype, np)

    inputs = {name: store(scale * rng.standard_normal((m, widths[name])))
              for name, scale in (("h", 1.0), ("attn", 1.0), ("act", 0.5))}
    weights = {op.weight: store(1 + 0.25 * rng.standard_normal(op.N)) if op.kind == "rmsnorm"
               else store(rng.standard_normal((op.N, op.K)) * op.K ** -0.5) for op in oc.layer_ops(model)}
    bias = f32(store(0.5 * rng.standard_normal(model.qkv))) if model.qkv_bias else None
    values = dict(inputs)
    for op in oc.layer_ops(model):
        x, w = f32(values[op.src]), f32(weights[op.weight])
        if op.kind == "rmsnorm":
            v = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + oc.EPS) * w
        else:
            v = x @ w.T
            if op.epilogue == "bias":
                v = v + bias
            elif op.epilogue == "silu":
                v = v / (1 + np.exp(-v))
            if op.residual:
                v = v + f32(values[op.residual])
        if op.dst == corrupt:
            v = v.copy()
            v[m // 2] *= -1  # one row wrong
        values[op.dst] = store(v)
    ref = oc.layer_reference({k: f32(inputs[k]).astype(np.float64) for k in oc.INPUTS},
                             lambda name: f32(weights[name]).astype(np.float64),
                             None if bias is None else bias.astype(np.float64), model, np)
    return values, ref


@pytest.mark.parametrize("dtype", oc.DTYPES)
def test_the_reference_and_tolerance_pass_a_faithful_layer(dtype):
    got, ref = _simulated_layer(TINY, dtype)
    assert set(ref) == {op.dst for op in oc.layer_ops(TINY)}
    errors = oc.compare(got, ref, slice(None), dtype, np)
    assert oc.failures(errors, dtype) == []
    tol = oc.TOLERANCE[dtype]
    assert max(e["rel_rms"] for e in errors.values()) < tol["rel_rms"] / 3  # with room to spare
    assert all(e["nonfinite"] == 0 for e in errors.values())


@pytest.mark.parametrize("dtype", oc.DTYPES)
def test_the_tolerance_catches_a_wrong_row_a_missing_bias_and_nan(dtype):
    got, ref = _simulated_layer(TINY, dtype, corrupt="gate")
    bad = oc.failures(oc.compare(got, ref, slice(None), dtype, np), dtype)
    assert any(b.startswith("gate:") for b in bad)
    got, ref = _simulated_layer(TINY, dtype)
    ref["qkv"] = ref["qkv"] + 1.0  # as if the bias were applied twice
    assert [b.split(":")[0] for b in oc.failures(oc.compare(got, ref, slice(None), dtype, np), dtype)] == ["qkv"]
    got, ref = _simulated_layer(TINY, dtype)
    got["h2"] = got["h2"].copy()
    got["h2"].view(np.uint16)[0, 0] = 0x7E00 if dtype == "float16" else 0x7FC0  # a NaN in either type's bits
    rows = np.arange(1, 24)  # row 0 not among the checked rows: the scan for non-finite values still finds it
    bad = oc.failures(oc.compare(got, {k: v[rows] for k, v in ref.items()}, rows, dtype, np), dtype)
    assert bad == ["h2: 1 non-finite values"]


def test_relative_errors():
    ref = np.array([[1.0, -2.0], [3.0, 4.0]])
    assert oc.relative_errors(ref, ref, np) == (0.0, 0.0)
    rms, top = oc.relative_errors(ref + np.array([[0.0, 0.0], [0.0, 0.4]]), ref, np)
    assert top == pytest.approx(0.1) and rms == pytest.approx(0.2 / np.sqrt(7.5))
    assert np.isnan(oc.relative_errors(ref * np.nan, ref, np)[0])


# --- arguments ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    ({"model": "gpt2"}, "model is one of"), ({"model": 3}, "model is a name"),
    ({"dtype": "float32"}, "dtype is one of"),
    ({"steps": 0}, "steps is a whole number"), ({"rounds": 1.5}, "rounds is a whole number"),
    ({"steps": True}, "steps is a whole number"), ({"seed": -1}, "seed is a whole number")])
def test_argument_errors_are_one_sentence(kwargs, match):
    args = {"model": "llama3_8b", "dtype": "float16", "steps": 240, "rounds": 3, "seed": 0} | kwargs
    with pytest.raises(LabError, match=match):
        oc.resolve(args.pop("model"), **args)
    with pytest.raises(LabError, match=match):  # run refuses before it needs a GPU or PyTorch
        oc.run("/nonexistent", **({"model": "llama3_8b"} | kwargs))


def test_resolve_takes_a_name_or_a_model():
    assert oc.resolve("qwen25_7b", "bfloat16", 4, 1) is oc.QWEN25_7B
    assert oc.resolve(TINY, "float16", 4, 1) is TINY


def test_main_without_pytorch_says_so_and_measures_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(oc, "torch_unavailable", lambda: "PyTorch cannot be imported here.")
    monkeypatch.setattr(oc, "run", lambda *a, **k: pytest.fail("nothing is measured without PyTorch"))
    assert oc.main([str(tmp_path), "--model", "qwen25_7b", "--dtype", "bfloat16", "--steps", "4"]) == 3
    assert capsys.readouterr().out.strip() == "PyTorch cannot be imported here."
    assert not list(tmp_path.iterdir())


def test_main_argument_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        oc.main([str(tmp_path), "--model", "gpt2"])
    assert info.value.code == 2
    assert oc.main([str(tmp_path), "--steps", "0"]) == 2
    assert "steps is a whole number" in capsys.readouterr().err


# --- on a GPU, with PyTorch -----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_a_tiny_trace_end_to_end(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device here")
    path = oc.run(tmp_path, model="qwen25_7b", dtype="bfloat16", steps=4, rounds=1, progress=lambda _line: None)
    assert path == tmp_path / "ops_vs_torch_qwen25_7b_bfloat16.json"
    record = json.loads(path.read_text())
    prov = record["provenance"]
    assert prov["torch"] == torch.__version__ and prov["commit"] and prov["date"] and prov["cupy"]
    assert record["model"]["name"] == "qwen25_7b" and record["model"]["qkv"] == 4608 and record["dtype"] == "bfloat16"
    ms = [r["M"] for r in record["step_counts"]]
    assert ms == sorted(oc.m_counts(oc.make_trace(0, 4)))
    checked = {(c["method"], c["M"]) for c in record["checks"]}
    for m in oc.check_ms(ms):
        for method in ("lab_eager", "torch_eager (addmm)", "torch_eager (linear_add)", "lab_graph", "torch_graph"):
            assert (method, m) in checked
    assert len(record["rounds"]) == 1 and sorted(record["rounds"][0]["order"]) == sorted(oc.METHODS)
    summary = record["summary"]
    assert set(summary["methods"]) == set(oc.METHODS) and set(summary["ratios"]) == {"eager", "graph"}
    assert all(v["median_ms"] > 0 for v in summary["methods"].values())
    assert record["torch_residual_form"] in oc.RESIDUAL_FORMS
    assert set(record["per_kind"]["kinds"]) == set(oc.KINDS)
    assert {(r["kind"], r["M"]) for r in record["per_op_us"]} == {(k, m) for k in oc.KINDS for m in ms}
    assert all(r["lab_us"] > 0 and r["torch_us"] > 0 for r in record["per_op_us"])
    assert [r["op"] for r in record["host_cost"]] == [f"{k} M={m}" for k, m in oc.HOST_OPS]
    for row in record["host_cost"]:
        for lib in ("lab", "torch"):
            assert row[lib]["bottleneck"] in ("gpu", "host") and row[lib]["wall_us"] > 0 and row[lib]["gpu_us"] > 0
    assert len(record["per_M_us"]) == len(ms)
