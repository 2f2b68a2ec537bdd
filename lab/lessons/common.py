"""What every lessons module needs: a family from its name, paths as a reader types them, Markdown text."""

from __future__ import annotations

from pathlib import Path

from lab.families import get_family
from lab.ladder import Family


def family_of(family: str | Family) -> Family:
    """A family given by name ("gemm_fp32") or already as a Family."""
    return get_family(family) if isinstance(family, str) else family


def shown_path(path: Path) -> str:
    """A path as a reader of this repository would type it: relative to the repo root when inside it."""
    from lab.build import REPO_ROOT

    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def describe_provenance(p: dict) -> str:
    """'NVIDIA H200 (sm_90) on 2026-11-29, commit 1697513703e1': where a set of numbers comes from."""
    commit = str(p.get("commit", "?"))[:12]
    return (f"{p.get('device', '?')} ({p.get('arch', '?')}) on {str(p.get('date', '?'))[:10]}, "
            f"commit {commit}")


class Markdown:
    """Text that Jupyter renders as Markdown and a terminal prints as it is."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def md(text: str) -> Markdown:
    return Markdown(text)
