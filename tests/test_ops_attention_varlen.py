"""CPU: lab.ops.attention_varlen's checks, each misuse one sentence (NumPy arrays stand in for CuPy's: the checks read
only shapes, types, flags and the offsets' values), and its sentence for arrays that are not on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from lab.core.errors import LabError
from lab.ops.attn_varlen import attention_varlen, check_offsets, check_shapes


def _arrays(T_q=10, T_k=12, H=4, H_kv=2, D=64, dtype=np.float16):
    return (np.ones((T_q, H, D), dtype), np.ones((T_k, H_kv, D), dtype), np.ones((T_k, H_kv, D), dtype))


def test_good_arrays_pass_and_give_the_type_and_flag():
    q, k, v = _arrays()
    assert check_shapes(q, k, v, True, None, None, None) == ("float16", 1)
    q, k, v = (x.view(np.uint16) for x in _arrays())
    assert check_shapes(q, k, v, False, 0.125, None, "bfloat16") == ("bfloat16", 0)


@pytest.mark.parametrize("change, words", [
    (lambda q, k, v: (q[None], k, v), "3-dimensional, packed"),
    (lambda q, k, v: (q, k, v[:5]), "one shape"),
    (lambda q, k, v: (q[:, :, :32], k, v), "must agree"),
    (lambda q, k, v: (q[:, :3], k, v), "multiple of"),
    (lambda q, k, v: (q[:0], k, v), "at least one query"),
    (lambda q, k, v: (q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)), "float16"),
    (lambda q, k, v: (q[:, ::2], k[:, :1], v[:, :1]), "C-contiguous"),
])
def test_each_misuse_is_one_sentence(change, words):
    q, k, v = change(*_arrays())
    with pytest.raises(LabError, match=words) as err:
        check_shapes(q, k, v, False, None, None, None)
    assert str(err.value).count(". ") <= 1


def test_a_scale_other_than_one_over_sqrt_d_and_a_wrong_out_are_refused():
    q, k, v = _arrays()
    with pytest.raises(LabError, match="1/sqrt"):
        check_shapes(q, k, v, False, 0.5, None, None)
    with pytest.raises(LabError, match="out must be"):
        check_shapes(q, k, v, False, None, np.empty((10, 4, 32), np.float16), None)
    with pytest.raises(LabError, match="causal is True or False"):
        check_shapes(q, k, v, "yes", None, None, None)


def test_offsets_give_lengths_or_one_sentence():
    assert check_offsets("cu_seqlens_q", np.array([0, 3, 3, 10], np.int32), 10) == [3, 0, 7]
    for offsets, total, batch, words in (
            (np.array([0, 3, 10], np.int64), 10, None, "int32"),
            (np.array([0], np.int32), 10, None, "B \\+ 1 offsets"),
            (np.array([1, 3, 10], np.int32), 10, None, "start at 0"),
            (np.array([0, 5, 3, 10], np.int32), 10, None, "never decrease"),
            (np.array([0, 3, 9], np.int32), 10, None, "end at"),
            (np.array([0, 3, 10], np.int32), 10, 3, "as many sequences")):
        with pytest.raises(LabError, match=words) as err:
            check_offsets("cu_seqlens_q", offsets, total, batch)
        assert str(err.value).count(". ") <= 1


def test_host_arrays_get_the_gpu_sentence():
    q, k, v = _arrays()
    offsets = np.array([0, 10], np.int32)
    with pytest.raises(LabError, match="GPU"):
        attention_varlen(q, k, v, offsets, np.array([0, 12], np.int32))
