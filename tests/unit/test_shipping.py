"""The pure parts of shipping the user's code: a deterministic archive named by its content, what is the
user's to ship (not installed packages, not the library), spark.submit.pyFiles, and a worker preferring a
shipped archive over an older copy of the same module."""

from __future__ import annotations

import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from elasticity.batch.container.shipped import prefer_shipped
from elasticity.config import ConfigError, validate
from elasticity.spark.shipping import KEEP_UNUSED_S, app_archive, code_root, library_archive, py_file_archives, user_modules


def package(folder: Path, name: str, body: str = "X = 1\n") -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(body)
    (folder / name / "rules.py").write_text("RULE = 'a'\n")
    (folder / name / "__pycache__").mkdir()
    (folder / name / "__pycache__" / "rules.cpython-311.pyc").write_bytes(b"\0stale")
    return folder / name


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))
    return code


def test_the_same_content_gives_the_same_name_and_a_one_byte_change_another(on_path, tmp_path):
    name = f"app_{uuid.uuid4().hex[:8]}"
    root = package(on_path, name)
    first = app_archive((f"{name}.rules",), tmp_path / "a")
    (tmp_path / "b").mkdir()
    root.joinpath("rules.py").touch()  # a new mtime, the same bytes
    again = app_archive((name,), tmp_path / "b")
    assert first is not None and again is not None
    assert first.name == again.name and first.name.startswith("app-") and len(first.name) == len("app-") + 16 + 4
    assert first.path.read_bytes() == again.path.read_bytes()
    assert first.modules == (name,)
    names = zipfile.ZipFile(first.path).namelist()
    assert names == [f"{name}/__init__.py", f"{name}/rules.py"]  # sorted, no bytecode
    assert {i.date_time for i in zipfile.ZipFile(first.path).infolist()} == {(1980, 1, 1, 0, 0, 0)}

    root.joinpath("rules.py").write_text("RULE = 'b'\n")
    changed = app_archive((name,), tmp_path / "b")
    assert changed is not None and changed.name != first.name


def test_a_single_module_file_is_shipped_under_its_own_name(on_path, tmp_path):
    name = f"orders_{uuid.uuid4().hex[:8]}"
    (on_path / f"{name}.py").write_text("def build(app): pass\n")
    archive = app_archive((name,), tmp_path)
    assert archive is not None and zipfile.ZipFile(archive.path).namelist() == [f"{name}.py"]
    assert archive.modules == (name,)


def test_installed_modules_and_the_library_are_not_shipped(tmp_path):
    assert code_root("elasticity.apps.identity") is None  # the library: shipped on its own
    assert code_root("pyarrow.compute") is None  # site-packages: installed on the workers
    assert code_root("json") is None  # the standard library
    assert code_root("no_such_module_anywhere") is None
    assert app_archive(("elasticity.apps.identity", "pyarrow"), tmp_path) is None


def test_the_configs_user_code_is_app_class_and_the_side_input_processors(tmp_path):
    config = validate(
        {
            "job.name": "j",
            "task.inputs": "kafka.orders",
            "app.class": "orders_app.build:build",
            "stores.users.side.inputs": "kafka.users",
            "stores.users.side.inputs.processor.factory": "orders_tables:users",
        }
    )
    assert user_modules(config) == ("orders_app.build", "orders_tables")


def test_py_files_are_named_by_content_and_a_py_file_keeps_its_module_name(tmp_path):
    wheel = tmp_path / "shiptag-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("shiptag/__init__.py", "")
        z.writestr("shiptag-1.0.dist-info/METADATA", "Name: shiptag\n")
    single = tmp_path / "helpers.py"
    single.write_text("H = 1\n")
    out = tmp_path / "out"
    out.mkdir()
    w, p = py_file_archives((str(wheel), str(single)), out)
    assert w.name.startswith("shiptag-") and w.name.endswith(".zip") and w.modules == ("shiptag",)
    assert w.path.read_bytes() == wheel.read_bytes()
    assert p.name.startswith("helpers-") and zipfile.ZipFile(p.path).namelist() == ["helpers.py"]
    assert p.modules == ("helpers",)
    with pytest.raises(ConfigError, match="spark.submit.pyFiles: .*missing.zip is not a file"):
        py_file_archives((str(tmp_path / "missing.zip"),), out)


def test_spark_submit_py_files_takes_python_archives_only():
    base = {"job.name": "j", "task.inputs": "kafka.orders"}
    assert validate({**base, "spark.submit.pyFiles": "a.zip, b.whl,c.py"}).submit_py_files == ("a.zip", "b.whl", "c.py")
    assert validate(base).submit_py_files is None
    with pytest.raises(ConfigError, match="spark.submit.pyFiles"):
        validate({**base, "spark.submit.pyFiles": "native.so"})


def test_a_worker_imports_a_changed_app_from_its_new_archive(tmp_path):
    """A reused Python worker has the old app imported; the new archive goes first and the old module is dropped."""
    name = f"app_{uuid.uuid4().hex[:8]}"
    old, new = tmp_path / "app-old.zip", tmp_path / "app-new.zip"
    for path, version in ((old, 1), (new, 2)):
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(f"{name}.py", f"VERSION = {version}\n")
    path = [str(old), *sys.path]
    saved = sys.path[:]
    try:
        sys.path[:] = path
        assert __import__(name).VERSION == 1
        sys.path.insert(1, str(new))  # as Spark's worker adds a new include
        assert prefer_shipped(((new.name, (name,)),)) is True
        assert sys.path[0] == str(new) and __import__(name).VERSION == 2
        assert prefer_shipped(((new.name, (name,)),)) is False  # already from there: nothing dropped
        assert prefer_shipped((("app-elsewhere.zip", (name,)),)) is False  # not on this worker's path
    finally:
        sys.path[:] = saved
        sys.modules.pop(name, None)


def test_runs_reuse_one_folder_that_keeps_what_recent_runs_shipped(tmp_path):
    """Every driver process (an Airflow task each) writes into one folder: the library's archive, the same
    bytes each time, is one file; a version unused for a week goes when a new one is written, one in use stays."""
    import os
    import time

    library = Path(__import__("elasticity").__file__).parent
    first = library_archive(library, tmp_path)
    again = library_archive(library, tmp_path)
    assert first.path == again.path and first.path.read_bytes() == again.path.read_bytes()
    names = zipfile.ZipFile(first.path).namelist()
    assert "elasticity/config/job.py" in names and "elasticity/views/templates/job_page.html" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    week_ago = time.time() - KEEP_UNUSED_S - 60
    stale = tmp_path / "app-0123456789abcdef.zip"
    stale.write_bytes(b"an old version")
    os.utime(stale, (week_ago, week_ago))
    os.utime(first.path, (week_ago, week_ago))
    assert library_archive(library, tmp_path).path == first.path  # in use again: kept, and its clock reset
    name = f"newapp{uuid.uuid4().hex[:6]}"
    package(tmp_path / "code", name)
    sys.path.insert(0, str(tmp_path / "code"))
    try:
        new = app_archive((name,), tmp_path)
    finally:
        sys.path.remove(str(tmp_path / "code"))
    assert new is not None and new.path.exists() and first.path.exists()
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.glob("*.zip")) == sorted([first.path.name, new.path.name])
