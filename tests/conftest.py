import pytest

from lab.core import device


def pytest_collection_modifyitems(config, items):
    if device.gpu_available():
        return
    skip = pytest.mark.skip(reason=f"no CUDA GPU here: {device.why_no_gpu()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
