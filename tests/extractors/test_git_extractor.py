import datetime as dt
from pathlib import Path

from extractor_inputs import blob_path, commit_file, git, init_repo, make_repo

from extractors import git as git_module
from extractors.git import GitExtractor
from extractors.testing import ExtractorContract
from warehouse.schemas import Event, Quarantine

UTC = dt.UTC


class TestGitContract(ExtractorContract):
    extractor = GitExtractor
    record_kind = "commit"

    def make_input(self, tmp_path, n_records):
        repo = tmp_path / "repo"
        make_repo(repo, n_records)
        return repo

    def make_bad_input(self, tmp_path):
        """Four commits; the blob the third one adds is gone (a damaged or partial clone). What is bad is
        that commit's patch: it is quarantined, and the commit itself (message, people, files) stays an
        event, so all four commits come out."""
        repo = tmp_path / "repo"
        make_repo(repo, 4)
        blob_path(repo, "HEAD:src/f2.txt").unlink()
        return repo, 4


def test_a_commit_whose_patch_cannot_be_made_keeps_its_message_and_people(tmp_path):
    repo = tmp_path / "repo"
    make_repo(repo, 4)
    blob_path(repo, "HEAD:src/f2.txt").unlink()
    events, quarantined = run(repo)
    broken = [e for e in events if e.attrs.get("diff_unavailable")]
    assert len(broken) == 1 and broken[0].body and broken[0].actor and broken[0].diff is None
    assert [f["path"] for f in broken[0].attrs["files"]] == ["src/f2.txt"]
    assert [(q.error_class, q.member) for q in quarantined] == [("git_diff_unreadable", broken[0].native_id)]


def run(path: Path, root: Path | None = None, **config) -> tuple[list[Event], list[Quarantine]]:
    rows = list(GitExtractor("ds", config, "r", root=root or path.parent).iter_records(path))
    return [r for r in rows if isinstance(r, Event)], [r for r in rows if isinstance(r, Quarantine)]


def by_title(events: list[Event]) -> dict[str, Event]:
    return {e.title: e for e in events}


def test_commit_fields_and_time_zones(tmp_path):
    repo = init_repo(tmp_path / "proj")
    sha = commit_file(repo, "a.py", "print(1)\n", "Fix the parser (PROJ-12)\n\nLonger explanation.\n",
                      date="2020-01-02T03:04:05+0530", cdate="2020-01-03T00:00:00-0800")
    (event,), quarantined = run(repo)
    assert quarantined == []
    assert event.native_id == sha and event.kind == "commit"
    assert event.ts == dt.datetime(2020, 1, 3, 8, 0, tzinfo=UTC)  # committer date, -0800 -> UTC
    assert event.attrs["author"] == {"name": "Ada Dev", "email": "Ada.Dev@Example.com",
                                     "date": "2020-01-02T03:04:05+05:30"}
    assert event.attrs["committer"]["date"] == "2020-01-03T00:00:00-08:00"
    assert (event.actor, event.actor_name) == ("git:ada.dev@example.com", "Ada Dev")
    assert event.title == "Fix the parser (PROJ-12)"
    assert event.body == "Fix the parser (PROJ-12)\n\nLonger explanation."
    assert event.attrs["files"] == [{"path": "a.py", "status": "A", "added": 1, "deleted": 0}]
    assert event.artifacts == [sha, "a.py"]
    assert event.attrs["repo"] == "proj" and event.attrs["parents"] == [] and event.attrs["merge"] is False
    assert "+print(1)" in event.diff and event.attrs["diff_truncated"] is False
    assert [(p["handle"], p["role"]) for p in event.attrs["people"]] == [
        ("git:ada.dev@example.com", "author"), ("git:cy@example.com", "committer")]
    assert event.attrs["refs"] == ["HEAD -> main"]


def test_merge_commit(tmp_path):
    repo = init_repo(tmp_path / "r")
    base = commit_file(repo, "a.txt", "a\n", "base")
    git(repo, "checkout", "-q", "-b", "topic")
    topic = commit_file(repo, "b.txt", "b\n", "topic work")
    git(repo, "checkout", "-q", "main")
    main = commit_file(repo, "c.txt", "c\n", "main work")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge topic", "topic")
    events, quarantined = run(repo)
    assert quarantined == [] and len(events) == 4
    merge = by_title(events)["Merge topic"]
    assert merge.attrs["merge"] is True and merge.attrs["parents"] == [main, topic]
    assert merge.attrs["files"] == [] and merge.diff is None
    assert by_title(events)["base"].native_id == base


def test_renamed_and_binary_files(tmp_path):
    repo = init_repo(tmp_path / "r")
    commit_file(repo, "old/name.txt", "".join(f"line {i}\n" for i in range(20)), "add")
    commit_file(repo, "logo.png", b"\x89PNG\0\0binary", "logo")
    git(repo, "mv", "old/name.txt", "new name\tx.txt")
    sha = commit_file(repo, "new name\tx.txt", "".join(f"line {i}\n" for i in range(21)), "rename")
    events, _ = run(repo)
    rename = by_title(events)["rename"]
    assert rename.attrs["files"] == [{"path": "new name\tx.txt", "status": "R", "added": 1, "deleted": 0,
                                      "old_path": "old/name.txt"}]
    assert rename.artifacts == [sha, "old/name.txt", "new name\tx.txt"]
    assert "rename from old/name.txt" in rename.diff
    assert by_title(events)["logo"].attrs["files"] == [{"path": "logo.png", "status": "A", "added": None,
                                                        "deleted": None}]


def test_non_utf8_message_is_replaced_and_flagged(tmp_path):
    # `git commit` re-encodes a Latin-1 message to UTF-8 itself, so write the commit object by hand, as
    # old tools (and some importers) did.
    repo = init_repo(tmp_path / "r")
    tree = git(repo, "write-tree").strip()
    raw = (f"tree {tree}\nauthor Ada Dev <ada@example.com> 1577934245 +0100\n"
           f"committer Ada Dev <ada@example.com> 1577934245 +0100\n\n").encode()
    raw += b"R\xe9sum\xe9 of the fix\n"
    sha = git(repo, "hash-object", "-t", "commit", "-w", "--literally", "--stdin", stdin=raw).strip()
    git(repo, "update-ref", "refs/heads/main", sha)
    (event,), quarantined = run(repo)
    assert quarantined == [] and event.native_id == sha
    assert event.title == "R\ufffdsum\ufffd of the fix" and event.attrs["encoding_error"] is True


def test_empty_email_uses_the_name(tmp_path):
    repo = init_repo(tmp_path / "r")
    commit_file(repo, "a.txt", "a\n", "anonymous", email="")
    (event,), _ = run(repo)
    assert event.actor == "git:name:Ada Dev" and event.attrs["people"][0]["email"] is None


def test_diff_is_capped(tmp_path):
    repo = init_repo(tmp_path / "r")
    commit_file(repo, "big.txt", "".join(f"line {i}\n" for i in range(2000)), "big")
    small = commit_file(repo, "small.txt", "s\n", "small")
    events, _ = run(repo, max_diff_bytes=500)
    big = by_title(events)["big"]
    assert len(big.diff.encode()) <= 500 and big.attrs["diff_truncated"] is True
    assert big.attrs["files"][0]["added"] == 2000  # counted on the whole patch, not the capped one
    assert by_title(events)["small"].attrs["diff_truncated"] is False
    assert by_title(events)["small"].native_id == small


def test_not_a_repository_is_one_quarantine_row(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("x")
    (tmp_path / "file.txt").write_text("x")
    for path in (tmp_path / "plain", tmp_path / "file.txt", tmp_path / "missing"):
        events, quarantined = run(path, root=tmp_path)
        assert events == [] and [q.error_class for q in quarantined] == ["not_a_repository"]
        assert quarantined[0].file == path.name


def test_a_folder_inside_a_repository_is_not_that_repository(tmp_path):
    repo = tmp_path / "r"
    make_repo(repo, 2)
    events, quarantined = run(repo / "src", root=tmp_path)
    assert events == [] and quarantined[0].error_class == "not_a_repository"


def test_all_branches_bare_repositories_and_detection(tmp_path):
    repo = tmp_path / "data" / "work"
    shas = make_repo(repo, 2)
    git(repo, "checkout", "-q", "-b", "side")
    side = commit_file(repo, "side.txt", "s\n", "side only")
    git(repo, "checkout", "-q", "main")
    (repo / "src" / "f0.txt").write_text("work in progress\n")
    git(repo, "stash", "-q")  # stash commits are not history: excluded
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(tmp_path / "data" / "mirror.git"))
    make_repo(repo / "vendor" / "nested", 1)
    (tmp_path / "data" / "notes").mkdir()
    found = GitExtractor.detect(tmp_path / "data")
    assert found == [tmp_path / "data" / "mirror.git", repo, repo / "vendor" / "nested"]
    work, _ = run(repo, root=tmp_path / "data")
    mirror, _ = run(tmp_path / "data" / "mirror.git", root=tmp_path / "data")
    assert {e.native_id for e in work} == {*shas, side} == {e.native_id for e in mirror}
    assert {e.attrs["repo"] for e in mirror} == {"mirror.git"}
    assert {e.attrs["repo"] for e in work} == {"work"}


def test_repository_as_the_dataset_root_is_named_after_its_folder(tmp_path):
    repo = tmp_path / "myrepo"
    make_repo(repo, 1)
    (event,), _ = run(repo, root=repo)
    assert event.attrs["repo"] == "myrepo" and event.provenance == {"file": "."}


def test_stopping_early_leaves_no_process_running(tmp_path):
    repo = tmp_path / "r"
    make_repo(repo, 5)
    rows = GitExtractor("ds", None, "r", root=tmp_path).iter_records(repo)
    first = next(rows)
    rows.close()
    assert first.kind == "commit"
    ours = f"git\0--no-pager\0--git-dir={repo}"
    procs = [p for p in Path("/proc").glob("[0-9]*/cmdline") if _cmdline(p).startswith(ours)]
    assert procs == []


def _cmdline(p: Path) -> str:
    try:
        return p.read_text()
    except OSError:
        return ""


def test_line_counts_and_statuses_agree_with_git_numstat(tmp_path):
    repo = init_repo(tmp_path / "r")
    commit_file(repo, "a.txt", "".join(f"a{i}\n" for i in range(30)), "a")
    commit_file(repo, "empty.txt", "", "empty file")
    commit_file(repo, "a.txt", "".join(f"a{i}\n" if i % 3 else f"++ changed {i}\n" for i in range(30))
                + "--- tail\nno newline", "edit with +/- looking lines")
    (repo / "a.txt").chmod(0o755)
    commit_file(repo, "b.bin", b"\0" * 10, "mode change and binary")
    git(repo, "rm", "-q", "empty.txt")
    commit_file(repo, "sub dir/c.txt", "c\n", "delete and add")
    events, _ = run(repo)
    for e in events:
        out = git(repo, "show", "--format=", "--numstat", "-z", "-M", e.native_id)
        expected = {}
        for chunk in filter(None, out.lstrip("\n").split("\0")):
            added, deleted, path = chunk.split("\t", 2)
            expected[path] = (None if added == "-" else int(added), None if deleted == "-" else int(deleted))
        assert {f["path"]: (f["added"], f["deleted"]) for f in e.attrs["files"]} == expected, e.title
    statuses = {e.title: sorted((f["status"], f["path"]) for f in e.attrs["files"]) for e in events}
    assert statuses["delete and add"] == [("A", "sub dir/c.txt"), ("D", "empty.txt")]
    assert statuses["mode change and binary"] == [("A", "b.bin"), ("M", "a.txt")]


def test_a_commit_with_an_unreadable_date_is_quarantined_alone(tmp_path, monkeypatch):
    repo = tmp_path / "r"
    shas = make_repo(repo, 3)
    real = git_module._parse

    def broken_date(raw, size, cap):
        commit = real(raw, size, cap)
        return {**commit, "ts": None} if commit["sha"] == shas[1] else commit

    monkeypatch.setattr(git_module, "_parse", broken_date)
    events, quarantined = run(repo)
    assert sorted(e.native_id for e in events) == sorted([shas[0], shas[2]])
    assert [(q.error_class, q.member) for q in quarantined] == [("bad_record", shas[1])]
