"""The catalogue: one module per kernel family (how to launch its rungs, its reference and its ceiling),
and here the lookup every driver uses. The base types live in lab.core.ladder, which imports no family, so
no module imports its importer."""

from __future__ import annotations

from lab.core.errors import LabError
from lab.core.ladder import Family, Rung
from lab.families.attention import AttentionFamily
from lab.families.attention_decode import AttentionDecodeFamily
from lab.families.attention_varlen import AttentionVarlenFamily
from lab.families.copy import CopyFamily
from lab.families.decode import DecodeFamily
from lab.families.gemm import GemmFp32Family
from lab.families.gemm_epilogue import GemmFp32EpilogueFamily, GemmTcEpilogueFamily
from lab.families.gemm_split_k import GemmSplitKFamily
from lab.families.gemm_tc import GemmTcFamily
from lab.families.grouped_gemm import GroupedGemmFamily
from lab.families.norms import LayerNormFamily, RMSNormFamily
from lab.families.softmax import SoftmaxFamily
from lab.families.transpose import TransposeFamily


def families() -> dict[str, Family]:
    """Every ladder, in reading order (a fresh instance each call: families hold no state worth sharing)."""
    return {f.name: f for f in (CopyFamily(), TransposeFamily(), GemmFp32Family(), GemmTcFamily(),
                                            GemmFp32EpilogueFamily(), GemmTcEpilogueFamily(), SoftmaxFamily(),
                                            RMSNormFamily(), LayerNormFamily(), GemmSplitKFamily(),
                                            DecodeFamily(), GroupedGemmFamily(), AttentionFamily(),
                                            AttentionDecodeFamily(), AttentionVarlenFamily())}


def get_family(name: str) -> Family:
    known = families()
    if name not in known:
        raise LabError(f"Unknown family {name!r}; the ladders are: {', '.join(known)}.")
    return known[name]


def all_rungs() -> list[Rung]:
    return [r for f in families().values() for r in f.rungs]
