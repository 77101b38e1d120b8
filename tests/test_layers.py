"""The package's shape: layers whose imports point one way, own modules imported at the top, no import circle."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "specdec_core"
# Lowest first: a module may import its own layer or one below, never one above.
LAYERS = ("settings", "core", "backends", "methods", "train", "bench", "cli")
FOLDERS = ("core", "backends", "methods", "train", "bench")


def module_name(path: Path) -> str:
    parts = ["specdec_core", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    part = module.split(".")[1] if "." in module else "cli"
    return LAYERS.index("cli" if part == "__main__" else part)


def own_imports(path: Path) -> list[tuple[str, bool]]:
    """(imported specdec_core module, at module level) for every import of the package in the file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body} | {id(c) for n in tree.body if isinstance(n, (ast.If, ast.Try))
                                         for c in ast.walk(n)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            pytest.fail(f"{path.name}: relative import (use specdec_core.…)")
        names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                 [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for name in names:
            if name.startswith("specdec_core"):
                if isinstance(node, ast.ImportFrom) and name in ("specdec_core", *(f"specdec_core.{f}" for f in FOLDERS)):
                    out += [(f"{name}.{a.name}", id(node) in top) for a in node.names]
                else:
                    out.append((name, id(node) in top))
    return out


FILES = sorted(PACKAGE.rglob("*.py"))


def test_the_layer_folders_exist():
    assert all((PACKAGE / f).is_dir() for f in FOLDERS) and (PACKAGE / "settings.py").is_file()


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_and_sit_at_the_top(path):
    me = module_name(path)
    for name, at_top in own_imports(path):
        assert at_top, f"{me} imports {name} inside a function"
        assert layer(name) <= layer(me), f"{me} (layer {LAYERS[layer(me)]}) imports {name} (layer {LAYERS[layer(name)]})"


def test_no_import_circle():
    graph = {module_name(p): {n for n, _ in own_imports(p)} for p in FILES}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 1:
            pytest.fail("import circle: " + " -> ".join(path[path.index(node):] + [node]))
        if state.get(node) == 2 or node not in graph:
            return
        state[node] = 1
        for nxt in sorted(graph[node]):
            visit(nxt, path + [node])
        state[node] = 2

    for module in sorted(graph):
        visit(module, [])
