"""Opening a checkpoint store (`CheckpointStore(url)`, then `close()`): the store is opened by every task,
trigger poll and page, so an up-to-date store's opening must stay cheap. Measures, on SQLite and PostgreSQL,
an up-to-date store's opening (the median of --repeat), a new store's first opening, and, with --before, the
same with the library of another tree, side by side in one run (absolute times drift on a shared machine;
the comparison holds), and this tree's first opening of a store the other tree made ("upgrading"). Each
tree runs in a process of its own (the first opening includes what it imports then), alternating, each
round on stores of its own.

usage: python bench/store_open_bench.py [--before OTHER/include] [--postgres URL] [--repeat N] [--rounds N]

e.g. the library before schema versions: `git archive 61e529e include | tar -x -C /tmp/before`, then
--before /tmp/before/include.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "include"


def worker(url: str, repeat: int) -> dict[str, float]:
    """In the tree's own process: the new store's first opening, then `repeat` openings of the made store (ms)."""
    from elasticity.checkpoint.store import CheckpointStore

    start = time.perf_counter()
    CheckpointStore(url).close()
    first = (time.perf_counter() - start) * 1000
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        CheckpointStore(url).close()
        samples.append((time.perf_counter() - start) * 1000)
    return {"first": first, "open": statistics.median(samples) if samples else first}


def run(tree: Path, url: str, repeat: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", url, "--repeat", str(repeat)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def fresh_urls(postgres: str | None, tmp: str) -> dict[str, str]:
    """A new SQLite file, and a new schema of the PostgreSQL database."""
    urls = {"sqlite": f"sqlite:///{tmp}/{uuid.uuid4().hex}.db"}
    if postgres:
        from sqlalchemy import create_engine, text

        schema = f"bench_open_{uuid.uuid4().hex[:8]}"
        admin = create_engine(postgres)
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        admin.dispose()
        urls["postgresql"] = f"{postgres}{'&' if '?' in postgres else '?'}options=-csearch_path%3D{schema}"
    return urls


def drop_schemas(postgres: str | None, urls: list[str]) -> None:
    if not postgres:
        return
    from sqlalchemy import create_engine, text

    admin = create_engine(postgres)
    with admin.begin() as conn:
        for url in urls:
            if "search_path" in url:
                conn.execute(text(f"DROP SCHEMA {url.rsplit('%3D', 1)[1]} CASCADE"))
    admin.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another tree's include/ folder, measured beside this one")
    parser.add_argument("--postgres", help="a PostgreSQL database URL (a new schema per store)")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.repeat)))
        return 0
    trees = {"this tree": HERE, **({"before": args.before.resolve()} if args.before else {})}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name, tree in trees.items():
                for backend, url in fresh_urls(args.postgres, tmp).items():
                    made.append(url)
                    results.setdefault((name, backend), []).append(run(tree, url, args.repeat))
            if args.before:  # a store the other tree made, opened by this one: its first opening upgrades it
                for backend, url in fresh_urls(args.postgres, tmp).items():
                    made.append(url)
                    run(args.before.resolve(), url, 0)
                    results.setdefault(("upgrading", backend), []).append(run(HERE, url, args.repeat))
    drop_schemas(args.postgres, made)
    print(f"{'tree':<10} {'backend':<11} {'open (median ms)':>17} {'first open (ms)':>16}")
    for (name, backend), rs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        opened = statistics.median(r["open"] for r in rs)
        first = statistics.median(r["first"] for r in rs)
        print(f"{name:<10} {backend:<11} {opened:>17.2f} {first:>16.1f}")
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        sys.exit(main())
    import results

    sys.exit(results.run("store_open_bench", main))
