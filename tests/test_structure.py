"""Structure checks (issue 26): the shape the code base keeps, checked in CI the way behaviour is.

- No import circle among the project's own modules, in any of its packages (the ones pyproject.toml installs): a
  circle means neither module can be read, tested or changed without the other, and hiding one behind an import
  inside a function (imported later, at call time) keeps the circle, so those imports count too. Only imports
  under `if TYPE_CHECKING:` (never run) are left out. The packages themselves are layered as well: no circle among
  them either.
- No localkube module over 800 lines: localkube is cut along kube-apiserver's seams (localkube/README.md, Layout);
  a module that grows past that holds more than one of them.
- `activities/kube.py` at most 400 lines: `KubeActivities` is a thin facade over the helpers that own a run's
  Kubernetes work (the run object, what a run made, the Job reader; issue 26); a facade that grows past that is
  doing their work again.

Pure source reading (ast): no import is executed, so the checks take well under a second.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALKUBE_MAX_LINES = 800
KUBE_ACTIVITIES_MAX_LINES = 400


def project_packages() -> list[str]:
    """The top-level packages pyproject.toml installs (`include = ["localkube*", ...]`)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(p.rstrip("*") for p in patterns)


def modules(packages: list[str]) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth (a function's too), but those under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _imports(ast.Module(body=[child], type_ignores=[])))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def import_graph(packages: list[str]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (`from a.b import c` names a.b.c when c is a module, else a.b)."""
    mods = modules(packages)

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, (path, is_package) in mods.items():
        package = module if is_package else module.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [owner(alias.name) for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                targets = [owner(f"{base}.{alias.name}") if f"{base}.{alias.name}" in mods else owner(base)
                           for alias in node.names]
            graph[module].update(t for t in targets if t is not None and t != module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    """Each module of a circle with the modules of the circle it imports, for the failure message."""
    members = set(component)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & members))}" for m in component)


def test_the_structure_checks_see_every_project_package_and_its_imports() -> None:
    packages = project_packages()
    assert {"localkube", "models", "workflows", "activities", "api", "agentrunner"} <= set(packages)
    graph = import_graph(packages)
    # The reader follows relative imports, imports inside functions and `from package import module`.
    assert "localkube.kubelet.runtime" in graph["localkube.kubelet.prober"]
    assert "models.keyfiles" in graph["models.signing"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_among_the_projects_modules() -> None:
    graph = import_graph(project_packages())
    circles = [describe(graph, c) for c in cycles(graph)]
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_import_circle_among_the_projects_packages() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in import_graph(project_packages()).items():
        top = module.split(".")[0]
        packages.setdefault(top, set()).update(t.split(".")[0] for t in targets if t.split(".")[0] != top)
    circles = [describe(packages, c) for c in cycles(packages)]
    assert not circles, "packages importing each other:\n" + "\n".join(circles)


def test_no_localkube_module_is_over_800_lines() -> None:
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
             for path in (ROOT / "localkube").rglob("*.py")}
    assert len(sizes) > 1
    over = {path: n for path, n in sorted(sizes.items()) if n > LOCALKUBE_MAX_LINES}
    assert not over, f"localkube modules over {LOCALKUBE_MAX_LINES} lines: {over}"


def test_kube_activities_module_is_at_most_400_lines() -> None:
    lines = len((ROOT / "activities" / "kube.py").read_text().splitlines())
    assert lines <= KUBE_ACTIVITIES_MAX_LINES, f"activities/kube.py has {lines} lines"
