"""The package's layout (docs/layout.md, docs/design.md): the library and the experiment layer apart, no private
names across modules, no import cycle, modules of a readable size.

- the import-linter contracts of pyproject.toml (what ``.ci/run`` runs as ``lint-imports``): the library never
  imports ``slt_relu.workflow`` or ``slt_relu.kinds``, the workflow never imports the kinds, no two sibling
  modules or packages import each other; the first contract's list of the library's modules is whole;
- no module of slt_relu imports another module's private name (``from m import _name``);
- no import cycle between slt_relu's modules (the strongly connected components of grimp's import graph);
- a kind's module is at most 350 lines, any other module at most 450, but for at most two that say why in their
  docstring ("Over ~N lines on purpose: ...").
"""
import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "slt_relu"
EXPERIMENT_LAYER = ("kinds", "workflow")
KIND_LINES, MODULE_LINES, LONG_MODULES = 350, 450, 2
LONG_ELSEWHERE = set()                  # modules over the limits by exception: none


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"Contracts: 3 kept, 0 broken", out.stdout), out.stdout


def test_the_library_contract_lists_every_library_module():
    """The forbidden contract's sources are every top-level module and package of slt_relu but the experiment
    layer: a new library module is covered as soon as it exists."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    library = next(c for c in config["contracts"] if c["type"] == "forbidden"
                   and set(c["forbidden_modules"]) == {f"slt_relu.{m}" for m in EXPERIMENT_LAYER})
    top = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
           if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert set(library["source_modules"]) == {f"slt_relu.{m}" for m in top - set(EXPERIMENT_LAYER)}


def private_imports(path: Path, source: str | None = None) -> list[str]:
    """``from m import _name`` in a module (``source``: its text, default the file's), _name not a dunder; a private
    submodule of the importer's own package (``from . import _style``) is its own."""
    found = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        for name in (alias.name for alias in node.names):
            if not name.startswith("_") or name.startswith("__"):
                continue
            if node.level == 1 and node.module is None and ((path.parent / f"{name}.py").exists()
                                                             or (path.parent / name).is_dir()):
                continue
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {'.' * node.level}{node.module or ''} "
                         f"import {name}")
    return found


def test_no_module_imports_another_modules_private_name():
    found = [f for p in modules() for f in private_imports(p)]
    assert not found, "\n".join(found)


def test_the_private_name_check_finds_one():
    probe = PACKAGE / "plots" / "probe.py"               # not written: the check reads the source given
    source = "from .llc import _per_chain\nfrom ..posterior import _x\nfrom . import _style\nfrom . import __doc__\n"
    assert private_imports(probe, source) == ["slt_relu/plots/probe.py:1: from .llc import _per_chain",
                                              "slt_relu/plots/probe.py:2: from ..posterior import _x"]


def cycles(graph, names) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & names) for m in names}
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for root in sorted(names):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            for nxt in edges[node]:
                if nxt in on_stack:
                    low[node] = min(low[node], low[nxt])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycle_between_modules():
    """Every import counts, those inside functions too (grimp reads them all)."""
    import grimp

    graph = grimp.build_graph("slt_relu", cache_dir=None)
    names = set(graph.modules)
    assert {"slt_relu.workflow.kind", "slt_relu.kinds.posterior_kind", "slt_relu.posterior.stopping"} <= names
    assert cycles(graph, names) == []


def test_the_cycle_check_finds_one():
    class Graph:
        imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}

        def find_modules_directly_imported_by(self, m):
            return self.imports[m]

    assert cycles(Graph(), set(Graph.imports)) == [["a", "b", "c"]]


def says_why(path: Path) -> bool:
    """Whether a module's docstring says why it is long: a sentence "Over ~N lines on purpose: <why>"."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return re.search(r"Over ~?\d+ lines on purpose: \w", doc) is not None


def test_every_kind_module_is_short():
    long = {str(p.relative_to(ROOT)): n for p in sorted((PACKAGE / "kinds").glob("*.py"))
            if (n := len(p.read_text().splitlines())) > KIND_LINES}
    assert not long, f"kind modules over {KIND_LINES} lines: {long}"


def test_library_modules_are_short_but_for_two_that_say_why():
    long = {str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    unexplained = [p for p in long if p not in LONG_ELSEWHERE and not says_why(ROOT / p)]
    kept = [p for p in long if p not in LONG_ELSEWHERE]
    assert not unexplained, f"modules over {MODULE_LINES} lines without a reason in their docstring: {unexplained}"
    assert len(kept) <= LONG_MODULES, f"more than {LONG_MODULES} modules over {MODULE_LINES} lines: {long}"
