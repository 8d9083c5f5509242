"""The import graph of src/bertkit: no cycle between modules, and no module importing from a
layer above its own, the layers being those docs/design.md states ("### Layers")."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT

SRC = ROOT / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every bertkit module -> the bertkit modules it imports, at the top or inside a function."""
    modules = {module_name(p): p for p in (SRC / "bertkit").rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import submodule` imports the submodule (and runs pkg/__init__,
                # which is no import back from the submodule); `from pkg import name` imports pkg
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                           else node.module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return {name: graph[name] for name in modules}


def layers() -> dict[str, int]:
    """Top-level part of bertkit -> its layer number, from docs/design.md."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("### Layers", 1)[1].split("\n#", 1)[0]
    out = {}
    for number, names in re.findall(r"^(\d+)\. (.+)$", section, re.M):
        for part in re.findall(r"`([\w.]+)`", names):
            out[part] = int(number)
    return out


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "bertkit"


def test_every_part_of_bertkit_has_a_layer_in_design_md():
    parts = {part(m) for m in import_graph()} - {"bertkit"}
    assert parts - set(layers()) == set(), "add these to docs/design.md's Layers"
    assert set(layers()) - parts == set(), "docs/design.md names parts that do not exist"


def test_no_import_runs_up_a_layer():
    level = layers()
    upward = [(a, b) for a, targets in import_graph().items() for b in targets
              if part(a) != "bertkit" and part(b) != "bertkit" and level[part(b)] > level[part(a)]]
    assert upward == []


def test_serving_stands_on_tasks_not_on_the_jobs_done_with_them():
    """The inference engine and the server import no fine-tuning job (loop, grid, run
    directories, distillation, pruning): what a task is lives in tasks/, what is done with it
    in finetuning/."""
    graph = import_graph()
    leaks = [(a, b) for a, targets in graph.items() for b in targets
             if part(a) in ("inference", "serve") and part(b) == "finetuning"]
    assert leaks == []
    assert not any(part(m) == "tasks" and part(b) == "finetuning" for m, t in graph.items() for b in t)


def test_no_import_cycle():
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_activation_names_and_functions_agree():
    from bertkit.config import ACTIVATIONS
    from bertkit.model.encoder import FUNCTIONS

    assert tuple(FUNCTIONS) == ACTIVATIONS
