"""`elasticity init` as a user meets it: the library built as a wheel and installed (no deps) in a fresh
virtualenv, whose dependencies are this venv's site-packages through a `.pth` path line (a path line's own
`.pth` files are not processed, so the editable install of this checkout is not on that venv's path). In an
empty folder: `init`, then `feed` to a real broker, `run-batch` on a local Spark whose Python workers run
that venv's interpreter, the Parquet output read back, and the generated app test run by that venv's
pytest. A template or data file missing from the wheel fails it."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from elasticity.apps.demo_feed import demo_records

REPO = Path(__file__).resolve().parents[2]
RECORDS, KEYS, PARTITIONS = 600, 20, 2


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 240) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _wheel(tmp: Path) -> Path:
    """The wheel of the files git ships (tracked and new, not ignored), built from a copy: no build/ here."""
    src = tmp / "src"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (REPO / name).is_file():  # a file deleted but not yet staged is listed too
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((REPO / name).read_bytes())
    out = tmp / "wheel"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "--disable-pip-version-check"]
        + ["-w", str(out), str(src)],
        tmp,
        dict(os.environ),
    )
    (wheel,) = out.glob("elasticity-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp, {}).strip())
    (purelib / "dependencies.pth").write_text(site.getsitepackages()[0] + "\n")
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", "--disable-pip-version-check"]
        + [str(wheel)],
        tmp,
        dict(os.environ),
    )
    return venv


def test_init_feed_run_batch_from_a_wheel(tmp_path: Path, kafka_bootstrap: str):
    venv = _fresh_venv(tmp_path, _wheel(tmp_path))
    # the user's environment: nothing of this checkout or of the test session's own settings
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ELASTICITY_", "AIRFLOW", "SPARK_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap)
    where = _run([str(venv / "bin" / "python"), "-c", "import elasticity; print(elasticity.__file__)"], tmp_path, env)
    assert Path(where.strip()).is_relative_to(venv), f"elasticity imported from {where} (not the wheel's)"

    empty = tmp_path / "work"
    empty.mkdir()
    job = f"orders-{uuid.uuid4().hex[:6]}"  # its own topic on the session's broker
    _run(["elasticity", "init", "shop", "--job", job], empty, env)
    project, config = empty / "shop", f"include/jobs/{job}.properties"

    fed = _run(
        ["elasticity", "feed", "--config", config, "--records", str(RECORDS), "--keys", str(KEYS)]
        + ["--partitions", str(PARTITIONS)],
        project,
        env,
    )
    assert f"sent {RECORDS} records" in fed
    ran = _run(["elasticity", "run-batch", "--config", config, "--until-caught-up"], project, env)
    summaries = [json.loads(line) for line in ran.splitlines() if line.startswith("{")]
    assert sum(s["records_read"] for s in summaries if s["batch_id"] is not None) == RECORDS
    assert summaries[-1]["lag_left"] == 0

    table = pq.read_table(project / ".elasticity" / job / "output" / "big_orders")
    assert {"key", "value", "batch_id", "task_name"} <= set(table.column_names)
    rows = [(k.decode(), json.loads(v)) for k, v in zip(table["key"].to_pylist(), table["value"].to_pylist(), strict=True)]
    got = sorted((k, v["seq"], v["cents"]) for k, v in rows)
    orders = [(k, json.loads(v)) for k, v in demo_records(RECORDS, KEYS)]
    expected = sorted((k.decode(), v["seq"], round(v["amount"] * 100)) for k, v in orders if k is not None and v["amount"] >= 100)
    assert got == expected and 0 < len(got) < RECORDS

    tested = _run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"], project, env)
    assert "1 passed" in tested
