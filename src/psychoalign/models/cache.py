"""On-disk response cache keyed by the full request, so experiments rerun reproducibly and cheaply."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import struct
import threading
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from .base import Backend
from .spec import ModelSpec
from .types import ChatRequest, Completion

#: Files up to this size are hashed whole for the cache key; larger ones (a GGUF model) by their
#: size, their first MiB, a GGUF's whole metadata section, and their last MiB: two models of one
#: architecture differ in the first and last MiB, and a GGUF's chat template sits in its metadata,
#: which can end past the first MiB (SmolLM2's template starts 1.7 MB in, after its vocabulary).
_WHOLE_FILE = 64 << 20

#: Byte sizes of GGUF's fixed-size value types (uint8 ... float64), by type id.
_GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def _gguf_skip(fh: BinaryIO, kind: int, depth: int = 0) -> None:
    if kind in _GGUF_SCALAR:
        fh.seek(_GGUF_SCALAR[kind], os.SEEK_CUR)
    elif kind == _GGUF_STRING:
        fh.seek(struct.unpack("<Q", fh.read(8))[0], os.SEEK_CUR)
    elif kind == _GGUF_ARRAY and depth < 4:
        item, count = struct.unpack("<IQ", fh.read(12))
        if item in _GGUF_SCALAR:
            fh.seek(_GGUF_SCALAR[item] * count, os.SEEK_CUR)
        else:
            for _ in range(count):
                _gguf_skip(fh, item, depth + 1)
    else:
        raise ValueError(f"GGUF value type {kind}")


def _gguf_metadata_end(fh: BinaryIO, size: int) -> int | None:
    """Where a GGUF file's key-value metadata (architecture, tokenizer, chat template) ends, or
    None when the file is not a GGUF (v2+) this reader understands."""
    try:
        fh.seek(0)
        head = fh.read(24)
        if len(head) < 24 or head[:4] != b"GGUF" or struct.unpack("<I", head[4:8])[0] < 2:
            return None
        for _ in range(struct.unpack("<Q", head[16:24])[0]):
            fh.seek(struct.unpack("<Q", fh.read(8))[0], os.SEEK_CUR)  # the key
            _gguf_skip(fh, struct.unpack("<I", fh.read(4))[0])
            if fh.tell() > size:
                return None
        return fh.tell()
    except (struct.error, ValueError, OSError):
        return None


@lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        if size <= _WHOLE_FILE:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        else:
            head = max(1 << 20, min(_gguf_metadata_end(fh, size) or 0, _WHOLE_FILE))
            fh.seek(0)
            digest.update(fh.read(head))
            fh.seek(-(1 << 20), os.SEEK_END)
            digest.update(fh.read(1 << 20))
    return digest.hexdigest()


def file_fingerprint(path: str | None) -> str | None:
    """What a file named by a model spec holds (a script, a GGUF or classifier weights file), so a
    file replaced at the same path is a different model. None when ``path`` names no file."""
    if not path or not os.path.isfile(path):
        return None
    try:
        stat = os.stat(path)
        return _digest(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    except OSError:
        return None


def cache_key(spec: ModelSpec, request: ChatRequest, backend: Backend | None = None) -> str:
    """SHA-256 over everything that can change the reply (backend, model, endpoint, request), the
    content of a file the spec names (a script or weights file edited in place is another model,
    whose replies must not come from the old one's cache), and what ``backend`` loads beyond the
    spec's name (:meth:`Backend.load_identity`: an embedded model's GGUF content and ``n_ctx``)."""
    payload: dict[str, object] = {
        "backend": spec.backend,
        "model": spec.model,
        "base_url": spec.base_url,
        "script": spec.script,
        "request": request.model_dump(mode="json"),
    }
    files = {k: d for k, d in (("script", file_fingerprint(spec.script)), ("model", file_fingerprint(spec.model))) if d}
    if files:  # absent for endpoint models, so their cached replies keep their keys
        payload["files"] = files
    if backend is not None and (load := backend.load_identity()):
        payload["load"] = load  # absent for backends that load nothing, so their keys hold
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """A SQLite file of ``key -> Completion``. Only schema-valid completions are stored."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion TEXT NOT NULL)")

    def _get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._conn.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        return Completion.model_validate_json(row[0]) if row else None

    def _put(self, key: str, completion: Completion) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, completion) VALUES (?, ?)",
                (key, completion.model_dump_json()),
            )

    async def get(self, key: str) -> Completion | None:
        return await asyncio.to_thread(self._get, key)

    async def put(self, key: str, completion: Completion) -> None:
        await asyncio.to_thread(self._put, key, completion)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
