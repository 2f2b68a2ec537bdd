"""lab.ops called with NumPy arrays: every mistake that can be seen without a GPU gets its own sentence first, and
then one sentence that says there is no GPU (or, where there is one, how to move the arrays onto it)."""

from __future__ import annotations

import numpy as np
import pytest

import lab.ops as ops
from lab.core import device
from lab.core.errors import LabError

A = np.ones((4, 8), np.float16)
W = np.ones((16, 8), np.float16)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    monkeypatch.setattr(device, "why_no_gpu", lambda: "no CUDA driver")


@pytest.mark.parametrize("kwargs, words", [
    ({"layout": "NN"}, "b gives K = 16"),
    ({"layout": "TN", "activation": "swish"}, "activation is one of"),
    ({"layout": "XX"}, "layout is \"NN\""),
    ({"layout": "TN", "bias": np.ones(16, np.float16)}, "bias must be float32"),
    ({"layout": "TN", "out": np.empty((4, 15), np.float16)}, "out must be a C-contiguous"),
    ({"layout": "TN", "residual": np.ones((4, 16), np.float32)}, "residual must be"),
])
def test_a_wrong_argument_is_named_before_the_missing_gpu(no_gpu, kwargs, words):
    with pytest.raises(LabError, match=words):
        ops.matmul(A, W, **kwargs)


def test_a_valid_call_on_numpy_arrays_says_there_is_no_gpu(no_gpu):
    with pytest.raises(LabError) as err:
        ops.matmul(A, W, layout="TN", bias=np.ones(16, np.float32), activation="silu")
    text = str(err.value)
    assert "runs on a CUDA GPU" in text and "no CUDA driver" in text and "cupy.asarray" not in text
    assert "\n" not in text


def test_with_a_gpu_numpy_arrays_are_told_how_to_move(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    with pytest.raises(LabError, match="convert with cupy.asarray"):
        ops.matmul(A, W, layout="TN")


def test_wrong_types_and_non_arrays_get_their_sentence(no_gpu):
    with pytest.raises(LabError, match="takes float16"):
        ops.matmul(A.astype(np.int32), W.astype(np.int32), layout="TN")
    with pytest.raises(LabError, match="takes arrays"):
        ops.matmul([[1.0]], W, layout="TN")


def test_row_ops_check_numpy_arrays_then_say_there_is_no_gpu(no_gpu):
    x, w = np.ones((3, 8), np.float16), np.ones(8, np.float16)
    with pytest.raises(LabError, match="weight and bias must be float16 of shape"):
        ops.rmsnorm(x, np.ones(7, np.float16))
    with pytest.raises(LabError, match="C-contiguous"):
        ops.rmsnorm(np.ones((8, 3), np.float16).T, np.ones(8, np.float16)[:8])
    with pytest.raises(LabError, match="runs on a CUDA GPU"):
        ops.rmsnorm(x, w)
