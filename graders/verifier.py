"""The verifier phase of code-change tasks: after the agent, in the same sandbox session, the hidden tests.

Sequence (`verify`), each step on the host's initiative, none visible to the agent:
1. every process of the session but PID 1 is killed (`Session.exec(..., kill_others=True)`): nothing the
   agent started can watch or race what follows;
2. the repository is made writable again and every test-runner configuration file the agent could have
   planted or edited (conftest.py, pytest.ini, .pytest.ini, tox.ini, setup.cfg, pyproject.toml, and the
   Node runners' configs, anywhere in the work tree) is deleted, then the fix's test files and the fix's
   versions of those configuration files are written over whatever the agent left (a symlink or a folder
   where a file belongs is removed first). The contents come from the world's repository on the host, at
   the fix commit: they never existed in the session before this step;
3. the touched test modules run with the environment's runner (pytest with a JUnit XML report at a path
   chosen now; plug-in auto-loading off; pytest imported before the repository is on sys.path), under the
   session's limits and the task's timeout;
4. the report is read back and parsed (graders.junit); FAIL_TO_PASS and PASS_TO_PASS outcomes go to the
   grade through `Context.extra["verifier"]`, read by the checks `tests_resolved` (all or nothing) and
   `tests_fraction`.

`measure` runs the same restore-and-run steps to compute a candidate's test sets: the parent commit with
the fix's test files applied (what doing nothing leaves the verifier), then with the whole fix, alternating,
`repeats` times each (after the first pair, only when some test failed before and passed after); `classify`
turns the runs into FAIL_TO_PASS, PASS_TO_PASS and the flaky tests left out. Tests that do not finish within
the timeout make the candidate unmeasurable (a timeout would otherwise count every test as failing).

Invariants:
- A report the verifier cannot read (missing, broken XML) is a grader error, never a score.
- A test missing from the report (not collected, its module failed to import, the run timed out) did not pass.
- The verifier writes only inside the repository and a fresh folder under /tmp whose name is drawn after
  the agent's processes are dead.
"""

from __future__ import annotations

import base64
import json
import secrets
import shlex
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environments import codeenv
from environments.docker_cli import SandboxError
from environments.sandbox import Mount, Sandbox, Session
from graders.junit import JUnitError, parse

PY_CONFIG = ("conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
NODE_CONFIG = ("package.json", "jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs",
               ".mocharc.js", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml", "vitest.config.js",
               "vitest.config.ts", "babel.config.js", ".babelrc")
CONFIG_NAMES = PY_CONFIG + NODE_CONFIG
DEFAULT_TIMEOUT_S = 300.0
REPORT_LIMIT = 32 << 20

# Runs in the session as `python3 -I -c UNPACK payload repo`: writes the payload's files into the repository
# (None deletes), after deleting every file named in its "prune" list anywhere in the work tree.
UNPACK = r"""
import base64, json, os, shutil, stat, sys
payload, repo = sys.argv[1], sys.argv[2]
with open(payload) as f:
    data = json.load(f)
def clear(p):
    if os.path.islink(p) or (os.path.lexists(p) and not os.path.isdir(p)):
        os.unlink(p)
    elif os.path.isdir(p):
        shutil.rmtree(p)
if os.path.islink(repo) or (os.path.lexists(repo) and not os.path.isdir(repo)):
    os.unlink(repo)
os.makedirs(repo, exist_ok=True)
for d, dirs, files in os.walk(repo):
    dirs[:] = [x for x in dirs if not os.path.islink(os.path.join(d, x))]
    try:
        os.chmod(d, 0o755)
    except OSError:
        pass
    for name in files:
        p = os.path.join(d, name)
        if not os.path.islink(p):
            try:
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IRUSR)
            except OSError:
                pass
prune = set(data.get("prune") or [])
if prune:
    for d, dirs, files in os.walk(repo):
        dirs[:] = [x for x in dirs if x not in (".git", "node_modules") and not os.path.islink(os.path.join(d, x))]
        for name in files + [x for x in os.listdir(d) if os.path.islink(os.path.join(d, x))]:
            if name in prune:
                clear(os.path.join(d, name))
for rel, content in sorted(data["files"].items()):
    parts = rel.split("/")
    if rel.startswith("/") or ".." in parts or ".git" in parts:
        continue
    cur = repo
    for part in parts[:-1]:
        cur = os.path.join(cur, part)
        if os.path.islink(cur) or (os.path.lexists(cur) and not os.path.isdir(cur)):
            clear(cur)
        if not os.path.isdir(cur):
            if content is None:
                break
            os.mkdir(cur)
    else:
        target = os.path.join(repo, rel)
        clear(target)
        if content is not None:
            with open(target, "wb") as f:
                f.write(base64.b64decode(content["b64"]))
            if content.get("exec"):
                os.chmod(target, 0o755)
print("ok")
"""


@dataclass(frozen=True)
class CodeSpec:
    """What the verifier needs, from a task's `reference["code"]` and `world["env"]`."""

    repo: str                          # the repository's slug: the agent's work tree is ~/<repo>
    base_commit: str
    fix_commit: str
    restore: tuple[str, ...]           # paths at the fix written over the agent's tree (tests and runner config)
    run: tuple[str, ...]               # the test modules to run
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    env: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, reference: dict, world: dict) -> CodeSpec | None:
        code = reference.get("code")
        if not code:
            return None
        return cls(repo=code["repo"], base_commit=code["base_commit"], fix_commit=code["fix_commit"],
                   restore=tuple(code.get("restore") or ()), run=tuple(code.get("run") or ()),
                   fail_to_pass=tuple(code.get("FAIL_TO_PASS") or ()),
                   pass_to_pass=tuple(code.get("PASS_TO_PASS") or ()),
                   timeout_s=float(code.get("timeout_s") or DEFAULT_TIMEOUT_S), env=dict(world.get("env") or {}))

    @property
    def env_spec(self) -> codeenv.EnvSpec:
        return codeenv.EnvSpec.from_json(self.env)


def spec_of(task) -> CodeSpec | None:
    """The verifier spec of a task (None when the task has no verifier phase)."""
    return CodeSpec.of(task.reference or {}, task.world or {})


def env_cache(worlds_dir: Path) -> Path:
    """Where a world keeps its environments' installed files (environments.codeenv)."""
    return Path(worlds_dir) / "envs"


def environment(spec: CodeSpec, sandbox: Sandbox, worlds_dir: Path) -> str | None:
    """The image a code task's episodes run in (built again when it was pruned; None: the sandbox's default)."""
    return codeenv.prepare(sandbox, spec.env_spec, env_cache(worlds_dir))


PATCH_ARG_LIMIT = 96 << 10   # a command is one argument of `docker exec`: Linux caps one at 128 KB


def apply_command(repo: str, patch: str) -> str:
    """A shell command that applies `patch` to the agent's repository ~/<repo> (the oracle)."""
    data = base64.b64encode(patch.encode()).decode()
    return (f"cd ~/{shlex.quote(repo)} && printf %s {data} | base64 -d | "
            "git apply --whitespace=nowarn -")


def oracle_command(task) -> str | None:
    """The oracle of a code task (its real fix's non-test changes, applied as a patch), None for other tasks."""
    code = (task.reference or {}).get("code")
    if not code or code.get("patch") is None:
        return None
    return apply_command(code["repo"], code["patch"])


# --- files from the world's repository --------------------------------------------------------------------


def blobs(repo: Path, commit: str, paths: Iterable[str]) -> dict[str, bytes | None]:
    """The bytes of `paths` at `commit` in a host repository (None: not in that commit), in one git call."""
    paths = list(dict.fromkeys(paths))
    if not paths:
        return {}
    stdin = "".join(f"{commit}:{p}\n" for p in paths).encode()
    proc = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "cat-file", "--batch"], input=stdin,
                          capture_output=True)
    if proc.returncode != 0:
        raise SandboxError(f"git cat-file failed in {repo.name}: {proc.stderr.decode(errors='replace')[:200]}")
    out: dict[str, bytes | None] = {}
    data, pos = proc.stdout, 0
    for p in paths:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) >= 2 and header[-1] == b"missing":
            out[p] = None
            continue
        size = int(header[2])
        out[p] = data[pos:pos + size] if header[1] == b"blob" else None
        pos += size + 1
    return out


def executable(repo: Path, commit: str, paths: Iterable[str]) -> set[str]:
    paths = list(paths)
    if not paths:
        return set()
    proc = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "ls-tree", "-z", commit, "--", *paths],
                          capture_output=True)
    return {e.split(b"\t", 1)[1].decode() for e in proc.stdout.split(b"\0") if e.startswith(b"100755")}


def payload(files: dict[str, bytes | None], execs: set[str] = frozenset(), prune: Iterable[str] = ()) -> bytes:
    return json.dumps({"files": {p: None if b is None else {"b64": base64.b64encode(b).decode(),
                                                           "exec": p in execs} for p, b in files.items()},
                       "prune": sorted(prune)}).encode()


# --- steps in a session ---------------------------------------------------------------------------------------


def _workdir(session: Session) -> str:
    """A fresh folder under /tmp, named now (after the agent's processes are dead)."""
    name = f"/tmp/.taskmine-verify-{secrets.token_hex(8)}"
    r = session.exec(f"mkdir -m 700 {shlex.quote(session.path_of(name))}", timeout_s=30, kill_others=True)
    if r.exit_code != 0:
        raise _AgentBroke(f"the verifier could not make its folder: {r.status_line()}: {r.stderr.strip()[-200:]}")
    return name


class _AgentBroke(Exception):
    """The agent left the session in a state the verifier cannot work in (a full disk, ...): the agent's
    failure, scored 0 with this message."""


def apply_files(session: Session, repo_dir: str, files: dict[str, bytes | None], execs: set[str] = frozenset(),
                prune: Iterable[str] = (), work: str | None = None) -> None:
    """Write `files` into the session's repository `repo_dir` (a path as the session's commands see it,
    e.g. `$HOME/slug`), deleting every file named in `prune` first."""
    work = work or _workdir(session)
    target = f"{work}/payload-{secrets.token_hex(4)}.json"
    try:
        session.write_file(target, payload(files, execs, prune), 0o600)
    except SandboxError as exc:
        raise _AgentBroke(f"the verifier could not write its files: {exc}") from None
    cmd = (f"python3 -I -c {shlex.quote(UNPACK)} {shlex.quote(session.path_of(target))} {repo_dir} && "
           f"rm -f {shlex.quote(session.path_of(target))}")
    r = session.exec(cmd, timeout_s=120, kill_others=True)
    if r.exit_code != 0 or "ok" not in r.stdout:
        raise _AgentBroke(f"the verifier could not restore the test files: {r.status_line()}: "
                          f"{r.stderr.strip()[-300:]}")


@dataclass
class TestRun:
    outcomes: dict[str, str] | None      # None: the report could not be read (error says why)
    messages: dict[str, str]
    status: str
    duration_s: float
    error: str = ""


def run_tests(session: Session, repo_dir: str, spec: codeenv.EnvSpec, files: list[str], timeout_s: float,
              work: str, extra_paths: list[str] = (), plugin_names: list[str] = ()) -> TestRun:
    """Run the test `files` once in the session's repository and parse the runner's JUnit report."""
    report = f"{work}/report-{secrets.token_hex(4)}.xml"
    cmd = f"cd {repo_dir} && " + codeenv.test_command(spec, files, session.path_of(report), extra_paths=extra_paths,
                                                      plugin_names=plugin_names)
    r = session.exec(cmd, timeout_s=timeout_s, kill_others=True)
    status = r.status_line()
    try:
        raw = session.read_file(report, limit=REPORT_LIMIT)
    except SandboxError as exc:
        if r.timed_out:   # the tests did not finish: none of them passed
            return TestRun({}, {}, status, r.duration_s, "")
        return TestRun(None, {}, status, r.duration_s,
                       f"the test runner wrote no report ({status}; {exc}): {r.stderr.strip()[-300:]}")
    if r.timed_out:
        return TestRun({}, {}, status, r.duration_s, "")
    try:
        rep = parse(raw)
    except JUnitError as exc:
        return TestRun(None, {}, status, r.duration_s, f"{exc} ({status})")
    return TestRun(rep.outcomes, {t: _message(m, rep.details.get(t, "")) for t, m in rep.messages.items()}, status,
                   r.duration_s)


def _message(message: str, detail: str) -> str:
    """The report's message, with the error line of the traceback when the message alone says little
    ("collection failure")."""
    errors = [line[1:].strip() for line in detail.splitlines() if line.startswith("E ")]
    if errors and errors[-1] not in message:
        return f"{message}: {errors[-1]}" if message else errors[-1]
    return message


def _env_paths(session: Session, spec: codeenv.EnvSpec, cache: Path) -> tuple[list[str], list[str]]:
    """(extra sys.path entries, pytest plug-ins) for a session: in Docker the image holds the environment;
    in the local sandbox its installed files on the host are put on sys.path."""
    root = codeenv.install(spec, cache) if spec.ecosystem == "python" else None
    names = codeenv.plugins(root) if root else []
    if session.kind == "local" and root is not None:
        return [str(root / "site"), str(root / "runner")], names
    return [], names


def verify(session: Session, spec: CodeSpec, worlds_dir: Path) -> dict[str, Any]:
    """The verifier phase (see the module docstring); the result checks read from `Context.extra`."""
    repo_git = Path(worlds_dir) / "git" / f"{spec.repo}.git"
    if not repo_git.exists():
        raise SandboxError(f"the world's repository {repo_git} is missing; re-run the world stage")
    session.exec("true", timeout_s=30, kill_others=True)          # every agent process dies now
    files = blobs(repo_git, spec.fix_commit, spec.restore)
    execs = executable(repo_git, spec.fix_commit, [p for p, b in files.items() if b is not None])
    repo_dir = f"$HOME/{shlex.quote(spec.repo)}"
    env = spec.env_spec
    extra, plugin_names = _env_paths(session, env, env_cache(worlds_dir))
    try:
        work = _workdir(session)
        apply_files(session, repo_dir, files, execs, CONFIG_NAMES, work)
        run = run_tests(session, repo_dir, env, list(spec.run), spec.timeout_s, work, extra, plugin_names)
    except _AgentBroke as exc:
        return {"ran": False, "error": "", "failed_setup": str(exc)[:500], "outcomes": {}}
    if run.outcomes is None:
        return {"ran": True, "error": run.error[:500], "outcomes": {}, "status": run.status}
    wanted = set(spec.fail_to_pass) | set(spec.pass_to_pass)
    return {"ran": True, "error": "", "status": run.status, "duration_s": run.duration_s,
            "outcomes": {t: run.outcomes.get(t, "missing") for t in sorted(wanted)},
            "collected": len(run.outcomes)}


# --- computing the test sets of a candidate --------------------------------------------------------------------


@dataclass
class Measure:
    before: list[dict[str, str]]          # per run: test id -> outcome (parent + the fix's test files)
    after: list[dict[str, str]]           # per run: with the whole fix
    messages: dict[str, str]              # test id -> failure message in the first run before the fix
    error: str = ""                       # why the runs could not be read (a report missing or broken)
    seconds: float = 0.0
    after_messages: dict[str, str] = field(default_factory=dict)   # ... in the first run after it

    def to_json(self) -> dict:
        return {"before": self.before, "after": self.after, "messages": self.messages, "error": self.error,
                "seconds": self.seconds, "after_messages": self.after_messages}

    @classmethod
    def from_json(cls, d: dict) -> Measure:
        return cls(d["before"], d["after"], d.get("messages") or {}, d.get("error") or "", d.get("seconds") or 0.0,
                   d.get("after_messages") or {})


def measure(sandbox: Sandbox, image: str | None, tree: Path, slug: str, env: codeenv.EnvSpec, cache: Path,
            before: dict[str, bytes | None], after: dict[str, bytes | None], run: list[str], *,
            execs: set[str] = frozenset(), repeats: int = 3, timeout_s: float = DEFAULT_TIMEOUT_S) -> Measure:
    """Run the test modules `run` `repeats` times on `tree` (the parent commit's files, a host folder) with
    `before` written over it (the fix's test files and runner config), then `repeats` times with `after`
    too (the rest of the fix)."""
    import time

    started = time.monotonic()
    deadline = (timeout_s + 60) * repeats * 2 + 300
    with sandbox.session(image=image, mounts=(Mount(tree, "/src"),), deadline_s=deadline) as s:
        repo_dir = f"$HOME/{shlex.quote(slug)}"
        r = s.exec(f"mkdir -p {repo_dir} && cp -R {shlex.quote(s.path_of('/src'))}/. {repo_dir}/",
                   timeout_s=300, kill_others=True)
        if r.exit_code != 0:
            raise SandboxError(f"could not copy the repository into the session: {r.status_line()}: "
                               f"{r.stderr.strip()[-200:]}")
        if env.ecosystem == "node" and s.exec("command -v node", timeout_s=30).exit_code != 0:
            raise SandboxError("the sandbox has no Node.js (the base image is Python only): set "
                               "TASKMINE_BASE_IMAGE to an image of it with node, or leave the family off")
        extra, plugin_names = _env_paths(s, env, cache)
        work = _workdir(s)
        runs: dict[str, list[dict[str, str]]] = {"before": [], "after": []}
        messages: dict[str, dict[str, str]] = {"before": {}, "after": {}}
        # one run before and one after first: no test that fails before and passes after ends it there
        plan = [("before", before, CONFIG_NAMES), ("after", after, ())] + \
            [("before", before, CONFIG_NAMES), ("after", after, ())] * (repeats - 1)
        for i, (phase, files, prune) in enumerate(plan):
            if i == 2 and not classify(runs["before"], runs["after"]).fail_to_pass:
                break
            apply_files(s, repo_dir, files, execs, prune, work)
            t = run_tests(s, repo_dir, env, run, timeout_s, work, extra, plugin_names)
            error = t.error or (f"the tests did not finish within {timeout_s:g}s" if "timed out" in t.status else "")
            if t.outcomes is None or error:
                return Measure(runs["before"], runs["after"], messages["before"], f"{phase} the fix: {error}",
                               round(time.monotonic() - started, 3), messages["after"])
            if not runs[phase]:
                messages[phase] = dict(t.messages)
            runs[phase].append(t.outcomes)
    return Measure(runs["before"], runs["after"], messages["before"], "", round(time.monotonic() - started, 3),
                   messages["after"])


@dataclass(frozen=True)
class TestSets:
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    flaky: list[str]
    broken: list[str]          # passed before the fix and not after (left out, counted)


def classify(before: list[dict[str, str]], after: list[dict[str, str]]) -> TestSets:
    """FAIL_TO_PASS: not passed in every run before and passed in every run after; PASS_TO_PASS: passed in
    every run of both; a test whose result varies within either phase is flaky and in neither. A test absent
    from a run did not pass in it. Collection errors (ids without `::`) are never tests of either list."""
    ids = sorted({t for run in before + after for t in run if "::" in t})
    f2p, p2p, flaky, broken = [], [], [], []
    for t in ids:
        b = {run.get(t) == "passed" for run in before}
        a = {run.get(t) == "passed" for run in after}
        if len(b) > 1 or len(a) > 1:
            flaky.append(t)
        elif b == {False} and a == {True}:
            f2p.append(t)
        elif b == {True} and a == {True}:
            p2p.append(t)
        elif b == {True} and a == {False}:
            broken.append(t)
    return TestSets(f2p, p2p, flaky, broken)
