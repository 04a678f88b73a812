"""Environments for code-change tasks: what a repository's tests need to run in the sandbox, built once per
(repository, dependency state) and shared by every task that needs the same.

- `detect` finds the ecosystem from the files at the repository root (Python: pyproject.toml, setup.cfg,
  setup.py, requirements*.txt, tox.ini; Node: package.json) and the dependencies the tests need (runtime
  dependencies plus the declared test extras, test requirement files and tox deps).
- `EnvSpec` is that dependency state plus what the dataset's taskmine.toml adds (install arguments, a test
  command, the interpreter version); its `key` names the environment, so tasks whose repositories declare
  the same dependencies share one image, whatever else changed between their commits.
- Dependencies are installed on the HOST, from the registries the host reaches (PyPI through
  `uv pip install --target`, for the image's interpreter and platform; npm through `npm install`), because
  containers have no network, and copied into an image `FROM` the project's base image (no registry is
  needed for `docker pull`). The test runner (pytest: it writes JUnit XML) is copied from the locked
  environment taskmine itself runs in, so a project with no dependency needs no network at all; a project
  that declares its own pytest gets its own (it comes first on sys.path).
- Images are `taskmine-env:<hash of key, base image, labels>`, labelled `taskmine.env=<key>`, `taskmine.home`
  and `taskmine.base`, so `prune_env_images` removes those no current task uses (a task names its
  environment by key in `world["env"]`; the tag is found again from the key wherever the task runs).
- The installed files are kept in the world's `envs/<key>` folder (under the TASKMINE_HOME that uses them),
  so a pruned image is rebuilt without the network, and the local sandbox runs the tests against them.

Invariants: nothing of a task's answer is in an environment (only dependencies and the runner); an
environment that cannot be built is a `SandboxError` with one line saying why (the family rejects the
candidates that need it with that reason).
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import threading
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from environments.docker_cli import SandboxError, current_host, docker, image_id, using
from environments.images import _locked, _normalized, _walk, stale_images
from warehouse.ids import content_hash

# CPython 3.11 before 3.11.8 (gh-106905) keeps the AST constructor's recursion depth in per-interpreter
# state, so two threads parsing at once raise "SystemError: AST constructor recursion depth mismatch".
# Code tasks are drafted on a thread pool; every parse of repository source goes through this one lock.
_AST_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """ast.parse under the process-wide lock (see above). Raises SyntaxError/ValueError as ast.parse does."""
    with _AST_LOCK:
        return ast.parse(source)


# The interpreter of the sandbox's base image (Debian bookworm's python3). Another version needs another
# base image: `python` of [families.code_change] in taskmine.toml is checked against this.
IMAGE_PYTHON = "3.11"
SITE_DIR = f"/usr/local/lib/python{IMAGE_PYTHON}/dist-packages"   # first on Debian's sys.path
RUNNER_DIR = "/usr/lib/python3/dist-packages"                      # after it: a project's own pytest wins
NODE_DIR = "/opt/taskmine/node"                                     # node_modules of a Node project
RUNNER_DISTS = ("pytest",)         # with what it requires (runner_dists)
PY_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "requirements.txt")
NODE_MARKERS = ("package.json",)
TEST_EXTRAS = ("test", "tests", "testing")
INSTALL_TIMEOUT_S = 1800

_REQ_FILE = re.compile(r"^(requirements[-_.]?(test|tests|testing)[^/]*\.txt|(test|tests|testing)[-_]requirements"
                       r"[^/]*\.txt|requirements/(test|tests|testing)[^/]*\.txt|requirements\.txt)$", re.I)


class EnvError(ValueError):
    """A dependency declaration we cannot read (one line: which file, what is wrong)."""


@dataclass(frozen=True)
class Detected:
    """What a repository's root says about how to run its tests."""

    ecosystem: str | None                   # "python" | "node" | None
    markers: tuple[str, ...] = ()           # the root files that decided it
    requirements: tuple[str, ...] = ()      # python: requirement lines; node: the manifest's digest
    sources: tuple[str, ...] = ()           # the files the requirements were read from
    reason: str = ""                        # why no ecosystem was found

    def to_json(self) -> dict:
        return {"ecosystem": self.ecosystem, "markers": list(self.markers), "requirements": list(self.requirements),
                "sources": list(self.sources)}


def detect(paths: Iterable[str], read: Callable[[str], bytes | None], prefer: str | None = None,
           requirement_files: Iterable[str] = ()) -> Detected:
    """The ecosystem of a repository whose files are `paths` (read through `read`). When both kinds of
    markers are present, `prefer` (the ecosystem of the files a change touched) decides. `requirement_files`
    (taskmine.toml `[families.code_change] requirements`) are read too when the repository has them."""
    paths = set(paths)
    root = {p for p in paths if "/" not in p}
    py = [m for m in PY_MARKERS if m in root] + sorted(p for p in root if re.match(r"requirements.*\.txt$", p))
    node = [m for m in NODE_MARKERS if m in root]
    if py and node:
        kind = prefer if prefer in ("python", "node") else "python"
    elif py or node:
        kind = "python" if py else "node"
    else:
        return Detected(None, reason="no pyproject.toml, setup.cfg, setup.py, requirements*.txt, tox.ini or "
                                     "package.json at the repository root")
    if kind == "node":
        return _node(paths, read)
    return _python(paths, read, tuple(dict.fromkeys(py)), tuple(requirement_files))


def _text(read: Callable[[str], bytes | None], path: str) -> str | None:
    data = read(path)
    return data.decode("utf-8", "replace") if data is not None else None


def _norm_req(line: str) -> str | None:
    """A requirement line as pip reads it, or None for what is not a requirement of the tests (comments,
    options, editable installs of the project itself)."""
    line = line.split(" #", 1)[0].strip()
    if not line or line.startswith("#"):
        return None
    if line.startswith(("-e", "--editable", "-c", "--constraint", "--index", "-i ", "--extra-index", "-f ",
                        "--find-links", "--hash", "--no-binary", "--only-binary", "--pre", "--trusted-host")):
        return None
    if line in (".", "./") or line.startswith((".[", "./", "file:")):
        return None
    return " ".join(line.split())


def _requirements_file(paths: set[str], read, path: str, seen: set[str]) -> list[str]:
    """Requirement lines of a requirements file, following -r/--requirement inside the repository."""
    if path in seen or path not in paths:
        return []
    seen.add(path)
    text = _text(read, path) or ""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r"^(?:-r|--requirement)[=\s]*(\S+)", line)
        if m:
            target = m.group(1).replace("{toxinidir}/", "")
            target = os.path.normpath(os.path.join(os.path.dirname(path), target)).lstrip("./") \
                if not target.startswith("/") else target
            out += _requirements_file(paths, read, target, seen)
            continue
        r = _norm_req(line)
        if r:
            out.append(r)
    return out


def _setup_py(text: str) -> list[str]:
    """install_requires / tests_require / extras_require[test] of a setup.py, when they are literals."""
    try:
        tree = parse_python(text)
    except SyntaxError:
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "setup"):
            continue
        for kw in node.keywords:
            with contextlib.suppress(ValueError, SyntaxError, TypeError):
                value = ast.literal_eval(kw.value)
                if kw.arg in ("install_requires", "tests_require") and isinstance(value, (list, tuple)):
                    out += [str(v) for v in value]
                elif kw.arg == "extras_require" and isinstance(value, dict):
                    for extra in TEST_EXTRAS:
                        out += [str(v) for v in value.get(extra, ())]
    return out


def _python(paths: set[str], read, markers: tuple[str, ...], extra_files: tuple[str, ...] = ()) -> Detected:
    reqs: list[str] = []
    sources: list[str] = []
    if "pyproject.toml" in paths:
        try:
            data = tomllib.loads(_text(read, "pyproject.toml") or "")
        except tomllib.TOMLDecodeError as exc:
            raise EnvError(f"pyproject.toml is not valid TOML ({exc})") from None
        project = data.get("project") or {}
        found = list(project.get("dependencies") or [])
        for extra in TEST_EXTRAS:
            found += list((project.get("optional-dependencies") or {}).get(extra) or [])
            found += [g for g in (data.get("dependency-groups") or {}).get(extra) or [] if isinstance(g, str)]
        if found:
            sources.append("pyproject.toml")
            reqs += found
    if "setup.cfg" in paths:
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read_string(_text(read, "setup.cfg") or "")
        except configparser.Error as exc:
            raise EnvError(f"setup.cfg cannot be read ({str(exc).splitlines()[0]})") from None
        found = []
        if cfg.has_option("options", "install_requires"):
            found += cfg.get("options", "install_requires").splitlines()
        if cfg.has_option("options", "tests_require"):
            found += cfg.get("options", "tests_require").splitlines()
        for extra in TEST_EXTRAS:
            if cfg.has_option("options.extras_require", extra):
                found += cfg.get("options.extras_require", extra).splitlines()
        if any(f.strip() for f in found):
            sources.append("setup.cfg")
            reqs += found
    if "setup.py" in paths:
        found = _setup_py(_text(read, "setup.py") or "")
        if found:
            sources.append("setup.py")
            reqs += found
    seen: set[str] = set()
    for path in sorted({p for p in paths if _REQ_FILE.match(p)} | {p for p in extra_files if p in paths}):
        found = _requirements_file(paths, read, path, seen)
        if found:
            sources.append(path)
            reqs += found
    if "tox.ini" in paths:
        cfg = configparser.ConfigParser(interpolation=None, strict=False)
        with contextlib.suppress(configparser.Error):
            cfg.read_string(_text(read, "tox.ini") or "")
            if cfg.has_option("testenv", "deps"):
                found = []
                for line in cfg.get("testenv", "deps").splitlines():
                    line = re.sub(r"^[\w,{}.-]+:\s*", "", line.strip()) if re.match(r"^[\w,{}-]+:\s", line.strip()) \
                        else line.strip()
                    m = re.match(r"^(?:-r|--requirement)\s*(\S+)", line)
                    if m:
                        found += _requirements_file(paths, read, m.group(1).replace("{toxinidir}/", ""), seen)
                    elif "{" not in line and (r := _norm_req(line)):
                        found.append(r)
                if found:
                    sources.append("tox.ini")
                    reqs += found
    clean = sorted({r for r in (_norm_req(x) for x in reqs) if r})
    return Detected("python", markers, tuple(clean), tuple(sources))


def _node(paths: set[str], read) -> Detected:
    try:
        manifest = json.loads(_text(read, "package.json") or "{}")
    except ValueError as exc:
        raise EnvError(f"package.json is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise EnvError("package.json is not a JSON object")
    deps = {k: manifest.get(k) or {} for k in ("dependencies", "devDependencies")}
    lock = next((p for p in ("package-lock.json", "npm-shrinkwrap.json") if p in paths), None)
    sources = ["package.json"] + ([lock] if lock else [])
    digest = content_hash("node-deps", deps, _text(read, lock) if lock else None)
    return Detected("node", ("package.json",), (f"node-deps:{digest}",), tuple(sources))


# --- the environment --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvSpec:
    """An environment: the dependency state plus the dataset's settings; `key` names it."""

    ecosystem: str
    requirements: tuple[str, ...] = ()
    install: tuple[str, ...] = ()      # extra arguments for the installer ([families.code_change] install)
    test_command: str = ""             # [families.code_change] test ("" = pytest with a JUnit report)
    python: str = IMAGE_PYTHON
    manifest: dict[str, str] = field(default_factory=dict)  # node: package.json (+ lock) as text

    def key(self) -> str:
        return content_hash("code-env/1", self.ecosystem, self.requirements, self.install, self.python,
                            self.manifest, runner_fingerprint() if self.ecosystem == "python" else "")[:24]

    def tag(self, base_id: str, labels: dict[str, str] | None = None) -> str:
        """The image's tag on one base image with one set of labels (the home that built it: each home
        prunes its own images, as with task images)."""
        return f"taskmine-env:{content_hash('env-image/1', self.key(), base_id, sorted((labels or {}).items()))[:16]}"

    def to_json(self) -> dict:
        return {"key": self.key(), "ecosystem": self.ecosystem,
                "requirements": list(self.requirements), "install": list(self.install),
                "test_command": self.test_command, "python": self.python, "manifest": dict(self.manifest)}

    @classmethod
    def from_json(cls, data: dict) -> EnvSpec:
        return cls(ecosystem=data["ecosystem"], requirements=tuple(data.get("requirements") or ()),
                   install=tuple(data.get("install") or ()), test_command=data.get("test_command") or "",
                   python=data.get("python") or IMAGE_PYTHON, manifest=dict(data.get("manifest") or {}))


def runner_dists() -> list[str]:
    """pytest and every distribution it requires (markers evaluated here, extras left out), by name."""
    # packaging comes with pip, not a declared dependency: only for requirement files
    from packaging.requirements import Requirement

    out: dict[str, None] = {}
    todo = list(RUNNER_DISTS)
    while todo:
        name = todo.pop(0)
        key = name.lower().replace("_", "-")
        if key in out:
            continue
        out[key] = None
        for line in metadata.requires(name) or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(out)


def runner_top_level() -> list[str]:
    """The top-level modules the runner's distributions provide (pytest, _pytest, py, pluggy, ...): a file of the
    repository never stands in for them (graders.sealed_child)."""
    out: set[str] = set()
    for name in runner_dists():
        for f in metadata.distribution(name).files or ():
            top = str(f).split("/", 1)[0]
            if top.endswith(".py"):
                out.add(top[:-3])
            elif "." not in top and top != "__pycache__":
                out.add(top)
    return sorted(out)


def runner_fingerprint() -> str:
    """The versions of the test runner copied into every Python environment (part of its key)."""
    return ",".join(f"{d}=={metadata.version(d)}" for d in runner_dists())


def env_root(spec: EnvSpec, cache: Path) -> Path:
    """Where an environment's installed files live under `cache` (a world's `envs` folder: inside the
    TASKMINE_HOME that uses them, like every cache taskmine writes)."""
    return Path(cache) / spec.key()


def _platform() -> str:
    machine = os.uname().machine
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(machine)
    if arch is None:
        raise SandboxError(f"no manylinux platform for this machine ({machine}); install dependencies by hand")
    return f"{arch}-manylinux_2_36"   # Debian bookworm's glibc


def _run(cmd: list[str], what: str, cwd: Path | None = None, env: dict | None = None) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", cwd=cwd, timeout=INSTALL_TIMEOUT_S,
                              env={**os.environ, **(env or {})})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"could not {what}: {exc}") from None
    if proc.returncode != 0:
        tail = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        raise SandboxError(f"could not {what} (exit {proc.returncode}): {' | '.join(tail[-3:])[:400]}")


def install_runner(dest: Path) -> None:
    """Copy the test runner (pytest and what it imports) from the environment taskmine runs in."""
    for name in runner_dists():
        dist = metadata.distribution(name)
        for f in dist.files or ():
            rel = Path(str(f))
            if rel.is_absolute() or ".." in rel.parts or "__pycache__" in rel.parts or rel.suffix == ".pyc":
                continue
            src = Path(dist.locate_file(f))
            if src.is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest / rel)


def install(spec: EnvSpec, cache: Path, progress: Callable[[str], None] = lambda _m: None) -> Path:
    """The environment's files on the host (installed once, then reused): <root>/site (dependencies),
    <root>/runner (pytest), <root>/node (node_modules)."""
    root = env_root(spec, cache)
    if (root / "done").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f"{spec.key()}.lock"):
        if (root / "done").exists():
            return root
        tmp = Path(tempfile.mkdtemp(prefix=f".{spec.key()}-", dir=root.parent))
        try:
            if spec.ecosystem == "python":
                (tmp / "site").mkdir()
                (tmp / "runner").mkdir()
                install_runner(tmp / "runner")
                args = [*spec.requirements, *spec.install]
                if args:
                    uv = shutil.which("uv")
                    if uv is None:
                        raise SandboxError("uv is not installed on the host; it installs the tests' dependencies")
                    progress(f"installing {len(args)} requirements for Python {spec.python} on the host")
                    _run([uv, "pip", "install", "--no-config", "--quiet", "--target", str(tmp / "site"),
                          "--python-version", spec.python, "--python-platform", _platform(), *args],
                         f"install {' '.join(args)[:200]} from PyPI",
                         env={"UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(Path(cache) / ".uv-cache")})
            elif spec.ecosystem == "node":
                npm = shutil.which("npm")
                if npm is None:
                    raise SandboxError("npm is not installed on the host; it installs the tests' dependencies")
                work = tmp / "node"
                work.mkdir()
                for name, text in spec.manifest.items():
                    (work / name).write_text(text)
                lock = any(n in spec.manifest for n in ("package-lock.json", "npm-shrinkwrap.json"))
                progress("installing the Node dependencies on the host")
                _run([npm, "ci" if lock else "install", "--ignore-scripts", "--no-audit", "--no-fund",
                      "--cache", str(Path(cache) / ".npm-cache"), *spec.install],
                     "install the Node dependencies from npm", cwd=work)
            else:
                raise SandboxError(f"no installer for ecosystem {spec.ecosystem!r}")
            (tmp / "spec.json").write_text(json.dumps(spec.to_json(), indent=1, sort_keys=True))
            (tmp / "done").write_text("")
            if root.exists():
                shutil.rmtree(root)
            tmp.rename(root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return root


def ensure_image(spec: EnvSpec, base: str, cache: Path, labels: dict[str, str] | None = None,
                 progress: Callable[[str], None] = lambda _m: None) -> tuple[str, str, bool]:
    """(tag, image ID, built now) of the environment's image on top of `base`; built once per key (and base
    image and labels)."""
    base_id = image_id(base)
    if base_id is None:
        raise SandboxError(f"base image {base} is missing; run `python -m environments.images`")
    tag = spec.tag(base_id, labels)
    existing = image_id(tag)
    if existing:
        return tag, existing, False
    root = install(spec, cache, progress)
    copies = [("site", SITE_DIR), ("runner", RUNNER_DIR)] if spec.ecosystem == "python" else [("node", NODE_DIR)]
    lines = [f"FROM {base}"] + [f"COPY {src} {dst}" for src, dst in copies]
    dockerfile = ("\n".join(lines) + "\n").encode()
    with _locked(root.parent / "image-build.lock"), tempfile.TemporaryFile() as ctx:
        existing = image_id(tag)
        if existing:
            return tag, existing, False
        with tarfile.open(fileobj=ctx, mode="w", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(_normalized(info), io.BytesIO(dockerfile))
            for src, _ in copies:
                tar.add(root / src, arcname=src, recursive=False, filter=_normalized)
                for rel, path, _st in _walk(root / src):
                    tar.add(path, arcname=f"{src}/{rel}", recursive=False, filter=_normalized)
        ctx.seek(0)
        all_labels = {**(labels or {}), "taskmine.env": spec.key(), "taskmine.base": base_id}
        label_args = [part for k, v in sorted(all_labels.items()) for part in ("--label", f"{k}={v}")]
        progress(f"building {tag}")
        docker("build", "-q", *label_args, "-t", tag, "-", stdin=ctx, timeout=1800)
    built = image_id(tag)
    if built is None:
        raise SandboxError(f"docker build reported success but {tag} is missing")
    return tag, built, True


def prepare(sandbox, spec: EnvSpec, cache: Path,
            progress: Callable[[str], None] = lambda _m: None) -> str | None:
    """Make the environment ready for `sandbox`: its image in Docker (returned), its files on the host for the
    local sandbox (None: sessions use their default)."""
    publish = getattr(sandbox, "publish", None)   # a cluster pulls images (environments.kube): push it there
    if sandbox.kind == "docker" or publish is not None:
        labels = {k: v for k, v in getattr(sandbox, "image_labels", {}).items() if k == "taskmine.home"}
        # on the sandbox's daemon (one host of a pool: environments.pool), not the environment's
        with using(getattr(sandbox, "host", None) or current_host()):
            tag = ensure_image(spec, sandbox.base_image, cache, labels, progress)[0]
        return publish(tag) if publish is not None else tag
    install(spec, cache, progress)
    return None


def prune_env_images(home_label: str, keep_keys: set[str]) -> list[str]:
    """Remove the environment images built for `home_label` whose key no current task names, or that sit on
    a base image that is no longer the current one. Images a container still uses stay. Returns the tags."""
    stale = stale_images("taskmine-env", home_label, "taskmine.env", keep_keys)
    for i in range(0, len(stale), 50):
        docker("rmi", *stale[i:i + 50], check=False, timeout=300)
    return [t for t in stale if image_id(t) is None]


def image_bytes(ref: str) -> int:
    """The size docker reports for an image (its layers, the base's included)."""
    proc = docker("image", "inspect", "--format", "{{.Size}}", ref, check=False, timeout=60)
    return int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0


# --- the test command ----------------------------------------------------------------------------------------

# The runner's bootstrap: pytest (and the environment's plug-ins) are imported before the repository goes on
# sys.path, so a `pytest.py` or a plug-in's name the agent left in it cannot stand in for them; -I ignores
# PYTHON* variables and the user's site folder; plug-ins load only when named. A test that allocates
# without bound gets a MemoryError (an address-space limit under the container's memory) and one that never
# returns a TimeoutError after TEST_TIMEOUT_S, instead of the whole run being killed: its neighbours' results
# still count. The limit is on the data segment (RLIMIT_DATA: heap and private mappings), not the address
# space, which threads' stack reservations exhaust long before memory runs out. Linux counts a thread's stack
# (a private mapping) in RLIMIT_DATA too: at glibc's 8 MB default about 110 threads filled the limit, and
# more-itertools' concurrency tests (TestSerialize, TestSynchronized, TestConcurrentTee) made pytest itself
# fail with a MemoryError (exit 3, an unreadable report) in one run of ten. Threads the tests start get
# THREAD_STACK_BYTES (CPython 3.11 needs little C stack per Python call).
TEST_MEMORY_BYTES = 896 << 20      # under the sandbox's 1 GB
TEST_TIMEOUT_S = 20
THREAD_STACK_BYTES = 1 << 20
_BOOT = """\
import importlib, os, resource, signal, sys, threading
threading.stack_size({stack})
sys.path[1:1] = {extra!r}
import pytest
for name in {modules!r}:
    importlib.import_module(name)
resource.setrlimit(resource.RLIMIT_DATA, ({memory}, {memory}))


class Guard:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        def expire(signum, frame):
            raise TimeoutError("the test ran longer than {timeout} seconds")
        old = signal.signal(signal.SIGALRM, expire)
        signal.alarm({timeout})
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)


sys.path.insert(0, os.getcwd())
raise SystemExit(pytest.main(sys.argv[1:], plugins=[Guard()]))
"""


def runner_recipe() -> str:
    """What decides how tests are run (the bootstrap and its limits): part of every cached measurement's key."""
    return content_hash("runner", _BOOT, TEST_MEMORY_BYTES, TEST_TIMEOUT_S, THREAD_STACK_BYTES,
                        runner_fingerprint())[:16]


def plugins(root: Path) -> list[str]:
    """Modules of the pytest plug-ins installed in an environment (pytest11 entry points): imported by the
    bootstrap and loaded with -p, since auto-loading is off in the verifier."""
    out = []
    for ep_file in sorted((root / "site").glob("*.dist-info/entry_points.txt")):
        cfg = configparser.ConfigParser(interpolation=None)
        with contextlib.suppress(configparser.Error):
            cfg.read_string(ep_file.read_text(errors="replace"))
            if cfg.has_section("pytest11"):
                out += [cfg.get("pytest11", k).split(":", 1)[0].strip() for k in cfg.options("pytest11")]
    return sorted(set(out))


def test_command(spec: EnvSpec, files: list[str], report: str, *, extra_paths: list[str] = (),
                 plugin_names: list[str] = (), per_test_s: int = TEST_TIMEOUT_S) -> str:
    """The shell command (run in the repository) that runs the test `files` and writes a JUnit XML report
    to `report`. A dataset's own command (`[families.code_change] test`) gets the report path as $TASKMINE_JUNIT
    and the files as $TASKMINE_TESTS."""
    quoted = " ".join(shlex.quote(f) for f in files)
    env = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTEST_ADDOPTS= PYTEST_PLUGINS="
    if spec.test_command:
        return (f"{env} TASKMINE_JUNIT={shlex.quote(report)} TASKMINE_TESTS={shlex.quote(' '.join(files))} "
                f"NODE_PATH={NODE_DIR}/node_modules sh -c {shlex.quote(spec.test_command)}")
    boot = _BOOT.format(extra=list(extra_paths), modules=list(plugin_names), memory=TEST_MEMORY_BYTES,
                        timeout=int(per_test_s), stack=THREAD_STACK_BYTES)
    plugs = " ".join(f"-p {shlex.quote(p)}" for p in plugin_names)
    return (f"{env} python3 -I -B -c {shlex.quote(boot)} -p no:cacheprovider {plugs} -o junit_family=xunit1 "
            f"-o junit_logging=no --junitxml={shlex.quote(report)} -q -rN --tb=short {quoted}")
