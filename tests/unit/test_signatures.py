"""Calls that read at the call site: a function of more than four parameters takes at most four by position, a
boolean flag is always named, and a dataclass of more than four fields is built by keyword (kw_only, or
KW_ONLY after its first fields). Read from
the source (ast), like the architecture test."""

from __future__ import annotations

import ast

from tests.support.library import library_modules

# Samza's keyedTumblingWindow(keyFn, duration, initialValue, aggregator, merger) order: an aggregation's triple
# (`*Windows.count()`) spreads into its last three.
POSITIONAL_BY_DESIGN = {"keyed_tumbling_window", "keyed_session_window"}


def _flag(arg: ast.arg) -> bool:
    return arg.annotation is not None and ast.unparse(arg.annotation) in ("bool", "bool | None")


def _findings() -> list[str]:
    found = []
    for name, path in library_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in POSITIONAL_BY_DESIGN:
                args = node.args
                positional = [a for a in args.posonlyargs + args.args if a.arg not in ("self", "cls")]
                total = len(positional) + len(args.kwonlyargs) + bool(args.vararg)
                if total > 4 and len(positional) > 4:
                    found.append(f"{name}.{node.name}: {len(positional)} positional parameters")
                found += [f"{name}.{node.name}: flag {a.arg} by position" for a in positional if _flag(a)]
            elif isinstance(node, ast.ClassDef):
                for d in node.decorator_list:
                    if "dataclass" not in ast.unparse(d) or "kw_only=True" in ast.unparse(d):
                        continue
                    fields = []
                    for s in node.body:
                        if isinstance(s, ast.AnnAssign):
                            if ast.unparse(s.annotation) == "KW_ONLY":  # the fields after it are keyword-only
                                break
                            if "ClassVar" not in ast.unparse(s):
                                fields.append(s)
                    if len(fields) > 4:
                        found.append(f"{name}.{node.name}: a dataclass of {len(fields)} fields built by position")
    return sorted(found)


def test_long_signatures_and_flags_are_keyword_only():
    assert _findings() == []
