"""The floors of `src/gradcert` (docs: DESIGN's Layout, CONTRIBUTING.md), read from the source:
reference -> generators -> backends -> conformance -> runs -> reports -> cli, each importing only
from its own floor and the floors before it, so no two floors import each other.

Every import counts: at the top of a module, inside a function (imported when it runs) and under
`TYPE_CHECKING` (the type checker follows it). The package's own `__init__` (its version, the
`gradcert.check` shortcut) and `gradcert.known` (known-defect files) stand outside the floors.
The modules above the reference also import no circle among themselves (the reference's IR has
one on purpose: `Program.__str__` prints through the printer, which reads the IR's classes).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import ROOT

FLOORS = ("reference", "generators", "backends", "conformance", "runs", "reports", "cli")
PACKAGE = "gradcert"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    line: int
    target: str  # the imported module (or the package whose name an import takes from it)

    def where(self, root: Path) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at `path` in the package folder `root`."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(root: Path) -> Iterator[Import]:
    """Every import of a module of the package folder `root` by one of its modules."""
    package = root.name
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # `from gradcert.runs import fuzz` imports the module it names
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target == package or target.startswith(package + "."):
                    yield Import(module, node.lineno, target)


def floor(module: str) -> str | None:
    """The floor of a dotted module name; None outside the floors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FLOORS else None


def upward(edges: list[Import]) -> list[Import]:
    """The imports that reach a floor above the importer's."""
    out = []
    for e in edges:
        a, b = floor(e.module), floor(e.target)
        if a is not None and b is not None and FLOORS.index(b) > FLOORS.index(a):
            out.append(e)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, nexts = work[-1]
            w = next(nexts, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def floor_graph(edges: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for e in edges:
        a, b = floor(e.module), floor(e.target)
        if a is not None and b is not None and a != b:
            graph.setdefault(a, set()).add(b)
    return graph


def module_graph(edges: list[Import], modules: set[str]) -> dict[str, set[str]]:
    """Module -> the modules it imports, between the modules of the floors above the reference
    (an import of a name from a package counts as an import of the package's `__init__`)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        a = floor(e.module)
        if a is None or a == "reference" or floor(e.target) is None:
            continue
        target = e.target
        while target not in modules and "." in target:
            target = target.rpartition(".")[0]
        if target != e.module and target in modules:
            graph.setdefault(e.module, set()).add(target)
    return graph


def check(root: Path) -> list[str]:
    """What breaks the floors in the package folder `root`, one line each (empty where nothing)."""
    edges = list(imports(root))
    problems = [f"upward: {e.where(root)}" for e in upward(edges)]
    problems += [f"floors import each other: {' <-> '.join(c)}" for c in cycles(floor_graph(edges))]
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    problems += [f"modules import each other: {' <-> '.join(c)}" for c in cycles(module_graph(edges, modules))]
    return problems


def test_the_source_keeps_its_floors() -> None:
    root = ROOT / "src" / PACKAGE
    assert {p.name for p in root.iterdir() if (p / "__init__.py").is_file()} >= set(FLOORS)
    assert check(root) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / PACKAGE
    for f in FLOORS:
        (root / f).mkdir(parents=True)
        (root / f / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_the_checker_passes_downward_imports_of_every_kind(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "runs/a.py": "from gradcert.conformance import x\nimport gradcert.backends.y\nfrom . import b\n",
            "runs/b.py": "from ..reference import z\nfrom gradcert import generators\n",
            "cli/main.py": "def f():\n    from gradcert.reports import html\n    from gradcert.runs.a import g\n",
        },
    )
    assert check(root) == []


@pytest.mark.parametrize(
    ("files", "said"),
    [
        # at the top, inside a function, under TYPE_CHECKING, relative, from the package
        ({"backends/p.py": "from gradcert.conformance.oracles import close\n"}, "upward: gradcert.backends.p:1"),
        ({"conformance/f.py": "def f():\n    import gradcert.reports.html\n"}, "upward: gradcert.conformance.f:2"),
        (
            {"backends/t.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gradcert.runs import x\n"},
            "upward: gradcert.backends.t:3",
        ),
        ({"generators/r.py": "from ..backends import registry\n"}, "upward: gradcert.generators.r:1"),
        ({"reference/k.py": "from gradcert import cli\n"}, "upward: gradcert.reference.k:1 imports gradcert.cli"),
        # two modules of one floor importing each other (as fuzz and cluster did)
        (
            {
                "runs/fuzz.py": "from gradcert.runs.cluster import run\n",
                "runs/cluster.py": "def f():\n    from gradcert.runs import fuzz\n",
            },
            "modules import each other: gradcert.runs.cluster <-> gradcert.runs.fuzz",
        ),
    ],
)
def test_the_checker_finds_a_planted_break(tmp_path: Path, files: dict[str, str], said: str) -> None:
    problems = check(_tree(tmp_path, files))
    assert any(p.startswith(said) for p in problems), problems


def test_two_floors_importing_each_other_are_a_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {"backends/p.py": "import gradcert.conformance.v\n", "conformance/v.py": "import gradcert.backends.p\n"},
    )
    problems = check(root)
    assert "floors import each other: backends <-> conformance" in problems, problems
