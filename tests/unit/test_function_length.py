"""No function of the library runs over 60 lines of its own (a nested function's lines are its own, not its
parent's), so each reads on one screen. Read from the source (ast), like the signature test. Declarative tables
are exempt; the functions not yet split are named below, and the list may only shrink. No module runs over
500 lines either."""

from __future__ import annotations

import ast

from tests.support.library import library_modules

MAX_LINES = 60
DECLARATIVE = {"elasticity.quality.suite._expectations"}  # the data-quality checks' table, one entry per check
NOT_YET_SPLIT: set[str] = set()

Function = ast.FunctionDef | ast.AsyncFunctionDef


def own_lines(node: Function) -> int:
    """The function's lines less those of the functions defined in it."""
    nested = [c for s in node.body for c in ast.walk(s) if isinstance(c, Function)]
    outermost = [
        c for c in nested if not any(o is not c and o.lineno <= c.lineno and c.end_lineno <= o.end_lineno for o in nested)
    ]
    return node.end_lineno - node.lineno + 1 - sum(c.end_lineno - c.lineno + 1 for c in outermost)


def long_functions() -> dict[str, int]:
    found = {}
    for name, path in library_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, Function) and (lines := own_lines(node)) > MAX_LINES:
                found[f"{name}.{node.name}"] = lines
    return found


def test_no_function_runs_over_60_lines_of_its_own():
    found = long_functions()
    new = {f: n for f, n in found.items() if f not in DECLARATIVE | NOT_YET_SPLIT}
    assert not new, f"functions over {MAX_LINES} lines of their own (split them): {new}"
    assert set(found) >= NOT_YET_SPLIT, f"split since, drop from NOT_YET_SPLIT: {sorted(NOT_YET_SPLIT - set(found))}"


def test_own_lines_leaves_nested_functions_out():
    tree = ast.parse("def outer():\n    x = 1\n    def inner():\n        return 2\n    return inner\n")
    assert own_lines(tree.body[0]) == 3 and own_lines(tree.body[0].body[1]) == 2


MAX_MODULE_LINES = 500


def test_no_module_runs_over_500_lines():
    """A module over 500 lines holds more than one concept: split it along its seams (as the checkpoint store's
    facade, the job's config keys and the test harness were)."""
    long = {name: n for name, path in library_modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them): {long}"
