"""`lab release OUT_DIR`: the student bundle, with neither solutions nor hidden checks.

What goes in: the `lab` package, pyproject.toml, run.sh, a student README (lab/grading/student_readme.md with
the exercise table filled in from exercise.json; the developer README speaks of tests and instructor
commands a bundle lacks), the notebooks (the .py twins, and the .ipynb files with every output cleared:
committed outputs print the rungs' sources), results/ (less results/*/grading, whose records name the
hidden check groups), kernels/ with every file's solution regions stripped, for each exercise its
README.md, exercise.json and a freshly generated starter.cu (a dispatch_rules exercise: its starter table,
the student's file as shipped), and bundle.json (which kernels are shipped stripped, for the tour to say so).
What stays out: hidden.json, a table exercise's solution/ (its reference table), tests/, .ci/, scripts/,
hidden files and build leftovers. The leak check looks for solution lines of the kernels and for the
reference tables, in every file of the bundle.

The bundle is built in a temporary folder next to OUT_DIR and moved into place only once it is complete
and free of solution text, so a failed release never leaves half a bundle behind.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from lab.core.build import KERNELS_DIR, REPO_ROOT
from lab.core.errors import LabError
from lab.grading import exercises

TOP_FILES = ("pyproject.toml", "run.sh")
STUDENT_README = Path(__file__).with_name("student_readme.md")
INSTRUCTORS_HEADING = "## For instructors"  # in exercises/README.md: left out of the bundle from here on
MANIFEST = "bundle.json"  # at a bundle's root: what `lab release` changed (lab.cli.tour reads it)
SKIPPED_RESULTS = {"grading"}  # results/<gpu>/grading: the grader's evidence names the hidden check groups
EXERCISE_FILES = ("README.md", "exercise.json")  # starter.cu is regenerated, hidden.json never goes
SKIPPED_DIRS = {"__pycache__", ".ipynb_checkpoints"}
SKIPPED_SUFFIXES = {".pyc", ".pyo"}
# Solution lines this short say nothing about a solution ("}", "__syncthreads();" is 16).
MIN_LEAK_CHARS = 12
# Lines inside solution regions that give nothing away: the naive transpose (rung 01, shipped whole)
# has the same tile indexing and loop, the GEMM rungs 06-08 (shipped whole) the same loop over a
# k tile, and "#pragma unroll" and the bare barrier occur in every tiled kernel.
GENERIC_LINES = frozenset({
    "#pragma unroll",
    "__syncthreads();",
    "int c = blockIdx.x * TILE + threadIdx.x;",
    "for (int k = 0; k < TILE; k += BLOCK_ROWS)",
    "for (int k = 0; k < TILE; k += BLOCK_ROWS) {",
    "for (int k = 0; k < BK; ++k) {",
    "for (int mi = 0; mi < MI; ++mi)",  # gemm_tc: the warp tile's loops appear in the epilogue too
})


def _shipped_files(root: Path) -> Iterator[Path]:
    """Every file under root except hidden files and folders and build leftovers, in a stable order."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part in SKIPPED_DIRS for part in rel.parts):
            continue
        if path.is_file() and path.suffix not in SKIPPED_SUFFIXES:
            yield path


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def _copy_tree(src: Path, dst: Path, skip: set[str] = frozenset()) -> None:
    for path in _shipped_files(src):
        if not skip & set(path.relative_to(src).parts[:-1]):
            _copy(path, dst / path.relative_to(src))


def cleared_notebook(text: str) -> str:
    """An .ipynb with every output and execution count removed (what a fresh `Clear all outputs` gives)."""
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _write_notebooks(src: Path, dst: Path) -> None:
    for path in _shipped_files(src):
        target = dst / path.relative_to(src)
        if path.suffix == ".ipynb":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(cleared_notebook(path.read_text()))
        elif path.suffix == ".py":
            _copy(path, target)


def _write_kernels(src: Path, dst: Path) -> list[str]:
    """Every kernel with its solution regions stripped; returns the ones that had any (relative to src)."""
    stripped = []
    for path in _shipped_files(src):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        rel = path.relative_to(src.parent)
        text = path.read_text()
        target.write_text(exercises.strip_solution(text, str(rel)))
        if exercises.solution_regions(text, str(rel)):
            stripped.append(path.relative_to(src).as_posix())
    return stripped


def student_readme() -> str:
    """The bundle's README: lab/grading/student_readme.md with its exercise table and notebook list filled in
    from the exercises' own files (nothing typed twice)."""
    rows = ["| exercise | what you write | points | performance target (same run) |", "|---|---|---:|---|"]
    for ex in exercises.all_exercises(exercises.KINDS):
        target = f"{ex.performance.target_of_ceiling:.2f}x of {ex.ceiling_title}"
        rows.append(f"| `{ex.id}` | {ex.title} | {ex.max_points(include_hidden=False):g} | {target} |")
    books = sorted(p.name for p in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    return (STUDENT_README.read_text().replace("{exercise_table}", "\n".join(rows))
            .replace("{notebook_list}", ", ".join(f"`{b}`" for b in books)))


def stripped_kernels(root: Path | None = None) -> list[str]:
    """The kernels (relative to kernels/) a student bundle ships stripped, from its bundle.json; [] in the
    development tree, which has none."""
    manifest = (REPO_ROOT if root is None else root) / MANIFEST
    if not manifest.is_file():
        return []
    return list(json.loads(manifest.read_text()).get("stripped_kernels", []))


def _write_exercises(dst: Path) -> None:
    top_readme = exercises.EXERCISES_DIR / "README.md"
    if top_readme.is_file():  # the students' part: the instructors' section speaks of files a bundle lacks
        dst.mkdir(parents=True, exist_ok=True)
        (dst / "README.md").write_text(top_readme.read_text().split(INSTRUCTORS_HEADING)[0].rstrip() + "\n")
    for ex in exercises.all_exercises(exercises.KINDS):
        folder = dst / ex.path.name
        for name in EXERCISE_FILES:
            _copy(ex.path / name, folder / name)
        (folder / ex.starter_path.name).write_text(ex.starter_text())


def solution_lines(kernels_dir: Path | None = None) -> dict[str, str]:
    """Each distinctive line of every solution region under kernels_dir -> the file it comes from. A line that the
    same file also has outside its regions (a loop header the starter keeps) is not distinctive: the starter ships
    it anyway."""
    kernels_dir = KERNELS_DIR if kernels_dir is None else kernels_dir
    lines: dict[str, str] = {}
    for path in _shipped_files(kernels_dir):
        rel = str(path.relative_to(kernels_dir))
        text_of_file = path.read_text()
        outside = {line.strip() for line in exercises.strip_solution(text_of_file, rel).splitlines()}
        for region in exercises.solution_regions(text_of_file, rel):
            for line in region.splitlines():
                text = line.strip()
                if len(text) > MIN_LEAK_CHARS and text not in GENERIC_LINES and text not in outside:
                    lines.setdefault(text, rel)
    return lines


def solution_tables() -> dict[str, object]:
    """Each dispatch_rules exercise's reference table (lab.ops.rules.Table) -> the file it comes from."""
    from lab.ops import rules

    return {rules.load(ex.solution_path): str(ex.solution_path.relative_to(REPO_ROOT))
            for ex in exercises.all_exercises((exercises.DISPATCH_RULES,)) if ex.solution_path.is_file()}


def _table_in(data: bytes, tables: dict) -> str | None:
    """The reference a file is a copy of, or None: a JSON file that parses to one of the reference tables (in
    any layout, notes or not) gives the solution away as surely as its bytes would."""
    from lab.core.errors import LabError
    from lab.ops import rules

    if b'"rules"' not in data:
        return None
    try:
        pending = [json.loads(data)]
    except ValueError:  # not JSON
        return None
    while pending:  # the file itself, or any object inside it (a record that quotes a table)
        item = pending.pop()
        if isinstance(item, dict) and "rules" in item:
            try:
                found = tables.get(rules.parse(item))
            except LabError:  # an object that is no table
                found = None
            if found:
                return found
        pending += list(item.values()) if isinstance(item, dict) else item if isinstance(item, list) else []
    return None


_RUNTIME_TABLE = Path("lab/ops/default_table.json")


def find_leaks(bundle: Path, lines: dict[str, str] | None = None, tables: dict | None = None) -> list[str]:
    """'file: line (from kernel)' for every solution line found anywhere in the bundle's files, and 'file: the
    reference table of ...' for every file that is a reference table of a dispatch_rules exercise."""
    lines = solution_lines() if lines is None else lines
    tables = solution_tables() if tables is None else tables
    found = []
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        data = path.read_bytes()  # every file, text or not
        for line, origin in lines.items():
            if line.encode() in data:
                found.append(f"{path.relative_to(bundle)}: {line!r} (solution text of {origin})")
        # lab.ops's built-in table ships with the runtime (lab.ops cannot dispatch without it); exercise 09's
        # reference is that table, as exercise 09's README says, so it is public in the lab itself.
        origin = _table_in(data, tables) if tables and path.relative_to(bundle) != _RUNTIME_TABLE else None
        if origin:
            found.append(f"{path.relative_to(bundle)}: the reference table of {origin}")
    return found


def _check_target(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise LabError(f"{out_dir} is a file; give `lab release` a new or empty folder.")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise LabError(f"{out_dir} is not empty; give `lab release` a new or empty folder, so that no old file "
                       "(a hidden check, a solution) can end up in the bundle.")
    if out_dir.resolve() == REPO_ROOT or REPO_ROOT.is_relative_to(out_dir.resolve()):
        raise LabError(f"{out_dir} contains the lab itself; release into a folder outside it.")


def release(out_dir: Path) -> Path:
    """Write the student bundle into out_dir (new or empty) and return its resolved path."""
    out_dir = Path(out_dir).expanduser()
    _check_target(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as tmp:
        bundle = Path(tmp) / "bundle"
        bundle.mkdir()
        for name in TOP_FILES:
            _copy(REPO_ROOT / name, bundle / name)
        (bundle / "README.md").write_text(student_readme())
        _copy_tree(REPO_ROOT / "lab", bundle / "lab")
        _copy_tree(REPO_ROOT / "results", bundle / "results", skip=SKIPPED_RESULTS)
        _write_notebooks(REPO_ROOT / "notebooks", bundle / "notebooks")
        stripped = _write_kernels(KERNELS_DIR, bundle / "kernels")
        _write_exercises(bundle / "exercises")
        (bundle / MANIFEST).write_text(json.dumps({"stripped_kernels": stripped}, indent=1) + "\n")
        leaks = find_leaks(bundle)
        if leaks:
            shown = "\n  ".join(leaks[:10])
            raise LabError(f"The bundle would contain solution text; nothing was written:\n  {shown}\n"
                           "Put that code inside a // BEGIN SOLUTION ... // END SOLUTION region, and keep a "
                           "reference table in its exercise's solution/ folder only.")
        if out_dir.is_dir():
            out_dir.rmdir()  # empty (checked above); the finished bundle takes its place
        bundle.rename(out_dir)
    return out_dir.resolve()


def bundle_files(bundle: Path) -> list[str]:
    """The bundle's files as sorted relative paths (for reports and tests)."""
    return [str(p.relative_to(bundle)) for p in sorted(bundle.rglob("*")) if p.is_file()]
