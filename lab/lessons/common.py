"""What every lessons module needs: a family from its name, paths as a reader types them, Markdown text, and the
loud LIVE/REPLAY box each notebook opens with."""

from __future__ import annotations

from pathlib import Path

from lab.core.ladder import Family
from lab.families import get_family


def family_of(family: str | Family) -> Family:
    """A family given by name ("gemm_fp32") or already as a Family."""
    return get_family(family) if isinstance(family, str) else family


def shown_path(path: Path) -> str:
    """A path as a reader of this repository would type it: relative to the repo root when inside it."""
    from lab.core.build import REPO_ROOT

    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def describe_provenance(p: dict) -> str:
    """'NVIDIA H200 (sm_90) on 2026-11-29, commit 1697513703e1': where a set of numbers comes from."""
    commit = str(p.get("commit", "?"))[:12]
    return (f"{p.get('device', '?')} ({p.get('arch', '?')}) on {str(p.get('date', '?'))[:10]}, "
            f"commit {commit}")


def run_stamp() -> str:
    """'MEASURED IN THIS RUN on NVIDIA H200 (sm_90, 132 SMs, 60.0 MiB L2) at commit 1a2b3c4d5e6f, 2026-12-02 01:40
    UTC': what a live banner says, so a saved notebook reads as a dated snapshot of one run. Needs a GPU."""
    import datetime as dt

    from lab.core import device
    from lab.measure.records import format_bytes, git_commit

    gpu = device.current()
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"MEASURED IN THIS RUN on {gpu.name} ({gpu.sm}, {gpu.sm_count} SMs, {format_bytes(gpu.l2_bytes)} L2) "
            f"at commit {git_commit()[:12]}, {when}")


def box(lines: list[str], char: str = "#") -> str:
    """Lines framed by `char`: the notebooks' loud banners."""
    width = max(len(line) for line in lines) + 4
    edge = char * width
    return "\n".join([edge] + [f"{char} {line.ljust(width - 4)} {char}" for line in lines] + [edge])


REPLAY_HEAD = "REPLAY MODE: NOTHING BELOW IS MEASURED ON THIS MACHINE."


def mode_box(live: bool, reason: str, live_lines: list[str], body: list[str]) -> str:
    """A notebook's banner: `live_lines` (what this run measures) framed with '=' when live, else the REPLAY line and
    why ('#'); then `body`, one entry per record file (record_lines) and what is computed here."""
    head = live_lines if live else [REPLAY_HEAD, f"Why: {reason}."]
    return box(head + body, "=" if live else "#")


def record_lines(label: str, provenance: dict | None, path: Path, recorded_by: str) -> list[str]:
    """One record file in a banner: REPLAYED from where it was made, or NO RECORDED RESULTS at its path and
    `recorded_by` (a sentence: the command that makes it)."""
    if provenance is None:
        return [f"{label}: NO RECORDED RESULTS at {shown_path(path)};",
                f"  its cells say so and show nothing. {recorded_by}."]
    return [f"{label}: REPLAYED from {describe_provenance(provenance)}."]


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


def replayed_record(path: Path) -> dict | None:
    """A JSON record with provenance, marked replayed (what a notebook shows from it was measured elsewhere, at
    another time); None when the file is absent, unreadable or has no provenance."""
    import json

    try:
        payload = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("provenance"), dict):
        return None
    return payload | {"replayed": True}
