"""The user's code on the executors, shipped from the driver: the modules the job config names (`app.class`,
`stores.<store>.side.inputs.processor.factory`) zipped from the driver's copy, and the pure-Python packages of
Spark's `spark.submit.pyFiles`. Each archive is named by its content hash: a changed app is a new artifact,
which the workers import in place of the old one (`elasticity.batch.container.processing` prefers it), and an unchanged
one is added once per session. Code installed in site-packages, and the library itself (shipped by
`session.ship_library`), is the workers' own.

What a driver process remembers of its shipping (`ShippedCode`: the archives it zipped, what each session was
given, what it put on its own path) is held by the process registry (`elasticity.process_registry`), bounded,
and undone when the registry closes."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import site
import sys
import sysconfig
import tempfile
import threading
import time
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticity.config import ConfigError, JobConfig
from elasticity.process_registry import PROCESS

FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest: the same files give the same bytes
LIBRARY = "elasticity"
KEEP_UNUSED_S = 7 * 86400
NAMED_CODE = ("stores.", ".side.inputs.processor.factory")  # a key naming user code, besides app.class
KEEP_ZIPPED = 8  # app archives remembered per driver process (the latest per set of files): one per job it runs
KEEP_SESSIONS = 8  # sessions whose added archives a driver process remembers: one per Spark target it talks to


@dataclass(frozen=True)
class Archive:
    """One shipped file: its name on the executors (`<stem>-<sha256[:16]>.zip`), where the driver wrote it,
    and the top-level modules it provides (which a worker imports from it, not from an older copy)."""

    name: str
    path: Path
    modules: tuple[str, ...]

    @property
    def shipped(self) -> tuple[str, tuple[str, ...]]:
        """What the executors are told: (name, modules), plain values."""
        return self.name, self.modules


def user_modules(config: JobConfig) -> tuple[str, ...]:
    """The modules of user code the job config names: app.class and the side-input processor factories."""
    specs = [config.app_class] + [
        v for k, v in config.raw_map.items() if k.startswith(NAMED_CODE[0]) and k.endswith(NAMED_CODE[1])
    ]
    return tuple(dict.fromkeys(s.partition(":")[0].strip() for s in specs if ":" in s))


def installed(path: Path) -> bool:
    """In site-packages or the standard library: installed on the workers like any dependency."""
    if {"site-packages", "dist-packages"} & set(path.parts):
        return True
    paths = sysconfig.get_paths()
    roots = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")] + site.getsitepackages()
    return any(path.is_relative_to(Path(r).resolve()) for r in roots)


def code_root(module: str) -> Path | None:
    """The top-level package folder (or module file) of `module` on the driver's path; None when it is not
    the user's to ship: the library, installed, native, or not found (the driver fails on it with its own error)."""
    top = module.split(".")[0]
    if top == LIBRARY:
        return None
    spec = importlib.util.find_spec(top)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        locations = list(spec.submodule_search_locations)
        root = Path(locations[0]).resolve() if len(locations) == 1 else None  # a namespace over folders: installed
    else:
        root = Path(spec.origin).resolve() if spec.origin and spec.origin.endswith(".py") else None
    return None if root is None or installed(root) else root


def _entries(root: Path) -> list[tuple[str, Path]]:
    """(name in the archive, file) of a package folder or module file, sorted; bytecode left out."""
    if root.is_file():
        return [(root.name, root)]
    files = (p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    return sorted((p.relative_to(root.parent).as_posix(), p) for p in files)


def deterministic_zip(entries: list[tuple[str, bytes]]) -> bytes:
    """A zip of `entries` in name order, every timestamp and mode fixed: the same content, the same bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in sorted(entries):
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return out.getvalue()


def content_name(stem: str, data: bytes) -> str:
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:16]}.zip"


def top_modules(names: list[str]) -> tuple[str, ...]:
    """The importable top-level names of an archive's entries (a wheel's .dist-info and .data left out)."""
    tops = set()
    for n in names:
        first = n.split("/")[0]
        if "/" not in n:
            if first.endswith(".py"):
                tops.add(first[:-3])
        elif first.isidentifier():
            tops.add(first)
    return tuple(sorted(tops))


def shipping_folder() -> Path:
    """Where drivers keep the archives they ship, named by content: one folder for every run of the user's
    jobs (a folder per driver process would leave one behind per Airflow task, for as long as a job runs)."""
    return Path(tempfile.gettempdir()) / f"elasticity-shipped-{os.getuid()}"


def _write(folder: Path, stem: str, data: bytes) -> Archive:
    """The archive of `data` in `folder`, written once; archives unused for KEEP_UNUSED_S (former versions of
    an app or of the library) are removed, so the folder holds what the job's recent runs shipped."""
    name = content_name(stem, data)
    path = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.utime(path)  # in use: not pruned
    except FileNotFoundError:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        cutoff = time.time() - KEEP_UNUSED_S
        for old in folder.glob("*.zip"):
            with contextlib.suppress(OSError):
                if old.stat().st_mtime < cutoff:
                    old.unlink()
    return Archive(name, path, top_modules(zipfile.ZipFile(io.BytesIO(data)).namelist()))


def library_archive(package: Path, folder: Path) -> Archive:
    """The library's own code (`package`: the `elasticity` folder), for executors that do not have it installed."""
    return _write(folder, LIBRARY, deterministic_zip([(name, f.read_bytes()) for name, f in _entries(package)]))


def app_archive(modules: tuple[str, ...], folder: Path, shipped: ShippedCode | None = None) -> Archive | None:
    """One archive of the user code behind `modules` (None: nothing of theirs to ship); the same files as the
    last time in this process (names, mtimes and sizes) are not read and zipped again."""
    roots = sorted({r for m in modules if (r := code_root(m)) is not None})
    if not roots:
        return None
    shipped = shipped if shipped is not None else PROCESS.get(ShippedCode)
    files = [(name, f) for r in roots for name, f in _entries(r)]
    seen = tuple((name, f.stat().st_mtime_ns, f.stat().st_size) for name, f in files)
    if (known := shipped.zipped_archive(folder, roots, seen)) is not None:
        return known
    archive = _write(folder, "app", deterministic_zip([(name, f.read_bytes()) for name, f in files]))
    shipped.remember_zipped(folder, roots, seen, archive)
    return archive


def py_file_archives(paths: tuple[str, ...], folder: Path) -> list[Archive]:
    """Each of `spark.submit.pyFiles` under its content's name: a .zip or .whl as it is (a wheel is a zip;
    Spark puts a .zip on the workers' path), a .py zipped, so that it keeps its module name."""
    out = []
    for p in paths:
        path = Path(p).expanduser()
        if not path.is_file():
            raise ConfigError(f"spark.submit.pyFiles: {p} is not a file on the driver")
        data = path.read_bytes()
        if path.suffix == ".py":
            data = deterministic_zip([(path.name, data)])
        stem = path.name.split("-")[0] if path.suffix == ".whl" else path.stem
        out.append(_write(folder, stem, data))
    return out


@dataclass(eq=False)
class ShippedCode:
    """A driver process's memory of what it shipped, bounded: the latest app archive per set of files (the
    KEEP_ZIPPED last used), the archives added to each session (the KEEP_SESSIONS last used), and the
    `spark.submit.pyFiles` archives it put on its own `sys.path`. They are on it because the driver imports
    them too, as spark-submit --py-files has it (an app whose module imports one); closing takes them off."""

    zipped: OrderedDict[tuple[Path, tuple[Path, ...]], tuple[tuple[tuple[str, int, int], ...], Archive]] = field(
        default_factory=OrderedDict
    )  # (folder, code roots) -> (their files' names, mtimes and sizes, the archive)
    added: OrderedDict[str, set[str]] = field(default_factory=OrderedDict)  # session -> archive names added
    on_path: list[str] = field(default_factory=list)  # what this process put on sys.path
    lock: threading.Lock = field(default_factory=threading.Lock)

    def zipped_archive(self, folder: Path, roots: list[Path], seen: tuple[tuple[str, int, int], ...]) -> Archive | None:
        key = (folder, tuple(roots))
        known = self.zipped.get(key)
        if known is None or known[0] != seen or not known[1].path.exists():
            return None
        self.zipped.move_to_end(key)
        return known[1]

    def remember_zipped(self, folder: Path, roots: list[Path], seen: tuple[tuple[str, int, int], ...], archive: Archive) -> None:
        key = (folder, tuple(roots))
        self.zipped[key] = (seen, archive)
        self.zipped.move_to_end(key)
        while len(self.zipped) > KEEP_ZIPPED:
            self.zipped.popitem(last=False)

    def put_on_path(self, path: Path) -> None:
        """`path` on this process's sys.path, after the script's folder (ahead of installed packages)."""
        if (entry := str(path)) not in sys.path:
            sys.path.insert(1, entry)
            self.on_path.append(entry)

    def was_added(self, session: str, name: str) -> bool:
        self.added.setdefault(session, set())
        self.added.move_to_end(session)
        while len(self.added) > KEEP_SESSIONS:
            self.added.popitem(last=False)
        return name in self.added[session]

    def close(self) -> None:
        with self.lock:
            for entry in self.on_path:
                with contextlib.suppress(ValueError):
                    sys.path.remove(entry)
            self.on_path.clear()
            self.zipped.clear()
            self.added.clear()


def _session_key(spark: Any) -> str:
    session_id = getattr(spark, "session_id", None)
    return session_id if isinstance(session_id, str) else f"classic-{id(spark.sparkContext)}"


def ship_user_code(spark: Any, config: JobConfig) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Add the app's code and `spark.submit.pyFiles` to the session (each content once per session), and
    return what the executors should import from: (archive name, its top-level modules), the app's first."""
    shipped = PROCESS.get(ShippedCode)
    with shipped.lock:
        folder = shipping_folder()
        app = app_archive(user_modules(config), folder, shipped)
        py_files = py_file_archives(config.submit_py_files or (), folder)
        for a in py_files:
            shipped.put_on_path(a.path)
        session = _session_key(spark)
        archives = ([app] if app else []) + py_files
        for a in archives:
            if not shipped.was_added(session, a.name):
                _add(spark, a.path)
                shipped.added[session].add(a.name)
    return tuple(a.shipped for a in archives)


def _add(spark: Any, path: Path) -> None:
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.errors import PySparkException

        with contextlib.suppress(PySparkException):  # ARTIFACT_ALREADY_EXISTS: another driver process added it
            spark.addArtifacts(str(path), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(path))
