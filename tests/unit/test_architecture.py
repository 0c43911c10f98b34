"""The package tree is the architecture: imports go down the layers below, never up
and never in a circle, only `spark/` and `airflow/` touch Spark and Airflow, and
only the command line uses the local stack (`local/`).
Read from the source (ast), so a violation fails here before it tangles anything."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests.support.library import PACKAGE, REPO, library_modules

# Bottom to top: a unit may import itself and the units before it.
LAYERS = (
    "faults",
    "process_registry",
    "serializers",
    "formats",
    "jobmodel",
    "config",
    "kafka",
    "checkpoint",
    "metrics",
    "api",
    "state",
    "apps",
    "batch",
    "scaling",
    "quality",
    "maintenance",
    "views",
    "testing",
    "scaffold",
    "spark",
    "airflow",
    "local",
    "cli",
    "__main__",
)
# `batch/`'s sub-roles, bottom to top: the sinks, the worker's side (Samza's SamzaContainer), the driver's
# (its JobCoordinator); a role may import itself and the roles before it.
BATCH_ROLES = ("sinks", "container", "coordinator")
ONLY_IN = {"pyspark": "spark", "py4j": "spark", "airflow": "airflow", "fastapi": "airflow"}


MODULES = library_modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module this one imports, at any depth of its code (lazy and TYPE_CHECKING imports count)."""
    found = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _unit(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_every_unit_has_a_layer():
    assert {_unit(m) for m in MODULES} - {""} == set(LAYERS)


def test_imports_go_down_the_layers():
    rank = {u: i for i, u in enumerate(LAYERS)}
    upward = sorted(
        f"{m} imports {d}"
        for m, deps in GRAPH.items()
        if _unit(m)
        for d in deps
        if d.startswith("elasticity.") and _unit(d) and rank[_unit(d)] > rank[_unit(m)]
    )
    assert upward == []


def _batch_role(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "batch" else ""


def test_every_batch_module_has_a_role():
    """`batch/` holds its three sub-roles and nothing beside them (its own `__init__` aside)."""
    assert {_batch_role(m) for m in MODULES if _unit(m) == "batch"} - {""} == set(BATCH_ROLES)
    assert [m for m in MODULES if _unit(m) == "batch" and not _batch_role(m)] == ["elasticity.batch"]


def test_batch_roles_import_down():
    """Within `batch/`: the coordinator (driver) may import the container (worker) and the sinks, the container
    the sinks, the sinks neither; so a Python worker never loads the driver's side."""
    rank = {r: i for i, r in enumerate(BATCH_ROLES)}
    upward = sorted(
        f"{m} imports {d}"
        for m, deps in GRAPH.items()
        if _batch_role(m)
        for d in deps
        if _batch_role(d) and rank[_batch_role(d)] > rank[_batch_role(m)]
    )
    assert upward == []


def test_no_import_cycle():
    edges = {m: {d for d in deps if d in MODULES and d != m} for m, deps in GRAPH.items()}
    # a package's __init__ importing its own submodules is how it exports them, not a cycle
    for m in edges:
        edges[m] = {d for d in edges[m] if not d.startswith(m + ".")}
    seen: dict[str, int] = {}
    cycles = []

    def visit(m: str, stack: list[str]) -> None:
        seen[m] = 1
        for d in sorted(edges[m]):
            if seen.get(d) == 1:
                cycles.append(" -> ".join(stack[stack.index(d) :] + [d]))
            elif d not in seen:
                visit(d, stack + [d])
        seen[m] = 2

    for m in sorted(edges):
        if m not in seen:
            visit(m, [m])
    assert cycles == []


def test_production_code_is_free_of_the_local_stack():
    """The broker, servers and clusters this machine starts are the local stack's; the engine, checkpoints,
    state, quality and the Airflow operators find them by their state files, never by importing it."""
    wrong = sorted(
        f"{m} imports {d}"
        for m, deps in GRAPH.items()
        if _unit(m) not in ("local", "cli", "__main__")
        for d in deps
        if d.startswith("elasticity.local")
    )
    assert wrong == []


def test_spark_and_airflow_are_imported_only_in_their_packages():
    wrong = sorted(
        f"{m} imports {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if d.split(".")[0] in ONLY_IN and _unit(m) != ONLY_IN[d.split(".")[0]]
    )
    assert wrong == []


def test_the_domain_core_loads_neither_spark_nor_airflow():
    """What the ast sees, checked at run time: importing every core module leaves pyspark and airflow unloaded."""
    core = sorted(m for m in MODULES if _unit(m) not in ("spark", "airflow", "cli", "__main__"))
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in core)
        + "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'airflow'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_the_documented_layout_is_the_tree():
    """The documentation's Layout page lists every unit of the library in layer order, each with a line
    saying what it holds (`name/` for a package, `name.py` for a module), and nothing that is gone."""
    layout = (REPO / "docs" / "reference" / "layout.md").read_text()
    listed = re.findall(r"^  (\w+)(/|\.py)\s+\S", layout, re.M)
    tree = [(u, "/" if (PACKAGE / u).is_dir() else ".py") for u in LAYERS]
    assert listed == tree


def test_one_name_per_module():
    """No two modules of the library share a name (a name says which concept it is)."""
    names = [p.stem for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_the_project_speaks_of_itself():
    """Ideas are credited to Samza's designs (SEP-32, SAMZA-71, CheckpointV2), never to our tracker or notes."""
    said = re.compile(r"\bissues? #?\d+\b|\.\./shared|\bseeds/|\bthe seed (says|puts|writes|asks|wants)|\bas the seed\b", re.I)
    skip = {".venv", ".git", ".elasticity", "node_modules", "__pycache__"}
    files = [
        p
        for p in REPO.rglob("*")
        if p.is_file()
        and not skip & set(p.relative_to(REPO).parts)
        and (p.suffix in (".py", ".md", ".properties", ".yaml", ".toml") or p.name == "Makefile")
        and p != Path(__file__).resolve()
    ]
    found = [
        f"{p.relative_to(REPO)}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1) if said.search(line)
    ]
    assert found == []
