"""The package's import graph has no cycle: counting every import -- at
module level, inside functions and under TYPE_CHECKING -- no module of
placement/ reaches itself again. Lower layers (the transport, the region
pool, the array handle) reach the default client through placement._default
and annotate it as Any instead of importing placement.client."""
import ast
import os

import placement


def import_graph():
    root = os.path.dirname(placement.__file__)
    modules = {f[:-3] for f in os.listdir(root) if f.endswith(".py") and f != "__init__.py"}
    graph = {m: set() for m in modules}
    for m in modules:
        with open(os.path.join(root, m + ".py")) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module == "placement":
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("placement."):
                names = [node.module.split(".")[1]]
            elif isinstance(node, ast.Import):
                names = [a.name.split(".")[1] for a in node.names
                         if a.name.startswith("placement.")]
            graph[m].update(n for n in names if n in modules)
    return graph


def cycle_through(graph, start):
    """A path start -> ... -> start, or None."""
    stack = [(start, [start])]
    seen = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph[node]):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 20
    cycles = [c for m in sorted(graph) if (c := cycle_through(graph, m)) is not None]
    assert cycles == [], " | ".join(" -> ".join(c) for c in cycles)


def test_low_layers_do_not_import_the_client():
    graph = import_graph()
    for low in ["_transport", "_region_pool", "_shared_region", "_staging", "_tensors", "array",
                "devices", "sharding", "types", "_session"]:
        assert "client" not in graph[low], low
