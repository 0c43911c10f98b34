"""`pip install elasticity` must bring what the library imports: read every third-party import
of `include/elasticity` (ast, lazy imports inside functions too) and check it against pyproject's
lists. The core (everything outside `spark/`, `airflow/`, `quality/` and `local/`) must work with
`dependencies` alone; a package with an extra may use the core's and its extra's, and an extra
reaching another package's code must include that package's extra. Imports are mapped to
distributions as installed here (`importlib.metadata`), so a renamed import (`kafka` is
kafka-python) is checked against the name pip installs."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.library import REPO, library_modules

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRA_PACKAGES = ("spark", "airflow", "quality", "local")  # elasticity.<p> -> the extra named p
OPTIONAL = {"fsspec": "fsspec"}  # imported by the core only behind a feature: the extra that brings it
# Imported only where Airflow supplies them: the hooks' connection-form methods, which Airflow 3.1 calls with
# its web server's WTForms and Flask-Babel (FAB) or, without FAB, stand-ins it puts in sys.modules itself.
FROM_AIRFLOW = {"elasticity.airflow.hooks": {"wtforms", "flask_babel"}}
DYNAMIC = {"import_module", "find_spec", "files"}  # importlib calls whose literal argument is an import too


@dataclass
class Module:
    name: str
    part: str
    third_party: set[str] = field(default_factory=set)  # dotted names, eager and lazy
    eager: set[str] = field(default_factory=set)  # elasticity modules imported when this one loads
    lazy: set[str] = field(default_factory=set)  # elasticity modules imported inside a function


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in EXTRA_PACKAGES else "core"


PATHS = library_modules()


def _own(name: str, names: Iterable[str]) -> set[str]:
    """`from elasticity.quality import cursor` imports the submodule when there is one."""
    found = {name}
    found.update(f"{name}.{n}" for n in names if f"{name}.{n}" in PATHS)
    return {m for m in found if m in PATHS} or {name}


def scan(name: str, path: Path) -> Module:
    module = Module(name, _part(name))

    def visit(node: ast.AST, lazy: bool) -> None:
        imported: set[str] = set()
        if isinstance(node, ast.Import):
            imported = {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{name}: relative import"
            imported = _own(node.module, [a.name for a in node.names]) if node.module.startswith("elasticity") else {node.module}
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if called in DYNAMIC and re.fullmatch(r"[A-Za-z_][\w.]*", node.args[0].value):
                imported = {node.args[0].value}
        for m in imported:
            top = m.split(".")[0]
            if top == "elasticity":
                (module.lazy if lazy else module.eager).add(m)
            elif top not in sys.stdlib_module_names and top != "__future__":
                module.third_party.add(m)
        inside = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return module


MODULES = {name: scan(name, path) for name, path in PATHS.items()}


def _canon(requirement: str) -> Requirement:
    r = Requirement(requirement)
    r.name = canonicalize_name(r.name)
    return r


def declared(project: dict, part: str) -> set[str]:
    """Distributions a package may import: the core's, its extra's, and those of the extras it includes."""
    extras = project.get("optional-dependencies", {})
    texts = [*project["dependencies"], *(r for e in sorted(_included_extras(project, part)) for r in extras.get(e, []))]
    names: set[str] = set()
    for r in map(_canon, texts):
        if r.name != canonicalize_name(project["name"]):
            names |= {r.name, *_meta_requirements(r.name, frozenset(r.extras))}
    return names


@cache
def _meta_requirements(dist: str, extras: frozenset[str]) -> set[str]:
    """What a distribution stands for beyond itself: a meta-package without modules of its own (apache-airflow)
    brings its requirements, a requested extra (psycopg[binary]) the distributions it adds."""
    try:
        distribution = md.distribution(dist)
    except md.PackageNotFoundError:
        return set()
    meta = not any(str(f).endswith(".py") for f in distribution.files or [])
    out = set()
    for text in distribution.requires or []:
        r = Requirement(text)
        plain = r.marker is None or r.marker.evaluate({"extra": ""})
        wanted = r.marker is not None and any(r.marker.evaluate({"extra": e}) for e in extras) and not plain
        if (meta and plain) or wanted:
            out.add(canonicalize_name(r.name))
    return out


@cache
def _files(dist: str) -> frozenset[str]:
    return frozenset(str(f) for f in md.distribution(dist).files or [])


@cache
def _packages() -> dict[str, list[str]]:
    return md.packages_distributions()


@cache
def owners(module: str) -> frozenset[str]:
    """The installed distributions that provide a module; where several share a top-level name (airflow.*),
    those holding the deepest file of its path."""
    candidates = _packages().get(module.split(".")[0], [])
    if len(candidates) <= 1:
        return frozenset(canonicalize_name(d) for d in candidates)
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        stem = "/".join(parts[:n])
        found = {d for d in candidates if {f"{stem}.py", f"{stem}/__init__.py"} & _files(d)}
        if found:
            return frozenset(canonicalize_name(d) for d in found)
    return frozenset(canonicalize_name(d) for d in candidates)


def problems(project: dict) -> list[str]:
    """Every import a part would fail on when installed with only what pyproject declares for it."""
    out = []
    extras = project.get("optional-dependencies", {})
    for part in ("core", *EXTRA_PACKAGES):
        allowed_dists = declared(project, part)
        allowed_parts = {"core", part} | {p for p in EXTRA_PACKAGES if p in _included_extras(project, part)}
        reached, todo = set(), [m for m in MODULES if MODULES[m].part == part]
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            reached.add(name)
            module = MODULES[name]
            for target in module.eager:
                todo.append(target)
            for target in module.lazy:
                target_part = _part(target)
                if target_part in allowed_parts:
                    todo.append(target)
                elif module.part != "core":  # the core may reach an extra's package in a function: that extra's feature
                    out.append(f"{name} imports {target}, but extra [{part}] does not include [{target_part}]")
        for name in sorted(reached):
            for imported in sorted(MODULES[name].third_party):
                if imported.split(".")[0] in FROM_AIRFLOW.get(name, ()):
                    continue
                found = owners(imported)
                if not found:
                    out.append(f"{name} imports {imported}, which no installed distribution provides")
                elif not found & allowed_dists and not _optional(imported, extras):
                    where = "dependencies" if part == "core" else f"dependencies or extra [{part}]"
                    out.append(f"{name} ({part}) imports {imported} ({', '.join(sorted(found))}), not in {where}")
    return sorted(set(out))


def _included_extras(project: dict, part: str) -> set[str]:
    extras = project.get("optional-dependencies", {})
    seen, todo = set(), [part]
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in extras.get(extra, []):
            r = _canon(text)
            if r.name == canonicalize_name(project["name"]):
                todo += sorted(r.extras)
    return seen


def _optional(imported: str, extras: dict) -> bool:
    extra = OPTIONAL.get(imported.split(".")[0])
    return extra is not None and bool(owners(imported) & {_canon(r).name for r in extras.get(extra, [])})


def test_every_import_is_declared_for_its_part():
    assert problems(PROJECT) == []


@pytest.mark.parametrize(
    ("dists", "part"),
    [
        (["sqlalchemy"], "core"),
        (["croniter"], "core"),
        (["xxhash"], "core"),
        (["noida-db"], "core"),
        (["pyspark", "pyspark-client"], "spark"),
        (["great-expectations"], "quality"),
        (["fastapi"], "airflow"),
    ],
)
def test_a_missing_dependency_is_found(dists: list[str], part: str):
    """The check is not vacuous: take a declared distribution away and it names the import."""
    project = {**PROJECT, "optional-dependencies": dict(PROJECT["optional-dependencies"])}
    lists, key = (project, "dependencies") if part == "core" else (project["optional-dependencies"], part)
    kept = [r for r in lists[key] if _canon(r).name not in dists]
    assert len(kept) == len(lists[key]) - len(dists)
    lists[key] = kept
    assert any(f"({dists[0]}" in p or f", {dists[0]}" in p for p in problems(project))


def test_an_extra_reaching_another_package_must_include_its_extra():
    project = {**PROJECT, "optional-dependencies": dict(PROJECT["optional-dependencies"])}
    project["optional-dependencies"]["airflow"] = [
        r for r in project["optional-dependencies"]["airflow"] if not r.startswith("elasticity[")
    ]
    found = problems(project)
    assert any("extra [airflow] does not include [quality]" in p for p in found)
    assert any("extra [airflow] does not include [spark]" in p for p in found)


def test_the_pins_satisfy_the_declared_ranges():
    """requirements.txt's exact pins are one install of these ranges."""
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            r = _canon(line)
            pins[r.name] = Version(next(iter(r.specifier)).version)
    ranges = [_canon(r) for r in PROJECT["dependencies"]]
    ranges += [_canon(r) for reqs in PROJECT["optional-dependencies"].values() for r in reqs]
    outside = [f"{r} (pinned {pins[r.name]})" for r in ranges if r.name in pins and pins[r.name] not in r.specifier]
    assert outside == []
    unpinned = sorted(
        {r.name for r in ranges} - set(pins) - {canonicalize_name(PROJECT["name"])} - {"fastapi", "requests", "fsspec"}
    )
    assert unpinned == []  # these three come in with apache-airflow
