"""Sandbox images: the shared base image and the thin per-task images on top of it.

Invariants:
- The base image is `taskmine-base:<recipe hash>`, where the hash covers everything that decides its
  content (Debian suite, package list, the setup script, the Dockerfile, the `company` tool source, the
  image config), so changing any of them builds a new tag and an existing tag is reused at once.
- It is built from a Dockerfile when a registry answers (or `debian:<suite>-slim` is already local), else
  from Debian packages with `debootstrap` + `docker import`; both paths run the same setup script. The
  debootstrap output is cached as a tarball under $TASKMINE_CACHE (default ~/.cache/taskmine), keyed by
  suite + packages, so a rebuild after `docker system prune` or a new `company` tool downloads nothing.
- `TASKMINE_BASE_IMAGE` replaces all of this with an image the user already has.
- A task image is `FROM <base>` + `COPY world /world`, tagged `taskmine-task:<hash>` where the hash covers the
  base image ID and the world's content (paths, exec bits, bytes, symlink targets); the build context is a
  tar with owner root and normalized modes, so the agent (uid 1000) can never write to /world.
- Graders and references are never put into any of these images.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from environments.docker_cli import SandboxError, daemon_answers, docker, image_id, last_line
from warehouse.ids import content_hash

SUITE = "bookworm"
# python3, not python3-minimal: the minimal standard library has no json, which `company` needs.
PACKAGES = ("python3", "git", "ca-certificates")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
REGISTRY_PROBE_URL = "https://registry-1.docker.io/v2/"
AGENT_UID = 1000
# The uid that fills read-only folders and runs the tool relay where a host cannot bind-mount this machine's
# folders (environments.relay): not the agent's, so the agent can neither write those folders nor signal it.
HELPER_UID = 1001
SUPERVISE_PATH = "/usr/local/lib/taskmine/supervise"
IMAGE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/home/agent",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TASKMINE_WORLD": "/world",
}
IMAGE_CHANGES = ("USER agent", "WORKDIR /home/agent", *(f"ENV {k}={v}" for k, v in IMAGE_ENV.items()))

# Runs as root inside the new root filesystem (chroot or Dockerfile RUN). `company` is already at
# /usr/local/bin/company. It must stay idempotent and must not need the network unless apt is required.
SETUP_SCRIPT = """\
set -eu
if ! command -v python3 >/dev/null || ! command -v git >/dev/null; then
    apt-get update && apt-get install -y --no-install-recommends $TASKMINE_PACKAGES
fi
if ! getent passwd agent >/dev/null; then
    if command -v useradd >/dev/null; then
        groupadd -g 1000 agent && useradd -u 1000 -g 1000 -d /home/agent -m -s /bin/sh agent
    else
        echo 'agent:x:1000:' >> /etc/group
        echo 'agent:x:1000:1000::/home/agent:/bin/sh' >> /etc/passwd
        mkdir -p /home/agent && chown 1000:1000 /home/agent
    fi
fi
chmod 0755 /usr/local/bin/company
chmod 0755 /usr/local/lib/taskmine /usr/local/lib/taskmine/supervise
git config --system --add safe.directory '*'
mkdir -p /world /run/company
rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/* \\
    /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/lintian \\
    /tmp/* /root/.cache
find / -xdev -name __pycache__ -type d -prune -exec rm -rf {} +
python3 -c "import json, argparse, select, socket" && company --version >/dev/null
python3 -I /usr/local/lib/taskmine/supervise run --timeout 5 -- true >/dev/null
"""

DOCKERFILE = """\
FROM debian:{suite}-slim
COPY company /usr/local/bin/company
COPY supervise /usr/local/lib/taskmine/supervise
COPY setup.sh /tmp/setup.sh
RUN TASKMINE_PACKAGES="{packages}" sh /tmp/setup.sh
{changes}
"""

Progress = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(f"[taskmine-base] {msg}", file=sys.stderr, flush=True)


def company_tool_source() -> bytes:
    return (Path(__file__).with_name("company_tool.py")).read_bytes()


def supervise_source() -> bytes:
    return (Path(__file__).with_name("supervise.py")).read_bytes()


def recipe_hash() -> str:
    return content_hash(
        "taskmine-base/2",
        SUITE,
        PACKAGES,
        SETUP_SCRIPT,
        DOCKERFILE,
        IMAGE_CHANGES,
        hashlib.sha256(company_tool_source()).hexdigest(),
        hashlib.sha256(supervise_source()).hexdigest(),
    )


def base_tag() -> str:
    return f"taskmine-base:{recipe_hash()[:16]}"


def cache_dir() -> Path:
    root = Path(os.environ.get("TASKMINE_CACHE") or Path.home() / ".cache" / "taskmine")
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialize builds across processes (parallel test workers, CI steps) so each tag is built once."""
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def ensure_base_image(progress: Progress = _stderr) -> str:
    """Return a local image reference for the sandbox base, building it if needed (minutes, once)."""
    named = os.environ.get("TASKMINE_BASE_IMAGE")
    if named:
        if image_id(named) is None:
            raise SandboxError(
                f"TASKMINE_BASE_IMAGE={named} is not a local image; load or build it, "
                "or unset the variable to build taskmine-base"
            )
        return named
    tag = base_tag()
    if image_id(tag):
        return tag
    if not daemon_answers():
        raise SandboxError(
            "no Docker daemon answers; start dockerd (scripts/ci-docker.sh) or use the local sandbox"
        )
    with _locked(cache_dir() / "base-build.lock"):
        if image_id(tag):
            return tag
        started = time.monotonic()
        if _registry_answers(progress):
            try:
                _build_from_dockerfile(tag, progress)
            except SandboxError as exc:
                progress(f"Dockerfile build failed ({exc}); falling back to debootstrap")
                _build_from_debootstrap(tag, progress)
        else:
            _build_from_debootstrap(tag, progress)
        progress(f"built {tag} in {time.monotonic() - started:.0f}s")
    return tag


def _registry_answers(progress: Progress, timeout: float = 3.0) -> bool:
    if image_id(f"debian:{SUITE}-slim"):
        return True
    try:
        urllib.request.urlopen(REGISTRY_PROBE_URL, timeout=timeout).close()
    except urllib.error.HTTPError:
        pass  # 401 Unauthorized is the normal answer of a live registry
    except (OSError, ValueError):
        progress(f"no registry answers within {timeout:.0f}s; building from Debian packages")
        return False
    return True


def _build_from_dockerfile(tag: str, progress: Progress) -> None:
    progress(f"building {tag} from debian:{SUITE}-slim")
    dockerfile = DOCKERFILE.format(suite=SUITE, packages=" ".join(PACKAGES), changes="\n".join(IMAGE_CHANGES))
    files = {
        "Dockerfile": dockerfile.encode(),
        "company": company_tool_source(),
        "supervise": supervise_source(),
        "setup.sh": SETUP_SCRIPT.encode(),
    }
    with tempfile.TemporaryFile() as ctx:
        with tarfile.open(fileobj=ctx, mode="w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
        ctx.seek(0)
        docker(
            "build",
            "-q",
            "--label",
            f"taskmine.recipe={recipe_hash()}",
            "-t",
            tag,
            "-",
            stdin=ctx,
            timeout=1800,
        )


def _rootfs_tarball(progress: Progress) -> Path:
    """The debootstrap output for SUITE + PACKAGES, downloaded once and kept in the cache."""
    key = content_hash("debootstrap/1", SUITE, PACKAGES, os.uname().machine)[:16]
    cached = cache_dir() / f"rootfs-{SUITE}-{key}.tar"
    if cached.exists():
        progress(f"reusing cached Debian root filesystem {cached}")
        return cached
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            "debootstrap is not installed; `apt-get install debootstrap` (or run scripts/ci-docker.sh)"
        )
    mirror = os.environ.get("TASKMINE_DEBIAN_MIRROR") or DEFAULT_MIRROR
    work = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=cache_dir()))
    log = cache_dir() / "debootstrap.log"
    try:
        rootfs = work / "rootfs"
        progress(f"debootstrap {SUITE} from {mirror} (a few minutes; log: {log})")
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(rootfs),
            mirror,
        ]
        with open(log, "w") as logf:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
            )
            stages: set[str] = set()
            for line in proc.stdout:  # type: ignore[union-attr]
                logf.write(line)
                words = line.split()
                if len(words) >= 2 and words[0] == "I:" and words[1] not in stages:
                    stages.add(words[1])
                    progress(f"debootstrap: {line.strip()}")
            rc = proc.wait()
        if rc != 0:
            raise SandboxError(
                f"debootstrap failed (exit {rc}); see {log} (mirror: set TASKMINE_DEBIAN_MIRROR)"
            )
        partial = cached.with_suffix(".partial")
        _tar(rootfs, partial, exclude_dev=False, exclude=("./var/cache/apt/archives/*.deb",))
        partial.replace(cached)
        progress(f"cached Debian root filesystem ({cached.stat().st_size >> 20} MB) at {cached}")
        return cached
    finally:
        _safe_rmtree(work)


def _build_from_debootstrap(tag: str, progress: Progress) -> None:
    tarball = _rootfs_tarball(progress)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=cache_dir()))
    try:
        rootfs = work / "rootfs"
        rootfs.mkdir()
        _run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-xpf", str(tarball)], "unpack the root filesystem"
        )
        tool = rootfs / "usr/local/bin/company"
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_bytes(company_tool_source())
        supervisor = rootfs / SUPERVISE_PATH.lstrip("/")
        supervisor.parent.mkdir(parents=True, exist_ok=True)
        supervisor.write_bytes(supervise_source())
        (rootfs / "tmp/taskmine-setup.sh").write_text(SETUP_SCRIPT)
        progress("configuring: user agent (1000), company tool, supervisor, git safe.directory, cleanup")
        env = {"PATH": IMAGE_ENV["PATH"], "LANG": "C.UTF-8", "TASKMINE_PACKAGES": " ".join(PACKAGES)}
        _run(
            ["chroot", str(rootfs), "/bin/sh", "/tmp/taskmine-setup.sh"], "configure the root filesystem", env
        )
        (rootfs / "tmp/taskmine-setup.sh").unlink(missing_ok=True)
        progress(f"importing {tag}")
        image = work / "image.tar"
        _tar(rootfs, image, exclude_dev=True)
        args = ["import", "--message", f"taskmine recipe {recipe_hash()}"]
        for change in (*IMAGE_CHANGES, f"LABEL taskmine.recipe={recipe_hash()}"):
            args += ["--change", change]
        with open(image, "rb") as f:
            docker(*args, "-", tag, stdin=f, timeout=1800)
    finally:
        _safe_rmtree(work)


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, errors="replace", env=env, timeout=1800
    )
    if proc.returncode != 0:
        raise SandboxError(
            f"could not {what} (exit {proc.returncode}): {last_line(proc.stderr + proc.stdout)}"
        )


def _tar(rootfs: Path, dest: Path, *, exclude_dev: bool, exclude: tuple[str, ...] = ()) -> None:
    patterns = ("./proc/*", "./sys/*", *exclude, *(("./dev/*",) if exclude_dev else ()))
    excludes = [f"--exclude={p}" for p in patterns]
    _run(
        ["tar", "-C", str(rootfs), "--numeric-owner", *excludes, "-cf", str(dest), "."],
        "pack the root filesystem",
    )


def _safe_rmtree(path: Path) -> None:
    """Remove a build dir, but never through a mount (a failed debootstrap can leave /proc or /dev bound)."""
    prefix = str(path.resolve()) + "/"
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    if any(line.split()[1].startswith(prefix) for line in Path("/proc/self/mounts").read_text().splitlines()):
        raise SandboxError(f"{path} still has mounts inside; unmount them and delete it by hand")
    shutil.rmtree(path, ignore_errors=True)


# --- per-task images ----------------------------------------------------------------------------------


def _walk(world: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """Every entry under `world` in a stable order, as (posix relative path, path, lstat)."""
    for dirpath, dirnames, filenames in os.walk(world):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(dirnames) + sorted(filenames):
            path = base / name
            st = path.lstat()
            if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                raise SandboxError(f"{path} is not a file, folder or symlink; a world slice holds only those")
            yield path.relative_to(world).as_posix(), path, st


def world_hash(world_dir: Path) -> str:
    """sha256 over the world's paths, kinds, exec bits, file bytes and symlink targets (not mtimes/owners)."""
    world = Path(world_dir)
    if not world.is_dir():
        raise SandboxError(f"world directory {world} does not exist")
    h = hashlib.sha256()
    for rel, path, st in _walk(world):
        if stat.S_ISLNK(st.st_mode):
            h.update(f"L {rel}\0{os.readlink(path)}\0".encode())
        elif stat.S_ISDIR(st.st_mode):
            h.update(f"D {rel}\0".encode())
        else:
            h.update(f"F {rel}\0{int(bool(st.st_mode & 0o111))}\0{st.st_size}\0".encode())
            with open(path, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
    return h.hexdigest()


def _normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    if info.isdir():
        info.mode = 0o755
    elif info.isfile():
        info.mode = 0o755 if info.mode & 0o111 else 0o644
    return info


def build_task_image(base: str, world_dir: Path, *, world_digest: str | None = None,
                     labels: dict[str, str] | None = None) -> tuple[str, str]:
    """(tag, image ID) of the image holding `world_dir` at /world on top of `base`; built once per content.

    `world_digest` is `world_hash(world_dir)` when the caller already computed it. `labels` (e.g. the
    TASKMINE_HOME and task world that use the image, for `prune_task_images`) are part of the tag's hash."""
    base_id = image_id(base)
    if base_id is None:
        raise SandboxError(f"base image {base} is missing; run `python -m environments.images`")
    labels = {**(labels or {}), "taskmine.base": base_id}
    digest = world_digest or world_hash(world_dir)
    tag = f"taskmine-task:{content_hash('task-image/2', base_id, digest, sorted(labels.items()))[:16]}"
    existing = image_id(tag)
    if existing:
        return tag, existing
    dockerfile = f"FROM {base}\nCOPY world /world\n".encode()
    with tempfile.TemporaryFile() as ctx:
        with tarfile.open(fileobj=ctx, mode="w", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(_normalized(info), io.BytesIO(dockerfile))
            tar.add(world_dir, arcname="world", recursive=False, filter=_normalized)
            for rel, path, _ in _walk(Path(world_dir)):
                tar.add(path, arcname=f"world/{rel}", recursive=False, filter=_normalized)
        ctx.seek(0)
        label_args = [part for k, v in sorted(labels.items()) for part in ("--label", f"{k}={v}")]
        docker("build", "-q", "--label", f"taskmine.world={tag.split(':')[1]}", *label_args, "-t", tag, "-",
               stdin=ctx, timeout=1800)
    built = image_id(tag)
    if built is None:
        raise SandboxError(f"docker build reported success but {tag} is missing")
    return tag, built


def stale_images(repository: str, home_label: str, label: str, keep: set[str]) -> list[str]:
    """Tags of `repository` built for `home_label` whose `label` value is not in `keep`, or that sit on a base
    image that is no longer the current one (task images, code environment images)."""
    current_base = image_id(os.environ.get("TASKMINE_BASE_IMAGE") or base_tag())
    proc = docker("images", repository, "--filter", f"label=taskmine.home={home_label}", "--format",
                  "{{.Repository}}:{{.Tag}}", check=False, timeout=60)
    tags = proc.stdout.split() if proc.returncode == 0 else []
    stale = []
    if tags:
        labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", *tags, check=False, timeout=120)
        for tag, line in zip(tags, labels.stdout.splitlines()):
            try:
                found = json.loads(line) or {}
            except ValueError:
                continue
            if found.get(label) not in keep or found.get("taskmine.base") != current_base:
                stale.append(tag)
    return stale


BASE_GRACE_S = 86400   # an earlier recipe of the base is kept this long after it was built


def prune_task_images(home_label: str, keep_world_ids: set[str]) -> list[str]:
    """Remove the task images built for `home_label` (the `taskmine.home` label) that no current task uses:
    their world is not in `keep_world_ids`, or they sit on a base image that is no longer the current one.
    Earlier recipes of the base go too, once nothing sits on them and BASE_GRACE_S after they were built: the
    Docker daemon may serve another checkout or version of taskmine whose current base that recipe is, running
    now (a base built an hour ago is someone's), and removing it would fail every task of that run.
    Images a container still uses are left (docker refuses). Returns the tags removed."""
    stale = stale_images("taskmine-task", home_label, "taskmine.world_id", keep_world_ids)
    if not os.environ.get("TASKMINE_BASE_IMAGE"):
        bases = docker("images", "taskmine-base", "--format", "{{.Repository}}:{{.Tag}}", check=False, timeout=60)
        old = [t for t in bases.stdout.split() if t != base_tag()] if bases.returncode == 0 else []
        stale += [t for t in old if _age_s(t) > BASE_GRACE_S]
    for i in range(0, len(stale), 50):
        docker("rmi", *stale[i:i + 50], check=False, timeout=300)
    return [tag for tag in stale if image_id(tag) is None]


def _age_s(ref: str) -> float:
    """Seconds since the image `ref` was created (0 when the daemon cannot tell: kept)."""
    proc = docker("image", "inspect", "--format", "{{.Created}}", ref, check=False, timeout=60)
    try:   # RFC 3339 with nanoseconds: "2024-05-01T06:45:12.123456789Z"
        created = dt.datetime.fromisoformat(proc.stdout.strip()[:19]).replace(tzinfo=dt.UTC)
    except ValueError:
        return 0.0
    return (dt.datetime.now(dt.UTC) - created).total_seconds()


def main() -> int:
    try:
        print(ensure_base_image())
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
