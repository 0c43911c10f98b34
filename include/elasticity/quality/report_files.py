"""Where data-quality reports live: the job's object store (an `s3://...` URI, the S3-protocol server its blob
store uses) or a local folder when the job has none. A run is built in a scratch folder of the process that ran
it, then put here whole; the API server reads it back from here, whichever host it runs on.

Locations are kept in the store without their credentials (`public`): a reader resolves a run's location
against the job's configured report location (`files_of`), which carries them."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from pyarrow import fs

from elasticity.state.backends.blob_manager import BlobStoreManager

_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.I)


def is_uri(location: str) -> bool:
    return "://" in location


def public(location: str) -> str:
    """The location without the `user:secret@` of its URI (what the store keeps and the page shows)."""
    return _USERINFO.sub(r"\1", location)


class ReportFiles:
    """The files under one location: a folder, or a prefix of an object store (any pyarrow or fsspec URI)."""

    def __init__(self, location: str) -> None:
        self.location = location if is_uri(location) else str(Path(location).resolve())
        self._blobs: BlobStoreManager | None = None

    @property
    def is_local(self) -> bool:
        return not is_uri(self.location)

    @property
    def local_folder(self) -> Path | None:
        return None if is_uri(self.location) else Path(self.location)

    def _fs(self) -> tuple[fs.FileSystem, str]:
        if self._blobs is None:
            if self.is_local:  # a reader must not create a folder that is not there
                return fs.LocalFileSystem(), self.location
            self._blobs = BlobStoreManager(self.location)
        return self._blobs.fs, self._blobs.root

    def _path(self, name: str) -> str:
        filesystem, root = self._fs()
        return f"{root}/{name.strip('/')}" if name.strip("/") else root

    def child(self, name: str) -> ReportFiles:
        """The files under `name` (a relative path), as a location of their own."""
        name = name.strip("/")
        if self.is_local:
            return ReportFiles(str(Path(self.location) / name))
        base, q, query = self.location.partition("?")
        return ReportFiles(f"{base.rstrip('/')}/{name}" + (f"?{query}" if q else ""))

    def files_of(self, location: str) -> ReportFiles:
        """A location the store names (credentials dropped) as files to read: under this one, through it."""
        mine = public(self.location).partition("?")[0].rstrip("/")
        theirs = location.partition("?")[0].rstrip("/")
        if theirs.startswith(mine + "/"):
            return self.child(theirs[len(mine) + 1 :])
        return ReportFiles(location)

    def read_bytes(self, name: str) -> bytes:
        """A file's bytes; FileNotFoundError when it is not there (or `name` leaves the location)."""
        if ".." in Path(name).parts:
            raise FileNotFoundError(name)
        filesystem, _ = self._fs()
        path = self._path(name)
        if filesystem.get_file_info(path).type != fs.FileType.File:
            raise FileNotFoundError(f"{public(self.location)}: no file {name}")
        with filesystem.open_input_stream(path) as src:
            return src.read()

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode()

    def exists(self, name: str) -> bool:
        filesystem, _ = self._fs()
        return filesystem.get_file_info(self._path(name)).type == fs.FileType.File

    def write_text(self, name: str, text: str) -> None:
        """One file, replaced whole (a local one through a rename; an object store's PUT is whole)."""
        filesystem, _ = self._fs()
        path = self._path(name)
        if self.is_local:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(f"{path}.tmp-{os.getpid()}")
            tmp.write_text(text)
            tmp.replace(path)
            return
        with filesystem.open_output_stream(path) as out:
            out.write(text.encode())

    def put_folder(self, local: Path, name: str) -> None:
        """Copy a local folder's files under `name` (nothing to do when it already is that folder)."""
        filesystem, _ = self._fs()
        target = self._path(name)
        if self.is_local and Path(target).resolve() == local.resolve():
            return
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            dest = f"{target}/{path.relative_to(local).as_posix()}"
            if self.is_local:
                Path(dest).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "rb") as src, filesystem.open_output_stream(dest) as out:
                shutil.copyfileobj(src, out, 4 << 20)

    def remove_folder(self, name: str = "") -> bool:
        """Remove everything under `name`; False: nothing was there."""
        filesystem, _ = self._fs()
        path = self._path(name)
        if filesystem.get_file_info(path).type == fs.FileType.NotFound:
            return False
        filesystem.delete_dir(path)
        return True

    def folder_ages(self, name: str, now_s: float | None = None) -> dict[str, float]:
        """Each folder right under `name`, with the seconds since a file in it last changed."""
        filesystem, _ = self._fs()
        now_s = time.time() if now_s is None else now_s
        found = {}
        for d in filesystem.get_file_info(fs.FileSelector(self._path(name), allow_not_found=True)):
            if d.type != fs.FileType.Directory:
                continue
            times = [
                i.mtime.timestamp()
                for i in [d, *filesystem.get_file_info(fs.FileSelector(d.path, recursive=True))]
                if i.mtime is not None
            ]
            found[d.base_name] = now_s - max(times, default=0.0)
        return found
