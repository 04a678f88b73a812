"""The verifier phase of code-change tasks: after the agent, in the same sandbox session, the hidden tests, run
by the sealed runner (graders.sealed and graders.sealed_child), whose verdict the agent's code cannot produce.

Sequence (`verify`), each step on the host's initiative, none visible to the agent:
1. every process of the session but PID 1 is killed (`Session.exec(..., kill_others=True)`): nothing the
   agent started can watch or race what follows;
2. a fresh folder under /tmp, named now, receives the runner, its child and a payload: the fix's test files and
   the fix's versions of the test-runner configuration files (from the world's repository on the host, at the
   fix commit: they never existed in the session before this step), the modules to run, the environment's
   site folders and plug-ins, and the paths of the base commit (a file that shadows a module of the standard
   library or of the runner is honoured only when it was already there);
3. the runner (graders.sealed) prepares the work tree before each test module (runner configuration deleted
   anywhere in it, compiled files deleted, the fix's files written over whatever the agent left) and runs the
   module in a child whose outcomes leave it signed by a core installed before the repository's first byte runs
   (graders.sealed_child: an import guard against shadowing, start-up hooks ignored, the verdict taken from the
   test function's own return and an integrity check of the runner after each test, never from pytest's
   report alone); the runner writes one result file and prints its digest on a stdout no test process holds;
4. the result is read back and checked against the digest; FAIL_TO_PASS and PASS_TO_PASS outcomes go to the grade
   through `Context.extra["verifier"]`, read by the checks `tests_resolved` (all or nothing) and
   `tests_fraction`.

`measure` runs the same runner to compute a candidate's test sets: the parent commit with the fix's test files
applied (what doing nothing leaves the verifier), then with the whole fix, alternating, `repeats` times each
(after the first pair, only when some test failed before and passed after); `classify` turns the runs into
FAIL_TO_PASS, PASS_TO_PASS and the flaky tests left out. Tests that do not finish within the timeout make the
candidate unmeasurable (a timeout would otherwise count every test as failing).

Invariants:
- A test missing from the result (not collected, its module failed to import, its process ended or tampered,
  the run timed out) did not pass.
- A run that leaves no readable result (the runner was killed, its result does not match the digest it
  printed, a dataset command's JUnit report is broken) is `no_report`: graders.replay scores it 0 when the
  oracle's run of the same verifier produces one, and counts it as an infrastructure failure otherwise (a policy
  cannot turn a 0 into a grader error at will).
- The verifier writes only inside the repository and a fresh folder under /tmp whose name is drawn after the
  agent's processes are dead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import shlex
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environments import codeenv
from environments.docker_cli import SandboxError
from environments.sandbox import Mount, Sandbox, Session
from graders import sealed
from graders.junit import JUnitError, parse
from warehouse.ids import content_hash

PY_CONFIG = ("conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
NODE_CONFIG = ("package.json", "jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs",
               ".mocharc.js", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml", "vitest.config.js",
               "vitest.config.ts", "babel.config.js", ".babelrc")
CONFIG_NAMES = PY_CONFIG + NODE_CONFIG
DEFAULT_TIMEOUT_S = 300.0
REPORT_LIMIT = 32 << 20

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


def files_json(files: dict[str, bytes | None], execs: set[str] = frozenset()) -> dict:
    """The runner's form of the files it writes over the work tree (None: delete)."""
    return {p: None if b is None else {"b64": base64.b64encode(b).decode(), "exec": p in execs}
            for p, b in files.items()}


def tree_paths(repo: Path, commit: str) -> list[str] | None:
    """Every file and folder (`dir/`) of `commit` in a host repository, None when the commit is not there."""
    proc = subprocess.run(["git", "-C", str(repo), "-c", "safe.directory=*", "ls-tree", "-r", "-z", "--name-only",
                           commit], capture_output=True)
    if proc.returncode != 0:
        return None
    return _with_dirs(p.decode("utf-8", "surrogateescape") for p in proc.stdout.split(b"\0") if p)


def _with_dirs(files: Iterable[str]) -> list[str]:
    out = set()
    for f in files:
        out.add(f)
        parts = f.split("/")
        out.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
    return sorted(out)


def base_paths(worlds_dir: Path, repo_git: Path, base_commit: str) -> list[str]:
    """The base commit's paths (what may shadow a module because it was already there): from the world's
    repository, or from `code/base/<commit>.json` where an export left them (a Harbor task's tests folder holds
    a repository with the fix's test files only)."""
    found = tree_paths(repo_git, base_commit)
    if found is not None:
        return found
    stored = Path(worlds_dir) / "code" / "base" / f"{base_commit}.json"
    return json.loads(stored.read_text()) if stored.exists() else []


# --- steps in a session ---------------------------------------------------------------------------------------


WORKDIR_SHOWN = "/tmp/.taskmine-verify-…"   # the verifier's folder as messages show it (its name is random)


def _workdir(session: Session) -> str:
    """A fresh folder under /tmp, named now (after the agent's processes are dead)."""
    name = f"/tmp/.taskmine-verify-{secrets.token_hex(8)}"
    r = session.exec(f"mkdir -m 700 {shlex.quote(session.path_of(name))}", timeout_s=30, kill_others=True)
    if r.exit_code != 0:
        raise _AgentBroke(f"the verifier could not make its folder: {r.status_line()}: {r.stderr.strip()[-200:]}")
    return name


def _shown(session: Session, work: str, text: str) -> str:
    """`text` with the verifier's folder under one name: its real name is drawn per episode (the agent cannot
    guess it), and a validation's stored message must not change from run to run with it."""
    return text.replace(session.path_of(work), WORKDIR_SHOWN).replace(work, WORKDIR_SHOWN)


class _AgentBroke(Exception):
    """The agent left the session in a state the verifier cannot work in (a full disk, ...): the agent's
    failure, scored 0 with this message."""


@dataclass
class TestRun:
    outcomes: dict[str, str] | None      # None: no readable result (error says why)
    messages: dict[str, str]
    status: str
    duration_s: float
    error: str = ""
    timed_out: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Setup:
    """Where the runner finds the environment in one session: its site folders (Docker: the image's; the local
    sandbox: the installed files on the host), the pytest plug-ins to load, the runner's own top-level names."""

    site_dirs: tuple[str, ...]
    plugins: tuple[str, ...]
    runner_names: tuple[str, ...]


def setup_for(session: Session, spec: codeenv.EnvSpec, cache: Path) -> Setup:
    root = codeenv.install(spec, cache) if spec.ecosystem == "python" else None
    names = tuple(codeenv.plugins(root)) if root else ()
    if session.kind == "local" and root is not None:
        dirs = (str(root / "site"), str(root / "runner"))
    else:
        dirs = (codeenv.SITE_DIR, codeenv.RUNNER_DIR)
    return Setup(dirs, names, tuple(codeenv.runner_top_level()))


def run_tests(session: Session, repo_dir: str, spec: codeenv.EnvSpec, files: dict[str, bytes | None],
              modules: list[str], timeout_s: float, work: str, setup: Setup, *, execs: set[str] = frozenset(),
              prune: Iterable[str] = (), base: list[str] = (), test_files: Iterable[str] = ()) -> TestRun:
    """Write `files` over the session's repository `repo_dir` (deleting the `prune` names first) and run the test
    `modules` once with the sealed runner (see the module docstring)."""
    body = {"files": files_json(files, set(execs)), "prune": sorted(prune), "modules": list(modules),
            "timeout_s": float(timeout_s), "per_test_s": codeenv.TEST_TIMEOUT_S, "memory": codeenv.TEST_MEMORY_BYTES,
            "thread_stack": codeenv.THREAD_STACK_BYTES, "site_dirs": list(setup.site_dirs),
            "plugins": list(setup.plugins), "runner_names": list(setup.runner_names), "base": list(base),
            "test_files": sorted(set(test_files) | set(files)), "python": "python3"}
    if spec.test_command:
        body.update({"command": spec.test_command, "node_path": f"{codeenv.NODE_DIR}/node_modules"})
    try:
        for name, data in (("sealed.py", RUNNER_SOURCE()), ("sealed_child.py", CHILD_SOURCE()),
                           ("payload.json", json.dumps(body).encode())):
            session.write_file(f"{work}/{name}", data, 0o600)
    except SandboxError as exc:
        raise _AgentBroke(f"the verifier could not write its files: {exc}") from None
    cmd = (f"exec python3 -I -S -B {shlex.quote(session.path_of(work + '/sealed.py'))} "
           f"{shlex.quote(session.path_of(work + '/payload.json'))} {repo_dir}")
    r = session.exec(cmd, timeout_s=timeout_s + 120, kill_others=True)
    status = r.status_line()
    lines = [x for x in r.stdout.splitlines() if x.startswith(sealed.MARK + " ")]
    if not lines:
        # the folder's name is drawn per episode (the agent cannot guess it): not in what a validation stores
        said = _shown(session, work, r.stderr or r.stdout)
        return TestRun(None, {}, status, r.duration_s, f"the sealed runner left no result ({status}): "
                                                       f"{said.strip()[-300:]}")
    digest = lines[-1].split()[1]
    try:
        raw = session.read_file(f"{work}/result.json", limit=REPORT_LIMIT)
    except SandboxError as exc:
        return TestRun(None, {}, status, r.duration_s,
                       f"the sealed runner's result cannot be read: {_shown(session, work, str(exc))}")
    if hashlib.sha256(raw).hexdigest() != digest:
        return TestRun(None, {}, status, r.duration_s, "the sealed runner's result is not the one it wrote")
    result = json.loads(raw)
    if spec.test_command:
        try:
            rep = parse(base64.b64decode(result.get("junit_b64") or ""))
        except JUnitError as exc:
            if result.get("timed_out"):
                return TestRun({}, {}, status, r.duration_s, timed_out=True)
            return TestRun(None, {}, status, r.duration_s, f"{exc} ({result.get('status')}): "
                                                           f"{result.get('output', '')[-200:]}")
        return TestRun(rep.outcomes, {t: _message(m, rep.details.get(t, "")) for t, m in rep.messages.items()},
                       status, r.duration_s, timed_out=bool(result.get("timed_out")))
    return TestRun(dict(result.get("outcomes") or {}), dict(result.get("messages") or {}), status,
                   float(result.get("duration_s") or r.duration_s), timed_out=bool(result.get("timed_out")),
                   notes=list(result.get("notes") or []))


def _message(message: str, detail: str) -> str:
    """The report's message, with the error line of the traceback when the message alone says little
    ("collection failure")."""
    errors = [line[1:].strip() for line in detail.splitlines() if line.startswith("E ")]
    if errors and errors[-1] not in message:
        return f"{message}: {errors[-1]}" if message else errors[-1]
    return message


def _source(name: str):
    """The bytes of one of the runner's files (read once: they are written into every verifier session)."""
    cache: list[bytes] = []

    def read() -> bytes:
        if not cache:
            cache.append((Path(__file__).parent / name).read_bytes())
        return cache[0]
    return read


RUNNER_SOURCE = _source("sealed.py")
CHILD_SOURCE = _source("sealed_child.py")


def runner_recipe() -> str:
    """What decides how tests are run (the sealed runner's code, the limits, the runner's versions): part of
    every cached measurement's key."""
    return content_hash("sealed-runner", hashlib.sha256(RUNNER_SOURCE() + CHILD_SOURCE()).hexdigest(),
                        codeenv.runner_recipe())[:16]


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
    setup = setup_for(session, env, env_cache(worlds_dir))
    try:
        work = _workdir(session)
        run = run_tests(session, repo_dir, env, files, list(spec.run), spec.timeout_s, work, setup, execs=execs,
                        prune=CONFIG_NAMES, base=base_paths(worlds_dir, repo_git, spec.base_commit),
                        test_files=spec.restore)
    except _AgentBroke as exc:
        return {"ran": False, "error": "", "failed_setup": str(exc)[:500], "outcomes": {}}
    if run.outcomes is None:
        return {"ran": True, "error": "", "no_report": run.error[:500], "outcomes": {}, "status": run.status}
    wanted = set(spec.fail_to_pass) | set(spec.pass_to_pass)
    out = {"ran": True, "error": "", "status": run.status, "duration_s": run.duration_s,
           "outcomes": {t: run.outcomes.get(t, "missing") for t in sorted(wanted)},
           "collected": len(run.outcomes)}
    if run.notes:
        out["notes"] = run.notes[:20]
    return out


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
            execs: set[str] = frozenset(), repeats: int = 3, timeout_s: float = DEFAULT_TIMEOUT_S,
            restore: Iterable[str] = ()) -> Measure:
    """Run the test modules `run` `repeats` times on `tree` (the parent commit's files, a host folder) with
    `before` written over it (the fix's test files and runner config), then `repeats` times with `after`
    too (the rest of the fix)."""
    started = time.monotonic()
    deadline = (timeout_s + 180) * repeats * 2 + 300
    base = _with_dirs(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() and ".git" not in p.parts)
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
        setup = setup_for(s, env, cache)
        runs: dict[str, list[dict[str, str]]] = {"before": [], "after": []}
        messages: dict[str, dict[str, str]] = {"before": {}, "after": {}}
        # one run before and one after first: no test that fails before and passes after ends it there
        plan = [("before", before, CONFIG_NAMES), ("after", after, ())] + \
            [("before", before, CONFIG_NAMES), ("after", after, ())] * (repeats - 1)
        for i, (phase, files, prune) in enumerate(plan):
            if i == 2 and not classify(runs["before"], runs["after"]).fail_to_pass:
                break
            try:
                t = run_tests(s, repo_dir, env, files, run, timeout_s, _workdir(s), setup, execs=execs, prune=prune,
                              base=base, test_files=restore)
            except _AgentBroke as exc:
                raise SandboxError(str(exc)) from None
            error = t.error or (f"the tests did not finish within {timeout_s:g}s" if t.timed_out else "")
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
