"""Commit link: an issue, and the company some days after its fix -> the fixing commit's SHA.

Invariants:
- The world's repositories are the dataset's anonymized histories without issue keys in commit messages
  (task_builders.world), so the answer cannot be found with `git log --grep KEY`; the reference is the
  fixing commit's SHA in that history.
- The cutoff is `last fix + days_after_fix` ([families.commit_link]); the repository at the cutoff holds
  the fix (a draft whose fix is not reachable then is rejected). Documents of the world that name the fixing
  commit by its SHA (a CI bot's push notice, "fixed in 1a2b3c4") are withheld from the task's world, and their
  number recorded (`withheld`); the hidden-facts check then proves the SHA (any 7-digit prefix) is nowhere else
  the agent can read at the cutoff.
- The answer must take work: a fix whose files are named after the issue key (`git log --name-only | grep
  KEY` finds it), or whose subject repeats the issue summary (`git log --grep` on the summary finds it), is
  rejected with that reason.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

from pydantic import Field

from environments.actions import Answer
from environments.gitworld import GitWorldError, git
from graders.baselines import nearest_commit, title_grep
from graders.rubric import CheckSpec, Rubric
from core.config import FamilyConfig
from task_builders.families import (
    READ_TOOLS,
    REPO_TOOLS,
    WITHHELD_RECORD,
    BuildContext,
    Draft,
    Family,
    Probe,
    absent_problem,
    kept_fixes,
    register_family,
)
from task_builders.world import strip_keys
from warehouse.schemas import Rejection

SUMMARY_OVERLAP = 0.6  # share of the summary's words in the fix subject that makes the answer a grep away


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.casefold()) if len(w) > 2}


class CommitLinkConfig(FamilyConfig):
    """[families.commit_link] of taskmine.toml."""

    days_after_fix: float = Field(7.0, ge=0)   # the task's world is the company this long after the last fix
    legacy = {"link_days": "days_after_fix"}


@register_family("commit_link")
class CommitLink(Family):
    """An issue and the repository days after its fix -> the SHA of the commit that fixed it."""

    Config = CommitLinkConfig
    tools = (*READ_TOOLS, *REPO_TOOLS, "answer")
    baselines = (nearest_commit, title_grep)

    def build(self, ctx: BuildContext) -> Iterator[Draft | Rejection]:
        commits = {e.native_id: e for e in ctx.by_kind("commit")}
        issues = {e.native_id: e for e in ctx.by_kind("issue_created")}
        for item in ctx.items:
            # an export without any repository (a tracker alone, or `git log` metadata that no extractor reads
            # as a repository) says so, rather than that no commit names the issue: no commit could
            if not ctx.repos and not commits:
                yield self.reject(ctx, item, "no git repository in the dataset")
                continue
            if item.attrs.get("withheld_fixes"):   # the fixes the world knows are not all of them
                yield self.reject(ctx, item, WITHHELD_RECORD, f"{item.attrs['withheld_fixes']} fixing commits withheld")
                continue
            shas = kept_fixes(ctx, item.attrs.get("fix_shas") or [], commits)
            if not shas:
                yield self.reject(ctx, item, "no commit names the issue")
                continue
            repos = {commits[s].attrs.get("repo") for s in shas if s in commits}
            if len(repos) != 1:
                yield self.reject(ctx, item, "fixing commits span several repositories", ",".join(map(str, repos)))
                continue
            repo = next(iter(repos))
            if repo not in ctx.repos:
                yield self.reject(ctx, item, "repository could not be rewritten",
                                  f"{repo}: see its git_unreadable row in the quarantine")
                continue
            issue = issues.get(item.thread_key)
            if issue is None:
                yield self.reject(ctx, item, "issue not in the dataset")
                continue
            yield self._draft(ctx, item, issue, [commits[s] for s in shas], repo)

    def _draft(self, ctx: BuildContext, item, issue, fixes, repo) -> Draft | Rejection:
        key = issue.native_id
        sha_map = ctx.repos[repo]["sha_map"]
        refs = [sha_map[c.native_id] for c in fixes if c.native_id in sha_map]
        if len(refs) != len(fixes):
            return self.reject(ctx, item, "fixing commit not in the rewritten history")
        gone = absent_problem(ctx.repos[repo], refs)
        if gone:
            return self.reject(ctx, item, *gone)
        named = sorted({f["path"] for c in fixes for f in c.attrs.get("files") or []
                        if key.casefold() in str(f.get("path", "")).casefold()})
        if named:
            return self.reject(ctx, item, "the fix's files are named after the issue key",
                               f"git log --name-only finds it: {named[0][:120]}")
        summary = _words(issue.title or "")
        for c in fixes:
            subject = _words(strip_keys(c.title or "", {key}))
            if summary and len(summary & subject) / len(summary) >= SUMMARY_OVERLAP:
                return self.reject(ctx, item, "the fix's subject repeats the issue summary",
                                   f"{len(summary & subject)} of {len(summary)} summary words in the subject")
        last = max(fixes, key=lambda c: c.ts)
        days = self.settings(ctx).days_after_fix
        cutoff = last.ts + dt.timedelta(days=days)
        prompt = (
            f"Issue {key}: {issue.title}\n\n{(issue.body or '').strip()[:4000]}\n\n"
            f"This issue was fixed by a commit in the git repository at ~/{ctx.repos[repo]['slug']} (its history "
            "as it stood "
            f"{days:g} days after the fix; commit messages do not name issue keys). The company's "
            f"tools (`company jira show {key}`, `company mail search ...`, `company slack search ...`) show the "
            "tracker, mail and chat as they were at that moment. Find the commit that fixed it and submit its "
            "SHA with: company answer --sha SHA"
        )
        view = ctx.view(cutoff)
        naming = sorted({h["event_id"] for r in refs for h in (view.token_hits(r[:7], limit=500) if view else [])})
        rubric = Rubric(checks=[CheckSpec(id="sha", check="sha_equals", weight=1,
                                          criterion="the SHA of the commit that fixed the issue",
                                          args={"expected": refs})])
        probes = []
        try:  # guessing the newest commit at the cutoff must not find the fix
            head = git(ctx.repos[repo]["path"], "rev-list", "-1", "--first-parent",
                       f"--before={int(cutoff.timestamp())}", "HEAD").strip()
            if head:
                probes.append(Probe("newest_commit", [Answer(sha=head)]))
        except GitWorldError:
            pass
        return Draft(item=item, prompt=prompt, cutoff=cutoff, reference=[Answer(sha=refs[-1])], rubric=rubric,
                     probes=probes,
                     hidden_events=naming, hidden_tokens=[r[:7] for r in refs], repos={repo: None},
                     needed_commits=refs, meta={"fix_shas": refs, "repo": repo, "withheld": len(naming)})
