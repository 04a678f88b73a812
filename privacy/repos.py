"""Repository anonymization: every git repository of a dataset rewritten with pseudonymized authors, scrubbed
messages and blobs (privacy.gitrewrite), once per (source HEAD, pseudonym set, audit rules) and reused otherwise;
what the leak audit still refuses in it withheld; what git cannot read left out, each object a quarantine row.

The index (`worlds/<dataset>/repos/index.json`, `repos_index`) is what the later stages read of a rewrite: its SHA
map, absent files, the copies of commits only a dropped ref reaches, unreadable objects, withheld records and
the repository's public remote (`repo_remotes`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from environments.gitworld import optimize
from extractors.git import GitError
from extractors.git import repository as git_repository
from extractors.stages import GIT_OBJECT
from privacy import gitrewrite
from privacy.anonymize import Anonymizer
from warehouse.ids import content_hash
from warehouse.schemas import Quarantine
from warehouse.store import Store


def repos_index(store: Store, dataset: str) -> Path:
    return store.worlds(dataset) / "repos" / "index.json"


def anonymize_repos(store: Store, dataset: str, dataset_dir: Path, anon: Anonymizer, check=None,
                    run_id: str = "") -> dict[str, dict]:
    """Rewrite each repository once per (source HEAD, pseudonym set, audit rules); reuse the rewrite otherwise.

    What git cannot read is left out of the rewrite, not the repository (privacy.gitrewrite): each missing or
    corrupt object is a quarantine row (`git_object_missing`, `git_object_corrupt`, `git_object_left_out` for a
    commit cut out with its unreadable tree; file, object id, reason), a missing blob an absent file. With
    `check` (privacy.withhold.Check), blobs, paths and messages the leak audit still refuses after scrubbing are
    withheld the same way. A repository that cannot be rewritten at all (no readable branch) is quarantined whole
    (`git_unreadable`): its commits stay events, the tasks that need it are rejected with the reason.

    The index entry of a repository records its SHA map, its absent files (`absent`: a side file with, per
    original commit, how many files it lacks and how many of those it changes are absent, by why: counts, never a
    path), the copies of commits only a dropped ref reaches (`equivalent`: original -> original commit a rewritten
    branch holds, gitrewrite.equivalents), its unreadable objects and withheld records."""
    sources: dict[str, str] = {}
    shas: dict[str, set[str]] = {}
    for e in store.iter("events", dataset):
        if e.kind == "commit" and e.attrs.get("repo") is not None:
            sources.setdefault(str(e.attrs["repo"]), e.provenance.get("file") or "")
            shas.setdefault(str(e.attrs["repo"]), set()).add(e.native_id)
    index_file = repos_index(store, dataset)
    index = json.loads(index_file.read_text()) if index_file.exists() else {}
    fingerprint = content_hash("pseudonyms", sorted((k, v.full_name) for k, v in anon.vault.pseudonyms.items()),
                               sorted(check.rules.strings + check.rules.handles) if check is not None else None)
    out, broken = {}, []
    for name, src in sorted(sources.items()):
        src_path = dataset_dir / src
        slug = name.replace("/", "_") or "repo"
        dst = store.worlds(dataset) / "repos" / f"{slug}.git"
        try:
            src_path = git_repository(src_path)  # a bundle file: its unpacked copy
            head = gitrewrite.head(src_path)
            # /3: partial histories, withheld records; the object store's packs and loose objects: a repository
            # whose missing objects were fetched since is rewritten again
            key = content_hash("anon-repo/3", head, fingerprint, gitrewrite.object_store(src_path))
            remote = public_remote(src_path, anon)
            if index.get(name, {}).get("key") == key and dst.exists():
                out[name] = {**index[name], "remote": remote}
                continue
            _remove_rewrites(dst, slug)
            result = gitrewrite.rewrite(src_path, dst, identity=anon.git_identity, message=anon.prose,
                                        blob=_blob_scrubber(anon), residue=check.git if check is not None else None)
            optimize(dst)  # fast-import writes barely compressed packs: one delta-compressed pack instead
        except (gitrewrite.GitRewriteError, GitError) as exc:
            _remove_rewrites(dst, slug)
            broken.append(Quarantine(
                quarantine_id=content_hash("git-rewrite", dataset, name), dataset=dataset, source="git", file=src,
                error_class="git_unreadable", message=f"{exc}; its commits are kept as events, tasks that need "
                "this repository are rejected"[:500]))
            continue
        absent = dst.parent / f"{slug}.absent.json"
        absent.write_text(json.dumps({"touched": result.touched, "absent": {
            sha: dict(Counter(paths.values())) for sha, paths in result.absent.items()}}, sort_keys=True))
        dropped = shas.get(name, set()) - set(result.sha_map)
        out[name] = {"key": key, "path": str(dst), "sha_map": result.sha_map, "remote": remote,
                     "absent": str(absent), "dropped_refs": list(result.dropped_refs),
                     "equivalent": gitrewrite.equivalents(src_path, dropped, result.sha_map),
                     "unreadable": [{**u.__dict__, "path": _clean_path(u.path, check)} for u in result.unreadable],
                     "checked": result.checked,
                     "withheld": [{"dataset": dataset, "stage": "anonymize", "record_kind": w.kind,
                                   "record_id": f"{slug}:{w.id}", "reason": w.reason, "run_id": run_id}
                                  for w in result.withheld]}
    index_file.parent.mkdir(parents=True, exist_ok=True)
    index_file.write_text(json.dumps(out, sort_keys=True))
    objects = [Quarantine(quarantine_id=content_hash("git-object", dataset, name, u["object"]), dataset=dataset,
                          source="git", file=sources[name], member=u["object"],
                          error_class=GIT_OBJECT + ("left_out" if u["reason"] not in ("missing", "corrupt")
                                                    else u["reason"]),
                          message=_unreadable_message(u))
               for name, info in sorted(out.items()) for u in info.get("unreadable", [])]
    before = store.read("quarantine", dataset)
    kept = [q for q in before if q.error_class != "git_unreadable" and not q.error_class.startswith(GIT_OBJECT)]
    if len(kept) != len(before) or broken or objects:
        store.replace("quarantine", dataset, kept + broken + objects)
    return out


def _clean_path(path: str, check) -> str:
    """A path of the source repository as the index may keep it: "" when the audit would refuse it (the index is
    no private file)."""
    return path if check is None or not path or check.text(path) is None else ""


def _unreadable_message(u: dict) -> str:
    """One line on an object a rewritten repository lacks and what the rewrite did without it."""
    if u["type"] == "blob":
        return (f"blob {u['object']} {u['reason']}: {u['path'] or 'its file'} is absent in the rewritten history "
                f"where {u['commits']} commits wrote it; code tasks whose fix or tests need it are rejected")[:500]
    if u["type"] == "commit":
        return (f"commit {u['object']} left out ({u['reason']}): its children start the rewritten history as root "
                "commits; a branch whose tip it was is dropped")[:500]
    return (f"tree {u['object']} {u['reason']}: the commits whose tree holds it are left out of the rewritten "
            "history")[:500]


def public_remote(repo: Path, anon: Anonymizer) -> str | None:
    """The repository's `origin` URL when anonymization leaves it as it is (a project's public address, e.g.
    https://host/owner/name.git: SWE-bench's `repo` is its owner/name); None when there is none or it names a
    person (the scrubber changed it)."""
    r = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "config", "--get", "remote.origin.url"],
                       capture_output=True, text=True)
    url = r.stdout.strip() if r.returncode == 0 else ""
    if not url or "://" not in url and "@" not in url:
        return None                      # none, or a local path (a clone of a bundle)
    return url if anon.scrub(url) == url else None


def repo_remotes(store: Store, dataset: str) -> dict[str, str | None]:
    """World repository slug -> its public remote (public_remote), from the anonymize stage's index."""
    index_file = repos_index(store, dataset)
    index = json.loads(index_file.read_text()) if index_file.exists() else {}
    return {(name.replace("/", "_") or "repo"): info.get("remote") for name, info in index.items()}


def _remove_rewrites(dst: Path, slug: str) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    for stale in dst.parent.glob(f"{slug}.linkfree.*"):
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()


def _blob_scrubber(anon: Anonymizer):
    def scrub(data: bytes) -> bytes:
        if len(data) > 2_000_000 or b"\0" in data[:8192]:
            return data  # binary or huge: left as is (the leak audit still scans it)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        return anon.scrub(text, code=True).encode("utf-8")

    return scrub
