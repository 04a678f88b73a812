"""Fuzzing the Jira JSON and git extractors with damaged inputs. Every person, project and text here is
invented.

Whatever the damage, a run never raises, every row is schema-valid (`to_table`), event ids are unique,
every quarantine row names its file, where in it and why, and every record the damage did not touch
still comes out. Jira: one issue among six is cut, overwritten, flipped, mis-encoded, nested 100k deep,
10 MB long, or has 10 MB of junk beside it, in a search page, a top-level array or a folder of single-issue
files. git: a commit among six has a junk message or ident, a 10 MB message, a diff over the cap, or a
corrupt loose object; and the path is not a repository, or an empty one.
"""

import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from extractor_inputs import blob_path, git, init_repo, jira_issue, make_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.git import BUNDLE_SIGNATURES, GitExtractor
from extractors.jira import JiraJsonExtractor
from warehouse.schemas import Event, Quarantine, to_table

FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
GIT = settings(FUZZ, max_examples=25)  # each example builds a repository and runs git a few times
BIG = settings(FUZZ, max_examples=20)  # each example writes and reads 10 MB
TEN_MB = 10_000_000


def split(rows: list) -> tuple[list[Event], list[Quarantine]]:
    events = [r for r in rows if isinstance(r, Event)]
    quarantined = [r for r in rows if isinstance(r, Quarantine)]
    assert len(events) + len(quarantined) == len(rows)
    assert to_table(Event, events).num_rows == len(events)
    assert to_table(Quarantine, quarantined).num_rows == len(quarantined)
    assert len({e.event_id for e in events}) == len(events)
    assert len({q.quarantine_id for q in quarantined}) == len(quarantined)
    assert all(e.ts.tzinfo is not None for e in events)
    return events, quarantined


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# Invalid UTF-8 (lone continuation, cut sequences, overlong, encoded surrogates, past U+10FFFF, 5 bytes),
# and JSON escapes of a lone surrogate, which are ASCII but name no character either.
NOT_UNICODE = [b"\x80", b"\xff", b"\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
               b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", rb"\ud800", rb"\uDFFF", rb"\ud83d x"]
not_unicode = st.sampled_from(NOT_UNICODE) | st.binary(min_size=1, max_size=8).map(
    lambda b: bytes(c | 0x80 for c in b)).filter(lambda b: not is_utf8(b))


# --- Jira ---------------------------------------------------------------------------------------------------

KEYS = [f"PROJ-{i}" for i in range(6)]
PARTS = [json.dumps(jira_issue(k)).encode() for k in KEYS]
VICTIM = 3
SHAPES = ["page", "array", "folder"]
PAGE_HEAD = b'{"expand": "schema,names", "startAt": 0, "maxResults": 50, "total": 6, "issues": ['
STRUCTURAL = frozenset(b'"\\[]{}')  # bytes that move where a JSON value ends
# Members of the victim issue whose value a hostile value replaces, or bad text goes into (a top-level
# member after the key: a file whose key is not in its first 64 KB is left unclaimed by `detect`).
SLOTS = {"description": (b'"description": ', b'"Steps for PROJ-3"'),
         "summary": (b'"summary": ', b'"Summary of PROJ-3"'),
         "comment": (b'"body": ', b'"comment 0 on PROJ-3"'),
         "top-level": (b'"changelog": ', json.dumps(jira_issue(KEYS[VICTIM])["changelog"]).encode())}


def put(slot: str, value: bytes) -> bytes:
    """The victim issue with `value` as the value of `slot`."""
    member, old = SLOTS[slot]
    assert PARTS[VICTIM].count(member + old) == 1
    return PARTS[VICTIM].replace(member + old, member + value)


def lay_out(root: Path, shape: str, parts: list[bytes], sep: bytes = b", ") -> list[tuple[Path, int, int]]:
    """Write `parts` as one search page, one array, or one file each; return each part's (file, start, end)."""
    root.mkdir(parents=True, exist_ok=True)
    if shape == "folder":
        for i, part in enumerate(parts):
            (root / f"PROJ-{i}.json").write_bytes(part)
        return [(root / f"PROJ-{i}.json", 0, len(part)) for i, part in enumerate(parts)]
    path, spans = root / "issues.json", []
    data = bytearray(PAGE_HEAD if shape == "page" else b"[")
    for i, part in enumerate(parts):
        data += sep if i else b""
        spans.append((path, len(data), len(data) + len(part)))
        data += part
    path.write_bytes(bytes(data + (b"]}" if shape == "page" else b"]")))
    return spans


def ingest(root: Path, **config) -> tuple[set[str], list[Event], list[Quarantine]]:
    """jira_json over every file it claims under `root` (as a pipeline run would); the properties every run
    keeps are checked here. Returns the keys of the issues that came out."""
    files = JiraJsonExtractor.detect(root)
    extractor = JiraJsonExtractor("ds", config, "r", root=root)
    events, quarantined = split([row for path in files for row in extractor.iter_records(path)])
    sizes = {p.relative_to(root).as_posix(): p.stat().st_size for p in files}
    for q in quarantined:
        assert q.file in sizes and q.message and q.error_class, q
        assert q.offset is not None and 0 <= q.offset <= sizes[q.file], q
    return {e.native_id for e in events if e.kind == "issue_created"}, events, quarantined


def others(shape: str, structure_kept: bool) -> set[str]:
    """The keys a damaged victim must leave alone: in a folder, or when the damage left every value's
    end where it was, all the others; otherwise (an extra '[' swallows what follows) those before it."""
    return set(KEYS) - {KEYS[VICTIM]} if shape == "folder" or structure_kept else set(KEYS[:VICTIM])


@FUZZ
@given(shape=st.sampled_from(SHAPES), where=st.floats(0, 1),
       after=st.sampled_from([None, b'"expand"', b'"issues"', b'"fields"', b'"fields": ']))
def test_fuzz_jira_truncated_anywhere(shape, where, after):
    """A cut download: exactly the issues wholly before the cut come out (and those of the other files),
    and the cut is one `truncated` row. `after`: cut right after the first such text instead (a member
    name or its colon, rare points for a random cut), where a cut is easily taken for bad JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spans = lay_out(root, shape, PARTS)
        victim = spans[VICTIM][0]
        data = victim.read_bytes()
        cut = data.index(after) + len(after) if after and after in data else int(where * len(data))
        victim.write_bytes(data[:cut])
        got, _, quarantined = ingest(root)
        assert got == {k for k, (path, _, end) in zip(KEYS, spans) if path != victim or end <= cut}
        if cut < len(data) and victim in JiraJsonExtractor.detect(root):
            assert [q.error_class for q in quarantined] == ["truncated"]


@FUZZ
@given(shape=st.sampled_from(SHAPES), where=st.floats(0, 1), junk=st.binary(min_size=1, max_size=64))
def test_fuzz_jira_random_bytes_inside_one_issue(shape, where, junk):
    """Bytes written into one issue cost at most that issue, unless they open a string or a container
    that then runs on into the next issues (in one file only)."""
    victim = PARTS[VICTIM]
    at = 1 + int(where * (len(victim) - 2))  # strictly inside its braces
    with tempfile.TemporaryDirectory() as tmp:
        lay_out(Path(tmp), shape, PARTS[:VICTIM] + [victim[:at] + junk + victim[at:]] + PARTS[VICTIM + 1:])
        got, _, _ = ingest(Path(tmp))
    assert others(shape, not STRUCTURAL & set(junk)) <= got


@FUZZ
@given(shape=st.sampled_from(SHAPES),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 7)), min_size=1, max_size=8))
def test_fuzz_jira_bit_flips_inside_one_issue(shape, flips):
    """Flipped bits cost at most their issue, unless they make or unmake a quote or bracket (which moves
    where that issue ends, in its one file only)."""
    data = bytearray(PARTS[VICTIM])
    touched = set()
    for where, bit in flips:
        at = int(where * (len(data) - 1))
        touched.add(at)
        data[at] ^= 1 << bit
    kept = all(PARTS[VICTIM][i] not in STRUCTURAL and data[i] not in STRUCTURAL for i in touched)
    with tempfile.TemporaryDirectory() as tmp:
        lay_out(Path(tmp), shape, PARTS[:VICTIM] + [bytes(data)] + PARTS[VICTIM + 1:])
        got, _, _ = ingest(Path(tmp))
    assert others(shape, kept) <= got


@FUZZ
@given(shape=st.sampled_from(SHAPES), slot=st.sampled_from(["description", "summary", "comment"]),
       bad=not_unicode, where=st.floats(0, 1))
def test_fuzz_jira_text_that_is_not_unicode(shape, slot, bad, where):
    """Invalid UTF-8 or a lone surrogate escape in a string: the issue is kept, the text gets U+FFFD (so it
    can be written as UTF-8 at all) and the issue is flagged; nothing else is lost or flagged."""
    text = SLOTS[slot][1]
    at = 1 + int(where * (len(text) - 2))  # inside its quotes
    damaged = put(slot, text[:at] + bad + text[at:])
    with tempfile.TemporaryDirectory() as tmp:
        lay_out(Path(tmp), shape, PARTS[:VICTIM] + [damaged] + PARTS[VICTIM + 1:])
        got, events, quarantined = ingest(Path(tmp))
    assert got == set(KEYS) and quarantined == []
    flagged = {e.native_id for e in events if e.kind == "issue_created" and e.attrs.get("encoding_error")}
    assert flagged == {KEYS[VICTIM]}
    field = {"description": "body", "summary": "title"}.get(slot, "body")
    kind = "comment" if slot == "comment" else "issue_created"
    (shown,) = [getattr(e, field) for e in events if e.kind == kind and e.thread_key == KEYS[VICTIM]]
    assert "\ufffd" in shown


@FUZZ
@given(shape=st.sampled_from(SHAPES), slot=st.sampled_from(["description", "comment", "top-level"]),
       depth=st.integers(10_000, 100_000), closed=st.booleans())
def test_fuzz_jira_deeply_nested_value(shape, slot, depth, closed):
    """Lists nested past what Python's parser can recurse into (a few thousand levels while Hypothesis
    runs, as it raises the recursion limit): that issue is quarantined `too_deep`, its neighbours are kept;
    left unclosed it swallows the rest of its file, which is `truncated`."""
    deep = b"[" * depth + (b"]" * depth if closed else b"")
    damaged = put(slot, deep)
    with tempfile.TemporaryDirectory() as tmp:
        spans = lay_out(Path(tmp), shape, PARTS[:VICTIM] + [damaged] + PARTS[VICTIM + 1:])
        got, _, quarantined = ingest(Path(tmp))
    assert got == others(shape, closed)
    expected = ("too_deep", spans[VICTIM][1]) if closed else ("truncated", None)
    assert expected in {(q.error_class, q.offset if closed else None) for q in quarantined}


@functools.cache
def huge(slot: str) -> bytes:
    return put(slot, json.dumps("y" * TEN_MB).encode())


@BIG
@given(shape=st.sampled_from(SHAPES), slot=st.sampled_from(["description", "summary", "comment"]),
       cap=st.none() | st.integers(1 << 20, TEN_MB - 1))
def test_fuzz_jira_ten_megabyte_value(shape, slot, cap):
    """A 10 MB string is read whole under the default cap; under a lower `max_issue_bytes` its issue is
    quarantined `too_large` where it starts, and the other issues are read either way."""
    config = {} if cap is None else {"max_issue_bytes": cap}
    with tempfile.TemporaryDirectory() as tmp:
        spans = lay_out(Path(tmp), shape, PARTS[:VICTIM] + [huge(slot)] + PARTS[VICTIM + 1:])
        got, events, quarantined = ingest(Path(tmp), **config)
    if cap is None:
        assert got == set(KEYS) and quarantined == []
        field = "title" if slot == "summary" else "body"
        kind = "comment" if slot == "comment" else "issue_created"
        assert [len(getattr(e, field)) for e in events if e.kind == kind and e.thread_key == KEYS[VICTIM]] == [TEN_MB]
    else:
        assert got == set(KEYS) - {KEYS[VICTIM]}
        assert [(q.error_class, q.offset) for q in quarantined] == [("too_large", spans[VICTIM][1])]


def without(chars: bytes):
    return lambda b: bytes(c for c in b if c not in chars)


# The pattern of a line of junk that is one bad element, whatever else it holds: a value that opens no
# string or container, with no delimiter or JSON whitespace in it; or a stray '}' or ':' followed by
# anything but those and the start of an element (each stray byte was once a row of its own).
junk_pattern = st.binary(max_size=16).map(without(b" \t\r\n,]}")).map(
    lambda b: b if b and b[0] not in b'{[":' else b"z" + b) | st.tuples(
    st.sampled_from([b"}", b":"]), st.binary(max_size=16).map(without(b' \t\r\n,]{["'))).map(b"".join)


@BIG
@given(shape=st.sampled_from(SHAPES), pattern=junk_pattern, slot=st.integers(1, len(KEYS) - 1),
       cap=st.none() | st.integers(1 << 20, TEN_MB - 1))
def test_fuzz_jira_ten_megabyte_junk_line_between_issues(shape, pattern, slot, cap):
    """Every issue is read and the junk is one quarantine row where it starts (in a folder, after the
    file's one issue: `trailing_data`). Under a cap it is skipped unkept, like an oversized issue."""
    config = {} if cap is None else {"max_issue_bytes": cap}
    junk = (pattern * (TEN_MB // len(pattern) + 1))[:TEN_MB]
    with tempfile.TemporaryDirectory() as tmp:
        if shape == "folder":
            spans = lay_out(Path(tmp), shape, PARTS[:slot] + [PARTS[slot] + b"\n" + junk] + PARTS[slot + 1:])
            at, classes = len(PARTS[slot]) + 1, {"trailing_data"}
        else:
            spans = lay_out(Path(tmp), shape, PARTS[:slot] + [junk] + PARTS[slot:], sep=b",\n")
            value = pattern[:1] not in (b"}", b":")
            at, classes = spans[slot][1], {"too_large"} if value and cap else {"json_decode", "not_an_object"}
        got, _, quarantined = ingest(Path(tmp), **config)
    assert got == set(KEYS)
    (row,) = quarantined
    assert row.error_class in classes and row.offset == at


# --- git ----------------------------------------------------------------------------------------------------

T0 = 1_577_869_200  # 2020-01-01T09:00:00Z
DAY = 86_400
N = 6
AUTHOR = b"Ada Dev <ada@example.com>"
GIT_ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}


def message(i: int) -> bytes:
    return f"Add f{i} (PROJ-{i})\n".encode()


def build_repo(repo: Path, messages: list[bytes], *, author: bytes = AUTHOR, content: bytes | None = None,
               path: bytes = b"src/f3.txt") -> list[str]:
    """A linear history, commit i adding src/f{i}.txt a day after the last; commit VICTIM is written by
    `author` and adds `content` at `path`. Returns the SHAs, oldest first. `git fast-import` keeps the
    message, ident and path bytes as given (`git commit` would re-encode a message that is not UTF-8 as
    Latin-1) and builds the whole repository in one process, fed from a file (a pipe would move megabytes
    4 KB at a time)."""
    init_repo(repo)
    with tempfile.TemporaryFile() as stream:
        for i, msg in enumerate(messages):
            odd = i == VICTIM
            data = content if odd and content is not None else f"line {i}\n".encode()
            quoted = b'"' + b"".join(b"\\%03o" % c for c in (path if odd else b"src/f%d.txt" % i)) + b'"'
            stream.write(b"commit refs/heads/main\nauthor %s %d +0100\ncommitter Cy Merger <cy@example.com> %d +0000\n"
                         % (author if odd else AUTHOR, T0 + i * DAY, T0 + i * DAY))
            for chunk in (b"data %d\n" % len(msg), msg, b"\nM 100644 inline %s\n" % quoted,
                          b"data %d\n" % len(data), data, b"\n"):
                stream.write(chunk)
        stream.seek(0)
        subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet", "--date-format=raw"], stdin=stream,
                       env=GIT_ENV, check=True, capture_output=True)
    return git(repo, "rev-list", "--reverse", "main").split()


def ingest_repo(repo: Path, **config) -> tuple[dict[str, Event], list[Quarantine]]:
    events, quarantined = split(list(GitExtractor("ds", config, "r", root=repo.parent).iter_records(repo)))
    assert all(e.kind == "commit" and e.provenance == {"file": repo.name} for e in events)
    assert all(q.file == repo.name and q.error_class and q.message for q in quarantined)
    return {e.native_id: e for e in events}, quarantined


nul_free = st.binary(min_size=1, max_size=300).map(lambda b: b.replace(b"\0", b""))
# git stops a message at a NUL (and cannot take one in a name or a path).
SEPARATORS = st.sampled_from([b"\x1f", b"\x1e", b"\x1eTMC\x1f", b"\0\x1eTMC\x1f", b"\n", b"\r", b" ", b"x"])
junk_message = (nul_free | st.text(min_size=1).map(str.encode) | st.lists(not_unicode | SEPARATORS, min_size=1)
                .map(b"".join)).map(lambda b: b.replace(b"\0", b""))


@GIT
@given(junk=junk_message)
def test_fuzz_git_junk_commit_message(junk):
    """Binary junk, invalid UTF-8 or the extractor's own separators in a message: every commit comes out;
    the message is the junk decoded with U+FFFD, flagged when it was not UTF-8."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shas = build_repo(repo, [junk if i == VICTIM else message(i) for i in range(N)])
        events, quarantined = ingest_repo(repo)
    assert set(events) == set(shas) and quarantined == []
    victim = events[shas[VICTIM]]
    assert victim.body == junk.decode("utf-8", "replace").rstrip("\n")
    assert victim.attrs.get("encoding_error", False) is not is_utf8(junk)
    assert victim.attrs["author"]["email"] == "ada@example.com" and victim.attrs["files"][0]["path"] == "src/f3.txt"


ident_junk = nul_free.map(lambda b: b.translate(None, b"<>\n").strip()).filter(bool)


@GIT
@given(name=ident_junk, email=ident_junk | st.just(b"ada@example.com"))
def test_fuzz_git_junk_author_name_and_email(name, email):
    """Any byte but NUL can be in a name or an e-mail (\\x1f included): the other fields of that commit are
    still read from their own places, not shifted."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shas = build_repo(repo, [message(i) for i in range(N)], author=name + b" <" + email + b">")
        events, quarantined = ingest_repo(repo)
    assert set(events) == set(shas) and quarantined == []
    victim = events[shas[VICTIM]]
    assert victim.attrs["author"]["email"] == email.decode("utf-8", "replace")
    assert victim.attrs["author"]["date"] == "2020-01-04T10:00:00+01:00"
    assert victim.attrs["committer"] == {"name": "Cy Merger", "email": "cy@example.com",
                                         "date": "2020-01-04T09:00:00+00:00"}
    assert victim.body == "Add f3 (PROJ-3)" and victim.attrs["refs"] == []
    assert victim.attrs.get("encoding_error", False) is not (is_utf8(name) and is_utf8(email))


@GIT
@given(name=st.tuples(SEPARATORS | st.just(b"f-"), nul_free | not_unicode).map(b"".join).map(
    lambda b: b.replace(b"\0", b"").replace(b"/", b"")))
def test_fuzz_git_junk_file_name(name):
    """A file name is any bytes but NUL and '/': it comes out as the path (U+FFFD where not UTF-8, and
    flagged), even one that starts like the extractor's own commit separator."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shas = build_repo(repo, [message(i) for i in range(N)], path=name)
        events, quarantined = ingest_repo(repo)
    assert set(events) == set(shas) and quarantined == []
    victim = events[shas[VICTIM]]
    assert victim.attrs["files"] == [{"path": name.decode("utf-8", "replace"), "status": "A", "added": 1,
                                      "deleted": 0}]
    assert victim.body == "Add f3 (PROJ-3)" and victim.attrs.get("encoding_error", False) is not is_utf8(name)
    assert all(e.attrs["files"][0]["path"] == f"src/f{i}.txt" for i, e in enumerate(map(events.get, shas))
               if i != VICTIM)


@GIT
@given(lines=st.integers(0, 20_000), width=st.integers(1, 80), cap=st.integers(1_000, 200_000))
def test_fuzz_git_diff_over_the_cap(lines, width, cap):
    """A diff over `max_diff_bytes` is its first `cap` bytes, flagged `diff_truncated`, with its line count
    still exact; the other commits are untouched."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shas = build_repo(repo, [message(i) for i in range(N)],
                          content=b"".join(b"%0*d\n" % (width, n) for n in range(lines)))
        patch = git(repo, "show", "--format=", "--no-color", "-M", shas[VICTIM]).encode()
        events, quarantined = ingest_repo(repo, max_diff_bytes=cap)
    assert set(events) == set(shas) and quarantined == []
    victim = events[shas[VICTIM]]
    assert victim.attrs["diff_truncated"] is (len(patch) > cap)
    assert victim.diff == patch[:cap].decode("utf-8", "replace")
    assert victim.attrs["files"] == [{"path": "src/f3.txt", "status": "A", "added": lines, "deleted": 0}]
    assert not any(e.attrs["diff_truncated"] for sha, e in events.items() if sha != shas[VICTIM])


@settings(BIG, max_examples=6)  # each example moves 10 MB through git, the extractor and Arrow
@given(pattern=nul_free.map(lambda b: b.replace(b"\n", b"")).filter(bool))
def test_fuzz_git_ten_megabyte_one_line_message(pattern):
    """A 10 MB single-line message (of any bytes but NUL and newline) comes out whole, as its title too."""
    junk = (pattern * (TEN_MB // len(pattern) + 1))[:TEN_MB]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shas = build_repo(repo, [junk if i == VICTIM else message(i) for i in range(N)])
        events, quarantined = ingest_repo(repo)
    assert set(events) == set(shas) and quarantined == []
    victim = events[shas[VICTIM]]
    assert victim.body == junk.decode("utf-8", "replace").rstrip("\n")
    assert victim.title == " ".join(victim.body.split())
    assert not victim.attrs["diff_truncated"] and victim.attrs["files"][0]["added"] == 1


@pytest.fixture(scope="module")
def corruptible(tmp_path_factory) -> tuple[Path, list[str]]:
    """Six commits made by `git commit` (dates from GIT_AUTHOR_DATE/GIT_COMMITTER_DATE), loose objects."""
    repo = tmp_path_factory.mktemp("template") / "repo"
    return repo, make_repo(repo, N)


def object_of(repo: Path, target: str, sha: str, k: int) -> Path:
    rev = {"commit": sha, "tree": f"{sha}^{{tree}}", "blob": f"{sha}:src/f{k}.txt"}[target]
    return blob_path(repo, rev)


@GIT
@given(target=st.sampled_from(["commit", "tree", "blob"]), k=st.integers(1, N - 2),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 7)), min_size=1, max_size=4))
def test_fuzz_git_corrupt_loose_object(corruptible, target, k, flips):
    """A flipped bit in the loose object of commit k, its tree or the blob it adds: that commit is
    quarantined by SHA, or reported for the repository, and every commit that does not need the object
    still comes out. A commit's diff needs its parent's tree, and a commit object holds the only link to
    its ancestors (git cannot walk past it): so a tree costs commits k and k+1, a commit k+1 and older."""
    template, shas = corruptible
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(template, repo)
        victim = object_of(repo, target, shas[k], k)
        data = bytearray(victim.read_bytes())
        for where, bit in flips:
            data[int(where * (len(data) - 1))] ^= 1 << bit
        victim.chmod(0o644)
        victim.write_bytes(bytes(data))
        events, quarantined = ingest_repo(repo)
    needs = {"blob": shas[k:k + 1], "tree": shas[k:k + 2], "commit": shas[:k + 2]}[target]
    assert set(shas) - set(needs) <= set(events)
    if shas[k] not in events:  # the damage can cancel out (two flips of one bit)
        assert quarantined and all(q.error_class == "git_error" for q in quarantined)
        if target == "blob":
            assert shas[k] in {q.member for q in quarantined}


@GIT
@given(kind=st.sampled_from(["missing", "file", "plain folder", "empty repository", "empty bare repository",
                             "empty .git folder", "junk .git file", "junk HEAD", "junk branch"]),
       junk=nul_free)
def test_fuzz_git_not_a_repository_or_empty(kind, junk):
    """Not a repository: one `not_a_repository` row. An empty repository: nothing (an empty export is not
    an error). A repository git refuses to open: one `git_error` row. Never an exception."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "repo"
        if kind == "file":
            path.write_bytes(junk)
        elif kind == "plain folder":
            path.mkdir()
            (path / "notes.txt").write_bytes(junk)
        elif kind == "empty repository":
            init_repo(path)
        elif kind == "empty bare repository":
            git(Path(tmp), "init", "-q", "--bare", "repo")
        elif kind == "empty .git folder":
            (path / ".git").mkdir(parents=True)
        elif kind == "junk .git file":
            path.mkdir()
            (path / ".git").write_bytes(junk)
        elif kind in ("junk HEAD", "junk branch"):
            make_repo(path, 2)
            (path / ".git" / ("HEAD" if kind == "junk HEAD" else "refs/heads/main")).write_bytes(junk)
        events, quarantined = ingest_repo(path)
    if kind == "file" and junk[:16] in BUNDLE_SIGNATURES:  # a bundle's signature and nothing a bundle needs
        assert events == {} and [q.error_class for q in quarantined] == ["git_error"]
    elif kind in ("missing", "file", "plain folder"):
        assert events == {} and [q.error_class for q in quarantined] == ["not_a_repository"]
    elif kind.startswith("empty repo") or kind.startswith("empty bare"):
        assert events == {} and quarantined == []
    elif kind in ("empty .git folder", "junk .git file"):
        assert events == {} and [q.error_class for q in quarantined] == ["git_error"]
    else:  # unless the junk happens to be a valid ref ("ref: refs/heads/x" is an unborn HEAD)
        assert len(events) == 2 or [q.error_class for q in quarantined] == ["git_error"]
