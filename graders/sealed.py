#!/usr/bin/env python3
"""The sealed runner: runs a task's test modules, each in a child process (graders.sealed_child), and decides
every test's outcome itself, from records the child's core signed, never from anything the repository's code
could write or print.

The verifier (graders.verifier) writes this file, the child's and a settings file into a fresh folder of the
session after the agent's processes are dead, and runs

    exec python3 -I -S -B <folder>/sealed.py <folder>/payload.json <repository>

Standalone (the standard library only): it runs inside the sandbox as the agent's uid (Docker, local, a Harbor
container). It never imports repository code. On its own stdout (which no child holds: the children's output
goes to a pipe this process drains) it prints one line, `TASKMINE-SEALED <sha256>`, the digest of the result
file it wrote last, once every process it started is dead.

For each test module:
1. every process this runner started is killed (it is the child subreaper: orphans come back to it);
2. the work tree is prepared (`prepare`): made writable, every test-runner configuration file (conftest.py,
   pytest.ini, tox.ini, setup.cfg, pyproject.toml, the Node runners') deleted anywhere in it, every
   `__pycache__` folder and compiled file (.pyc, .pyo) deleted, then the fix's test and configuration files
   written over whatever is there (a link or folder where a file belongs is removed first). Done again before
   every child: a child's code cannot leave files for the next one;
3. a child runs the module (`-I -S -B --check-hash-based-pycs always`, a clean environment, its own session),
   with a fresh key and the settings on one pipe and its records on another; pytest's configuration is the
   repository's own file found the way pytest finds it, never above the repository (`-c`, `--rootdir`,
   `--confcutdir`);
4. the records are checked (`Stream`): each must carry the key's HMAC and the next sequence number, else the
   stream is broken from there. A test passed only when the stream shows it collected, begun, its setup, call
   and teardown reports passed (not xfail), the sealed wrapper's `body ok` (its own function returned), and its
   `done` (the integrity check after it found nothing);
5. a child that stops before its `end` record (it exited, crashed, was killed, tampered, broke the stream,
   timed out) leaves the tests it finished as they are, fails the test it was running with the reason, and
   the module's remaining tests run in a fresh child (`--deselect` the others), as long as each child makes
   progress.

A dataset's own test command (`[families.code_change] test`, e.g. a Node runner) runs the same way (steps 1-2,
then the command with $TASKMINE_JUNIT and $TASKMINE_TESTS, its JUnit report read back by the verifier): its report
is only as trustworthy as that runner; the Python path above is the one that resists the repository's code.
"""

import ast
import base64
import ctypes
import hashlib
import hmac
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time

MARK = "TASKMINE-SEALED"
PY_CONFIG = ("conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
INI_ORDER = (("pytest.ini", None), (".pytest.ini", None), ("pyproject.toml", "[tool.pytest"),
             ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))
TAIL = 16 << 10
TAMPER_EXIT = 86
MAX_CHILDREN = 64
KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "TASKMINE_WORLD", "TZ")


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# --- the work tree ------------------------------------------------------------------------------------------


def _clear(p: str) -> None:
    if os.path.islink(p) or (os.path.lexists(p) and not os.path.isdir(p)):
        os.unlink(p)
    elif os.path.isdir(p):
        shutil.rmtree(p, ignore_errors=True)


def prepare(repo: str, files: dict, prune=(), compiled: bool = True) -> None:
    """Make `repo` the tree the tests run in: writable, the `prune` names and compiled files deleted anywhere in
    it, then `files` (path -> {"b64", "exec"} or None: delete) written. Paths outside the tree, absolute paths and
    `.git` are never written."""
    if os.path.islink(repo) or (os.path.lexists(repo) and not os.path.isdir(repo)):
        os.unlink(repo)
    os.makedirs(repo, exist_ok=True)
    prune = set(prune)
    for d, dirs, names in os.walk(repo):
        try:
            os.chmod(d, 0o755)
        except OSError:
            pass
        keep = []
        for x in dirs:
            p = os.path.join(d, x)
            if os.path.islink(p):
                if x in prune or (compiled and x == "__pycache__"):
                    os.unlink(p)
                continue
            if compiled and x == "__pycache__":
                shutil.rmtree(p, ignore_errors=True)
                continue
            if x in (".git", "node_modules"):
                continue
            keep.append(x)
        dirs[:] = keep
        for name in names:
            p = os.path.join(d, name)
            if name in prune or (compiled and name.endswith((".pyc", ".pyo"))):
                _clear(p)
                continue
            if not os.path.islink(p):
                try:
                    os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IRUSR)
                except OSError:
                    pass
    for rel, content in sorted(files.items()):
        parts = rel.split("/")
        if rel.startswith("/") or ".." in parts or ".git" in parts:
            continue
        cur = repo
        for part in parts[:-1]:
            cur = os.path.join(cur, part)
            if os.path.islink(cur) or (os.path.lexists(cur) and not os.path.isdir(cur)):
                _clear(cur)
            if not os.path.isdir(cur):
                if content is None:
                    break
                os.mkdir(cur)
        else:
            target = os.path.join(repo, rel)
            _clear(target)
            if content is not None:
                with open(target, "wb") as f:
                    f.write(base64.b64decode(content["b64"]))
                if content.get("exec"):
                    os.chmod(target, 0o755)


def inifile(repo: str, module: str) -> str | None:
    """The configuration file pytest would read for `module`: the first folder from the module's up to the
    repository's root holding a file with a pytest section (pytest.ini always counts)."""
    d = os.path.dirname(os.path.join(repo, module))
    root = os.path.abspath(repo)
    while True:
        for name, section in INI_ORDER:
            p = os.path.join(d, name)
            if os.path.isfile(p) and not os.path.islink(p):
                if section is None:
                    return p
                try:
                    with open(p, encoding="utf-8", errors="replace") as f:
                        if section in f.read():
                            return p
                except OSError:
                    pass
        if os.path.abspath(d) == root or len(d) <= len(root):
            return None
        d = os.path.dirname(d)


# --- processes ----------------------------------------------------------------------------------------------


def _children() -> list[int]:
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat_line = f.read().decode(errors="replace")
            ppid = int(stat_line[stat_line.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            out.append(int(entry))
    return out


def kill_descendants() -> None:
    """SIGKILL every process this runner started, and reap them: as the child subreaper it gets every orphan of
    its descendants back, so a process that left its session or double-forked is found too."""
    for _ in range(200):
        kids = _children()
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.01)
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break


def _clean_env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k in KEEP_ENV}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    env.update(extra)
    return env


class Run:
    """One child: its exit status, its record lines, its output's tail, whether it timed out."""

    def __init__(self):
        self.lines: list[bytes] = []
        self.output = b""
        self.status: int | None = None
        self.timed_out = False


def run_child(argv: list[str], cwd: str, env: dict, settings: bytes | None, deadline: float) -> Run:
    """Start argv (its records on the fd given as its last argument when `settings` is given), feed it the
    settings, drain its records and output until it ends or the deadline passes, then kill every descendant."""
    run = Run()
    fds = []
    rec_r = rec_w = set_r = set_w = None
    if settings is not None:
        set_r, set_w = os.pipe()
        rec_r, rec_w = os.pipe()
        argv = [*argv, str(set_r), str(rec_w)]
        fds = [set_r, rec_w]
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, pass_fds=fds, start_new_session=True)
    except OSError as exc:
        for fd in (set_r, set_w, rec_r, rec_w):
            if fd is not None:
                os.close(fd)
        run.output = f"could not start the test process: {exc}".encode()
        return run
    out_fd = proc.stdout.fileno()
    open_fds = {out_fd: "out"}
    if settings is not None:
        os.close(set_r)
        os.close(rec_w)
        open_fds[rec_r] = "rec"
        os.set_blocking(set_w, False)
    pending = settings or b""
    buf = b""
    ended_at = None
    while open_fds or proc.poll() is None:
        now = time.monotonic()
        if now >= deadline:
            run.timed_out = True
            break
        if proc.poll() is not None and rec_r not in open_fds:
            ended_at = ended_at or now
            if now - ended_at > 2:      # a process it left holds the output pipe: it dies below
                break
        wfds = [set_w] if pending and set_w is not None else []
        r, w, _ = select.select(list(open_fds), wfds, [], min(0.5, deadline - now))
        if w:
            try:
                n = os.write(set_w, pending[:1 << 16])
                pending = pending[n:]
            except BlockingIOError:
                pass
            except OSError:
                pending = b""
            if not pending:
                os.close(set_w)
                set_w = None
        elif set_w is not None and not pending:
            os.close(set_w)
            set_w = None
        for fd in r:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                del open_fds[fd]
                if fd != out_fd:
                    os.close(fd)
                continue
            if open_fds[fd] == "out":
                run.output = (run.output + chunk)[-TAIL:]
            else:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                run.lines += lines
        if not open_fds and proc.poll() is None:
            time.sleep(0.01)
    if set_w is not None:
        os.close(set_w)
    for fd in list(open_fds):
        if fd != out_fd:
            os.close(fd)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    kill_descendants()
    proc.stdout.close()
    if proc.returncode is None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    run.status = proc.returncode
    if buf:
        run.lines.append(buf)
    return run


# --- the records ----------------------------------------------------------------------------------------------


class Stream:
    """The checked records of one child (see the module docstring)."""

    def __init__(self, key: bytes, lines: list[bytes]):
        self.records: list[tuple] = []
        self.broken = ""
        self.end = ""
        for i, line in enumerate(lines):
            text, sep, mac = line.rpartition(b"\t")
            want = hmac.new(key, text, "sha256").hexdigest().encode()
            if not sep or not hmac.compare_digest(mac, want):
                self.broken = f"record {i} does not carry the key's signature"
                break
            try:
                rec = ast.literal_eval(text.decode("utf-8"))
            except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
                self.broken = f"record {i} cannot be read"
                break
            if not isinstance(rec, tuple) or len(rec) < 2 or rec[0] != i:
                self.broken = f"record {i} is out of sequence"
                break
            self.records.append(rec[1:])


class Module:
    """What the children said about one module's tests."""

    def __init__(self, module: str):
        self.module = module
        self.collected: list[str] | None = None
        self.final: dict[str, tuple[str, str]] = {}     # test id -> (outcome, message)
        self.collect_errors: dict[str, str] = {}
        self.notes: list[str] = []

    def absorb(self, stream: Stream, run: Run) -> tuple[bool, bool]:
        """Fold one child's records in; (complete, progressed)."""
        begun: str | None = None
        reports: dict[str, list] = {}
        bodies: dict[str, list[str]] = {}
        ended = False
        reason = ""
        before = len(self.final)
        for kind, *fields in stream.records:
            if kind == "collected":
                if self.collected is None:
                    self.collected = list(fields[0])
            elif kind == "collecterror":
                self.collect_errors[fields[0]] = fields[1]
            elif kind == "begin":
                if fields[0] in self.final or fields[0] in reports:
                    reason = f"tampering: {fields[0]} begun twice"
                    break
                begun = fields[0]
                reports[begun], bodies[begun] = [], []
            elif kind == "report":
                reports.setdefault(fields[0], []).append(fields[1:])
            elif kind == "body":
                bodies.setdefault(fields[0], []).append(fields[1])
            elif kind == "done":
                t = fields[0]
                self.final[t] = judge(reports.get(t, []), bodies.get(t, []))
                begun = None
            elif kind == "tamper":
                reason = f"tampering: {fields[0]}"
                break
            elif kind == "end":
                ended = True
                stream.end = fields[0] if fields else ""
        if not ended:
            if not reason:
                reason = stream.broken or ("timed out" if run.timed_out else
                                           f"the test process ended without finishing (exit status {run.status})")
            if begun is not None and begun not in self.final:
                self.final[begun] = ("failed" if reason != "timed out" else "failed", reason[:2000])
            self.notes.append(f"{self.module}: {reason}")
        return ended, len(self.final) > before


def judge(reports: list, bodies: list[str]) -> tuple[str, str]:
    """A test's outcome from its reports and its wrapper's body records."""
    message = ""
    outcome = None
    for when, result, wasxfail, msg in reports:
        if result == "failed":
            outcome = outcome or ("failed" if when == "call" else "error")
            message = message or msg
        elif (result == "skipped" or wasxfail) and outcome is None:
            outcome = "skipped"
    if outcome is not None:
        return outcome, message
    phases = {r[0] for r in reports if r[1] == "passed"}
    if not {"setup", "call", "teardown"} <= phases:
        return "failed", "the test's setup, call or teardown was not reported"
    if not bodies:
        return "failed", "the test function did not run under the sealed runner's wrapper"
    if all(b == "ok" for b in bodies):
        return "passed", ""
    bad = next(b for b in bodies if b != "ok")
    if bad == "raised":
        return "failed", "the test function raised although its report said it passed"
    return "failed", f"the test function could not be verified: {bad[12:]}"


def junit_id(nodeid: str) -> str:
    """A pytest node id as the JUnit-based ids were written (`file::Outer.Inner::name`)."""
    head, bracket, params = nodeid.partition("[")
    parts = head.split("::")
    if len(parts) > 3:
        parts = [parts[0], ".".join(parts[1:-1]), parts[-1]]
    return "::".join(parts) + bracket + params


# --- the run ------------------------------------------------------------------------------------------------


def run_module(p: dict, repo: str, module: str, child_src: str, deadline: float) -> Module:
    mod = Module(module)
    deselect: list[str] = []
    for _ in range(MAX_CHILDREN):
        kill_descendants()
        prepare(repo, p.get("files") or {}, p.get("prune") or ())
        key = os.urandom(32)
        ini = inifile(repo, module)
        args = ["-p", "no:cacheprovider", "-q", "-rN", "--tb=short", "--rootdir", repo, "--confcutdir", repo,
                "-c", ini or os.devnull]
        for name in p.get("plugins") or ():
            args += ["-p", name]
        for nodeid in deselect:
            args += ["--deselect", nodeid]
        args.append(module)
        settings = {"repo": repo, "site_dirs": p.get("site_dirs") or [], "plugins": p.get("plugins") or [],
                    "runner_names": p.get("runner_names") or [], "base": p.get("base") or [],
                    "test_files": p.get("test_files") or [], "memory": p.get("memory"),
                    "thread_stack": p.get("thread_stack"), "per_test_s": p.get("per_test_s") or 20,
                    "pytest_args": args}
        argv = [p.get("python") or "python3", "-I", "-S", "-B", "--check-hash-based-pycs", "always", "-c", child_src]
        run = run_child(argv, repo, _clean_env({}), key.hex().encode() + b"\n" + json.dumps(settings).encode(),
                        deadline)
        stream = Stream(key, run.lines)
        if p.get("debug"):
            mod.notes.append(f"records: {stream.records!r}"[:4000] + f" output: {run.output[-2000:]!r}")
        complete, progressed = mod.absorb(stream, run)
        if complete or run.timed_out or mod.collected is None or not progressed:
            if complete and not mod.collected and not mod.collect_errors:
                mod.collect_errors[module] = f"the tests were never collected (pytest ended with {stream.end})"
            if not complete and mod.collected is None:
                why = mod.notes[-1] if mod.notes else "the test process ended before collecting"
                tail = run.output.decode("utf-8", "replace").strip()[-1500:]
                mod.collect_errors.setdefault(module, f"{why}: {tail}" if tail else why)
            break
        deselect = sorted(set(mod.final))
    return mod


def run_command(p: dict, repo: str, work: str, deadline: float) -> dict:
    """A dataset's own test command: its JUnit report's bytes (base64), read after every process it left is dead."""
    prepare(repo, p.get("files") or {}, p.get("prune") or ())
    out_dir = os.path.join(work, f"junit-{os.urandom(6).hex()}")
    os.mkdir(out_dir, 0o700)
    report = os.path.join(out_dir, "report.xml")
    env = _clean_env({"TASKMINE_JUNIT": report, "TASKMINE_TESTS": " ".join(p.get("modules") or []),
                      "NODE_PATH": p.get("node_path") or "", "PYTEST_ADDOPTS": "", "PYTEST_PLUGINS": ""})
    run = run_child(["sh", "-c", p["command"]], repo, env, None, deadline)
    data = b""
    try:
        fd = os.open(report, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                while len(data) <= (32 << 20):
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    data += chunk
        finally:
            os.close(fd)
    except OSError:
        pass
    return {"junit_b64": base64.b64encode(data).decode(), "timed_out": run.timed_out, "status": run.status,
            "output": run.output.decode("utf-8", "replace")[-2000:]}


def main(argv: list[str]) -> int:
    _prctl(4, 0)      # PR_SET_DUMPABLE 0: the children cannot read this process's memory or file descriptors
    _prctl(36, 1)     # PR_SET_CHILD_SUBREAPER: every orphan of a child comes back to this process
    payload_path, repo = argv[0], os.path.abspath(argv[1])
    with open(payload_path, "rb") as f:
        p = json.loads(f.read())
    work = os.path.dirname(os.path.abspath(payload_path))
    started = time.monotonic()
    deadline = started + float(p.get("timeout_s") or 300)
    result: dict = {"outcomes": {}, "messages": {}, "notes": [], "timed_out": False}
    if p.get("command"):
        result.update(run_command(p, repo, work, deadline))
    else:
        with open(os.path.join(work, "sealed_child.py"), encoding="utf-8") as f:
            child_src = f.read()
        for module in p.get("modules") or []:
            if time.monotonic() >= deadline:
                result["timed_out"] = True
                result["notes"].append(f"{module}: not run (the time was up)")
                continue
            mod = run_module(p, repo, module, child_src, deadline)
            for t, (outcome, message) in mod.final.items():
                result["outcomes"][junit_id(t)] = outcome
                if message:
                    result["messages"][junit_id(t)] = message
            for t, message in mod.collect_errors.items():
                result["outcomes"][t] = "error"
                result["messages"][t] = message
            result["notes"] += mod.notes
            if time.monotonic() >= deadline:
                result["timed_out"] = True
    kill_descendants()
    result["duration_s"] = round(time.monotonic() - started, 3)
    data = json.dumps(result, sort_keys=True).encode()
    out = os.path.join(work, "result.json")
    tmp = f"{out}.{os.getpid()}"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    kill_descendants()
    sys.stdout.write(f"{MARK} {hashlib.sha256(data).hexdigest()}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
