"""CuPy Kernel Lab: CUDA C++ kernel ladders, compiled through CuPy, checked and measured honestly."""

from lab.core.errors import LabError

__all__ = ["LabError"]
__version__ = "0.1.0"
