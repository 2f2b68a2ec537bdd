#!/usr/bin/env python3
"""Convert notebooks/src/*.py (jupytext percent format) to their paired notebooks/*.ipynb and execute them.

    python scripts/execute_notebooks.py --inplace             # on the GPU machine: commit the outputs
    python scripts/execute_notebooks.py --out /tmp/executed   # anywhere: executed copies elsewhere
    python scripts/execute_notebooks.py --sync                # no execution: refresh the .ipynb inputs
    python scripts/execute_notebooks.py notebooks/src/01_memory_bound.py --out /tmp/x   # one notebook

The .py file (notebooks/src/, out of the learner's way) is the source of truth; the .ipynb twin in notebooks/ carries
the outputs. --sync rewrites each .ipynb's cells from its .py and keeps the outputs of exactly the code cells whose
source did not change.
Each cell runs under a time limit (--timeout). On an error the script still writes the partly executed
notebook (for reading the traceback) and exits 1, naming the notebook and the cell that failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO / "notebooks"
SOURCE_DIR = NOTEBOOK_DIR / "src"
PAIRING = "ipynb,src//py:percent"  # notebooks/NN.ipynb <-> notebooks/src/NN.py


def ipynb_of(py: Path) -> Path:
    """The .ipynb twin of notebooks/src/NN.py: notebooks/NN.ipynb."""
    return py.parent.parent / py.with_suffix(".ipynb").name


def py_of(path: Path) -> Path:
    """The .py twin of a notebook named either way (notebooks/NN.ipynb, notebooks/src/NN.py, or NN)."""
    path = Path(path)
    if path.suffix == ".py":
        return path
    return path.parent / "src" / path.with_suffix(".py").name if path.suffix == ".ipynb" else SOURCE_DIR / f"{path}.py"


def notebook_sources(paths: list[str] | None = None) -> list[Path]:
    """The .py twins to work on: those named (a .py or its .ipynb), else every notebooks/src/NN_*.py."""
    if not paths:
        return sorted(SOURCE_DIR.glob("[0-9][0-9]_*.py"))
    found = []
    for p in map(Path, paths):
        py = py_of(p)
        if not py.is_file():
            raise SystemExit(f"error: {py} does not exist; name a notebooks/src/NN_*.py or notebooks/NN_*.ipynb file.")
        found.append(py.resolve())
    return found


RUN_KEY = "lab_run"  # the .ipynb metadata entry that says where, when and on what inputs its outputs were made


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def lessons_imported(text: str) -> set[Path]:
    """The lab.lessons modules a piece of code imports, and what they import in turn (static: every import statement,
    at any depth, in the code and in each module found; a package's __init__ comes with its modules). A notebook's
    outputs depend on these, not on the lessons modules of other notebooks."""
    import ast

    lessons = REPO / "lab" / "lessons"

    def module_file(dotted: str) -> Path | None:
        parts = dotted.split(".")
        if parts[:2] != ["lab", "lessons"]:
            return None
        base = REPO.joinpath(*parts)
        if base.is_dir():
            return base / "__init__.py"
        return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None

    def imports(source: str, package: str) -> set[str]:
        # Lines a notebook runs as shell or magic commands are not Python: drop them before parsing.
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importing module's package
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names.add(base)
                names |= {f"{base}.{a.name}" for a in node.names}  # a submodule, where the name is one
        return names

    found: set[Path] = set()
    todo = [(text, "lab.lessons")]
    while todo:
        source, package = todo.pop()
        for dotted in imports(source, package):
            parts = dotted.split(".")
            for n in range(2, len(parts) + 1):  # lab.lessons, its subpackages, the module itself
                f = module_file(".".join(parts[:n]))
                if f is not None and f not in found:
                    found.add(f)
                    pkg = ".".join(f.relative_to(REPO).with_suffix("").parts)
                    todo.append((f.read_text(), pkg if f.name == "__init__.py" else pkg.rsplit(".", 1)[0]))
    return {f for f in found if f.is_relative_to(lessons)}


def notebook_inputs(py: Path) -> dict[str, str]:
    """What a notebook's outputs depend on, each file with its content hash: the notebook itself, the lessons modules
    it imports (lessons_imported), and for each family the notebook names, its module, its kernels and the shared
    device headers those kernels include (every shared header where the notebook uses lab.ops, which runs kernels of
    many families). A saved output made before a change to one of them is stale."""
    sys.path.insert(0, str(REPO)) if str(REPO) not in sys.path else None
    from lab.core.build import included_headers
    from lab.families import families

    text = py.read_text()
    lessons = sorted(lessons_imported(text))
    files = {py, *lessons}
    # Families are named in the notebook or in the topic modules of the lessons layer it uses.
    text += "".join(m.read_text() for m in lessons if m.stem != "__init__" and re.search(rf"\b{m.stem}\b", text))
    named = [fam for name, fam in families().items() if re.search(rf"[\"']{re.escape(name)}[\"']", text)]
    kernels: set[Path] = set()
    for fam in named:
        files.add(Path(sys.modules[type(fam).__module__].__file__))
        for rung in fam.rungs:
            kernels |= set((REPO / "kernels" / rung.spec.source).parent.glob("*.cu"))
    files |= kernels
    for kernel in kernels:
        files |= set(included_headers(kernel.read_text()))
    if re.search(r"\blab\.ops\b|from lab import .*\bops\b", text):  # the runtime a notebook teaches
        files |= {*(REPO / "lab" / "ops").glob("*.py"), REPO / "lab" / "ops" / "default_table.json"}
        files |= set((REPO / "kernels" / "common").glob("*.cuh"))
    return {str(f.relative_to(REPO)): _digest(f) for f in sorted(files) if f.is_file() and f.is_relative_to(REPO)}


def run_stamp(py: Path, mode: str) -> dict:
    """The metadata a run writes into the .ipynb: the commit, the date, live or replay, the GPU, and the inputs."""
    sys.path.insert(0, str(REPO)) if str(REPO) not in sys.path else None
    from lab.measure.records import git_commit

    device = "no GPU"
    if mode == "live":
        from lab.core import device as lab_device

        gpu = lab_device.current()
        device = f"{gpu.name} ({gpu.sm}, {gpu.sm_count} SMs)"
    return {"commit": git_commit(), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "mode": mode, "device": device, "inputs": notebook_inputs(py)}


def stale_inputs(py: Path, ipynb: Path) -> list[str]:
    """The notebook's inputs (as they are now) that changed, or were not inputs, since the saved outputs of `ipynb`
    were made: every input when it records none. A file that was an input and no longer is does not count (the
    notebook itself is an input, so a change that drops an import shows as its change)."""
    import json

    saved = json.loads(ipynb.read_text()).get("metadata", {}).get(RUN_KEY, {}).get("inputs", {})
    now = notebook_inputs(py)
    return sorted(name for name in now if now[name] != saved.get(name))


def read_paired(py: Path):
    """The notebook as the .py twin describes it, with the pairing recorded in its metadata."""
    import jupytext

    nb = jupytext.read(py)
    nb.metadata.setdefault("jupytext", {})["formats"] = PAIRING
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.setdefault("kernelspec", kernelspec)
    return nb


def sync(py: Path) -> Path:
    """Rewrite the .ipynb's cells from the .py, keeping outputs where a cell's source is unchanged."""
    import jupytext

    nb = read_paired(py)
    ipynb = ipynb_of(py)
    if ipynb.is_file():
        nb = keep_unchanged_outputs(nb, jupytext.read(ipynb))
    jupytext.write(nb, ipynb)
    return ipynb


def keep_unchanged_outputs(nb, saved):
    """`nb` (cells from the .py) with the outputs of `saved` (the .ipynb) on exactly the code cells whose source is
    unchanged, matched by source in order, and none on a changed or new cell: an output is never attached to code
    that did not make it. The saved notebook's metadata (the run that made the outputs) is kept, and so are an
    unchanged cell's id and metadata (markdown cells too): syncing a notebook whose .py did not change rewrites
    nothing."""
    pool: dict[tuple[str, str], list] = {}
    for cell in saved.cells:
        pool.setdefault((cell.cell_type, cell.source.strip()), []).append(cell)
    for cell in nb.cells:
        match = pool.get((cell.cell_type, cell.source.strip()))
        old = match.pop(0) if match else None
        if old is not None:
            cell.id, cell.metadata = old.get("id", cell.get("id")), old.metadata
        if cell.cell_type != "code":
            continue
        cell.outputs = old.outputs if old is not None else []
        cell.execution_count = old.execution_count if old is not None else None
    nb.metadata = {**saved.metadata, **{k: v for k, v in nb.metadata.items() if k != RUN_KEY}}
    return nb


def _first_line(source: str) -> str:
    line = next((ln for ln in source.splitlines() if ln.strip()), "")
    return line if len(line) <= 80 else line[:77] + "..."


def _gpu_mode() -> str:
    """'live' where the notebooks will find a GPU (lab.lessons.mode's own test), else 'replay'."""
    sys.path.insert(0, str(REPO)) if str(REPO) not in sys.path else None
    from lab.lessons.mode import mode

    return "live" if mode().live else "replay"


def execute(py: Path, out_path: Path, timeout: int, kernel: str) -> str | None:
    """Execute one notebook and write it to out_path; returns None, or what failed and where."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = read_paired(py)
    started = {"index": None}

    def on_cell_start(cell, cell_index, **_):
        started["index"] = cell_index

    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel, allow_errors=False,
                            resources={"metadata": {"path": str(ipynb_of(py).parent)}}, on_cell_start=on_cell_start)
    failure = None
    mode = _gpu_mode()
    nb.metadata[RUN_KEY] = run_stamp(py, mode)
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        i = started["index"]
        where = f"cell {i} ({_first_line(nb.cells[i].source)!r})" if i is not None else "kernel start"
        if isinstance(exc, CellExecutionError):
            what = f"{exc.ename}: {exc.evalue}"
        elif isinstance(exc, CellTimeoutError):
            what = f"timed out after {timeout} s"
        else:
            what = f"the kernel died ({exc})"
        failure = f"{py.relative_to(REPO) if py.is_relative_to(REPO) else py}: {where} failed: {what}"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, out_path)
    return failure


def execute_all(sources: list[Path], out_dir: Path | None = None, timeout: int = 600, kernel: str = "python3",
                log=print) -> list[str]:
    """Execute each notebook, in place (out_dir None) or into out_dir; returns the failures."""
    failures = []
    for py in sources:
        target = ipynb_of(py) if out_dir is None else Path(out_dir) / ipynb_of(py).name
        t0 = time.perf_counter()
        failure = execute(py, target, timeout, kernel)
        status = "FAILED" if failure else "ok"
        log(f"{py.name}: {status} in {time.perf_counter() - t0:.1f} s -> {target}")
        if failure:
            failures.append(failure)
    return failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", help="notebooks/src/NN_*.py (or notebooks/NN_*.ipynb) to run; default: all")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--inplace", action="store_true", help="execute; write outputs into notebooks/*.ipynb")
    mode.add_argument("--out", type=Path, help="execute and write the executed notebooks into this folder")
    mode.add_argument("--sync", action="store_true", help="only refresh each .ipynb's cells from its .py")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    args = p.parse_args(argv)

    sources = notebook_sources(args.notebooks)
    if not sources:
        print(f"error: no NN_*.py found in {SOURCE_DIR}", file=sys.stderr)
        return 2
    if args.sync:
        for py in sources:
            print(f"{py.name} -> {sync(py).name}")
        return 0
    failures = execute_all(sources, None if args.inplace else args.out, args.timeout, args.kernel)
    for f in failures:
        print(f"error: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
