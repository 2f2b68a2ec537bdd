"""A minimal ctypes binding to NVRTC: compile a CUDA source to a cubin, with the compiler's log.

Why not `cupy_backends.cuda.libs.nvrtc`: its getCUBIN drops the last bytes of the image (harmless
for loading, but nvdisasm then rejects the file), and it cannot be asked for the cubin's size.
The library itself is found the way CuPy finds it (cuda-pathfinder: the pip wheel, then the system),
unless LAB_NVRTC_LIBRARY names one (e.g. to reproduce here the code another machine's NVRTC builds:
register counts and SASS differ between NVRTC versions).
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass

from lab.core.errors import LabError


@functools.lru_cache(maxsize=1)
def library_path() -> str:
    override = os.environ.get("LAB_NVRTC_LIBRARY")
    if override:
        if not os.path.isfile(override):
            raise LabError(f"LAB_NVRTC_LIBRARY={override} is not a file; point it at a libnvrtc.so or unset it.")
        return override
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception as exc:
        raise LabError(
            "NVRTC (CUDA's runtime compiler) was not found; install it with "
            "`pip install nvidia-cuda-nvrtc` (CUDA 13) or `nvidia-cuda-nvrtc-cu12` (CUDA 12), "
            f"or run `bash run.sh test`, which does. ({exc})"
        ) from None


@functools.lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    return ctypes.CDLL(library_path())


class NvrtcError(Exception):
    pass


def _check(status: int, what: str) -> None:
    if status != 0:
        lib = _lib()
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise NvrtcError(f"{what}: {lib.nvrtcGetErrorString(status).decode()}")


def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def supported_archs() -> tuple[int, ...]:
    lib = _lib()
    n = ctypes.c_int()
    _check(lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * n.value)()
    _check(lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return tuple(archs)


@dataclass
class NvrtcResult:
    ok: bool
    log: str
    cubin: bytes = b""
    lowered_names: dict[str, str] | None = None


def compile_to_cubin(source: str, filename: str, options: list[str], name_expressions: list[str],
                     headers: dict[str, str] | None = None) -> NvrtcResult:
    """Compile; on a compile error return ok=False with the log (never raise for user errors).

    `headers` (name -> text) are handed to NVRTC in memory: an `#include "name"` is served from them
    without touching the filesystem."""
    lib = _lib()
    prog = ctypes.c_void_p()
    headers = headers or {}
    count = len(headers)
    texts = (ctypes.c_char_p * count)(*[t.encode() for t in headers.values()]) if count else None
    names = (ctypes.c_char_p * count)(*[n.encode() for n in headers]) if count else None
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), filename.encode(), count, texts, names),
           "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            _check(lib.nvrtcAddNameExpression(prog, expr.encode()), "nvrtcAddNameExpression")
        encoded = [o.encode() for o in options]
        status = lib.nvrtcCompileProgram(prog, len(encoded), (ctypes.c_char_p * len(encoded))(*encoded))
        size = ctypes.c_size_t()
        _check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.value.decode(errors="replace")
        if status != 0:
            return NvrtcResult(False, log)
        lowered: dict[str, str] = {}
        for expr in name_expressions:
            name = ctypes.c_char_p()
            if lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(name)) == 0:
                lowered[expr] = name.value.decode()
        _check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        image = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(prog, image), "nvrtcGetCUBIN")
        return NvrtcResult(True, log, image.raw, lowered)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
