"""CPU: lab.ops.attention's validation (one sentence per misuse, on NumPy arrays, before any GPU is touched), its
dispatch decisions (on a fake family and on the attention family's own rungs and refusals, with stand-in arrays
that only carry an address), its classes and buckets, the tune store's say, the warm-up manifest's attention
entries and the per-path compile counters."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import lab.ops as ops
from lab.core import device
from lab.core.errors import LabError
from lab.ops import attn, counters, manifest
from lab.ops.attn import AttentionShape, bucket, decide, family_label, shape_class
from lab.ops.dispatch import Runtime
from lab.ops.store import TuneStore


def arrays(B=1, H=4, H_kv=2, S_q=17, S_k=17, D=64, dtype=np.float16):
    q = np.ones((B, H, S_q, D), dtype)
    k = np.ones((B, H_kv, S_k, D), dtype)
    return q, k, k.copy()


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    monkeypatch.setattr(device, "why_no_gpu", lambda: "no CUDA driver")


# --- validation ----------------------------------------------------------------------------------------------

def _misuses():
    q, k, v = arrays()
    yield "rank", (q[0], k, v), {}, "must be 4-dimensional"
    yield "type mismatch", (q, k, v.astype(np.float32)), {}, "must have one type"
    yield "float32", (q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)), {}, "takes float16"
    yield "int8", (q.astype(np.int8), k.astype(np.int8), v.astype(np.int8)), {}, "takes float16"
    yield "uint16 without input_type", (q.view(np.uint16), k.view(np.uint16), v.view(np.uint16)), {}, \
        "only with input_type"
    yield "input_type", (q, k, v), {"input_type": "fp8"}, "input_type is None"
    yield "float16 with input_type bfloat16", (q, k, v), {"input_type": "bfloat16"}, "these are float16: drop"
    yield "k and v differ", (q, k, v[:, :, :5]), {}, "k and v must have one shape"
    yield "batch", (q, *arrays(B=2)[1:]), {}, "the batch and head dimension must agree"
    yield "head dim", (q, *arrays(D=128)[1:]), {}, "the batch and head dimension must agree"
    yield "H % H_kv", (q, *arrays(H_kv=3)[1:]), {}, "must be a multiple of"
    yield "D > 256", arrays(D=320), {}, "head dimensions up to 256"
    yield "empty", arrays(S_k=0), {}, "every dimension >= 1"
    yield "too large", (np.lib.stride_tricks.as_strided(q, (1, 2**12, 2**14, 64), (0, 0, 0, 2)),
                        *(np.lib.stride_tricks.as_strided(k, (1, 2**12, 2**14, 64), (0, 0, 0, 2)),) * 2), {}, \
        "below 2\\^31"
    yield "non-contiguous q", (np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3), k, v), {}, \
        "q must be C-contiguous"
    yield "non-contiguous v", (q, k, np.ones((1, 2, 17, 128), np.float16)[..., ::2]), {}, "v must be C-contiguous"
    yield "causal", (q, k, v), {"causal": "yes"}, "causal is True or False"
    yield "causal 2", (q, k, v), {"causal": 2}, "causal is True or False"
    yield "causal array", (q, k, v), {"causal": np.ones(3)}, "causal is True or False"
    yield "scale list", (q, k, v), {"scale": [0.125]}, "scale is a number"
    yield "scale", (q, k, v), {"scale": 0.5}, "use the scale 1/sqrt\\(D\\) = 0.125 only"
    yield "out shape", (q, k, v), {"out": np.empty((1, 4, 17, 32), np.float16)}, "out must be a C-contiguous"
    yield "out type", (q, k, v), {"out": np.empty(q.shape, np.float32)}, "out must be a C-contiguous"


MISUSES = list(_misuses())


@pytest.mark.parametrize("args, kwargs, words", [m[1:] for m in MISUSES], ids=[m[0] for m in MISUSES])
def test_each_misuse_is_one_sentence_before_the_missing_gpu(no_gpu, args, kwargs, words):
    with pytest.raises(LabError, match=words) as err:
        ops.attention(*args, **kwargs)
    text = str(err.value)
    assert "\n" not in text and text.endswith(".") and "runs on a CUDA GPU" not in text


def test_non_arrays_get_their_sentence(no_gpu):
    with pytest.raises(LabError, match="takes arrays for q, k and v"):
        ops.attention([[1.0]], *arrays()[1:])


@pytest.mark.parametrize("kwargs", [{}, {"causal": True}, {"causal": np.int64(1)}, {"causal": np.bool_(False)},
                                    {"scale": 0.125}, {"scale": np.float32(0.125)},
                                    {"out": np.empty((1, 4, 17, 64), np.float16)}])
def test_a_valid_call_on_numpy_arrays_says_there_is_no_gpu(no_gpu, kwargs):
    with pytest.raises(LabError) as err:
        ops.attention(*arrays(), **kwargs)
    text = str(err.value)
    assert "lab.ops.attention runs on a CUDA GPU" in text and "no CUDA driver" in text and "\n" not in text


def test_bf16_patterns_with_input_type_are_valid(no_gpu):
    q, k, v = (x.view(np.uint16) for x in arrays(D=128))
    with pytest.raises(LabError, match="runs on a CUDA GPU"):
        ops.attention(q, k, v, input_type="bfloat16")


def test_with_a_gpu_numpy_arrays_are_told_how_to_move(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    with pytest.raises(LabError, match="convert with cupy.asarray"):
        ops.attention(*arrays())


def test_check_values_returns_the_shape():
    q, k, v = arrays(B=2, H=8, H_kv=2, S_q=1, S_k=1000, D=80)
    shape = attn.check_values(q, k, v, True, None, None, None)
    assert shape == AttentionShape(2, 8, 2, 1, 1000, 80, "float16", 1, True)
    bf = attn.check_values(*(x.view(np.uint16) for x in (q, k, v)), 0, None, None, "bfloat16")
    assert bf.dtype == "bfloat16" and bf.causal == 0


# --- classes and buckets ----------------------------------------------------------------------------------

def shape(S_q=4096, S_k=4096, D=128, aligned=True, causal=0, H=16, H_kv=16, dtype="float16"):
    return AttentionShape(2, H, H_kv, S_q, S_k, D, dtype, causal, aligned)


def test_decode_and_prefill_classes_and_power_of_two_buckets():
    assert shape_class(shape(S_q=1)) == shape_class(shape(S_q=16)) == "decode"
    assert shape_class(shape(S_q=17)) == "prefill"
    assert family_label(shape(S_q=1, S_k=8000)) == "attention:decode S_q<=1 S_k<=8192"
    assert family_label(shape(S_q=1000, S_k=1000)) == "attention:prefill S_q<=1024 S_k<=1024"
    assert bucket(shape(S_q=3000, S_k=3001)) == bucket(shape(S_q=4096, S_k=2049))
    assert bucket(shape(S_q=4096)) != bucket(shape(S_q=4097))
    assert bucket(shape(causal=1)) != bucket(shape()) and bucket(shape(aligned=False)) != bucket(shape())
    assert "decode" in bucket(shape(S_q=1)) and "bfloat16" in bucket(shape(dtype="bfloat16"))


# --- decisions on a fake family ---------------------------------------------------------------------------

def refusing(*keys, generic=None):
    """A refusal function: the named rungs refuse; the generic one refuses with `generic` when given."""
    def refusal(key):
        if key == attn.GENERIC:
            return generic
        return f"rung {key} refuses." if key in keys else None
    return refusal


TWO = ("01_naive", "02_flash_mma")
THREE = ("01_naive", "02_flash_mma", "03_flash_pipelined")


@pytest.mark.parametrize("rungs, expected", [(TWO, "02_flash_mma"), (THREE, "03_flash_pipelined")])
@pytest.mark.parametrize("D", [64, 128])
def test_specialized_head_dims_take_the_fastest_flash_rung(rungs, expected, D):
    d = decide(shape(D=D), rungs, refusing())
    assert d.path == expected and not d.source.startswith("fallback")


def test_a_refusing_pipelined_rung_leaves_the_call_to_rung_02_without_a_fallback():
    d = decide(shape(), THREE, refusing("03_flash_pipelined"))
    assert d.path == "02_flash_mma" and not d.source.startswith("fallback")


@pytest.mark.parametrize("rungs", [TWO, THREE])
def test_misaligned_operands_fall_back_to_the_generic_rung(rungs):
    d = decide(shape(aligned=False), rungs, refusing(*rungs[1:]))
    assert d.path == "01_naive" and d.source == "fallback: attention: operands not 16-byte aligned"


@pytest.mark.parametrize("D", [1, 17, 80, 96, 192])
def test_other_head_dims_fall_back_to_the_generic_rung(D):
    asked = []

    def refusal(key):
        asked.append(key)
        return None

    d = decide(shape(D=D), THREE, refusal)
    assert d.path == "01_naive" and d.source == f"fallback: attention: D={D} has no flash kernel"
    assert asked == ["01_naive"]  # the flash rungs are not even asked


def test_d256_asks_the_flash_rungs_in_order_and_falls_back_with_the_first_sentence():
    """D = 256 is specialized, but only rung 05 builds it (on sm_90): off sm_90 every flash rung refuses, and the
    fallback carries rung 05's sentence."""
    d = decide(shape(D=256), ("01_naive", "02_flash_mma", "05_pingpong"),
               lambda key: None if key == "01_naive" else f"{key} cannot")
    assert d.path == "01_naive" and d.source == "fallback: attention: 05_pingpong cannot"
    asked = []
    d = decide(shape(D=256), ("01_naive", "02_flash_mma", "05_pingpong"), lambda key: asked.append(key))
    assert d.path == "05_pingpong" and asked == ["05_pingpong"]


def test_a_d256_decode_call_goes_to_rung_05_when_the_decode_kernel_refuses_it():
    """The split-KV decode kernel builds D 64 and 128 only: a D = 256 decode step goes to the flash rungs."""
    d = decide(shape(D=256, S_q=1), ("01_naive", "05_pingpong"), refusing(),
               decode_refusal=lambda: "decode attention compiles D in (64, 128)")
    assert d.path == "05_pingpong" and d.source == "flash: D=256"


def test_a_family_without_flash_rungs_falls_back():
    d = decide(shape(), ("01_naive",), refusing())
    assert d.path == "01_naive" and d.source == "fallback: attention: no flash rung in the family"


def test_an_unknown_refusal_is_named_in_the_fallback():
    d = decide(shape(), TWO, refusing("02_flash_mma"))
    assert d.source == "fallback: attention: rung 02_flash_mma refuses."


def test_no_kernel_at_all_is_one_sentence():
    with pytest.raises(LabError, match="has no kernel for this call") as err:
        decide(shape(D=80, S_k=50000), TWO, refusing(generic="attention rung 01_naive keeps a row's scores."))
    assert "\n" not in str(err.value)


def test_a_tuned_rung_is_served_only_where_it_serves():
    assert decide(shape(), THREE, refusing(), tuned="02_flash_mma").path == "02_flash_mma"
    assert decide(shape(), THREE, refusing(), tuned="02_flash_mma").source == "tuned"
    assert decide(shape(), TWO, refusing(), tuned="03_flash_pipelined").path == "02_flash_mma"  # absent rung
    assert decide(shape(), THREE, refusing("03_flash_pipelined"), tuned="03_flash_pipelined").path == "02_flash_mma"


# --- decisions on the attention family's own rungs and refusals (stand-in arrays: an address is all they read) ---

@dataclass
class _Data:
    ptr: int


@dataclass
class _Array:
    ptr: int

    @property
    def data(self):
        return _Data(self.ptr)


def _real(D, offset=0, S_k=128):
    from lab.core.ladder import Problem
    from lab.families import get_family

    fam = get_family("attention")
    s = shape(D=D, S_q=128, S_k=S_k, aligned=offset == 0)
    q, k, v, out = (_Array(base + offset) for base in (1 << 20, 2 << 20, 3 << 20, 4 << 20))
    problem = Problem("stand-in", {"Q": [q], "K": [k], "V": [v]}, (2, 16, 128, D), 0, params=s.params)
    return fam, s, lambda key: fam.refusal(fam.rung(key), problem, out)


@pytest.mark.parametrize("D, S_k, expected", [(64, 1024, "05_pingpong"), (128, 1024, "03_flash_pipelined"),
                                               (128, 256, "03_flash_pipelined"), (64, 17, "05_pingpong")])
def test_the_family_serves_aligned_specialized_calls_with_a_flash_rung(D, S_k, expected):
    """The fastest rung as measured that takes the call, whatever its key count: rung 05 where it takes it (with no
    GPU to ask, its shared memory is held against the smallest opt-in limit of the sm_80+ GPUs, 97 KiB: its 165 KiB
    at D = 128 do not fit, its 81 KiB at D = 64 do), else rung 03."""
    fam, s, refusal = _real(D, S_k=S_k)
    assert decide(s, [r.key for r in fam.rungs], refusal).path == expected


@pytest.mark.parametrize("D, offset, reason", [(128, 2, "operands not 16-byte aligned"), (80, 0, "D=80 has no flash"),
                                               (96, 2, "D=96 has no flash")])
def test_the_family_refusals_send_calls_to_rung_01(D, offset, reason):
    fam, s, refusal = _real(D, offset)
    d = decide(s, [r.key for r in fam.rungs], refusal)
    assert d.path == "01_naive" and reason in d.source


def test_the_family_rung_01_refuses_keys_past_shared_memory():
    fam, s, refusal = _real(80, S_k=1 << 16)
    with pytest.raises(LabError, match="has no kernel for this call"):
        decide(s, [r.key for r in fam.rungs], refusal)


# --- the runtime's say: the tune store ----------------------------------------------------------------------

class _FakeRung:
    def __init__(self, key):
        self.key = key


class _FakeFamily:
    def __init__(self, keys, refused=()):
        self.rungs = tuple(_FakeRung(k) for k in keys)
        self.refused = refused

    def rung(self, key):
        return next(r for r in self.rungs if r.key == key)

    def refusal(self, rung, problem, out):
        return f"{rung.key} refuses." if rung.key in self.refused else None


def runtime(store=None) -> Runtime:
    rt = Runtime(None, store)
    rt._arch, rt._env = 90, "test-env"
    return rt


def test_a_stored_entry_for_the_bucket_decides(tmp_path):
    store = TuneStore(tmp_path / "tune.json")
    s = shape(S_q=3000, S_k=3000)
    store.put("test-env", bucket(s), {"path": "02_flash_mma", "config": {}, "us": 1.0})
    fam = _FakeFamily(THREE)
    d = attn._decide_on_gpu(runtime(store), shape(S_q=2100, S_k=4000), fam, None, None)  # the same bucket
    assert (d.path, d.source) == ("02_flash_mma", "tuned")
    assert attn._decide_on_gpu(runtime(store), shape(S_q=5000), fam, None, None).path == "03_flash_pipelined"
    refusing_02 = _FakeFamily(THREE, refused=("02_flash_mma",))
    assert attn._decide_on_gpu(runtime(store), s, refusing_02, None, None).path == "03_flash_pipelined"


def test_autotune_runs_only_where_more_than_one_rung_serves(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(attn, "tune_bucket", lambda rt, s: calls.append(s) or {"path": "01_naive"})
    rt = runtime(TuneStore(tmp_path / "tune.json"))
    rt.autotune = True
    assert attn._decide_on_gpu(rt, shape(), _FakeFamily(THREE), None, None).source == "tuned" and len(calls) == 1
    only_generic = _FakeFamily(TWO, refused=("02_flash_mma",))
    assert attn._decide_on_gpu(rt, shape(aligned=False), only_generic, None, None).path == "01_naive"
    assert len(calls) == 1


# --- the warm-up manifest ---------------------------------------------------------------------------------

def test_manifest_takes_attention_entries(tmp_path):
    good = tmp_path / "m.json"
    entries = [{"op": "attention", "H": 32, "H_kv": 8, "S_q": 1, "S_k": 8192, "D": 128, "causal": 1},
               {"op": "attention", "B": 2, "H": 16, "S_q": 4096, "S_k": 4096, "D": 64, "dtype": "bfloat16"},
               {"M": 1, "N": 4096, "K": 4096}]
    good.write_text(json.dumps({"shapes": entries}))
    assert manifest.load(good) == entries


@pytest.mark.parametrize("entry, words", [
    ({"op": "attention", "H": 32, "S_q": 1, "S_k": 8192}, "an attention entry gives"),
    ({"op": "attention", "H": 32, "S_q": 1, "S_k": 8192, "D": 128, "layout": "TN"}, "an attention entry gives"),
    ({"op": "attention", "H": 0, "S_q": 1, "S_k": 8192, "D": 128}, "whole numbers >= 1"),
    ({"op": "attention", "H": 32, "S_q": 1.5, "S_k": 8192, "D": 128}, "whole numbers >= 1"),
    ({"op": "attention", "H": 32, "S_q": 1, "S_k": 8192, "D": 128, "dtype": "float32"}, "dtype is"),
    ({"op": "attention", "H": 32, "S_q": 1, "S_k": 8192, "D": 128, "causal": 2}, "causal is 0 or 1"),
])
def test_manifest_refuses_bad_attention_entries(tmp_path, entry, words):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"shapes": [entry]}))
    with pytest.raises(LabError, match=words):
        manifest.load(bad)


# --- counters and the package ---------------------------------------------------------------------------

def test_compiles_per_path_are_in_the_stats_and_reset(tmp_path):
    counters.reset_stats()
    counters.COMPILES_BY_PATH["attention:02_flash_mma compiled"] += 1
    counters.COUNTS["calls"] += 1
    assert counters.stats()["compiles_by_path"] == {"attention:02_flash_mma compiled": 1}
    path = tmp_path / "stats.json"
    counters.save(path)
    assert counters.load(path)["totals"]["compiles_by_path"] == {"attention:02_flash_mma compiled": 1}
    assert counters.stats()["compiles_by_path"] == {}


def test_attention_is_a_lazy_name_of_lab_ops():
    assert "attention" in ops.__all__ and ops.attention is attn.attention
    code = "import sys, lab.ops, lab.ops.attn; lab.ops.attention; assert 'cupy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("S_q", [1, 16])
def test_a_decode_call_takes_the_decode_kernel_where_it_serves(S_q):
    d = decide(shape(S_q=S_q, S_k=5000), THREE, refusing(), tuned="02_flash_mma", decode_refusal=lambda: None)
    assert d.path == attn.DECODE_PATH and d.source == "decode: split-KV"


def test_a_refusing_decode_kernel_leaves_the_call_to_the_flash_rungs():
    d = decide(shape(S_q=1, S_k=5000), THREE, refusing(), decode_refusal=lambda: "decode attention refuses.")
    assert d.path == "03_flash_pipelined"


def test_a_prefill_call_never_asks_the_decode_kernel():
    asked = []
    d = decide(shape(S_q=17, S_k=5000), THREE, refusing(), decode_refusal=lambda: asked.append(1))
    assert d.path == "03_flash_pipelined" and not asked


def test_lab_ops_keeps_unspecialized_head_dims_off_the_flash_rungs():
    """lab.ops dispatches, tunes and replays a tuned entry on a flash rung only for a specialized head dim
    (SPECIALIZED_HEAD_DIMS, 256 among them since rung 05's D = 256 build passed its GPU tests): for any other D every
    flash rung gets a sentence, the generic rung none."""
    from lab.ops.attn import SPECIALIZED_HEAD_DIMS, specialized_refusal

    assert SPECIALIZED_HEAD_DIMS == (64, 128, 256)
    assert "generic rung" in specialized_refusal(shape(D=96), "05_pingpong")
    assert specialized_refusal(shape(D=96), "01_naive") is None
    for d in SPECIALIZED_HEAD_DIMS:
        assert specialized_refusal(shape(D=d), "05_pingpong") is None
