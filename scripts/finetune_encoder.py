"""Experiment (not shipped): fine-tune the top layers of all-MiniLM-L6-v2 for the request head.

Run from the repo root (the shared data must be at ../shared/data or $PSYCHOALIGN_DATA_DIR):

    .venv/bin/python scripts/finetune_encoder.py explore --out DIR            # the grid, validation only
    .venv/bin/python scripts/finetune_encoder.py build --top 1 --lr 3e-5 --epochs 3 --out DIR  # one candidate
    .venv/bin/python scripts/finetune_encoder.py score --out DIR              # held-out files and benchmarks

Method (figures in src/psychoalign/models/classifier_data/MODEL_CARD.md, "Approaches evaluated and not adopted"):
the request examples of the train split (``psychoalign.models.safety_corpus``, benchmark text left
out) are cut into the classifier's encoder windows; the bottom ``6 - top`` transformer layers stay
frozen and their output is computed once and kept in memory; the top ``top`` layers, mean pooling,
L2 normalisation and a linear head (a learnt scale and bias on one direction) are trained with a
class-balanced cross-entropy on the window's request label (acceptable or not). After each epoch the
encoder is scored on the conversational validation requests (AUC, a request's worst window), and
the grid (``top``, learning rate, epochs) is chosen by that AUC alone. The chosen encoder then
embeds every request window, and the request head is fitted exactly as the shipped build fits it
(``scripts/train_classifier.py``'s ``fit_head``: RBF-kernel SVM, C and gamma by validation AUC,
Platt-scaled on validation, the balanced threshold on the conversational validation requests).
Held-out files and benchmarks are read only by ``score``, once, for the chosen candidate.

The candidate is written to DIR: ``delta.npz`` (the fine-tuned layers less the base layers, float16)
and ``request-candidate.json`` (v7's weights with the request head replaced). Nothing here changes
the runtime; the response head and the crisis check keep reading the base encoder.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

from psychoalign.errors import InputError  # noqa: E402
from psychoalign.models.classifier import load_weights  # noqa: E402
from psychoalign.models.minilm import MAX_TOKENS, model_dir  # noqa: E402
from psychoalign.models.safety_corpus import (  # noqa: E402
    Example,
    auc,
    default_data_dir,
    load_corpus_with_exclusions,
    windows,
)

#: Layers of all-MiniLM-L6-v2.
LAYERS = 6
#: The grid: (top layers trained, learning rate); each is run for up to MAX_EPOCHS epochs and every
#: epoch is a candidate. The top layer alone: on a shared 2-core machine one epoch of one layer takes
#: a few minutes, and two layers would double the delta a runtime has to ship (3.4 MiB per layer in
#: float16).
GRID = ((1, 3e-5), (1, 1e-4))
MAX_EPOCHS = 2
#: C of the linear probe on the base embeddings that the trained head starts from.
PROBE_C = 10.0
BATCH = 16
HEAD_LR = 1e-2
SEED = 0
CONVERSATIONAL = ("project-benign", "project-lookalike", "project-harmful", "hh-benign", "hh-harmful")


class Frozen:
    """The base model's bottom layers, run once per window (no gradients): each window's hidden
    states after layer ``6 - top`` and its attention mask, kept as a list of tensors."""

    def __init__(self, bert: Any, tokenizer: Any, bottom: int) -> None:
        self.bert, self.tokenizer, self.bottom = bert, tokenizer, bottom

    def __call__(self, texts: list[str]) -> list[tuple[Any, Any]]:
        import torch

        out: list[tuple[Any, Any]] = [None] * len(texts)  # type: ignore[list-item]
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths share a batch
        with torch.no_grad():
            for start in range(0, len(texts), 32):
                idx = order[start : start + 32]
                enc = self.tokenizer(
                    [texts[i] for i in idx],
                    truncation=True,
                    max_length=MAX_TOKENS,
                    padding=True,
                    return_tensors="pt",
                )
                hidden = self.bert.embeddings(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"])
                mask = enc["attention_mask"]
                ext = _additive(mask, hidden.dtype)
                for layer in self.bert.encoder.layer[: self.bottom]:
                    hidden = _run(layer, hidden, ext)
                for i, j in enumerate(idx):
                    n = int(mask[i].sum())
                    out[j] = (hidden[i : i + 1, :n].clone(), mask[i : i + 1, :n].clone())
        return out


def _run(layer: Any, hidden: Any, ext: Any) -> Any:
    """One BERT layer (transformers returns a tensor or a tuple depending on its version)."""
    got = layer(hidden, attention_mask=ext)
    return got[0] if isinstance(got, tuple) else got


def _additive(mask: Any, dtype: Any) -> Any:
    """The attention mask as BERT's layers take it: 0 where a token is read, a large negative where not."""
    import torch

    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def _top(layers: Any, hidden: Any, mask: Any) -> Any:
    """The top layers, mean pooling and L2 normalisation: the sentence embedding."""
    import torch

    ext = _additive(mask, hidden.dtype)
    for layer in layers:
        hidden = _run(layer, hidden, ext)
    w = mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * w).sum(1) / w.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, p=2, dim=1)


def _pad(items: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    import torch

    n = max(h.shape[1] for h, _ in items)
    hs = torch.zeros(len(items), n, items[0][0].shape[2])
    ms = torch.zeros(len(items), n, dtype=torch.long)
    for i, (h, m) in enumerate(items):
        hs[i, : h.shape[1]] = h[0]
        ms[i, : m.shape[1]] = m[0]
    return hs, ms


def _batches(cached: list[tuple[Any, Any]], rng: np.random.Generator) -> list[NDArray[np.int64]]:
    """Training batches of windows of similar length (less padding to run through the layers), in a
    random order; which windows share a batch also varies (a random order before the stable sort)."""
    order = rng.permutation(len(cached))
    order = order[np.argsort([cached[i][0].shape[1] for i in order], kind="stable")]
    batches = [order[start : start + BATCH] for start in range(0, len(order), BATCH)]
    return [batches[i] for i in rng.permutation(len(batches))]


def embed(layers: Any, cached: list[tuple[Any, Any]]) -> NDArray[np.float32]:
    """The sentence embeddings of the cached windows (run in order of length, returned in order)."""
    import torch

    order = np.argsort([h.shape[1] for h, _ in cached], kind="stable")
    out = np.zeros((len(cached), 384), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(order), 64):
            idx = order[start : start + 64]
            h, m = _pad([cached[i] for i in idx])
            out[idx] = _top(layers, h, m).numpy()
    return out


def _worst(values: NDArray[np.float64], owner: list[int], n: int) -> NDArray[np.float64]:
    out = np.full(n, np.inf)
    for v, i in zip(values, owner, strict=True):
        out[i] = min(out[i], v)
    return out


def _design(exs: list[Example]) -> tuple[list[str], list[int], list[int]]:
    texts, labels, owner = [], [], []
    for i, ex in enumerate(exs):
        for w in windows(ex.text):
            texts.append(w)
            labels.append(int(ex.acceptable))
            owner.append(i)
    return texts, labels, owner


def load(data: Path | None) -> dict[str, list[Example]]:
    try:
        examples, _ = load_corpus_with_exclusions(data or default_data_dir())
    except InputError as exc:
        sys.exit(f"error: {exc}")
    req = [ex for ex in examples if ex.kind == "request"]
    return {s: [ex for ex in req if ex.split == s] for s in ("train", "val", "check")}


def base_model() -> tuple[Any, Any]:
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    path = str(model_dir())
    return AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


class Setup(NamedTuple):
    """What training reads: the cached windows of train and validation, their labels, and the
    linear probe on the base embeddings of the train windows the head starts from."""

    top: int
    cache_tr: list[tuple[Any, Any]]
    y_tr: list[int]
    cache_va: list[tuple[Any, Any]]
    own_va: list[int]
    y_va: NDArray[np.int64]
    conv: NDArray[np.bool_]
    probe: tuple[NDArray[np.float64], float]


def prepare(splits: dict[str, list[Example]], bert: Any, tok: Any, top: int) -> tuple[Setup, Frozen]:
    from sklearn.linear_model import LogisticRegression

    t0 = time.perf_counter()
    t_tr, y_tr, _ = _design(splits["train"])
    t_va, _, own_va = _design(splits["val"])
    y_va = np.asarray([int(ex.acceptable) for ex in splits["val"]])
    conv = np.asarray([ex.source in CONVERSATIONAL for ex in splits["val"]])
    print(f"{len(splits['train'])} train requests ({len(t_tr)} windows), {len(splits['val'])} validation")
    frozen = Frozen(bert, tok, LAYERS - top)
    cache_tr, cache_va = frozen(t_tr), frozen(t_va)
    base_layers = bert.encoder.layer[LAYERS - top :]
    lr = LogisticRegression(C=PROBE_C, class_weight="balanced", max_iter=5000).fit(embed(base_layers, cache_tr), y_tr)
    worst = _worst(lr.decision_function(embed(base_layers, cache_va)), own_va, len(y_va))
    print(
        f"bottom {LAYERS - top} layers cached in {time.perf_counter() - t0:.0f}s; base encoder, linear probe: "
        f"conversational validation AUC {auc(y_va[conv], worst[conv]):.4f}",
        flush=True,
    )
    probe = (lr.coef_[0].astype(np.float64), float(lr.intercept_[0]))
    return Setup(top, cache_tr, y_tr, cache_va, own_va, y_va, conv, probe), frozen


def train(setup: Setup, bert: Any, lr: float) -> list[tuple[float, int, Any]]:
    """Train the top layers and the head (started from the probe) for MAX_EPOCHS epochs: after each
    epoch, the conversational validation AUC, the epoch and a copy of the layers."""
    import torch

    torch.manual_seed(SEED)
    top = setup.top
    layers = copy.deepcopy(bert.encoder.layer[LAYERS - top :]).train()
    coef, intercept = setup.probe
    norm = float(np.linalg.norm(coef))
    direction = torch.nn.Parameter(torch.tensor(coef / norm, dtype=torch.float32))
    scale_bias = torch.nn.Parameter(torch.tensor([norm, intercept], dtype=torch.float32))
    opt = torch.optim.AdamW(
        [
            {"params": layers.parameters(), "lr": lr, "weight_decay": 0.01},
            {"params": [direction, scale_bias], "lr": HEAD_LR, "weight_decay": 0.0},
        ]
    )
    y = torch.tensor(setup.y_tr, dtype=torch.float32)
    pos = float(y.mean())
    weights = torch.where(y > 0.5, 0.5 / pos, 0.5 / (1 - pos))
    rng = np.random.default_rng(SEED)
    history = []
    for epoch in range(1, MAX_EPOCHS + 1):
        t0 = time.perf_counter()
        layers.train()
        for idx in _batches(setup.cache_tr, rng):
            h, m = _pad([setup.cache_tr[i] for i in idx])
            e = _top(layers, h, m)
            d = torch.nn.functional.normalize(direction, dim=0)
            logit = scale_bias[0] * (e @ d) + scale_bias[1]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, y[idx], weight=weights[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        layers.eval()
        x = embed(layers, setup.cache_va)
        with torch.no_grad():
            d = torch.nn.functional.normalize(direction, dim=0).numpy().astype(np.float64)
        worst = _worst(x.astype(np.float64) @ d, setup.own_va, len(setup.y_va))
        score = auc(setup.y_va[setup.conv], worst[setup.conv])
        history.append((score, epoch, copy.deepcopy(layers)))
        print(
            f"  top {top}, lr {lr:g}, epoch {epoch}: conversational validation AUC {score:.4f} "
            f"({time.perf_counter() - t0:.0f}s)",
            flush=True,
        )
    return history


def explore(args: argparse.Namespace) -> None:
    """The grid on train and validation; the best (top, lr, epochs) by the conversational
    validation AUC is kept, the request head fitted on its embeddings, the candidate written."""
    from train_classifier import fit_head

    splits = load(args.data)
    bert, tok = base_model()
    top = GRID[0][0]
    setup, frozen = prepare(splits, bert, tok, top)
    results = []
    for t, lr in GRID:
        assert t == top, "one top per run: the cached layers are those below it"
        results.extend((a, lr, e, layers) for a, e, layers in train(setup, bert, lr))
    score, lr, epochs, layers = max(results, key=lambda r: r[0])
    print(f"chosen by conversational validation AUC: top {top}, lr {lr:g}, {epochs} epochs ({score:.4f})")
    everything = [ex for s in ("train", "val", "check") for ex in splits[s]]
    texts = sorted({w for ex in everything for w in windows(ex.text)})
    emb = dict(zip(texts, embed(layers, frozen(texts)), strict=True))
    head, info = fit_head(everything, emb, "request")
    print(f"request head on the fine-tuned encoder: {info}, threshold {head.threshold:.3f}")
    t_ck, _, own_ck = _design(splits["check"])
    y_ck = np.asarray([int(ex.acceptable) for ex in splits["check"]])
    p = head.logits(np.stack([emb[w] for w in t_ck]))
    print(f"check split AUC (never chose anything) {auc(y_ck, _worst(p, own_ck, len(y_ck))):.4f}")
    base_layers = bert.encoder.layer[LAYERS - top :]
    delta = {
        f"layer{LAYERS - top + i}.{name}": (param.detach() - dict(base_layers[i].named_parameters())[name].detach())
        .numpy()
        .astype(np.float16)
        for i, layer in enumerate(layers)
        for name, param in layer.named_parameters()
    }
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "delta.npz", top=np.asarray(top), **delta)
    weights = load_weights()
    candidate = weights.model_copy(
        update={
            "version": "evaluator-minilm-ft-candidate",
            "request": head,
            "training": {
                **weights.training,
                "request_encoder": f"top {top} layers fine-tuned, lr {lr:g}, {epochs} epochs",
                "request_fit": info,
            },
        }
    )
    (args.out / "request-candidate.json").write_text(candidate.model_dump_json(indent=1) + "\n", encoding="utf-8")
    (args.out / "explore.json").write_text(
        json.dumps([{"val_auc": a, "top": top, "lr": r, "epochs": e} for a, r, e, _ in results], indent=1) + "\n"
    )
    size = (args.out / "delta.npz").stat().st_size
    print(f"wrote {args.out / 'delta.npz'} ({size / 1024 / 1024:.1f} MiB) and {args.out / 'request-candidate.json'}")


def candidate_encoder(out: Path) -> Any:
    """The fine-tuned encoder of ``out/delta.npz``: the base bottom layers, then the top layers with
    the delta added (float16 delta, float32 sum)."""
    import torch

    bert, tok = base_model()
    with np.load(out / "delta.npz") as z:
        top = int(z["top"])
        delta = {k: z[k] for k in z.files if k != "top"}
    layers = copy.deepcopy(bert.encoder.layer[LAYERS - top :]).eval()
    with torch.no_grad():
        for i, layer in enumerate(layers):
            for name, param in layer.named_parameters():
                param += torch.from_numpy(delta[f"layer{LAYERS - top + i}.{name}"].astype(np.float32))
    frozen = Frozen(bert, tok, LAYERS - top)

    def encode(texts: Any) -> NDArray[np.float32]:
        return embed(layers, frozen(list(texts))) if texts else np.zeros((0, 384), dtype=np.float32)

    return encode


def score(args: argparse.Namespace) -> None:
    """The held-out files and the benchmark prompts, through the benches' own code with the
    candidate's classifier in place of the shipped one (no doc is written)."""
    import benchmark_requests
    import request_head
    from psychoalign.models.classifier import SafetyClassifier

    clf = SafetyClassifier(load_weights(str(args.out / "request-candidate.json")), candidate_encoder(args.out))

    def fixed(*_: Any, **__: Any) -> SafetyClassifier:
        return clf

    request_head.load_classifier = fixed  # type: ignore[assignment]
    benchmark_requests.load_classifier = fixed  # type: ignore[assignment]
    sys.argv = ["request_head.py", "--head-only", "--no-doc"]
    request_head.main()
    sys.argv = ["benchmark_requests.py", "--no-doc"]
    benchmark_requests.main()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("explore", "score"))
    ap.add_argument("--out", type=Path, required=True, help="folder for the candidate (not the package)")
    ap.add_argument("--data", type=Path, default=None, help="shared data dir (default ../shared/data)")
    args = ap.parse_args()
    {"explore": explore, "score": score}[args.step](args)


if __name__ == "__main__":
    main()
