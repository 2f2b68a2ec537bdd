"""lab.ops: the runtime a practitioner imports. One call per operation; underneath, the shape is classified,
a path is picked from the dispatch table (or the autotune cache), the kernel is compiled once (the build cache)
and its launch prepared once per shape and operands, and everything that was decided is counted.

    import lab.ops as ops
    y = ops.matmul(x, w, layout="TN", residual=h)      # fp16/bf16 GEMM with a fused epilogue
    o = ops.attention(q, k, v, causal=True)            # fp16/bf16 attention, GQA, bottom-right causal
    o = ops.attention_varlen(q, k, v, cu_q, cu_k, causal=True)  # packed sequences of different lengths
    ops.stats()                                           # hits, misses, fallbacks, compiles, per path

Submodules: rules (the dispatch table's format), shapes (classification and buckets), paths (the kernels a
rule can name), dispatch (decisions and prepared launches), store (the on-disk autotune cache), tune (the
search), api (matmul, softmax, rmsnorm, layernorm), attn (attention), attn_varlen (attention_varlen), graphs
(capture: lab.ops calls as one CUDA graph), counters.
The names below load lazily, so importing a submodule (the store from a test, say) never imports CuPy.
"""

from __future__ import annotations

_API = ("matmul", "softmax", "rmsnorm", "layernorm", "default_runtime", "set_rules")
_MANIFEST = ("warmup",)
_COUNTERS = ("stats", "reset_stats")
_GRAPHS = ("capture",)
_ATTENTION = ("attention",)  # in lab.ops.attn: a submodule named attention would shadow the function
_ATTENTION_VARLEN = ("attention_varlen",)  # in lab.ops.attn_varlen, likewise


def __getattr__(name: str):
    if name in _API:
        from lab.ops import api

        return getattr(api, name)
    if name in _MANIFEST:
        from lab.ops import manifest

        return getattr(manifest, name)
    if name in _COUNTERS:
        from lab.ops import counters

        return getattr(counters, name)
    if name in _ATTENTION:
        from lab.ops import attn

        return attn.attention
    if name in _ATTENTION_VARLEN:
        from lab.ops import attn_varlen

        return attn_varlen.attention_varlen
    if name in _GRAPHS:
        from lab.ops import graphs

        return getattr(graphs, name)
    raise AttributeError(f"module 'lab.ops' has no attribute {name!r}")


__all__ = [*_API, *_ATTENTION, *_ATTENTION_VARLEN, *_MANIFEST, *_COUNTERS, *_GRAPHS]
