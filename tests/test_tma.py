"""CPU: the host side of TMA (lab.core.tma): which operands TMA can read as they are, the box limits of the
128-byte swizzle, the 128 bytes passed by value, and the clear sentence when cuda-bindings is missing."""

import numpy as np
import pytest

from lab.core import tma
from lab.core.errors import LabError


@pytest.mark.parametrize("address, ld, legal", [
    (0x7F0000000000, 4096, True), (0x7F0000000000, 8, True), (0x7F0000000000, 4104, True),
    (0x7F0000000000, 4095, False), (0x7F0000000000, 4097, False), (0x7F0000000000, 1, False),
    (0x7F0000000002, 4096, False),  # a view that starts one element in
])
def test_refusal_names_the_broken_requirement(address, ld, legal):
    why = tma.refusal(address, ld)
    assert (why is None) == legal
    if not legal:
        assert ("16-byte aligned" in why) == (address % 16 != 0)
        assert ("multiple of 16 bytes" in why) == (address % 16 == 0)


def test_boxes_must_fit_the_128_byte_swizzle():
    tma.TensorMap2D(0, 4096, 4096, 8192, 64, 256).check()
    with pytest.raises(LabError, match="128-byte swizzle"):
        tma.TensorMap2D(0, 4096, 4096, 8192, 128, 128).check()  # 256-byte box rows
    with pytest.raises(LabError, match="at most 256 rows"):
        tma.TensorMap2D(0, 4096, 4096, 8192, 64, 512).check()


def test_a_map_travels_as_one_128_byte_element():
    raw = bytes(range(128))
    param = tma.as_parameter(raw)
    assert param.shape == (1,) and param.size == 1 and param.dtype.itemsize == 128  # CuPy: by value
    assert param.tobytes() == raw
    with pytest.raises(LabError, match="128 bytes"):
        tma.as_parameter(raw[:64])


def test_map_bytes_read_the_opaque_words():
    class FakeMap:
        opaque = list(range(16))

    assert tma._map_bytes(FakeMap()) == np.arange(16, dtype=np.uint64).tobytes()


def test_missing_cuda_bindings_is_one_sentence(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_bindings(name, *args, **kwargs):
        if name.startswith("cuda.bindings") or (name == "cuda" and args and "bindings" in (args[2] or ())):
            raise ImportError("no cuda.bindings here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_bindings)
    tma.encode.cache_clear()
    with pytest.raises(LabError, match="pip install cuda-bindings"):
        tma.encode(tma.TensorMap2D(0, 64, 64, 128, 64, 64))


def test_a_3d_map_names_three_sizes_two_strides_and_a_one_plane_box(monkeypatch):
    """TensorMap3D reaches cuTensorMapEncodeTiled as rank 3: (width, height, depth), the row and plane strides, and
    a box one plane deep, so a box past a plane's last row reads zeros instead of the next plane's rows."""
    import types

    calls = []

    class Drv:
        CUtensorMapDataType = types.SimpleNamespace(CU_TENSOR_MAP_DATA_TYPE_UINT16="u16")
        CUtensorMapInterleave = types.SimpleNamespace(CU_TENSOR_MAP_INTERLEAVE_NONE="none")
        CUtensorMapSwizzle = types.SimpleNamespace(CU_TENSOR_MAP_SWIZZLE_128B="128B")
        CUtensorMapL2promotion = types.SimpleNamespace(CU_TENSOR_MAP_L2_PROMOTION_L2_256B="256B")
        CUtensorMapFloatOOBfill = types.SimpleNamespace(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE="zero")
        CUresult = types.SimpleNamespace(CUDA_SUCCESS=0)
        cuuint64_t = cuuint32_t = staticmethod(int)

        @staticmethod
        def cuTensorMapEncodeTiled(*args):
            calls.append(args)
            return 0, types.SimpleNamespace(opaque=list(range(16)))

    monkeypatch.setattr(tma, "driver", lambda: Drv)
    tma.encode.cache_clear()
    spec = tma.TensorMap3D(1 << 20, 128, 1000, 64, 256, 256 * 1000, 64, 128)
    tma.encode(spec)
    rank, address, sizes, strides, box, steps = calls[0][1:7]
    assert (rank, address, sizes, strides, box, steps) == (3, 1 << 20, [128, 1000, 64], [256, 256000], [64, 128, 1],
                                                          [1, 1, 1])
    with pytest.raises(LabError, match="128-byte swizzle"):
        tma.TensorMap3D(0, 128, 1000, 64, 256, 256000, 128, 128).check()
    with pytest.raises(LabError, match="plane stride"):
        tma.TensorMap3D(0, 128, 1000, 64, 256, 256008 - 2, 64, 128).check()
    tma.encode.cache_clear()
