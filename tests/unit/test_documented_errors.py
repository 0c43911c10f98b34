"""Every error message the docs quote is one the library prints, so a message reworded in the code without its
page (or a page that paraphrases a message) fails here.

What counts as a quoted error, on the README and every page under docs/:
- each line of a fenced block marked `error` (an opening fence of three backticks and `error`); an indented
  line is a detail of the line above (an example config's values, a log's tail) and is not checked. Every
  block of the troubleshooting page is one;
- an inline code span right after the word "error" ("the error `...`", "fails with the error:" and the span on
  the next line, a column named `error` and the span after it), and the spans listed after that one (`, `,
  ` or ` between);
- an inline code span that starts with `error: `, the command line's own line.

A quoted message matches a line of a string of the library's source (a constant or an f-string) where the
code's holes (`{...}`, `%s`) stand for anything, and the page's placeholders (`<...>`, `[...]`, `...`) stand
where the code has a hole; a quote that ends in `...` leaves the rest of the message out. The prefixes that
callers put before a message may be left on: the command line's `error: `, the exception's class name as
Python prints it (`ConfigError: `), and a leading `<placeholder>: ` (the file or operator a wrapper names)."""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.support.doc_blocks import blocks
from tests.support.library import PACKAGE, REPO

DOCS = REPO / "docs"
GENERATED = {"results"}  # measured output written by the benchmarks, not prose
TROUBLESHOOTING = DOCS / "operating" / "troubleshooting.md"

HOLE = "\x00"  # a placeholder of the page, or a hole of the code, once both are normalised
CODE_HOLE = re.compile(r"\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrfgx]")
PLACEHOLDER = re.compile(r"<[^<>\s=][^<>]*>|\[\.\.\.\]|\.\.\.")
SPECIFIC = 12  # a string with fewer literal characters (`f"{path}: {e}"`) would match any message
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
LEAD = re.compile(r"\berror`?:?\s*\(?\s*$")  # "the error `", "with the error:\n`", "its `error`\n`", "error (`"
LISTED = re.compile(r"^\s*(?:,|or|and|, or|, and)\s*$")
CLI_PREFIX = "error: "
EXCEPTION_PREFIX = re.compile(r"^([A-Z]\w*(?:Error|Exception)): ")
WRAPPER_PREFIX = re.compile(rf"^{HOLE}: ")


@dataclass(frozen=True)
class Quote:
    where: str
    text: str


# --- the library's strings ------------------------------------------------------------------------


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level names bound to a string, or to a tuple of strings (as `', '.join(NAME)` prints it)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, str):
                out[node.targets[0].id] = value
            elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
                out[node.targets[0].id] = ", ".join(value)
    return out


def _literal(text: str) -> str:
    """Code text as a page would quote it: a placeholder the code writes out (`s3://<bucket>/...`) is one."""
    return PLACEHOLDER.sub(HOLE, text)


def _rendered(node: ast.JoinedStr, constants: dict[str, str]) -> str:
    """An f-string with a hole per replacement field; a field naming a module constant (`{NAME}`,
    `{', '.join(NAME)}`) is printed into it, as it always prints the same."""
    text = ""
    for value in node.values:
        if isinstance(value, ast.Constant):
            text += _literal(str(value.value))
            continue
        assert isinstance(value, ast.FormattedValue)
        expr = value.value
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "join" and expr.args:
            expr = expr.args[0]
        plain = value.conversion == -1 and value.format_spec is None
        text += _literal(constants[expr.id]) if plain and isinstance(expr, ast.Name) and expr.id in constants else HOLE
    return text


def _pattern(template: str) -> re.Pattern[str]:
    """A template line as a regex: its holes match anything, the page's placeholders included."""
    return re.compile("(?:.*?)".join(re.escape(part) for part in template.split(HOLE)), re.S)


def _cut_pattern(template: str) -> re.Pattern[str] | None:
    """The template's start, as a quote that ends in `...` (the rest of the message left out) gives it: it
    may stop in a hole or inside a literal part, once it has quoted `SPECIFIC` characters of the template's
    own. None for a template too short for that."""
    cuts: list[str] = []
    head, said = "", 0
    for part in template.split(HOLE):
        lengths = range(len(part), max(0, SPECIFIC - said) - 1, -1)
        if lengths:
            cuts.append(head + f"(?:{'|'.join(re.escape(part[:j]) for j in lengths)})")
        head += re.escape(part) + "(?:.*?)"
        said += len(part)
    return re.compile("|".join(f"(?:{c})" for c in cuts), re.S) if cuts else None


@cache
def library() -> tuple[tuple[str, ...], frozenset[str]]:
    """Each line of every string of the library that says enough to name a message, with `HOLE` for what
    the code fills in; and the names of the library's classes (an exception's name may lead a quoted line)."""
    lines: set[str] = set()
    classes: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        constants = _constants(tree)
        parts_of_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts_of_fstrings:
                lines.update(CODE_HOLE.sub(HOLE, _literal(node.value)).split("\n"))
            elif isinstance(node, ast.JoinedStr):
                lines.update(_rendered(node, constants).split("\n"))
            elif isinstance(node, ast.ClassDef):
                classes.add(node.name)
    specific = sorted(t.strip() for t in lines if len(re.sub(rf"[\s{HOLE}]", "", t)) >= SPECIFIC)
    return tuple(specific), frozenset(classes)


@cache
def patterns() -> tuple[re.Pattern[str], ...]:
    return tuple(_pattern(t) for t in library()[0])


# --- the quotes of the docs -----------------------------------------------------------------------


def pages() -> list[Path]:
    docs = (p for p in DOCS.rglob("*.md") if not GENERATED & set(p.relative_to(DOCS).parts))
    return [REPO / "README.md", *sorted(docs)]


def _without_blocks(text: str) -> str:
    """The page with its fenced blocks blanked out, line numbers kept: inline spans are looked for in prose."""
    return re.sub(r"(?ms)^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1\s*$", lambda m: "\n" * m.group(0).count("\n"), text)


def block_quotes(page: Path) -> list[Quote]:
    out = []
    for b in blocks(page, REPO):
        if b.lang != "error":
            continue
        for i, line in enumerate(b.text.splitlines(), start=b.line + 1):
            if line.strip() and not line.startswith(" "):
                out.append(Quote(f"{b.page}:{i}", line))
    return out


def inline_quotes(page: Path) -> list[Quote]:
    text = _without_blocks(page.read_text())
    out, listed_after = [], None
    for m in SPAN.finditer(text):
        span = " ".join(m.group(1).split())
        before = text[max(0, m.start() - 40) : m.start()]
        follows_list = listed_after is not None and LISTED.match(text[listed_after : m.start()])
        quoted = LEAD.search(before) or follows_list or span.startswith(CLI_PREFIX)
        if quoted:
            out.append(Quote(f"{page.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}", span))
            listed_after = m.end()
        else:
            listed_after = None
    return out


def quotes() -> list[Quote]:
    return [q for page in pages() for q in (*block_quotes(page), *inline_quotes(page))]


# --- matching -------------------------------------------------------------------------------------


def messages(quoted: str) -> set[str]:
    """The quoted line as the library may compose it, the placeholders as holes: as quoted, and with each of
    the callers' prefixes taken off (a string of the library may print the prefix itself)."""
    found = {PLACEHOLDER.sub(HOLE, quoted.strip())}
    for text in list(found):
        if text.startswith(CLI_PREFIX):
            found.add(text[len(CLI_PREFIX) :])
    for text in list(found):
        exception = EXCEPTION_PREFIX.match(text)
        if exception and (exception.group(1) in library()[1] or hasattr(builtins, exception.group(1))):
            found.add(text[exception.end() :])
    return found | {WRAPPER_PREFIX.sub("", text) for text in found}


def printed(quoted: str) -> bool:
    """Whether a string of the library prints the quoted line (a quote with no words of its own, such as
    `error: <message>`, says nothing to check)."""
    texts = messages(quoted)
    if not all(re.sub(rf"[\s{HOLE}]", "", text) for text in texts):
        return True
    if any(p.fullmatch(text) for text in texts for p in patterns()):
        return True
    cut = {text.removesuffix(HOLE).rstrip() for text in texts if quoted.rstrip().endswith("...")}
    starts = [t for t in library()[0] if any(text.startswith(t.split(HOLE)[0]) for text in cut)]
    return any((p := _cut_pattern(t)) is not None and p.fullmatch(text) for t in starts for text in cut)


# --- the tests ------------------------------------------------------------------------------------


def test_the_conventions_find_quotes_in_prose_and_blocks():
    found = {q.text for q in quotes()}
    assert "job '<job>' has no checkpoints yet in <url>" in found  # a line of an error block
    assert "output kafka.<topic> partition <p> refused by the broker: <reason>" in found  # after "the error"
    assert "deserialize: value is not valid json ..." in found  # a column named `error`, then a list
    assert any(q.startswith("error: Kafka broker unreachable at 127.0.0.1") for q in found)  # the CLI's line


def test_placeholders_match_holes_only():
    assert printed("job '<job>' has no checkpoints yet in <url>")
    assert printed("error: job 'orders' has no checkpoints yet in sqlite:///x.db")  # values for the holes
    assert not printed("job '<job>' has no checkpoints in <url>")  # a word the code does not print
    assert not printed("job '<job>' has no <what> yet in <url>")  # a placeholder where the code has words
    assert printed("error: <message>")  # nothing of its own
    assert printed("job '<job>' has no checkpoints ...")  # the rest left out
    assert not printed("job '<job>' has no bananas ...")


def test_every_troubleshooting_block_quotes_errors():
    kinds = {b.lang for b in blocks(TROUBLESHOOTING, REPO)}
    assert kinds == {"error"}, "the troubleshooting page quotes errors only, each block marked ```error"


def test_every_quoted_error_is_printed_by_the_code():
    missing = [f"{q.where}: {q.text}" for q in quotes() if not printed(q.text)]
    assert missing == []
