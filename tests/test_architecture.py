"""The import floors of docs/design.md §2, read from the source (nothing is imported or run).

- the contract (`contract`: data definitions) imports nothing else of the project, and of the
  outside world only the standard library and pyarrow;
- the runtime the packages share (`runtime`) imports only itself and the contract, and the
  same outside world;
- `loadgen`, `receivers`, `suts` and `analysis` import only themselves, the runtime and the
  contract;
- the orchestration (the rest of `evbench`) may import everything;
- no module reaches itself through its imports (type-checking imports included): a cycle
  means two modules that cannot be read, tested or replaced apart;
- gevent and Locust monkey-patch the process that imports them, so no module that a process
  loading Spark, running the receiver or pacing a sender imports (directly or through others)
  may import them.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOOR = "contract"
RUNTIME = "runtime"
PACKAGES = ("loadgen", "receivers", "suts", "analysis")
PROJECT = ("evbench", FLOOR, RUNTIME, *PACKAGES)
FLOOR_THIRD_PARTY = {"pyarrow"}
PATCHING = {"gevent", "geventhttpclient", "locust"}
# Entry points of the processes that load Spark (the CLI runs `analyze` in-process, and the
# analysis job), run the receiver, or pace (the sender runs on uvloop; a fleet worker, which is
# patched, runs it as a child process).
NO_PATCHING_FROM = ("evbench.cli", "analysis.job", "receivers.__main__", "loadgen.__main__")


def _modules() -> dict[str, Path]:
    found = {}
    for top in PROJECT:
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


@cache
def imports_of(module: str) -> frozenset[str]:
    """Every module named by an import statement anywhere in `module` (a lazy import inside a
    function still runs in the process that calls it, so it counts)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                prefix = ".".join(base)
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            names.add(target)
            # `from pkg import module` names a module too
            names.update(
                f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES
            )
    return frozenset(names)


def _project_module(name: str) -> str | None:
    """The project module an imported name refers to (a name may be `module.attribute`)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _owner(module: str) -> str:
    top = module.split(".")[0]
    return top if top in (FLOOR, RUNTIME, *PACKAGES) else "orchestration"


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_source_is_read_at_all():
    """Guards every rule below against passing because nothing was found."""
    assert "loadgen.engine" in MODULES and "contract.records" in MODULES
    assert "runtime.parquet" in MODULES and "receivers.server" in MODULES
    assert "contract.records" in {_project_module(n) for n in imports_of("loadgen.engine")}


# What each layer may import of the project: itself and the layers below it.
BELOW = {FLOOR: (FLOOR,), RUNTIME: (RUNTIME, FLOOR)}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _owner(m) in BELOW))
def test_the_contract_and_the_runtime_stand_on_nothing_above_them(module):
    owner = _owner(module)
    for name in imports_of(module):
        target = _project_module(name)
        if target is not None:
            assert _owner(target) in BELOW[owner], f"{module} imports {target}, above {owner}"
        elif _top(name) in PROJECT:
            raise AssertionError(f"{module} imports {name}, which is not a module of the project")
        else:
            top = _top(name)
            allowed = (
                top in sys.stdlib_module_names or top in FLOOR_THIRD_PARTY or top == "__future__"
            )
            assert allowed, (
                f"{module} imports {name}: {owner} uses the standard library and pyarrow only"
            )


# Modules through which a definition would reach the disk, the network or other processes: the
# contract defines data; making, listing and reading things is the runtime's.
_IO_MODULES = {"os", "shutil", "subprocess", "socket", "http", "urllib", "tempfile", "glob"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _owner(m) == FLOOR))
def test_the_contract_holds_data_definitions_only(module):
    io = sorted({name for name in imports_of(module) if _top(name) in _IO_MODULES})
    assert not io, f"{module} imports {io}: I/O belongs in runtime/, the contract defines data"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _owner(m) in PACKAGES))
def test_a_package_imports_only_itself_and_the_floor(module):
    owner = _owner(module)
    for name in imports_of(module):
        target = _project_module(name)
        if target is None:
            assert _top(name) not in PROJECT, f"{module} imports {name}, which does not exist"
            continue
        assert _owner(target) in (owner, RUNTIME, FLOOR), (
            f"{module} imports {target}: {owner} may import only itself, {RUNTIME} and {FLOOR}"
        )


def _imported(module: str) -> set[str]:
    """The project's modules `module` imports, itself left out."""
    return {t for n in imports_of(module) if (t := _project_module(n)) not in (None, module)}


def cycle_through(start: str) -> list[str] | None:
    """A shortest chain of imports from `start` back to itself (None: there is none)."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        module = todo.pop(0)
        for target in sorted(_imported(module)):
            if target == start:
                return [*paths[module], start]
            if target not in paths:
                paths[target] = [*paths[module], target]
                todo.append(target)
    return None


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_itself_through_others(module):
    cycle = cycle_through(module)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _reachable(entry: str) -> set[str]:
    seen, todo = set(), [entry]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(t for n in imports_of(module) if (t := _project_module(n)) is not None)
    return seen


@pytest.mark.parametrize("entry", NO_PATCHING_FROM)
def test_no_process_that_loads_spark_receives_or_paces_imports_gevent(entry):
    reachable = _reachable(entry)
    assert len(reachable) > 1, f"nothing reachable from {entry}: the walk is broken"
    for module in sorted(reachable):
        patching = {n for n in imports_of(module) if _top(n) in PATCHING}
        assert not patching, f"{module} (reached from {entry}) imports {sorted(patching)}"


# Sizes (DEVELOPERS' style): a function reads at once, a module has one owner.
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 450


def _functions(module: str) -> list[tuple[str, int]]:
    tree = ast.parse(MODULES[module].read_text())
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno
    ]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_function_is_longer_than_a_screen(module):
    long = [f"{name} ({n} lines)" for name, n in _functions(module) if n > MAX_FUNCTION_LINES]
    assert not long, f"{module}: {', '.join(long)} over {MAX_FUNCTION_LINES} lines"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_outgrows_one_owner(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{module} has {lines} lines (at most {MAX_MODULE_LINES})"
