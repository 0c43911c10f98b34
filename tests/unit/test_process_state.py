"""A process keeps state in one place, the process registry, and its close closes it.

Read from the source (ast): a module-level name bound to a call is made by a callable of `CALLS` (each
returning something immutable, or state owned elsewhere, for the reason given) or is one of `STATE`; a module-level
dict, list or set literal is a constant (an UPPER_CASE name) that no code of the library changes; `global` is
used only as `GLOBALS` says. What has to live per process is the registry's (`elasticity.process_registry`)."""

from __future__ import annotations

import ast
import sys
import threading
from pathlib import Path

from elasticity.batch.container.container_process import container_process
from elasticity.batch.container.slot_claims import ClaimSweep, claim
from elasticity.process_registry import PROCESS, ProcessRegistry
from elasticity.spark.shipping import KEEP_SESSIONS, KEEP_ZIPPED, Archive, ShippedCode
from elasticity.state.handover import parking
from tests.support.library import library_modules

# What a module-level call may make, by the callable as written, and why that is not hidden state.
CALLS = {
    "logging.getLogger": "a logger: logging's own registry, configured by the host process",
    "re.compile": "a compiled pattern: immutable",
    "struct.Struct": "a compiled binary layout: immutable",
    "TypeVar": "a type variable: typing only",
    "frozenset": "immutable",
    "tuple": "immutable",
    "object": "a sentinel compared by identity",
    "float": "a number, read once from the environment",
    "str.join": "a string",
    "pa.schema": "an Arrow schema: immutable",
    "from_arrow_schema": "Spark's copy of an Arrow schema, never changed",
    "Parser": "a config value parser (frozen dataclass)",
    "choice": "a config value parser (frozen dataclass)",
    "declared_keys": "the job config's keys, a tuple",
    "_Required": "the REQUIRED marker, compared by identity",
    "_v2_tail": "bytes",
    "StoreDescriptor": "a store's declaration (frozen dataclass)",
    "TableDescriptor": "a table's declaration (frozen dataclass)",
    "Windows.reduce": "a window's declaration (frozen dataclass)",
    "MetaData": "the checkpoint store's schema: declared once, read by SQLAlchemy and Alembic",
    "Table": "a table of the checkpoint store's schema: declared once",
    "Path().resolve().with_name": "a path",
    "Path().with_name": "a path",
    "jinja2.Environment": "templates from package data; jinja's cache of them is bounded (400)",
    "environment": "a jinja2.Environment of package templates; jinja's cache of them is bounded (400)",
}
# Module-level state kept outside the registry, each with its reason.
STATE = {
    ("elasticity.process_registry", "PROCESS"): "the registry itself: the one place a process keeps state",
    ("elasticity.checkpoint.task_checkpoint", "_nano"): "a counter that keeps checkpoint ids unique within a process: "
    "it must never restart, so the registry's close must not forget it",
    ("elasticity.faults", "_hook"): "a test's fault hook, installed and restored around the code it runs (see faults)",
}
GLOBALS = {("elasticity.faults", "_hook"): "`hook` installs a test's hook and restores the previous one"}
MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "clear", "remove", "discard"}
MODULES = library_modules()


def _callee(node: ast.expr) -> str:
    """A call's callable as written, a call inside it as `name()`: `Path(__file__).resolve().with_name` ->
    `Path().resolve().with_name`; a constant's method by its type (`'; '.join` -> `str.join`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_callee(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_callee(node.func)}()"
    if isinstance(node, ast.Constant):
        return type(node.value).__name__
    return ast.unparse(node)


def _module_bindings(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            found += [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            found.append((node.target.id, node.value))
    return found


def _changed_names(tree: ast.Module) -> set[str]:
    """Names whose value a statement changes in place: `N[k] = v`, `del N[k]`, `N += x`, `N.append(x)`, ..."""
    changed = set()

    def base(node: ast.expr) -> str | None:
        while isinstance(node, ast.Subscript):
            node = node.value
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None

    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = [t for t in node.targets if isinstance(t, ast.Subscript)]
        elif isinstance(node, ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        changed.update(n for t in targets if (n := base(t)) is not None)
    return changed


TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}
CHANGED = set().union(*(_changed_names(t) for t in TREES.values()))


def test_module_level_calls_make_only_what_the_lists_allow():
    found = sorted(
        f"{m}.{name} = {_callee(value.func)}(...)"
        for m, tree in TREES.items()
        for name, value in _module_bindings(tree)
        if isinstance(value, ast.Call) and _callee(value.func) not in CALLS and (m, name) not in STATE
    )
    assert found == []


def test_module_level_containers_are_constants_nobody_changes():
    literals = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
    found = sorted(
        f"{m}.{name}"
        for m, tree in TREES.items()
        for name, value in _module_bindings(tree)
        if isinstance(value, literals)
        and name != "__all__"
        and (not name.lstrip("_").isupper() or name in CHANGED)
        and (m, name) not in STATE
    )
    assert found == []


def test_global_only_where_listed():
    found = sorted(
        (m, name) for m, tree in TREES.items() for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names
    )
    assert found == sorted(GLOBALS)


def test_the_lists_name_what_is_there():
    """An entry whose code is gone goes from the list too."""
    bound = {(m, name) for m, tree in TREES.items() for name, _ in _module_bindings(tree)}
    assert set(STATE) <= bound
    callees = {_callee(v.func) for t in TREES.values() for _, v in _module_bindings(t) if isinstance(v, ast.Call)}
    assert set(CALLS) <= callees


class _Client:
    closed = False

    def close(self) -> None:
        self.closed = True


class _Store:
    def __init__(self, root: Path) -> None:
        self.root = root

    def release(self) -> None:
        pass


def test_close_closes_the_consumers_and_empties_the_caches(tmp_path):
    PROCESS.close()
    process = container_process()
    consumer = _Client()
    process.consumers["127.0.0.1:1"] = consumer
    process.threads(2)
    keeper = parking()
    keeper.park(_Store(tmp_path))
    PROCESS.get(ClaimSweep).last = 1.0
    shipped = PROCESS.get(ShippedCode)
    shipped.remember_zipped(tmp_path, [tmp_path], (), Archive("app-0.zip", tmp_path / "app-0.zip", ("app",)))
    assert not shipped.was_added("session", "app-0.zip")
    shipped.added["session"].add("app-0.zip")
    shipped.put_on_path(tmp_path / "lib-0.zip")
    assert str(tmp_path / "lib-0.zip") in sys.path

    PROCESS.close()

    assert consumer.closed and not process.consumers
    assert process.pool is None
    assert not keeper._parked and keeper._keeper is None
    assert not shipped.zipped and not shipped.added and not shipped.on_path
    assert str(tmp_path / "lib-0.zip") not in sys.path
    assert PROCESS.held() == []
    assert container_process() is not process and parking() is not keeper and PROCESS.get(ClaimSweep).last < 0


def test_the_caches_are_bounded(tmp_path):
    shipped = ShippedCode()
    for i in range(KEEP_ZIPPED + 3):
        archive = Archive(f"app-{i}.zip", tmp_path / f"app-{i}.zip", ("app",))
        shipped.remember_zipped(tmp_path, [tmp_path / str(i)], (), archive)
        shipped.remember_zipped(tmp_path, [tmp_path / str(i)], (("a.py", i, 1),), archive)  # the same files, changed
    assert len(shipped.zipped) == KEEP_ZIPPED
    for i in range(KEEP_SESSIONS + 3):
        shipped.was_added(f"session-{i}", "app-0.zip")
    assert len(shipped.added) == KEEP_SESSIONS


def test_one_object_per_kind_made_once_under_threads_and_a_failed_close_does_not_stop_the_others():
    registry = ProcessRegistry()
    made = []

    class Kind:
        def __init__(self) -> None:
            made.append(self)

    got = []
    threads = [threading.Thread(target=lambda: got.append(registry.get(Kind))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and all(g is made[0] for g in got)

    class Failing:
        def close(self) -> None:
            raise RuntimeError("boom")

    client = registry.get(_Client)
    registry.get(Failing)  # newer: closed first, and fails
    registry.close()
    assert client.closed and registry.held() == []


def test_a_claim_sweeps_at_most_once_a_minute_per_process(tmp_path):
    PROCESS.close()
    claim(tmp_path / "now", 0, 1, None)
    swept = PROCESS.get(ClaimSweep).last
    assert swept > 0
    claim(tmp_path / "next", 0, 1, None)
    assert PROCESS.get(ClaimSweep).last == swept
