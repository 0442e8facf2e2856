"""No import cycles in ``e2c``: layers import downward only.

Every import counts, the ones inside functions too (an import moved into a function to dodge a cycle is
still a cycle: it only fails later). Imports under ``if TYPE_CHECKING:`` never run and are left out.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "e2c"


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """``e2c.x.y`` -> its file, packages by their ``__init__.py``."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The ``e2c`` modules ``name`` imports at run time -> the line of the first such import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        if target in modules and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:  # a submodule: the package's __init__ runs anyway
                    add(f"{source}.{alias.name}", node.lineno)
                elif source != "e2c":
                    add(source, node.lineno)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_against_a_plain_search_cpu() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {"e": 1}, "f": {}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycles_in_e2c_cpu() -> None:
    graph = import_graph()
    assert len(graph) > 100 and graph["e2c.eval.runner"], "the graph was not read"
    found = cycles(graph)
    lines = [
        " -> ".join(comp)
        + ": "
        + "; ".join(f"{a}:{graph[a][b]} imports {b}" for a in comp for b in comp if b in graph[a])
        for comp in found
    ]
    assert not found, "\n".join(lines)


@pytest.mark.parametrize("ground", ["e2c.errors", "e2c.budget", "e2c.chain_parse", "e2c.chain_tokens"])
def test_ground_floor_modules_import_no_higher_layer_cpu(ground: str) -> None:
    allowed = {"e2c.errors"}
    assert set(import_graph()[ground]) <= allowed


def test_a_function_level_cycle_is_found_cpu(tmp_path: Path) -> None:
    pkg = tmp_path / "e2c"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from e2c.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from e2c import a\n    return a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from e2c.a import f\n"
    )
    modules = module_files(pkg)
    graph = {n: imports_of(n, p, modules) for n, p in modules.items()}
    assert cycles(graph) == [["e2c.a", "e2c.b"]]
    assert graph["e2c.c"] == {}


SCRIPT_IMPORT = re.compile(r"from (e2c(?:\.\w+)*) import ([\w ,]+)")


def test_python_inside_shell_scripts_imports_names_that_exist() -> None:
    """The shell scripts run Python of their own (heredocs, ``-c``); a name moved to another module (as
    ``UserError`` moved to ``e2c.errors``) breaks them only when that line runs, so check every one now."""
    root = PACKAGE.parent
    scripts = sorted([*root.glob("scripts/*.sh"), *root.glob("scripts/*.sbatch"), *root.glob("tts/**/*.sh")])
    problems, seen = [], 0
    for script in scripts:
        for module, names in SCRIPT_IMPORT.findall(script.read_text(encoding="utf-8")):
            mod = importlib.import_module(module)
            for name in (n.strip() for n in names.split(",")):
                seen += 1
                submodule = (
                    hasattr(mod, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None
                )
                if name and not hasattr(mod, name) and not submodule:
                    problems.append(f"{script.relative_to(root)}: from {module} import {name}")
    assert seen > 5, seen  # the scan found the scripts' imports
    assert not problems, "\n".join(problems)
