"""The reference pages cannot drift from the code: every subcommand and flag of the
parser is on docs/reference/cli.md, every environment variable the code reads on
docs/reference/environment.md (read from the source with ast)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from elasticity.cli import build_parser
from tests.support.library import REPO

SOURCES = ("include", "dags", "plugins", "spark_apps")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_subcommand_flag_and_action_is_on_the_cli_page():
    page = (REPO / "docs" / "reference" / "cli.md").read_text()
    missing = []
    for name, parser in _subcommands().items():
        if f"### `elasticity {name}`" not in page:
            missing.append(f"the heading of {name}")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if action.option_strings:
                names = [o for o in action.option_strings if o.startswith("--")]
            else:  # a positional: its choices, else its name as the page writes it (`NAME`)
                names = [] if action.choices else [action.dest.upper()]
            missing += [f"{name} {n}" for n in names if f"`{n}" not in page]
            missing += [f"{name} {c}" for c in action.choices or () if f"`{c}`" not in page]
    assert not missing, f"not on docs/reference/cli.md: {missing}"


def _constants(trees: list[ast.Module]) -> dict[str, str]:
    """Module-level NAME = "text" of every module (a variable's name is often one, imported elsewhere)."""
    found = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                found.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _variable(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The variable's name (or, for `PREFIX + option`, the prefix), from a literal or a module constant."""
    if isinstance(node, ast.BinOp):
        return _variable(node.left, constants)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def variables_read(paths: list[Path]) -> set[str]:
    """`os.environ.get(X)`, `.setdefault(X)`, `os.environ[X]`, `X in os.environ`, `os.getenv(X)`, and the
    module constants named `*ENV*` (the variables read through a mapping passed in, as `env.get(PREFIX + ...)`)."""
    trees = [ast.parse(p.read_text()) for p in paths]
    constants = _constants(trees)
    found = {v for k, v in constants.items() if "ENV" in k.split("_")}
    for tree in trees:
        for node in ast.walk(tree):
            arg = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                f = node.func
                if (_is_environ(f.value) and f.attr in ("get", "setdefault")) or f.attr == "getenv":
                    arg = node.args[0]
            elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
                arg = node.slice
            elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
                arg = node.left
            if arg is not None:
                name = _variable(arg, constants)
                assert name, f"an environment read the test cannot name: {ast.unparse(node)}"
                found.add(name)
    return found


def test_every_environment_variable_read_is_on_the_environment_page():
    paths = [p for d in SOURCES for p in sorted((REPO / d).rglob("*.py"))]
    found = variables_read([p for p in paths if any(w in p.read_text() for w in ("environ", "getenv", "ENV"))])
    assert {"ELASTICITY_HOME", "KAFKA_BOOTSTRAP_SERVERS", "SPARK_REMOTE", "AIRFLOW__METRICS__"} <= found
    page = (REPO / "docs" / "reference" / "environment.md").read_text()
    missing = sorted(v for v in found if f"`{v}" not in page)
    assert not missing, f"read by the code, not on docs/reference/environment.md: {missing}"


def test_the_scan_finds_each_way_of_reading_a_variable(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import os\nNAME_ENV = 'A_ENV'\nB = 'B_VAR'\n"
        "os.environ.get(B)\nos.environ['C_VAR']\nos.getenv('D_VAR')\n'E_VAR' in os.environ\n"
        "os.environ.setdefault('F_VAR', '1')\nos.environ['G_SET'] = '1'\n"
    )
    assert variables_read([source]) == {"A_ENV", "B_VAR", "C_VAR", "D_VAR", "E_VAR", "F_VAR"}
