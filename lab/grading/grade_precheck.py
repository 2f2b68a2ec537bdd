"""The child process that reads one submission's file before any grading worker starts (lab.grading.grader's
check_content_in_child): a kernel's text and includes, or a dispatch table's whole parse. It prints one JSON line,
{"ok": bool, "text": the note or the sentence}, and needs no GPU.

It runs apart from the grader so that nothing in one file (a line that makes a reader crawl, a table that exhausts
the stack) can stall or stop the batch: the parent gives it a time limit and turns any failure into that
submission's sentence.

    python -m lab.grading.grade_precheck --kind kernel --file /abs/kernel.cu --shown kernel.cu --allowed a.cuh,b.cuh
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kind", required=True)
    p.add_argument("--file", required=True, type=Path)
    p.add_argument("--shown", required=True)
    p.add_argument("--allowed", default="", help="the lab headers the exercise allows, comma-separated")
    args = p.parse_args(argv)

    from lab.core.errors import LabError
    from lab.grading.grader import check_content

    allowed = {name for name in args.allowed.split(",") if name}
    try:
        answer = {"ok": True, "text": check_content(args.kind, args.file, args.shown, allowed)}
    except LabError as exc:
        answer = {"ok": False, "text": str(exc)}
    except RecursionError:
        answer = {"ok": False, "text": f"{args.shown} is nested too deeply to read; write it flat, as the starter is"}
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
