"""Commit link: an issue, and the repository as it stood some days after the fix -> the fixing SHA.

Invariants:
- The world's repository is the dataset's anonymized history rewritten once more with every issue
  key of the dataset (and URLs naming one) removed from commit messages, so the answer cannot be
  found with grep; the reference is the fixing commit's SHA in that rewritten history.
- The repository is cut at `last fix + link_days`: only the first-parent ancestor of HEAD dated at
  or before the cutoff and what it reaches; `verify_cutoff` must find nothing after it.
- The prompt and the other world files never contain the reference SHA.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from graders.rubric import CheckSpec, Rubric
from task_builders import gitrewrite
from task_builders.families import BuildContext, Family
from task_builders.mining import KEY
from task_builders.worlds import WorldError, cut_repository, git, verify_cutoff, write_json
from warehouse.schemas import Rejection, Task

_URL_WITH_KEY = re.compile(r"https?://\S*?/(?:browse|issues?)/[A-Z][A-Z0-9_]*-\d+\S*")


def strip_keys(message: str, keys: set[str]) -> str:
    """Remove issue keys (and URLs naming them) from a commit message, tidying what is left."""
    message = _URL_WITH_KEY.sub("", message)
    message = KEY.sub(lambda m: "" if m.group(1) in keys else m.group(0), message)
    lines = []
    for line in message.split("\n"):
        line = re.sub(r"[\[({]\s*[\])}]", "", line)  # brackets the key stood in
        line = re.sub(r"\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?|refs?|see)\b[\s:#,]*(?:and[\s,]*)*$", "",
                      line, flags=re.IGNORECASE)  # a trailing "Fixes" that only named keys
        line = re.sub(r"^[\s:\-\u2013,]+", "", line)
        line = re.sub(r"\s+(?:and|,)\s*$", "", line)
        lines.append(re.sub(r"[ \t]{2,}", " ", line).rstrip())
    return "\n".join(lines).strip() + "\n"


class CommitLink(Family):
    name = "commit_link"

    def build(self, ctx: BuildContext) -> Iterator[Task | Rejection]:
        if not ctx.repos and not any(e.kind == "commit" for e in ctx.events.values()):
            for item in ctx.items:
                if item.attrs.get("fix_shas"):
                    yield self.reject(ctx, item, "no git repository in the dataset")
            return
        keys = {e.native_id for e in ctx.by_kind("issue_created")}
        linkfree = {name: self._linkfree(ctx, name, info, keys) for name, info in ctx.repos.items()}
        commits = {e.native_id: e for e in ctx.by_kind("commit")}
        issues = {e.native_id: e for e in ctx.by_kind("issue_created")}
        for item in ctx.items:
            shas = item.attrs.get("fix_shas") or []
            if not shas:
                yield self.reject(ctx, item, "no commit names the issue")
                continue
            repos = {commits[s].attrs.get("repo") for s in shas if s in commits}
            if len(repos) != 1:
                yield self.reject(ctx, item, "fixing commits span several repositories", ",".join(map(str, repos)))
                continue
            if next(iter(repos)) not in linkfree:
                yield self.reject(ctx, item, "repository could not be rewritten", f"{next(iter(repos))}: "
                                  "see its git_unreadable row in the quarantine")
                continue
            try:
                yield self._task(ctx, item, issues[item.thread_key], [commits[s] for s in shas],
                                 linkfree[repos.pop()])
            except (WorldError, KeyError) as exc:
                yield self.reject(ctx, item, "world could not be built", f"{type(exc).__name__}: {exc}")

    def _linkfree(self, ctx: BuildContext, name: str, info: dict, keys: set[str]) -> dict:
        """The anonymized repository with every issue key stripped from messages (built once, cached)."""
        dst = ctx.world_root / "repos" / f"{name}.linkfree.git"
        map_file = dst.with_suffix(".shamap.json")
        if not map_file.exists():
            if dst.exists():
                shutil.rmtree(dst)
            result = gitrewrite.rewrite(Path(info["path"]), dst, identity=lambda n, e: (n, e),
                                        message=lambda m: strip_keys(m, keys))
            map_file.write_text(json.dumps(result.sha_map, sort_keys=True))
        second = json.loads(map_file.read_text())
        return {"path": dst, "sha_map": {raw: second[anon] for raw, anon in info["sha_map"].items() if anon in second}}

    def _task(self, ctx, item, issue, fixes, repo) -> Task | Rejection:
        last = max(fixes, key=lambda c: c.ts)
        cutoff = last.ts + dt.timedelta(days=ctx.config.link_days)
        src = repo["path"]
        head = git(src, "rev-list", "-n1", "--first-parent", f"--before={int(cutoff.timestamp())}", "HEAD").strip()
        refs = [repo["sha_map"][c.native_id] for c in fixes if c.native_id in repo["sha_map"]]
        if not head or len(refs) != len(fixes):
            return self.reject(ctx, item, "fixing commit not in the rewritten history")
        for sha in refs:
            if subprocess_ok(src, "merge-base", "--is-ancestor", sha, head) is False:
                return self.reject(ctx, item, "fix not reachable from the branch at the cutoff")
        world = ctx.world_root / self.name / item.thread_key
        if world.exists():
            shutil.rmtree(world)
        cut_repository(src, head, world / "repo")
        problems = verify_cutoff(world / "repo", cutoff)
        if problems:
            return self.reject(ctx, item, "repository holds history from after the cutoff", "; ".join(problems))
        if any(k in git(world / "repo", "log", "--format=%B", "main") for k in [issue.native_id]):
            return self.reject(ctx, item, "issue key still in commit messages")
        issue_doc = {"key": issue.native_id, "summary": issue.title, "description": issue.body or "",
                     "reporter": issue.actor_name, "created": issue.ts.isoformat(),
                     "type": (issue.attrs.get("issuetype") or {}).get("name")
                     if isinstance(issue.attrs.get("issuetype"), dict) else issue.attrs.get("issuetype")}
        write_json(world / "issue.json", issue_doc)
        prompt = (
            f"Issue {issue.native_id}: {issue.title}\n\n{(issue.body or '').strip()[:4000]}\n\n"
            "This issue was fixed by a commit in the git repository at /world/repo (its history as it stood "
            f"{ctx.config.link_days:g} days after the fix; commit messages do not name issue keys). Find the "
            "commit that fixed it and submit its SHA with: company answer --sha SHA"
        )
        leaked = [s for s in refs if s[:7] in prompt or s[:7] in json.dumps(issue_doc)]
        if leaked:
            return self.reject(ctx, item, "prompt or world names the fixing commit")
        rubric = Rubric(checks=[CheckSpec(id="sha", check="sha_equals", weight=1, args={"expected": refs})])
        reference = {"outbox": [{"action": "answer", "sha": refs[-1]}], "fix_shas": refs}
        return self.finish(ctx, item, prompt=prompt, world_dir=world, cutoff=cutoff, reference=reference,
                           rubric=rubric)


def subprocess_ok(repo: Path, *args: str) -> bool:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True).returncode == 0
