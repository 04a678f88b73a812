"""SWE-bench's view of a code-change task, split as the published dataset splits everything: what an agent may
see (the `tasks` files) and what only a grader may (the `grading` and `swebench` files).

SWE-bench's harness (the `swebench` package, 5.x) reads an instance with `instance_id`, `repo` (owner/name),
`base_commit`, `problem_statement`, `hints_text`, `created_at`, `version`, `environment_setup_commit`, and for
evaluation `patch`, `test_patch`, `FAIL_TO_PASS`, `PASS_TO_PASS` (JSON lists of test ids), `image` (the
instance's Docker image: the repository at `base_commit` in /testbed with its dependencies), `eval_script`
(bash: apply the test patch, run the tests between the harness's markers, reset the tests), `log_parser`
(one of its PARSER_REGISTRY names) and `eval_type`. `make_test_spec(instance)` builds its TestSpec from those.

Where the values come from:
- `repo`: owner/name of the repository's public remote when the world recorded one, else `<dataset>/<repo>`;
- `version`: the package version the repository declares at the base commit (pyproject.toml, setup.cfg,
  setup.py, package.json, `__version__`), "0" when none, plus `+env.<key>`: SWE-bench keys an environment by
  (repo, version), and taskmine's environments are keyed by their dependency state (environments.codeenv), so
  two commits with one declared version and different dependencies get different versions;
- `environment_setup_commit`: the earliest base commit among the published tasks of that version (the commit
  whose dependency declarations the environment was installed from);
- `hints_text`: the ticket's comments as they stood at the cutoff (what `company jira show` returns), empty for
  a fix without a ticket;
- `image`: `taskmine-swe:<hash>`, no registry holds it: `warehouse.loader.PublishedDataset.swebench_image` builds
  it locally from the task's environment image and the published repository bundle.

What SWE-bench's harness protects when it runs `eval_script`: the test files are reset and the test patch applied
after the agent's patch (edited or deleted tests come back), one container per instance. What it does not: the
tests run with the agent's files on sys.path, in an interpreter the agent's code can patch, and the verdict is
parsed from the printed log; a conftest.py or pytest.ini the patch adds, a module shadowing the standard library
or pytest, a monkeypatched report, a planted compiled file or code that prints `PASSED <id>` lines forges a pass.
taskmine's own verifier (graders.verifier with graders.sealed: `PublishedDataset.verify`) resists those; the
script here stays the plain pytest run SWE-bench's log parser reads.

Invariant: `agent_columns` never holds the patch, the tests, the test sets or anything after the cutoff.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from warehouse.ids import content_hash

# agent-visible SWE-bench columns (the `tasks` files) and grader-only ones (`grading`, `swebench`)
AGENT = ("instance_id", "repo", "base_commit", "problem_statement", "hints_text", "created_at", "version",
         "environment_setup_commit", "image")
GRADER = ("patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "eval_script", "log_parser", "eval_type")
WORKDIR = "/testbed"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"   # swebench.harness.constants
HEREDOC = "EOF_TASKMINE_TEST_PATCH"


def instance_id(dataset: str, code: dict, task_id: str) -> str:
    """`<dataset>__<repo>-<task id prefix>`: never the fix's SHA (its prefix would answer the commit_link task of
    the same ticket, and the fix is a commit the agent's repository must not reach)."""
    return f"{dataset}__{code['repo']}-{task_id[:12]}"


def image_name(instance: str, env_key: str | None) -> str:
    """The instance image's name (built locally by the loader; never pushed anywhere)."""
    return f"taskmine-swe:{content_hash('swe-image/1', instance, env_key)[:16]}"


_REMOTE = re.compile(r"(?:[:/])([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


def owner_name(remote: str | None, dataset: str, slug: str) -> str:
    """owner/name from a remote URL (https://host/owner/name(.git), git@host:owner/name.git), else dataset/slug."""
    remote = (remote or "").strip()
    m = _REMOTE.search(remote)
    if m and ("://" in remote or re.match(r"[\w.-]+@[\w.-]+:", remote)):   # a URL or scp-style, not a local path
        return f"{m.group(1)}/{m.group(2)}"
    return f"{dataset}/{slug}"


def declared_version(repo: Path, commit: str) -> str:
    """The version the repository declares at `commit` ("0" when it declares none or computes it)."""
    def show(path: str) -> str:
        r = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "show", f"{commit}:{path}"],
                           capture_output=True)
        return r.stdout.decode("utf-8", "replace") if r.returncode == 0 else ""

    text = show("pyproject.toml")
    if text:
        try:
            v = (tomllib.loads(text).get("project") or {}).get("version")
            v = v or ((tomllib.loads(text).get("tool") or {}).get("poetry") or {}).get("version")
            if isinstance(v, str) and v.strip():
                return v.strip()
        except tomllib.TOMLDecodeError:
            pass
    text = show("setup.cfg")
    if text:
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read_string(text)
            v = cfg.get("metadata", "version", fallback="")
            if v and not v.startswith(("attr:", "file:")):
                return v.strip()
        except configparser.Error:
            pass
    text = show("package.json")
    if text:
        try:
            v = json.loads(text).get("version")
            if isinstance(v, str) and v.strip():
                return v.strip()
        except (ValueError, AttributeError):
            pass
    m = re.search(r"""\bversion\s*=\s*['"]([0-9][^'"]*)['"]""", show("setup.py"))
    if m:
        return m.group(1)
    files = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "ls-tree", "-r", "--name-only", commit],
                           capture_output=True, text=True).stdout.split()
    for path in sorted(p for p in files if re.fullmatch(r"(src/)?[A-Za-z0-9_]+/(__init__|_version|version)\.py", p)):
        m = re.search(r"""^__version__\s*=\s*['"]([0-9][^'"]*)['"]""", show(path), re.M)
        if m:
            return m.group(1)
    return "0"


def version(declared: str, env_key: str | None) -> str:
    return f"{declared}+env.{(env_key or 'none')[:12]}"


def test_files(code: dict) -> list[str]:
    """The files the test patch touches (what the eval script resets before and after)."""
    return sorted(set(re.findall(r"^diff --git a/(\S+) b/", code.get("test_patch") or "", re.M)))


def eval_script(code: dict, env: dict) -> str:
    """SWE-bench's evaluation script for the task: in /testbed at the base commit with the candidate patch applied,
    reset the test files, apply the test patch, run the test modules with pytest's `-rA` summary between the
    harness's markers (what its `parse_log_pytest` reads), reset the test files again."""
    from environments import codeenv

    files = test_files(code)
    reset = f"git checkout {code['base_commit']} -- " + " ".join(shlex.quote(f) for f in files) if files else "true"
    spec = codeenv.EnvSpec.from_json(env) if env else codeenv.EnvSpec("python")
    run = codeenv.test_command(spec, list(code.get("run") or []), "/tmp/taskmine-junit.xml")
    run = run.replace(" -q -rN ", " -rA ")
    lines = ["#!/bin/bash", "set -uxo pipefail", f"cd {WORKDIR}", "git status", "git diff " + code["base_commit"],
             reset, f"git apply --whitespace=nowarn -v - <<'{HEREDOC}'", (code.get("test_patch") or "").rstrip("\n"),
             HEREDOC, f": '{START}'", run, f": '{END}'", reset]
    return "\n".join(lines) + "\n"


def hints(view, tickets: list[str]) -> str:
    """The tickets' discussion as the agent's tools show it at the cutoff."""
    out = []
    for key in tickets:
        issue = view.issue(key) if view is not None else None
        for c in (issue or {}).get("comments") or []:
            out.append(f"{c.get('author') or 'someone'} ({c.get('created')}):\n{(c.get('body') or '').strip()}")
    return "\n\n".join(out)


def columns(dataset: str, code: dict | None, world: dict, *, task_id: str = "", remote: str | None = None,
            declared: str = "0", setup_commit: str | None = None, hints_text: str = "", prompt: str = ""
            ) -> dict[str, Any]:
    """Every SWE-bench column of one task (None for a task without `reference["code"]`)."""
    if not code:
        return {name: None for name in (*AGENT, *GRADER)}
    env = world.get("env") or {}
    iid = instance_id(dataset, code, task_id)
    return {
        "instance_id": iid, "repo": owner_name(remote, dataset, code["repo"]),
        "base_commit": code["base_commit"], "problem_statement": code.get("problem_statement") or prompt,
        "hints_text": hints_text, "created_at": code.get("created_at"), "version": version(declared, env.get("key")),
        "environment_setup_commit": setup_commit or code["base_commit"],
        "image": image_name(iid, env.get("key")),
        "patch": code.get("patch", ""), "test_patch": code.get("test_patch", ""),
        "FAIL_TO_PASS": json.dumps(code.get("FAIL_TO_PASS") or []),
        "PASS_TO_PASS": json.dumps(code.get("PASS_TO_PASS") or []),
        "eval_script": eval_script(code, env), "log_parser": "parse_log_pytest" if env.get("ecosystem", "python") ==
        "python" and not env.get("test_command") else "parse_log_junit", "eval_type": "pass_and_fail",
    }
