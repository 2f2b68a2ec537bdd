"""The layers of lab/ (docs/architecture.md), read from the code: every import of a lab module, at the top of a file
or inside a function, goes to the module's own layer or one below it, and no new import cycle appears.

Each layer is a package of lab/. KNOWN_CYCLES is a ratchet: a cycle that is broken must leave it (the test fails on
a listed cycle that no longer exists), and a new one fails the test, so the house can only get tidier."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parent.parent / "lab"

# Lowest first. A module may import its own layer and every layer before it.
LAYERS = {
    "core": ["core", "core.*"],
    "measure": ["measure", "measure.*"],
    "tools": ["tools", "tools.*"],
    "families": ["families", "families.*"],
    "ops": ["ops", "ops.*"],
    "studies": ["studies", "studies.*"],
    "grading": ["grading", "grading.*"],
    "lessons": ["lessons", "lessons.*"],
    "cli": ["cli", "cli.*", "__main__"],
}
# Cycles hidden today by an import inside a function; each is one to break, never one to add.
KNOWN_CYCLES = {
    frozenset({"lessons.mode", "lessons.views"}),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in LAB.rglob("*.py"):
        parts = path.relative_to(LAB).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name or "lab"] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The lab modules a file imports anywhere in it (`from lab.x import y` names lab.x.y where that is a module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                (node.module == "lab" or node.module.startswith("lab.")):
            base = node.module[4:] if node.module != "lab" else ""
            subs = {f"{base}.{a.name}".lstrip(".") for a in node.names} & modules.keys()
            out |= subs or ({base} if base else set())
        elif isinstance(node, ast.Import):
            out |= {a.name[4:] for a in node.names if a.name.startswith("lab.") and a.name[4:] in modules}
    return out


def _layer_of(name: str) -> int | None:
    for rank, members in enumerate(LAYERS.values()):
        for pattern in members:
            if name == pattern or pattern.endswith(".*") and name.startswith(pattern[:-1]):
                return rank
    return None


MODULES = _modules()
PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}
GRAPH = {name: _imports(path, MODULES) - {name} for name, path in MODULES.items()}


def test_every_module_has_a_layer():
    missing = sorted(n for n in MODULES if n != "lab" and _layer_of(n) is None)
    assert not missing, f"give these modules a layer in tests/test_architecture.py (docs/architecture.md): {missing}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != "lab"))
def test_imports_go_down_the_layers(name):
    names = list(LAYERS)
    mine = _layer_of(name)
    upward = sorted(f"{t} ({names[_layer_of(t)]})" for t in GRAPH[name]
                    if t != "lab" and _layer_of(t) is not None and _layer_of(t) > mine)
    assert not upward, f"lab.{name} ({names[mine]}) imports from a higher layer: {', '.join(upward)}"


def _two_module_cycles() -> set[frozenset]:
    return {frozenset({a, b}) for a, targets in GRAPH.items() for b in targets
            if a in GRAPH.get(b, set()) and not {a, b} & {"lab", *PACKAGES}}


def test_no_new_import_cycle_and_every_listed_one_still_exists():
    found = _two_module_cycles()
    assert not found - KNOWN_CYCLES, f"new import cycles: {sorted(map(sorted, found - KNOWN_CYCLES))}"
    assert not KNOWN_CYCLES - found, ("these cycles are gone: take them out of KNOWN_CYCLES: "
                                      f"{sorted(map(sorted, KNOWN_CYCLES - found))}")


def test_no_private_name_is_imported_from_another_module():
    """A name with a leading underscore is its module's own: another module that needs it gets a public name."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lab") and node.level == 0:
                found += [f"lab.{name} imports {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, found


def _module_aliases(tree: ast.AST) -> set[str]:
    """Local names that stand for lab modules in a file (`from lab.measure import timing`, `import lab.x as y`)."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                (node.module == "lab" or node.module.startswith("lab.")):
            base = node.module[4:] if node.module != "lab" else ""
            aliases |= {a.asname or a.name for a in node.names if f"{base}.{a.name}".lstrip(".") in MODULES}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.asname and a.name.startswith("lab.")}
    return aliases


def test_no_private_name_is_read_through_another_module():
    """`timing._spinner(...)` reaches past a module's public names as surely as importing `_spinner` does."""
    found = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases = _module_aliases(tree)
        found += [f"lab.{name}:{node.lineno} reads {node.value.id}.{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                  and node.attr.startswith("_") and not node.attr.startswith("__")]
    assert not found, found
