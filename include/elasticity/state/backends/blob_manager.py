"""A blob store over any pyarrow or fsspec URI: a local folder, `s3://bucket/prefix`
(pyarrow's S3 client; `?endpoint_override=host:port&scheme=http` for an
S3-compatible server), or any scheme fsspec knows. Blob ids are paths under the root.
"""

from __future__ import annotations

import contextlib
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

from pyarrow import fs

FAILED = ".failed"  # beside a blob an upload promised and could not write: `<blob id>.failed` holds the error
ALIVE = ".alive"  # beside a blob an upload still promises, rewritten every HEARTBEAT_S while the upload runs
HEARTBEAT_S = 5.0
STALL_S = 4 * HEARTBEAT_S  # a promise whose heartbeat has not changed for this long is given up
MAX_PAUSE_S = 0.1  # between checks for a promised blob: an upload is noticed at most this long after it ends


class BlobNotFound(FileNotFoundError):
    pass


class UploadFailed(OSError):
    pass


class UploadStalled(UploadFailed):
    """The process that promised a blob stopped beating (its executor was lost, say): waiting longer
    would only reach task.commit.timeout.ms."""


class BlobStoreManager:
    def __init__(self, uri: str) -> None:
        self.uri = uri
        if "://" not in uri:
            Path(uri).mkdir(parents=True, exist_ok=True)
            self.fs, self.root = fs.LocalFileSystem(), str(Path(uri).resolve())
        else:
            try:
                self.fs, self.root = fs.FileSystem.from_uri(uri)
            except (ValueError, OSError, fs.ArrowNotImplementedError):  # a scheme pyarrow lacks: through fsspec
                import fsspec

                fsspec_fs, self.root = fsspec.core.url_to_fs(uri)
                self.fs = fs.PyFileSystem(fs.FSSpecHandler(fsspec_fs))
        self.root = self.root.rstrip("/")

    def _path(self, blob_id: str) -> str:
        return f"{self.root}/{blob_id}"

    def put_file(self, local: Path, blob_id: str) -> int:
        """Upload a file; returns its CRC-32."""
        crc = 0
        with open(local, "rb") as src, self._output(blob_id) as out:
            while chunk := src.read(4 << 20):
                crc = zlib.crc32(chunk, crc)
                out.write(chunk)
        return crc

    @contextlib.contextmanager
    def _output(self, blob_id: str) -> Iterator:
        """A blob appears whole or not at all, as an object store's PUT does: a reader that waits for it
        (`await_blob`) must never read a local file still being written, so one is written under another
        name and renamed. A writer killed half-way leaves that part file, named like its blob, which the
        store's cleanup deletes with it."""
        path = self._path(blob_id)
        if not isinstance(self.fs, fs.LocalFileSystem):
            with self.fs.open_output_stream(path) as out:
                yield out
            return
        self._parent(blob_id)
        part = f"{path}.part-{uuid.uuid4().hex[:8]}"
        try:
            with self.fs.open_output_stream(part) as out:
                yield out
            self.fs.move(part, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(part)
            raise

    def get_file(self, blob_id: str, local: Path) -> int:
        """Download a blob to a file; returns its CRC-32."""
        crc = 0
        try:
            with self.fs.open_input_stream(self._path(blob_id)) as src, open(local, "wb") as out:
                while chunk := src.read(4 << 20):
                    crc = zlib.crc32(chunk, crc)
                    out.write(chunk)
        except FileNotFoundError as e:
            raise BlobNotFound(f"blob {blob_id!r} not found in {self.uri}") from e
        return crc

    def put_bytes(self, blob_id: str, data: bytes) -> None:
        with self._output(blob_id) as out:
            out.write(data)

    def get_bytes(self, blob_id: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._path(blob_id)) as src:
                return src.read()
        except FileNotFoundError as e:
            raise BlobNotFound(f"blob {blob_id!r} not found in {self.uri}") from e

    def exists(self, blob_id: str) -> bool:
        return self.fs.get_file_info(self._path(blob_id)).type == fs.FileType.File

    def await_blob(self, blob_id: str, timeout_s: float, stall_s: float = STALL_S) -> None:
        """Until a blob another process promised exists; its `.failed` sibling, the timeout, or no change
        of its `.alive` heartbeat for `stall_s` (an upload that runs longer than HEARTBEAT_S beats) raise."""
        deadline, pause = time.monotonic() + timeout_s, 0.01
        beat, beat_seen = None, time.monotonic()
        while not self.exists(blob_id):
            if self.exists(blob_id + FAILED):
                raise UploadFailed(
                    f"upload of blob {blob_id!r} failed: {self.get_bytes(blob_id + FAILED).decode(errors='replace')}"
                )
            now = time.monotonic()
            if now >= deadline:
                raise BlobNotFound(f"blob {blob_id!r} not in {self.uri} after {timeout_s:g} s")
            if now - beat_seen > stall_s:
                last, beat = beat, self._read_or_none(blob_id + ALIVE)
                if beat is None or beat == last:
                    if self.exists(blob_id):
                        return
                    raise UploadStalled(
                        f"upload of blob {blob_id!r} stalled: no sign of life from its uploader for {now - beat_seen:.0f} s "
                        "(its process or executor was lost)"
                    )
                beat_seen = now
            time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)

    def _read_or_none(self, blob_id: str) -> bytes | None:
        try:
            return self.get_bytes(blob_id)
        except FileNotFoundError:
            return None

    def delete(self, blob_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self._path(blob_id))

    def list(self, prefix: str) -> list[str]:
        """Blob ids under a folder-like prefix (files only)."""
        selector = fs.FileSelector(self._path(prefix.rstrip("/")), recursive=True, allow_not_found=True)
        start = len(self.root) + 1
        return sorted(i.path[start:] for i in self.fs.get_file_info(selector) if i.type == fs.FileType.File)

    def _parent(self, blob_id: str) -> None:
        if isinstance(self.fs, fs.LocalFileSystem):  # object stores have no folders to create
            self.fs.create_dir(self._path(blob_id).rsplit("/", 1)[0], recursive=True)
