"""The structure docs/architecture.md promises, checked on the code as it is.

The layer contracts live in pyproject.toml ([tool.importlinter]) and run through import-linter
here, so a violation fails the suite, not only a separate lint step. Import circles are found on
the same import graph (imports inside functions count; TYPE_CHECKING imports do not run and do
not count). The size limits and "SQL only in the data layer" are checked from the files.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
from importlinter import configuration
from importlinter.application.use_cases import lint_imports

ROOT = Path(__file__).resolve().parents[1]
NOT_THE_PACKAGE = (
    "tests",
    "bench",
    "fixtures",
    "scripts",
    "build",
    ".venv",
    ".pyroot",
    "skills",
    "docs",
)
MAX_LINES = 700
ENGINE_MAX_LINES = 400
DATA_LAYER = ("store.py", "storage/")


def _sources() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in NOT_THE_PACKAGE:
            yield path


def _package_modules(graph: grimp.ImportGraph) -> set[str]:
    return {
        m
        for m in graph.modules
        if m.split(".")[1:2] == [] or m.split(".")[1] not in NOT_THE_PACKAGE
    }


def test_the_layer_contracts_hold() -> None:
    configuration.configure()  # what the lint-imports command does before it reads the contracts
    assert lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True
    ), "an import breaks a layer contract: run .venv/bin/lint-imports for the chain"


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & modules) for m in modules}
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
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
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_counting_imports_inside_functions() -> None:
    graph = grimp.build_graph("hermes_lcm", exclude_type_checking_imports=True)
    modules = _package_modules(graph)
    assert "hermes_lcm.handlers.grep" in modules and "hermes_lcm.storage.messages" in modules
    assert _cycles(graph, modules) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    """The check above could pass by finding nothing: on a graph with a circle it must report it."""
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph, {"pkg.a", "pkg.b", "pkg.c"}) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_no_source_file_is_over_its_size() -> None:
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in _sources()
    }
    assert sizes["engine.py"] <= ENGINE_MAX_LINES, sizes["engine.py"]
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_sql_runs_only_in_the_data_layer() -> None:
    """No module outside store.py and storage/ imports sqlite3 or calls ``execute``."""
    offenders = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(DATA_LAYER):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "sqlite3" for a in node.names):
                offenders.append(f"{rel}:{node.lineno} imports sqlite3")
            if isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
                offenders.append(f"{rel}:{node.lineno} imports from sqlite3")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("execute", "executemany", "executescript")
            ):
                offenders.append(f"{rel}:{node.lineno} calls {node.func.attr}")
    assert offenders == []


def test_every_subpackage_is_installed() -> None:
    """A subpackage missing from pyproject's package list works in a checkout and is absent
    from an installed copy."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        "hermes_lcm." + p.parent.relative_to(ROOT).as_posix().replace("/", ".")
        for p in _sources()
        if p.name == "__init__.py" and p.parent != ROOT
    }
    assert found - listed == set()


FRONT_DOORS = {
    "__init__.py",
    "engine.py",
    "core.py",
    "tools.py",
    "schemas.py",
    "command.py",
    "store.py",
    "dag.py",
    "config.py",
    "version.py",
}


def test_the_root_holds_only_the_front_doors_and_packages() -> None:
    """Every other module lives in a package named for its job: a new module at the root (or a
    name prefix standing in for a package) fails here."""
    modules = {p.name for p in ROOT.glob("*.py")}
    assert modules == FRONT_DOORS, sorted(modules ^ FRONT_DOORS)


def test_every_package_is_installed_and_opens_with_what_it_is_for() -> None:
    """A package directory is listed in pyproject's packages (else a wheel leaves it out) and its
    ``__init__`` says what the package is for (its front door)."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
            "packages"
        ]
    )
    for init in _sources():
        if init.name != "__init__.py" or init.parent == ROOT:
            continue
        dotted = "hermes_lcm." + ".".join(init.parent.relative_to(ROOT).parts)
        assert dotted in listed, f"{dotted} is not in pyproject's packages"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, (
            f"{init.relative_to(ROOT)} has no docstring saying what the package is for"
        )


def _front_doors() -> dict[str, set[str]]:
    """Packages whose ``__init__`` declares ``__all__``: their front door, and what it exports."""
    doors = {}
    for init in _sources():
        if init.name != "__init__.py" or init.parent == ROOT:
            continue
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                names = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}  # type: ignore[attr-defined]
                doors[".".join(init.parent.relative_to(ROOT).parts)] = names
    return doors


def test_a_package_with_a_front_door_is_entered_through_it() -> None:
    """The way httpx tests its exported members: a module outside a package that declares
    ``__all__`` imports only those names from the package itself, never from the modules behind
    it (they may move), and every exported name exists."""
    doors = _front_doors()
    assert doors, "no package declares its front door"
    wrong = []
    for path in _sources():
        rel = path.relative_to(ROOT)
        here = ".".join(rel.with_suffix("").parts)
        package_of_file = ".".join(rel.parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package_of_file.split(".") if package_of_file else []
            if node.level:
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("hermes_lcm."):
                target = node.module[len("hermes_lcm.") :]
            else:
                continue
            for door, names in doors.items():
                inside = here == door or here.startswith(door + ".")
                if inside:
                    continue
                if target.startswith(door + "."):
                    wrong.append(
                        f"{rel}:{node.lineno} imports {target} behind {door}/'s front door"
                    )
                elif target == door:
                    wrong += [
                        f"{rel}:{node.lineno} imports {a.name}, not exported by {door}/"
                        for a in node.names
                        if a.name not in names
                    ]
    assert not wrong, "\n".join(wrong)
    for door, names in doors.items():
        module = __import__(f"hermes_lcm.{door}", fromlist=["*"])
        assert all(hasattr(module, name) for name in names), door


# Arithmetic that was once split across modules, and the one module that now holds each piece.
ONE_HOME = {
    "prompt/budget.py": {"Budget", "plan_budget", "budget_for", "reserve_for", "default_reserve"},
    "search/snippets.py": {"snippet"},
    "ingest/hostlist.py": {"HostList"},
}


def test_each_split_piece_of_arithmetic_has_one_home() -> None:
    """The prompt budget, snippets and the host list's normalization are each defined once: a
    second ``reserve_for`` or ``snippet`` elsewhere (a copy that drifts) fails here."""
    homes: dict[str, list[str]] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.col_offset == 0:
                homes.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    for home, names in ONE_HOME.items():
        for name in names:
            assert homes.get(name) == [home], (name, homes.get(name))
