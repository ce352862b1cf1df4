"""No import cycles in src/recstack, between modules or between packages.

The graph is built statically (``ast``) from every ``import`` and ``from ...
import`` of a recstack module anywhere in a file: at module level, inside
functions and under ``if TYPE_CHECKING``. A function-level ("lazy") import
only defers a dependency, it does not remove it: two modules that import each
other, one of them lazily, still cannot be understood, tested or moved one
without the other. So every import counts.

Edges: ``import a.b`` depends on ``a.b``; ``from a.b import c`` on ``a.b.c``
when that is a module, else on ``a.b`` (the package's ``__init__``). The
parent packages Python initialises on the way are not counted: every
submodule would otherwise depend on its package's ``__init__``, and an
``__init__`` that re-exports its submodules would form a cycle with each.

Packages: a module belongs to its top-level package under recstack
(``recstack.hardware.machine`` -> ``hardware``), a package's ``commands``
module included: the commands of a package may import other packages'
engines, so they are counted where they live and an engine that imports them
back forms a cycle. The top-level command-line and API modules (``recstack``,
``api``, ``cli``, ``commands``, ``__main__``) form the ``interface`` layer
above everything else; only the CLI registry (``recstack.cli``,
``recstack.commands``) imports a ``*.commands`` module.

Layers (:data:`LAYERS`): data flows config <- zoo, workload <- profiling <-
analysis <- render/report, with hardware measurement a leaf that knows nothing
of profiles. In import terms the analyses sit below profiling: they read only a
profile and a machine file, and the runner calls them (docs/pipeline.md). An engine module (not a ``commands`` module) imports only its own
layer and the layers below; an upward arrow fails, except the ones listed in
:data:`KNOWN_UPWARD`, each with the reason it is still there (the list may only
shrink: an entry that no longer exists fails too). The tests below fail on a
cycle at either level and print it.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "recstack"
INTERFACE = "interface"
INTERFACE_MODULES = {ROOT, f"{ROOT}.api", f"{ROOT}.cli", f"{ROOT}.commands", f"{ROOT}.__main__"}

Graph = dict[str, set[str]]


def module_files(src: Path = SRC, root: str = ROOT) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``) for every .py under ``src/root``."""
    out = {}
    for path in sorted((src / root).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool, known: set[str]) -> Iterable[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in known:  # `import a.b.attr` is not valid, but be safe
                name = name.rpartition(".")[0]
            if name:
                yield name
        return
    if node.level:  # relative: from . import x / from ..a import b
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        if sub in known:
            yield sub
        elif target in known:
            yield target


def import_graph(src: Path = SRC, root: str = ROOT) -> Graph:
    """Module -> the recstack modules it imports (every import statement in the file counts)."""
    files = module_files(src, root)
    known = set(files)
    graph: Graph = {}
    for module, (path, is_pkg) in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(_imported(node, module, is_pkg, known))
        deps.discard(module)
        graph[module] = deps
    return graph


def package_of(module: str, root: str = ROOT) -> str:
    if module in INTERFACE_MODULES:
        return INTERFACE
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else root


def package_graph(graph: Graph) -> Graph:
    out: Graph = {}
    for a, deps in graph.items():
        pa = package_of(a)
        out.setdefault(pa, set()).update(package_of(b) for b in deps if package_of(b) != pa)
    return out


def components(graph: Graph) -> list[set[str]]:
    """The strongly connected components with more than one node: groups that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is small enough for recursion
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
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def cycles(graph: Graph) -> list[list[str]]:
    """One shortest cycle (``[a, b, ..., a]``) per group of nodes that import each other."""
    return [_cycle_in(graph, comp) for comp in components(graph)]


def _cycle_in(graph: Graph, comp: set[str]) -> list[str]:
    """A shortest cycle through the component's smallest node (breadth-first within the component)."""
    start = min(comp)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ()) & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle found in component {sorted(comp)}")


def _describe(graph: Graph) -> str:
    lines = ["import cycle(s):"]
    for comp in components(graph):
        lines.append("  " + " -> ".join(_cycle_in(graph, comp)))
        if len(comp) > 2:
            lines.append(f"    (one of the cycles among these {len(comp)}: {', '.join(sorted(comp))})")
    return "\n".join(lines)


# -- the checker itself -------------------------------------------------------------------------
def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_graph_counts_lazy_relative_and_type_checking_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import f\n",
            "pkg/a.py": "def f():\n    from pkg import b\n    return b\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n",
            "pkg/c.py": "import pkg.sub.d\nfrom pkg import a\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/d.py": "from .. import a\nfrom pkg.sub import nothing_here\n",
        },
    )
    g = import_graph(tmp_path, "pkg")
    assert g["pkg"] == {"pkg.a"}
    assert g["pkg.a"] == {"pkg.b"}  # inside a function
    assert g["pkg.b"] == {"pkg.c"}  # under TYPE_CHECKING, relative
    assert g["pkg.c"] == {"pkg.sub.d", "pkg.a"}
    assert g["pkg.sub.d"] == {"pkg.a", "pkg.sub"}  # `from .. import a`; a name from the package's __init__
    found = cycles(g)
    assert len(found) == 1 and found[0][0] == found[0][-1] == "pkg.a"
    assert set(found[0]) == {"pkg.a", "pkg.b", "pkg.c"}  # the shortest one through pkg.a
    assert "pkg.a -> pkg.b -> pkg.c -> pkg.a" in _describe(g)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph()


def test_graph_of_recstack_sees_its_imports(graph: Graph) -> None:
    g = graph
    assert len(g) > 50
    assert "recstack.analysis.pipeline" in g["recstack.profiling.runner"]  # a function-level import
    assert (
        "recstack.hardware.sysinfo" in g["recstack.hardware.gather_kernel"]
    )  # from recstack.hardware import sysinfo
    assert "recstack.costmodel.attach" in g["recstack.costmodel"]
    assert package_of("recstack.hardware.commands") == package_of("recstack.hardware.machine") == "hardware"
    assert package_of("recstack.commands") == INTERFACE


# -- layers -----------------------------------------------------------------------------------
LAYERS: list[set[str]] = [
    {"errors", "units", "noise", "version", "stage_names", "tagmode", "outputs", "usercode", "calls", "cli_base"},
    {"config"},
    {"schema", "store", "hardware"},  # hardware: measurement, a leaf that knows nothing of profiles
    {"tree", "results"},
    {"analysis", "workload", "costmodel"},  # analyses read a profile and a machine file; the runner calls them
    {"zoo"},
    {"profiling"},
    {"traceimport", "sharing", "compilation", "serving", "distributed", "session", "sweeps", "export", "memory"},
    {"render", "report"},
    {"advisor", "correlate"},
    {"cli_types", INTERFACE},
]
"""Packages from the bottom up: an engine imports its own layer and the ones below."""

MODULE_LAYER = {
    # live progress lines on stderr while something runs: used by the runs themselves, below the presentation
    f"{ROOT}.render.progress": "errors",
    f"{ROOT}.render.sweep_progress": "errors",
}
"""Modules placed in another package's layer than their folder's."""

KNOWN_UPWARD: dict[tuple[str, str], str] = {}
"""Upward arrows still there, with why; the list may only shrink."""


def layer_of(module: str) -> int:
    pkg = MODULE_LAYER.get(module, package_of(module))
    for i, layer in enumerate(LAYERS):
        if pkg in layer:
            return i
    raise AssertionError(f"{module} ({pkg}) is in no layer of LAYERS: add its package")


def upward_arrows(graph: Graph) -> set[tuple[str, str]]:
    """(engine module, module of a higher layer it imports); ``commands`` modules may import any engine."""
    return {
        (a, b)
        for a, deps in graph.items()
        if not a.endswith(".commands")
        for b in deps
        if layer_of(b) > layer_of(a)
    }


def test_layers_find_an_upward_arrow(tmp_path: Path) -> None:
    g = {f"{ROOT}.hardware.machine": {f"{ROOT}.tree", f"{ROOT}.units"}, f"{ROOT}.hardware.commands": {f"{ROOT}.tree"},
         f"{ROOT}.render.progress": set(), f"{ROOT}.profiling.runner": {f"{ROOT}.render.progress"}}
    assert upward_arrows(g) == {(f"{ROOT}.hardware.machine", f"{ROOT}.tree")}


# -- the rules --------------------------------------------------------------------------------------
def test_no_module_import_cycle(graph: Graph) -> None:
    assert not cycles(graph), _describe(graph)


def _without_api_below_interface(graph: Graph) -> Graph:
    """The graph less every import of recstack.api by a package (a commands module, the sweep's point runner,
    the advisor): the ones the session layer (issue 30 item 1) replaces."""
    api = f"{ROOT}.api"
    return {a: deps - {api} if package_of(a) != INTERFACE else deps for a, deps in graph.items()}


def test_no_package_import_cycle_but_packages_importing_the_api(graph: Graph) -> None:
    packages = package_graph(_without_api_below_interface(graph))
    assert not cycles(packages), _describe(packages)


def test_no_package_import_cycle(graph: Graph) -> None:
    packages = package_graph(graph)
    assert not cycles(packages), _describe(packages)


def test_no_upward_arrow(graph: Graph) -> None:
    found = upward_arrows(graph)
    new = sorted(found - set(KNOWN_UPWARD))
    gone = sorted(set(KNOWN_UPWARD) - found)
    assert not new, "engine imports a higher layer (see LAYERS):\n  " + "\n  ".join(f"{a} -> {b}" for a, b in new)
    assert not gone, "no longer upward: remove from KNOWN_UPWARD:\n  " + "\n  ".join(f"{a} -> {b}" for a, b in gone)


def test_only_the_cli_registry_imports_commands(graph: Graph) -> None:
    registry = {f"{ROOT}.cli", f"{ROOT}.commands"}
    bad = sorted(f"{a} -> {b}" for a, deps in graph.items() if a not in registry for b in deps if b.endswith(".commands"))
    assert not bad, "a commands module imported outside the CLI registry:\n  " + "\n  ".join(bad)


def test_hardware_measurement_knows_nothing_of_profiles(graph: Graph) -> None:
    """hardware/ (its command module aside) imports only itself and the base modules (schema: the machine
    file's model, among the documents' contract)."""
    allowed = {"hardware", "errors", "config", "outputs", "version", "units", "noise", "schema"}
    bad = sorted(
        f"{a} -> {b}"
        for a, deps in graph.items()
        if package_of(a) == "hardware" and not a.endswith(".commands")
        for b in deps
        if package_of(b) not in allowed
    )
    assert not bad, "hardware imports beyond its layer:\n  " + "\n  ".join(bad)


# -- what a commands module holds ----------------------------------------------------------------
def _argparse_wiring(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A command (``cmd_*``), its registration (``register*``), or argparse wiring: a ``type=`` parser (raises
    ArgumentTypeError), a function adding arguments to or returning a parser, or ``*_from_args``."""
    if fn.name.startswith(("cmd_", "register")) or fn.name.endswith("_from_args"):
        return True
    annotations = [a.annotation for a in fn.args.args + fn.args.kwonlyargs] + [fn.returns]
    if any(a is not None and "ArgumentParser" in ast.unparse(a) for a in annotations):
        return True
    return any(isinstance(n, ast.Raise) and n.exc is not None and "ArgumentTypeError" in ast.unparse(n.exc)
               for n in ast.walk(fn))


def engine_in_commands(src: Path = SRC, root: str = ROOT) -> list[str]:
    """``file: name`` of every class, and every function that is not a command or argparse wiring, defined in a
    commands module (``root/commands.py``, ``root/*/commands.py``)."""
    found = []
    for path in sorted([src / root / "commands.py", *(src / root).glob("*/commands.py")]):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            engine = isinstance(node, ast.ClassDef) or (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _argparse_wiring(node))
            if engine:
                found.append(f"{path.relative_to(src / root)}: {node.name}")
    return found


def test_engine_in_commands_is_found(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/commands.py": "", "pkg/a/commands.py": textwrap.dedent('''
        import argparse
        def cmd_x(args): ...
        def register(sub): ...
        def _sizes(text):
            raise argparse.ArgumentTypeError("bad")
        def add_flags(p: argparse.ArgumentParser) -> None: ...
        def run_point(cfg): ...
        class BuildCache: ...
        ''')})
    assert engine_in_commands(tmp_path, "pkg") == ["a/commands.py: run_point", "a/commands.py: BuildCache"]


def test_commands_modules_hold_only_commands_and_their_wiring() -> None:
    found = engine_in_commands()
    assert not found, ("engine or presentation code in a commands module (move it to its package, text to "
                       "render/):\n  " + "\n  ".join(found))


NOISE_CALLERS = {
    "report.diff": "recstack diff's verdicts",
    "advisor.measure": "advise's arms",
    "compilation.session": "compile's noise table",
    "compilation.recommend": "compile --recommend's gain thresholds",
    "serving.summary": "serving's latency intervals",
    "hardware.repeatability": "machine repeatability",
    "render.machine": "the noisy-host warning",
    "profiling.assemble": "profiling's A/B overhead interval",
}


def test_one_module_decides_beyond_noise(graph: Graph) -> None:
    """The rules live in recstack.noise, and every caller judges through it (no rule of its own)."""
    own = sorted(
        f"{m}.{node.name}"
        for m, (path, _) in module_files().items()
        if m != f"{ROOT}.noise"
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        and node.name in {"judge", "NoiseRule", "bootstrap_ci", "percentile_ci", "twin_floor", "beyond"}
    )
    assert not own, "a noise rule defined outside recstack.noise:\n  " + "\n  ".join(own)
    missing = sorted(f"{m} ({why})" for m, why in NOISE_CALLERS.items() if f"{ROOT}.noise" not in graph[f"{ROOT}.{m}"])
    assert not missing, "judges noise without recstack.noise:\n  " + "\n  ".join(missing)
