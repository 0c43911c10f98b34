"""The code blocks of the README and the getting-started, first-job and app pages run as written: a config
loads in strict mode, an app runs through `elasticity.testing` on demo orders and gives what a reference
computed here gives, a command runs. A block not meant to run says why (`<!-- not run: why -->`); every
other block runs here or in tests/integration/test_docs_run.py (the first-job walkthrough)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

from elasticity.api import Message
from elasticity.apps import enrichment
from elasticity.apps.demo_feed import demo_records
from elasticity.config import ConfigWarning, parse_properties, validate
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.testing import Record, TestRun
from tests.conftest import REPO
from tests.support.doc_blocks import Block, blocks, shell_commands

PAGES = [
    "README.md",
    "docs/getting-started.md",
    "docs/first-job.md",
    "docs/formats.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs" / "apps").glob("*.md")),
]
RUN_HERE = {  # page -> the kinds of block this module runs; first-job's run in tests/integration/test_docs_run.py
    "README.md": {"properties", "python"},
    "docs/getting-started.md": {"sh"},
    "docs/formats.md": {"properties", "python"},
    "docs/apps/async.md": {"python"},
    "docs/apps/index.md": {"python"},
    "docs/apps/stores.md": {"python"},
    "docs/apps/testing.md": {"python"},
    "docs/apps/windows-and-joins.md": {"python"},
}
WALKTHROUGH = {"docs/first-job.md": {"properties", "python", "sh"}}
NOT_RUN = 10  # blocks marked `<!-- not run: why -->` on these pages: a new one is a decision, made here


def page_blocks(page: str) -> list[Block]:
    return blocks(REPO / page, REPO)


def runnable(page: str, lang: str | None = None) -> list[Block]:
    return [b for b in page_blocks(page) if b.not_run is None and (lang is None or b.lang == lang)]


def test_every_block_runs_or_says_why_not():
    run, marked = [], []
    for page in PAGES:
        kinds = {**RUN_HERE, **WALKTHROUGH}.get(page, set())
        for b in page_blocks(page):
            if b.not_run is not None:
                assert len(b.not_run) > 5, f"{b.where}: say why it is not run"
                marked.append(b)
            else:
                assert b.lang in kinds, f"{b.where}: a ```{b.lang} block that no test runs; run it, or mark it not run"
                run.append(b)
    print(f"docs code blocks: {len(run)} run, {len(marked)} marked not run")
    assert len(marked) == NOT_RUN, [f"{b.where}: {b.not_run}" for b in marked]
    assert len(run) >= 12


@pytest.mark.parametrize("block", [b for p in PAGES for b in runnable(p, "properties")], ids=lambda b: b.where)
def test_a_config_block_loads_in_strict_mode_with_samzas_names(block):
    """An unknown key fails the strict load; no key is deprecated or a name Samza does not read. Strict mode
    also notes the deliberate differences in behaviour (the bucket hash, the thread pool, serde defaults):
    those are about the product, not the page."""
    props = parse_properties(block.text)
    with warnings.catch_warnings(record=True) as plain:
        warnings.simplefilter("always")
        validate(props)
    assert [str(w.message) for w in plain] == []
    with warnings.catch_warnings(record=True) as strict:
        warnings.simplefilter("always", ConfigWarning)
        validate(props, strict=True)
    about_names = [str(w.message) for w in strict if "does not read" in str(w.message) or "deprecated" in str(w.message)]
    assert about_names == []


def orders(count: int, keys: int = 20, seed: int = 3) -> list[tuple[str | None, dict]]:
    """What `elasticity feed` writes, decoded."""
    return [(k and k.decode(), json.loads(v)) for k, v in demo_records(count, keys=keys, seed=seed)]


def per_key(kvs) -> dict:
    out = defaultdict(list)
    for k, v in kvs:
        out[k].append(v)
    return dict(out)


@pytest.fixture
def module_folder(tmp_path, monkeypatch):
    """A folder on sys.path for the pages' modules; a module a test wrote is forgotten after it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def write_module(folder: Path, block: Block, name: str | None = None) -> str:
    name = name or (block.title or "").removesuffix(".py") or f"doc_{Path(block.page).stem.replace('-', '_')}_{block.line}"
    (folder / f"{name}.py").write_text(block.text)
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return name


def test_the_readme_job_runs_as_written(module_folder):
    """README's own job: its config and its app, on demo orders: each order with its tier, per key in input order."""
    config, app = runnable("README.md")
    assert (config.title, app.title) == ("orders.properties", "orders_app.py")
    write_module(module_folder, app)
    props = parse_properties(config.text)
    records = orders(60)
    with TestRun(config={**props, "task.max.concurrency": "8"}, partitions=2) as run:
        result = run.process(records)
    assert result.dead_letters == []
    gold = {"user-1", "user-2"}
    expected = [(k, {**v, "tier": "gold" if k in gold else "standard"}) for k, v in records if v["amount"] > 0]
    assert per_key(result.outputs["parquet.enriched"]) == per_key(expected)
    assert sum(t.processed for t in result.by_task.values()) == len(records)


def test_the_formats_page_job_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys):
    """The Avro example: its config written where the page's script reads it, the script run as written; it
    prints the running totals decoded from the Avro output, and no dead letter, as the page says."""
    config, script = runnable("docs/formats.md")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELASTICITY_HOME", str(tmp_path / "home"))
    (tmp_path / config.title).write_text(config.text)
    exec(compile(script.text, script.where, "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    page = (REPO / "docs" / "formats.md").read_text()
    assert printed == ["[('user-1', 5.0, 1), ('user-1', 7.5, 2)]", "[]"]
    assert all(f"`{line}`" in page for line in printed)


def test_the_async_page_app_is_the_readme_one():
    (app,) = runnable("docs/apps/async.md")
    assert app.text == runnable("README.md", "python")[0].text


def big_orders_in_cents(records):
    return [(k, {**v, "cents": round(v["amount"] * 100)}) for k, v in records if v["amount"] > 100]


def test_the_operators_page_app_gives_big_orders_in_cents(module_folder):
    (app,) = runnable("docs/apps/index.md")
    assert app.text.replace('  # or "kafka.<topic>"', "") == runnable("docs/first-job.md", "python")[0].text
    name = write_module(module_folder, app)
    records = orders(80)
    with TestRun(f"{name}:build", inputs=["kafka.orders"], factor=4, partitions=2) as run:
        result = run.process(records)
    assert per_key(result.outputs["parquet.big_orders"]) == per_key(big_orders_in_cents(records))


def test_the_stores_page_app_keeps_running_totals_across_batches(module_folder):
    app, reference = runnable("docs/apps/stores.md")
    name = write_module(module_folder, app)
    records = orders(80)
    with TestRun(f"{name}:build", inputs=["kafka.orders"], factor=4, partitions=2) as run:
        first = run.process(records[:50])
        second = run.process(records[50:])
    got = [kv for r in (first, second) for kv in r.outputs["parquet.enriched"]]
    # a null key has no store entry: its order goes to the dead letters (task.dead.letter.policy=dlq)
    dead = [d for r in (first, second) for d in r.dead_letters]
    assert [json.loads(d.value) for d in dead] == [v for k, v in records if k is None] != []
    running: dict = {}
    expected = []
    for k, v in records:
        if k is None:
            continue
        t = running.get(k) or {"total": 0, "count": 0}
        running[k] = {"total": round(t["total"] + v["amount"], 2), "count": t["count"] + 1}
        expected.append((k, {**v, **running[k]}))
    assert per_key(got) == per_key(expected)
    # the state reference, folded from nothing or from the start it is given, gives the demo app's totals
    ref = importlib.import_module(write_module(module_folder, reference))
    ssp = SystemStreamPartition("kafka", "orders", 0)
    messages = [Message(key=k, value=v, ssp=ssp, offset=i, timestamp=0) for i, (k, v) in enumerate(records)]
    assert ref.totals_of(messages) == enrichment.totals_of(messages)
    assert ref.totals_of(messages[40:], start=ref.totals_of(messages[:40])) == enrichment.totals_of(messages)


def test_the_windows_page_app_counts_clicks_per_minute_and_sums_sessions(module_folder):
    (app,) = runnable("docs/apps/windows-and-joins.md", "python")
    name = write_module(module_folder, app)
    clicks = [("u1", 0, 1.0), ("u1", 20_000, 2.0), ("u2", 30_000, 4.0), ("u1", 61_000, 8.0), ("u1", 200_000, 16.0)]
    with TestRun(f"{name}:build", inputs=["kafka.clicks"]) as run:
        run.append("kafka.users", [("u1", {"tier": "gold"})])
        result = run.process([Record(k, {"ts": ts, "amount": a}, timestamp=ts) for k, ts, a in clicks])
    assert result.dead_letters == []
    minutes = {(p["key"], p["start"]): p["value"] for _, p in result.outputs["parquet.clicks-per-minute"]}
    assert minutes == {("u1", 0): 2, ("u2", 0): 1, ("u1", 60_000): 1}  # closed by the watermark 200,000
    sessions = {(p["key"], p["start"]): p["value"] for _, p in result.outputs["parquet.sessions"]}
    assert sessions == {("u1", 0): 3.0, ("u2", 30_000): 4.0, ("u1", 61_000): 8.0}


def test_the_testing_page_example_passes():
    (block,) = runnable("docs/apps/testing.md")
    scope: dict = {}
    exec(compile(block.text, block.where, "exec"), scope)
    tests = [f for n, f in scope.items() if n.startswith("test_") and callable(f)]
    assert len(tests) == 1
    tests[0]()


def test_the_getting_started_commands_run_from_the_checkout():
    (block,) = runnable("docs/getting-started.md", "sh")
    for command in shell_commands(block.text):
        done = subprocess.run(
            command, shell=True, cwd=REPO, capture_output=True, text=True, timeout=120,
            env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(REPO)},
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
        assert " - " in done.stdout  # one `stream:partition - task` line per SSP
