"""Published tasks as Harbor (Terminal-Bench 2) task folders: `taskmine export harbor --dataset D --out DIR`.

Harbor's task format (harbor-framework/harbor, `harbor.models.task`): a folder per task with

    instruction.md          the prompt an agent gets
    task.toml               [metadata], [verifier] timeout_sec/user, [agent] timeout_sec/user, [environment]
    environment/Dockerfile  the container the agent works in (Harbor builds it with `docker compose build`,
                            starts it with `sleep infinity` as its command, and mounts /logs/{agent,verifier})
    solution/solve.sh       the oracle: Harbor's `oracle` agent copies solution/ to /solution and runs it
    tests/test.sh           copied to /tests only after the agent, run as the verifier; it writes the reward
                            to /logs/verifier/reward.txt (or reward.json), which Harbor reads

What each folder holds here:
- environment/: `FROM taskmine-harbor:<hash>`, an image built locally by the export (no registry is needed): the
  task's own image (the project's base image, or a code task's environment image with its dependencies and
  pytest) plus the runtime of the tool server and the grader (taskmine's packages and the Python libraries they
  import, copied from this environment: the image's Python is the same minor version). On top: the task's world
  cut at its cutoff (`environments.world.cut_documents`: nothing later, nothing hidden, issues as they stood)
  and its repositories exactly as at the cutoff (`load_dataset(...).repositories`), in /home/agent. The
  entrypoint starts the tool server (taskmine.harbor_box) as root. The agent runs as the image's user, root, as
  Harbor's agents and oracle expect (Harbor copies solution/ in as root and runs `chmod +x` on it as the agent's
  user); it reaches the company through `company` / `company mcp`. What it could read as root holds nothing
  beyond the cutoff and no grader file (the world is cut, the grader's files arrive with tests/ afterwards); the
  action log it could write holds only what the tools would have let it do. The verifier runs the hidden tests as
  uid 1000 after killing every process the agent left.
- solution/solve.sh: the reference replayed through the `company` CLI, or a code task's fix applied as a patch.
- tests/: grading.json (the rubric, the reference, a code task's test sets) and, for a code task, a small git
  repository holding only the fix's test and runner files (the verifier writes them over the agent's tree) and
  the base commit's paths (`world/code/base/<commit>.json`: a file that shadows a module is honoured only when
  it was already there), so nothing a grader reads is in the image the agent works in. The verifier runs in the
  agent's own container (Harbor's design): it resists the agent's code as graders.sealed describes, but an agent
  that ran as root could have changed the interpreter or the runtime itself; a lab that needs that boundary runs
  the agent as a non-root user (`[agent] user`) or replays the agent's patch with `taskmine replay`.

Harbor itself (Python 3.12, Docker Compose v2) is not needed to export; `run_folder` runs a folder the way
Harbor does with plain `docker` (build, start, oracle or nothing, copy tests in, test.sh, read the reward).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from core.registry import own_metadata
from environments import codeenv
from environments.docker_cli import SandboxError, docker, image_id
from environments.images import _normalized
from environments.sandbox import DockerSandbox, home_label
from environments.world import cut_documents, import_documents
from graders import replay, verifier
from graders.verifier import blobs, executable
from publishing.loader import load_dataset
from task_builders.families import served_tools
from taskmine.serving import has_repositories, published_difficulty, published_task, task_ids, world_root
from warehouse.ids import content_hash

RUNTIME = "/opt/taskmine"
INIT = "/usr/local/bin/taskmine-harbor-init"
HEALTH = "test -S /run/company/tools.sock"     # the tool server listens (the container is ready for the agent)
AGENT_TIMEOUT_S = 1800.0
# What the tool server and the grader import (python -c in the export's own environment lists the files).
BOX_IMPORTS = ("taskmine.harbor_box", "environments.episode", "environments.tools", "environments.requester",
               "environments.sandbox", "graders.replay", "graders.verifier", "mcp.server.lowlevel",
               "mcp.server.stdio", "mcp.types", "anyio", "llm.requester")

INIT_SCRIPT = f"""#!/bin/sh
# taskmine: start the company's tool server (root, outside the agent's reach), then run the container's command
if [ "$(id -u)" = 0 ] && [ -f {RUNTIME}/task/box.json ]; then
    mkdir -p /var/lib/taskmine /run/company && chmod 700 /var/lib/taskmine
    PYTHONPATH={RUNTIME}/site:{RUNTIME}/src PYTHONDONTWRITEBYTECODE=1 \\
        nohup python3 -m taskmine.harbor_box serve >/var/lib/taskmine/server.log 2>&1 &
fi
# the command runs beside this shell, which stays PID 1: the grader kills every process the agent left (they are
# PID 1's children once orphaned), and the container must outlive them
"$@" &
trap 'exit 0' TERM INT
while :; do sleep 3600 & wait $!; done
"""

TEST_SH = f"""#!/bin/bash
# taskmine: grade the agent's work (Harbor copies tests/ to /tests only now); the reward goes to
# /logs/verifier/reward.txt. No reward is written when the grade cannot be computed (a verifier error).
mkdir -p /logs/verifier
PYTHONPATH={RUNTIME}/site:{RUNTIME}/src PYTHONDONTWRITEBYTECODE=1 python3 -m taskmine.harbor_box grade /tests
"""


# --- the runtime image (built once per parent image and runtime content) -----------------------------------


def _runtime_files() -> dict[str, Path]:
    """Relative path in the runtime (site/..., src/...) -> file of this environment: every module the box imports,
    whole packages (and their .libs and .dist-info folders) of the libraries."""
    code = ("import importlib, json, sys; from core.registry import registry\n"
            f"[importlib.import_module(m) for m in {list(BOX_IMPORTS)!r}]\n"
            "registry('check').all()\n"
            "print(json.dumps(sorted({getattr(m, '__file__', None) or '' for m in list(sys.modules.values())})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    files = [Path(f) for f in json.loads(out) if f]
    repo = Path(__file__).resolve().parents[1]
    sites = [Path(p) for p in sys.path if p.endswith("site-packages")]
    tops: set[tuple[Path, str]] = set()
    ours: set[str] = set()
    for f in files:
        site = next((s for s in sites if f.is_relative_to(s)), None)
        if site is not None:
            tops.add((site, f.relative_to(site).parts[0]))
        elif f.is_relative_to(repo) and (repo / f.relative_to(repo).parts[0] / "__init__.py").is_file():
            ours.add(f.relative_to(repo).parts[0])   # a package of this project (any the box imports)
    dists = metadata.packages_distributions()
    result: dict[str, Path] = {}
    for site, top in sorted(tops):
        name = top[:-3] if top.endswith(".py") else top.split(".")[0]
        entries = [site / top, site / f"{name}.libs"]
        for dist in dists.get(name, []):
            entries += list(site.glob(f"{dist.replace('-', '_')}-*.dist-info"))
        for e in entries:
            if e.is_file():
                result[f"site/{e.name}"] = e
            elif e.is_dir():
                for p in e.rglob("*"):
                    if p.is_file() and "__pycache__" not in p.parts:
                        result[f"site/{p.relative_to(site)}"] = p
    # the project's own metadata: its entry points are how the registry finds the built-in checks and families
    for name, path in own_metadata().items():
        result[f"site/{name}"] = path
    for pkg in sorted(ours):
        for p in (repo / pkg).rglob("*.py"):
            if "__pycache__" not in p.parts:
                result[f"src/{p.relative_to(repo)}"] = p
        for p in (repo / pkg).rglob("*"):
            if p.is_file() and p.suffix in (".json", ".txt", ".toml") and "__pycache__" not in p.parts:
                result[f"src/{p.relative_to(repo)}"] = p
    return result


def _tar_context(files: dict[str, bytes | Path], modes: dict[str, int] | None = None):
    """A docker build context (owner root, mtime 0) of `files` (name -> bytes or a file to copy), in a temp file."""
    buf = tempfile.TemporaryFile()  # noqa: SIM115 (returned; the caller closes it)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            src = files[name]
            data = src if isinstance(src, bytes) else src.read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = (modes or {}).get(name, 0o755 if (not isinstance(src, bytes) and os.access(src, os.X_OK))
                                          else 0o644)
            tar.addfile(_normalized(info), io.BytesIO(data))
    buf.seek(0)
    return buf


def runtime_image(parent: str, labels: dict[str, str] | None = None) -> str:
    """`taskmine-harbor:<hash>`: `parent` (the base or a code environment image) with the tool server's and the
    grader's runtime and the entrypoint that starts the server; built once per parent and runtime content."""
    parent_id = image_id(parent)
    if parent_id is None:
        raise SandboxError(f"image {parent} is missing")
    files = _runtime_files()
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name].read_bytes()).digest())
    labels = dict(labels or {})
    key = content_hash("harbor-runtime/1", parent_id, h.hexdigest(), INIT_SCRIPT, sorted(labels.items()))
    tag = f"taskmine-harbor:{key[:16]}"
    if image_id(tag):
        return tag
    dockerfile = "\n".join([
        f"FROM {parent}", "USER root",
        f"COPY site {RUNTIME}/site", f"COPY src {RUNTIME}/src", f"COPY init {INIT}",
        # healthy once the tool server listens: `docker compose up --wait` (Harbor) waits for it
        f"HEALTHCHECK --interval=1s --timeout=5s --start-period=300s --retries=3 CMD {HEALTH}",
        f'ENTRYPOINT ["{INIT}"]', 'CMD ["sleep", "infinity"]', ""]).encode()
    label_args = [part for k, v in sorted({**labels, "taskmine.harbor": "runtime"}.items())
                  for part in ("--label", f"{k}={v}")]
    with _tar_context({"Dockerfile": dockerfile, "init": INIT_SCRIPT.encode(), **files},
                      {"init": 0o755, "Dockerfile": 0o644}) as ctx:
        docker("build", "-q", *label_args, "-t", tag, "-", stdin=ctx, timeout=1800)
    return tag


# --- one task folder ---------------------------------------------------------------------------------------


def folder_name(task) -> str:
    return f"{task.family.replace('_', '-')}-{task.task_id[:12]}"


def _instruction(task, repos: list[str]) -> str:
    lines = [task.prompt.rstrip(), "", "---", "",
             "You work inside the company as it stood at this moment. Its tracker, mail and chat are reached "
             "through the `company` command (`company --help`; e.g. `company jira show KEY`, `company mail search "
             "WORDS`) or, for an MCP client, the stdio server `company mcp`. What you do through it is recorded; "
             "when you are done, stop."]
    if repos:
        lines += ["", "Repositories (as they stood then): " + ", ".join(f"`/home/agent/{r}`" for r in repos) + "."]
    return "\n".join(lines) + "\n"


def _toml(task, verifier_timeout: float, difficulty: str | None) -> str:
    def q(v: str) -> str:
        return json.dumps(v)

    return "\n".join([
        'version = "1.0"', "",
        "[metadata]", 'author_name = "taskmine"', f"difficulty = {q(difficulty or 'unknown')}",
        f"category = {q(task.family)}", f"tags = [{q(task.family)}, {q(task.dataset)}]",
        f"taskmine_task_id = {q(task.task_id)}", f"taskmine_dataset = {q(task.dataset)}",
        f"taskmine_split = {q(task.split)}", f"canary = {q(task.canary or '')}", "",
        "[verifier]", f"timeout_sec = {verifier_timeout:.1f}", 'user = "root"', "",
        "[agent]", f"timeout_sec = {AGENT_TIMEOUT_S:.1f}", "",
        "[environment]", "build_timeout_sec = 600.0", "cpus = 1", "memory_mb = 2048", "storage_mb = 10240",
        "allow_internet = false", "",
        "[environment.healthcheck]", f"command = {q(HEALTH)}", "interval_sec = 1.0", "start_period_sec = 300.0",
        "retries = 3", ""])


def _fix_repository(src: Path, commit: str, paths: list[str], dest: Path) -> str:
    """A bare repository at `dest` with one commit whose tree is `paths` of `commit` in `src` (modes kept):
    the verifier's files and nothing else of the fix. Returns the new commit's id."""
    files = blobs(src, commit, paths)
    execs = executable(src, commit, [p for p, b in files.items() if b is not None])
    env = {**os.environ, "GIT_AUTHOR_NAME": "taskmine", "GIT_AUTHOR_EMAIL": "taskmine@invalid",
           "GIT_COMMITTER_NAME": "taskmine", "GIT_COMMITTER_EMAIL": "taskmine@invalid",
           "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
    git = lambda *a, **k: subprocess.run(["git", f"--git-dir={dest}", *a], check=True, capture_output=True,  # noqa: E731
                                         env=env, **k)
    subprocess.run(["git", "init", "-q", "--bare", str(dest)], check=True, capture_output=True)
    entries = []
    for p, data in sorted(files.items()):
        if data is None:
            continue
        sha = git("hash-object", "-w", "--stdin", input=data).stdout.decode().strip()
        entries.append((p, sha, "100755" if p in execs else "100644"))
    tree = _tree(git, entries)
    sha = git("commit-tree", tree, "-m", "the verifier's files", input=b"").stdout.decode().strip()
    git("update-ref", "refs/heads/fix", sha)
    return sha


def _tree(git, entries: list[tuple[str, str, str]]) -> str:
    """A tree object of (path, blob, mode) entries, nested folders made with mktree."""
    here, sub = [], {}
    for path, sha, mode in entries:
        head, _, rest = path.partition("/")
        if rest:
            sub.setdefault(head, []).append((rest, sha, mode))
        else:
            here.append(f"{mode} blob {sha}\t{head}")
    for name, children in sub.items():
        here.append(f"040000 tree {_tree(git, children)}\t{name}")
    return git("mktree", input=("\n".join(sorted(here, key=lambda line: line.split("\t")[1])) + "\n").encode()
               ).stdout.decode().strip()


def _env_metadata(env_root: Path, dest: Path) -> None:
    """The parts of a code environment's host folder the verifier reads in the container: its `done` mark and
    the entry points naming pytest plug-ins (the installed files themselves are in the image)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "done").write_text("")
    for ep in sorted((env_root / "site").glob("*.dist-info/entry_points.txt")):
        target = dest / "site" / ep.parent.name / ep.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ep, target)


@dataclass
class Exported:
    task_id: str
    family: str
    folder: Path
    image: str


def export_task(ds, task_id: str, out: Path, *, sandbox, worlds: Path, labels: dict[str, str]) -> Exported:
    """Write one task's folder under `out` (see the module docstring)."""
    task = published_task(ds, task_id)
    spec = verifier.spec_of(task)
    parent = verifier.environment(spec, sandbox, worlds) if spec else sandbox.base_image
    image = runtime_image(parent, labels)
    folder = out / folder_name(task)
    if folder.exists():
        shutil.rmtree(folder)
    env_dir, sol, tests = folder / "environment", folder / "solution", folder / "tests"
    for d in (env_dir / "task" / "world", sol, tests):
        d.mkdir(parents=True)
    # the world at the cutoff: documents, and the repositories as they stood
    with tempfile.TemporaryDirectory(prefix="taskmine-harbor-") as tmp:
        docs = Path(tmp) / "documents.jsonl"
        cut_documents(worlds / "world.sqlite", task.cutoff, task.world.get("hidden") or (), docs)
        import_documents(docs, env_dir / "task" / "world" / "world.sqlite")
    repos = [p.name for p in ds.repositories(task.task_id, env_dir / "home")] if has_repositories(task) else []
    if not repos:
        (env_dir / "home").mkdir(exist_ok=True)
    shell_kinds = {"git", "shell", "read_file", "write_file", "list_files"}   # the agent has a terminal
    allowed = served_tools(task.family, task.world, task.reference.get("actions") or [])
    world = {k: v for k, v in task.world.items() if k not in ("hidden", "env")}
    if world.get("requester"):        # no model in the container: the requester answers "No further information."
        world["requester"] = {k: v for k, v in world["requester"].items() if k not in ("messages", "forbidden")}
    box = {"world": {**world, "hidden": []}, "has_world": True,
           "tools": sorted(allowed - shell_kinds) if allowed is not None else None}
    (env_dir / "task" / "box.json").write_text(json.dumps(box, indent=1, sort_keys=True, default=str) + "\n")
    # no RUN step: building needs no container and no network (modes come from the build context)
    for path in [env_dir / "task", *(env_dir / "task").rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    (env_dir / "Dockerfile").write_text("\n".join([
        f"FROM {image}", "USER root",
        f"COPY task {RUNTIME}/task", "COPY --chown=1000:1000 home /home/agent", "WORKDIR /home/agent", ""]))
    # the oracle
    (sol / "solve.sh").write_text("#!/bin/bash\nset -euo pipefail\ncd /home/agent\n"
                                  + replay.oracle_command(task) + "\n")
    (sol / "solve.sh").chmod(0o755)
    # the grader's files: only in tests/, copied in after the agent
    grading = {"task": json.loads(task.model_dump_json())}
    if spec is not None:
        fix = _fix_repository(worlds / "git" / f"{spec.repo}.git", spec.fix_commit, list(spec.restore),
                              tests / "world" / "git" / f"{spec.repo}.git")
        grading["task"]["reference"]["code"]["fix_commit"] = fix
        base = tests / "world" / "code" / "base" / f"{spec.base_commit}.json"
        base.parent.mkdir(parents=True, exist_ok=True)     # what may shadow a module because it was there
        base.write_text(json.dumps(verifier.base_paths(worlds, worlds / "git" / f"{spec.repo}.git",
                                                       spec.base_commit)))

        _env_metadata(codeenv.install(spec.env_spec, verifier.env_cache(worlds)),
                      tests / "world" / "envs" / spec.env_spec.key())
    (tests / "grading.json").write_text(json.dumps(grading, indent=1, sort_keys=True) + "\n")
    (tests / "test.sh").write_text(TEST_SH)
    (tests / "test.sh").chmod(0o755)
    difficulty = published_difficulty(ds, task.task_id)
    (folder / "task.toml").write_text(_toml(task, (spec.timeout_s + 300) if spec else 120.0, difficulty))
    (folder / "instruction.md").write_text(_instruction(task, repos))
    return Exported(task.task_id, task.family, folder, image)


def export(published: Path | str, out: Path | str, *, tasks: list[str] | None = None, home: Path | None = None,
           progress=lambda _m: None) -> list[Exported]:
    """Every task of a published dataset (or `tasks`) as a Harbor task folder under `out`."""
    ds = load_dataset(published)
    labels = {"taskmine.home": home_label(home)} if home else {}
    sandbox = DockerSandbox(image_labels=labels)
    worlds = world_root(ds)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for tid in tasks or task_ids(ds):
        e = export_task(ds, tid, out, sandbox=sandbox, worlds=worlds, labels=labels)
        progress(f"{e.family:<16} {e.task_id[:12]}  {e.folder}")
        done.append(e)
    return done


# --- running a folder the way Harbor does ------------------------------------------------------------------


@dataclass
class Trial:
    reward: float | None
    agent_exit: int | None
    test_exit: int | None
    test_output: str
    grade: dict | None
    agent_output: str = ""


def _toml_value(text: str, section: str, key: str) -> str | None:
    m = re.search(rf"^\[{re.escape(section)}\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not m:
        return None
    v = re.search(rf"^{re.escape(key)}\s*=\s*\"?([^\"\n]*)\"?\s*$", m.group(1), re.M)
    return v.group(1) if v else None


def run_folder(folder: Path | str, agent: str = "oracle", *, keep_image: bool = False) -> Trial:
    """Run a task folder as Harbor's docker environment does, with plain docker: build environment/, start it
    (no network; `sleep infinity`; /logs/verifier and /logs/agent mounted), run the agent (`oracle`: copy
    solution/ to /solution and run solve.sh as the agent user; `nop`: nothing; or a shell command), copy tests/
    to /tests, run test.sh as the verifier user, and read /logs/verifier/reward.txt."""
    folder = Path(folder).resolve()
    toml = (folder / "task.toml").read_text()
    agent_user = _toml_value(toml, "agent", "user")
    verifier_user = _toml_value(toml, "verifier", "user")
    tag = f"taskmine-harbor-trial:{hashlib.sha256(str(folder).encode()).hexdigest()[:12]}"
    name = f"taskmine-harbor-{os.getpid()}-{hashlib.sha256(os.urandom(8)).hexdigest()[:8]}"
    logs = Path(tempfile.mkdtemp(prefix="taskmine-harbor-logs-"))
    for d in ("agent", "verifier", "artifacts"):
        (logs / d).mkdir()
        (logs / d).chmod(0o777)
    try:
        docker("build", "-q", "-t", tag, str(folder / "environment"), timeout=1800)
        docker("run", "-d", "--name", name, "--network", "none", "--label", "taskmine.sandbox=1",
               *(part for d in ("agent", "verifier", "artifacts") for part in ("-v", f"{logs / d}:/logs/{d}")),
               tag, "sh", "-c", "sleep infinity", timeout=120)

        def exec_(command: str, user: str | None) -> subprocess.CompletedProcess:
            return subprocess.run(["docker", "exec", *(["-u", user] if user else []), name, "bash", "-c", command],
                                  capture_output=True, text=True, timeout=3600)

        deadline = time.time() + 300      # `docker compose up --wait`: until the container is healthy
        while docker("inspect", "--format", "{{.State.Health.Status}}", name, check=False).stdout.strip() != \
                "healthy":
            if time.time() > deadline:
                raise SandboxError(f"{folder.name}: the container did not become healthy within 300s")
            time.sleep(1)
        exec_("chmod 777 /logs/agent /logs/verifier", None)
        agent_exit = None
        if agent == "oracle":
            docker("cp", f"{folder / 'solution'}/.", f"{name}:/solution", timeout=120)
            agent_exit = exec_("chmod +x /solution/solve.sh && /solution/solve.sh > /logs/agent/oracle.txt 2>&1",
                               agent_user).returncode
        elif agent != "nop":
            agent_exit = exec_(agent, agent_user).returncode
        docker("cp", f"{folder / 'tests'}/.", f"{name}:/tests", timeout=120)
        t = exec_("chmod +x /tests/test.sh && /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1", verifier_user)
        reward_file = logs / "verifier" / "reward.txt"
        reward = float(reward_file.read_text()) if reward_file.exists() and reward_file.read_text().strip() else None
        out = (logs / "verifier" / "test-stdout.txt").read_text(errors="replace") \
            if (logs / "verifier" / "test-stdout.txt").exists() else ""
        grade = json.loads((logs / "verifier" / "grade.json").read_text()) \
            if (logs / "verifier" / "grade.json").exists() else None
        agent_out = (logs / "agent" / "oracle.txt").read_text(errors="replace") \
            if (logs / "agent" / "oracle.txt").exists() else ""
        return Trial(reward, agent_exit, t.returncode, out, grade, agent_out[-4000:])
    finally:
        docker("rm", "-f", name, check=False, timeout=60)
        if not keep_image:
            docker("rmi", "-f", tag, check=False, timeout=120)
        subprocess.run(["rm", "-rf", str(logs)], check=False)


def remove_images(labels: dict[str, str]) -> list[str]:
    """Remove the runtime images built with `labels` (e.g. one TASKMINE_HOME's); their tags."""
    filters = [part for k, v in labels.items() for part in ("--filter", f"label={k}={v}")]
    proc = docker("images", "taskmine-harbor", "--filter", "label=taskmine.harbor=runtime", *filters, "--format",
                  "{{.Repository}}:{{.Tag}}", check=False, timeout=60)
    tags = proc.stdout.split() if proc.returncode == 0 else []
    if tags:
        docker("rmi", *tags, check=False, timeout=300)
    return tags


