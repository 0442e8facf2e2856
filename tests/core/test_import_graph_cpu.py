"""No import cycles in ``e2c``, and no module imports one on a higher floor of the pipeline.

Every import counts: the ones inside functions (an import moved into a function to dodge a cycle is still a
cycle: it only fails later) and the ones under ``if TYPE_CHECKING:`` (a type that must be imported from
above says the type lives on the wrong floor).

The floors, lowest first (:data:`FLOORS`, one per package): the ground (``e2c.core``, the chain format), the
command line, data, the sandbox and the grader, what the launchers share, generation, eval and TTS, the CPU
backends of verl, SFT and RL, then the whole-pipeline commands (quickstart, claims, study, the recipe check).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "e2c"


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """``e2c.x.y`` -> its file, packages by their ``__init__.py``."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The ``e2c`` modules ``name`` imports (anywhere: in functions, under ``TYPE_CHECKING``) -> the line of
    the first such import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        if target in modules and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
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


# The pipeline's floors, one per package: a module may import its own floor and the ones below. The few
# modules loose at the package's top (:data:`LOOSE`) are named here too.
FLOORS: dict[str, int] = {
    "e2c.core": 0,  # errors, environment switches, paths, files, progress, run folders, stats, model names
    "e2c.chain": 0,  # the chain format and its budgets (model names read the format's tags: same floor)
    "e2c.commandline": 1,  # value types, settings and flags, the parser, the guard, the e2c command
    "e2c.sandbox": 2,  # runs programs apart (code answers, execution traces)
    "e2c.data": 2,
    "e2c.rewards": 2,
    "e2c.launch": 3,  # what the launchers share: checks of their data files (e2c.data.schema), devices, ...
    "e2c.cluster": 3,  # door: python -m e2c.cluster runs e2c.launch.cluster
    "e2c.generation": 4,
    "e2c.view": 4,  # one HTML page of an eval or TTS run (reads their folders; eval and tts --view write it)
    "e2c.eval": 5,
    "e2c.tts": 5,
    "e2c.demo": 5,  # the interactive and one-problem demos: generate and grade
    "e2c.verl_cpu": 6,  # verl's CPU rollout and engine: what RL runs on without a GPU
    "e2c.sft": 7,
    "e2c.rl": 7,
    "e2c.quickstart": 8,
    "e2c.claims": 8,
    "e2c.study": 8,  # ablations built from the quickstart's and the claims' pieces
    "e2c.recipe_check": 8,  # sizes SFT and RL recipes from both launchers
    "e2c.stage_args": 8,  # reads a Slurm stage's arguments with its launcher's own parser
    "e2c.__main__": 9,  # python -m e2c: the e2c command, which imports every stage's entry point by name
}
# The modules at the package's top: the package, python -m e2c, two commands that need both launchers, the
# demos the example scripts share, and a door where a module moved.
LOOSE = {"e2c", "e2c.__main__", "e2c.recipe_check", "e2c.stage_args", "e2c.demo", "e2c.cluster"}


def floor_of(module: str) -> int:
    """The floor of an ``e2c`` module: the floor of its package (or its own, loose at the top)."""
    return FLOORS[".".join(module.split(".")[:2])]


# Doors: a module that moved keeps its python -m name as a module that only runs the new one (it imports
# that command, whatever its floor, and nothing else).
DOORS = {"e2c.cluster": "e2c.launch.cluster", "e2c.eval.passrate": "e2c.rl.passrate.cli"}


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    return [
        f"{a}:{line} (floor {floor_of(a)}) imports {b} (floor {floor_of(b)})"
        for a, targets in graph.items()
        for b, line in targets.items()
        if floor_of(b) > floor_of(a) and DOORS.get(a) != b
    ]


@pytest.mark.parametrize("door", sorted(DOORS))
def test_a_door_runs_the_moved_module_and_imports_nothing_else_cpu(door: str) -> None:
    target = importlib.import_module(DOORS[door])
    assert importlib.import_module(door).main is target.main
    assert set(import_graph()[door]) <= {DOORS[door], "e2c.commandline.entry"}


def test_floors_cpu() -> None:
    assert floor_of("e2c.core.errors") == 0 and floor_of("e2c.rl.health") == 7 and floor_of("e2c.eval") == 5
    graph = {"e2c.data.io": {"e2c.eval.run": 3}, "e2c.eval.run": {"e2c.data.io": 1}}
    assert upward_imports(graph) == ["e2c.data.io:3 (floor 2) imports e2c.eval.run (floor 5)"]


def test_every_module_is_in_a_package_with_a_floor_cpu() -> None:
    modules = set(module_files())
    loose = {m for m in modules if m.count(".") <= 1 and not any(n.startswith(m + ".") for n in modules)}
    assert loose | {"e2c"} == LOOSE, sorted(loose ^ LOOSE)
    assert len(LOOSE) <= 6
    assert {".".join(m.split(".")[:2]) for m in modules if m != "e2c"} == set(FLOORS)


def test_no_module_imports_a_higher_floor_cpu() -> None:
    graph = import_graph()
    assert set(FLOORS) <= set(graph), set(FLOORS) - set(graph)  # every name in the table is a module
    found = upward_imports(graph)
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "ground", ["e2c.core.errors", "e2c.chain.budget", "e2c.chain.parse", "e2c.chain.tokens"]
)
def test_ground_floor_modules_import_no_higher_layer_cpu(ground: str) -> None:
    allowed = {"e2c.core.errors", "e2c.chain.tags"}
    assert set(import_graph()[ground]) <= allowed


def test_a_function_level_cycle_is_found_cpu(tmp_path: Path) -> None:
    pkg = tmp_path / "e2c"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from e2c.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from e2c import a\n    return a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from e2c.d import f\n"
    )
    (pkg / "d.py").write_text("from e2c.c import x\n")
    modules = module_files(pkg)
    graph = {n: imports_of(n, p, modules) for n, p in modules.items()}
    assert sorted(cycles(graph)) == [["e2c.a", "e2c.b"], ["e2c.c", "e2c.d"]]  # a type-only import counts too
    assert graph["e2c.c"] == {"e2c.d": 3}


SCRIPT_IMPORT = re.compile(r"from (e2c(?:\.\w+)*) import ([\w ,]+)")


def test_python_inside_shell_scripts_imports_names_that_exist() -> None:
    """The shell scripts run Python of their own (heredocs, ``-c``); a name moved to another module (as
    ``UserError`` moved to ``e2c.core.errors``) breaks them only when that line runs, so check every one now."""
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


def imports_in_functions(
    stmts: list[ast.stmt], in_function: bool = False
) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside functions (not under ``if TYPE_CHECKING:``) among ``stmts``."""
    out: list[ast.Import | ast.ImportFrom] = []
    for s in stmts:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            if in_function:
                out.append(s)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out += imports_in_functions(s.body, True)
        elif not (isinstance(s, ast.If) and isinstance(s.test, ast.Name) and s.test.id == "TYPE_CHECKING"):
            for part in ("body", "orelse", "finalbody"):
                out += imports_in_functions(getattr(s, part, None) or [], in_function)
            for handler in getattr(s, "handlers", None) or []:
                out += imports_in_functions(handler.body, in_function)
    return out


def function_imports(root: Path = PACKAGE) -> list[tuple[str, int, list[str]]]:
    """Imports of ``e2c`` modules inside functions: (file, line, the line and the two above it)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for s in imports_in_functions(ast.parse(text).body):
            name = s.module if isinstance(s, ast.ImportFrom) else s.names[0].name
            if (isinstance(s, ast.ImportFrom) and s.level) or (name or "").startswith("e2c"):
                found.append((str(path.relative_to(root)), s.lineno, lines[max(0, s.lineno - 3) : s.lineno]))
    return found


def test_imports_in_functions_cpu() -> None:
    tree = ast.parse(
        "import os\nif TYPE_CHECKING:\n    import e2c.x\ndef f():\n    try:\n        import e2c.y\n"
        "    except ImportError:\n        import e2c.z\n    class C:\n        def g(self):\n            import e2c.w\n"
    )
    assert [n.names[0].name for n in imports_in_functions(tree.body)] == ["e2c.y", "e2c.z", "e2c.w"]


def test_dependencies_sit_at_the_top_of_their_module_cpu() -> None:
    """An e2c import inside a function is kept only for a heavy package (torch, transformers, ray, verl) or a
    measured start-up cost, and a comment on its line or just above it says which."""
    found = function_imports()
    assert len(found) <= 40, len(found)
    unexplained = [f"{f}:{line}" for f, line, near in found if not any("#" in x for x in near)]
    assert not unexplained, unexplained
