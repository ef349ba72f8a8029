"""The package's layout: its subpackages import each other one way, in the order of :data:`LAYERS` (kernels ->
solver -> inference -> normalization and posterior -> evidence -> selection -> estimator -> cli), with no cycle.
plotting draws plain arrays and imports none of them; selection's evidence surfaces call it to draw themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import bayesvm

PACKAGE = Path(bayesvm.__file__).resolve().parent

#: the layers, lowest first: a module imports only from its own layer or the layers below it
LAYERS = (("kernels",), ("solver",), ("inference",), ("normalization", "posterior"), ("evidence",), ("selection",),
          ("estimator",), ("cli",))


def _imports() -> dict[str, set[str]]:
    """For each subpackage or top-level module of bayesvm, the others it imports (relative or absolute)."""
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        package = parts[:-1] if path.name == "__init__.py" else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("bayesvm"):
                target = node.module.split(".")
            else:
                continue
            names = [target + [alias.name] for alias in node.names] if not node.module else [target]
            for name in names:
                source, destination = parts[1] if len(parts) > 1 else "", name[1] if len(name) > 1 else ""
                if source and destination and source != destination and source != "__init__":
                    edges.setdefault(source, set()).add(destination)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None (depth-first search with colours)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for successor in sorted(edges.get(node, ())):
            if state.get(successor) == 1:
                return path[path.index(successor):] + [successor]
            if successor not in state and (found := visit(successor)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


def test_no_import_cycle_among_the_subpackages():
    edges = _imports()
    assert {"evidence", "normalization", "inference", "posterior", "selection"} <= set(edges)  # the scan sees them
    assert _cycle(edges) is None, f"import cycle: {' -> '.join(_cycle(edges))}"
    assert "evidence" not in edges["inference"] and "normalization" not in edges["inference"]


def test_each_layer_imports_only_from_the_layers_below():
    edges = _imports()
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    upward = sorted(f"{source} -> {destination}" for source, destinations in edges.items() if source in layer
                    for destination in destinations if layer.get(destination, -1) > layer[source])
    assert not upward, f"imports against the layer order {LAYERS}: {upward}"
    assert "posterior" not in edges["normalization"] and "normalization" not in edges["posterior"]  # siblings
