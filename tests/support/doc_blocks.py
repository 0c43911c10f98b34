"""The fenced code blocks of a Markdown page, as the docs tests run them: each block's language, its
`title="..."` (the file the page asks the reader to write), its first line, and whether the page marks
it `<!-- not run: why -->` on the line before it. Pure parsing: no file is written, nothing runs."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<why>.+?)\s*-->$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str  # "" for a block without a language
    title: str | None  # the file the block is, from `title="orders.properties"`
    text: str
    not_run: str | None  # why, from `<!-- not run: why -->` on the line before the fence

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path, root: Path | None = None) -> list[Block]:
    """Every top-level fenced block of the page, in page order. An unclosed fence is an error: it would
    swallow the rest of the page."""
    page = str(path.relative_to(root)) if root else str(path)
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        lang, _, attrs = info.partition(" ")
        title = re.search(r'title="([^"]+)"', attrs)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: a code fence that is never closed")
        before = lines[i - 1].strip() if i else ""
        marked = NOT_RUN.match(before)
        out.append(
            Block(
                page,
                i + 1,
                lang.strip(),
                title.group(1) if title else None,
                "\n".join(lines[i + 1 : end]) + "\n",
                marked.group("why") if marked else None,
            )
        )
        i = end + 1
    return out


def shell_commands(text: str) -> list[str]:
    """A `sh` block's commands: a line ending in `\\` continues on the next; comments and blank lines are
    not commands. In a block that shows a session (a line starting `$ `), only those lines are commands and
    the rest is their output (see `shown_output`)."""
    lines = text.splitlines()
    session = any(line.startswith("$ ") for line in lines)
    commands: list[str] = []
    pending = ""
    for line in lines:
        if session and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if pending:
            line = pending + line.lstrip()
            pending = ""
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip() + " "
            continue
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            commands.append(stripped)
    if pending:
        raise ValueError(f"a command continued past the end of its block: {pending!r}")
    return commands


def shown_output(text: str) -> list[str]:
    """The output lines a session block shows, `...` (what the page leaves out) dropped."""
    lines = text.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        return []
    return [line for line in lines if not line.startswith("$ ") and line.strip() not in ("", "...")]


def script(page_blocks: list[Block]) -> str:
    """The page as one bash script, in page order: a block with a title writes that file (where the
    commands so far have left the shell), a `sh` block runs its commands, an untitled `python` block runs in
    the page's Python (`python -`). A session block's output goes to a file per block (`.doc-output/<line>`),
    which the test compares with what the page shows. Blocks marked not run are left out."""
    out = ["set -euo pipefail"]
    for b in page_blocks:
        if b.not_run is not None:
            continue
        marker = f"EOF_{b.line}"
        if b.title:
            out.append(f"cat > {shlex.quote(b.title)} <<'{marker}'\n{b.text}{marker}")
        elif b.lang == "sh":
            commands = shell_commands(b.text)
            if shown_output(b.text):
                sink = f"$DOC_OUTPUT/{b.line}"
                out += [f"{c} >> {sink}" for c in commands]
            else:
                out += commands
        elif b.lang == "python":
            out.append(f"python - <<'{marker}'\n{b.text}{marker}")
        else:
            raise ValueError(f"{b.where}: a ```{b.lang} block without a title has no way to run; mark it not run")
    return "\n".join(out) + "\n"
