"""A sandbox pool: one validation spread over several Docker daemons, each running a bounded number of sessions.

The hosts are daemon URLs (what `docker -H` takes: unix://, tcp://, ssh://), each with how many sessions it runs
at once (`URL*N`, default 1) and, optionally, how its sessions see this machine's folders (`files=auto|bind|copy`,
see environments.sandbox.DockerSandbox: a daemon on another machine gets the episode's folders copied in and the
tool socket relayed, environments.relay). They come from TASKMINE_SANDBOX_HOSTS, else from `sandbox_hosts` in the
dataset's taskmine.toml (`hosts_from`; the entries are read by core.hosts, below the config that checks them):

    TASKMINE_SANDBOX_HOSTS="unix:///var/run/docker.sock*2, ssh://ci@build-2*4 files=copy"
    sandbox_hosts = ["unix:///var/run/docker.sock*2", {url = "tcp://10.0.0.7:2376", concurrency = 4}]

Dispatch. The unit is a *lease*: one slot of one host for a piece of work that opens its sessions one after
another (a task's validation: its oracle, null and probe episodes). `SandboxPool.call(fn)` runs `fn(sandbox)` on a
lease of the host with the most free slots for its concurrency, so a task's images (its code environment, the
base image) are made on that host once, not on every host. When the daemon stopped answering during the work
(`HostLost`), the host leaves the rotation and `call` runs the work again on another host: the failure was the
host's, not the task's. A caller written for one sandbox that opens sessions on the pool itself (`session`) gets
a slot for each session's life, on a host that already has the session's image when one is free; another host
gets the image by `docker save | docker load` from one that has it (the image keeps its ID, so every tag derived
from it is the same everywhere).

Invariants:
- The pool is a `Sandbox` of kind "docker": its validation rows are the same kind as one daemon's (a task
  validated over one daemon is not validated again over two, and the other way round).
- The daemon is never chosen by changing os.environ (threads share it): every docker call names its host
  (docker_cli `host=`, or `using` for the image builders).
- A host that does not answer when the pool starts is left out with a warning on stderr; no host answering is a
  SandboxError; a configuration entry that cannot be read is a one-line PoolConfigError naming the entry.
- Never the Docker socket in a container: sessions on every host are DockerSandbox sessions (its hardening).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from core.hosts import EXAMPLE, HOSTS_ENV, HostSpec, PoolConfigError, hosts_from, parse_hosts
from environments.docker_cli import SandboxError, copy_image, daemon_answers, image_id, using
from environments.images import base_tag
from environments.sandbox import DockerSandbox, DockerSession, HostLost, Mount, Sandbox

__all__ = ["HOSTS_ENV", "HostSpec", "PoolConfigError", "SandboxPool", "hosts_from", "parse_hosts"]

T = TypeVar("T")


def _warn(message: str) -> None:
    print(f"[taskmine-pool] {message}", file=sys.stderr, flush=True)


@dataclass(eq=False)
class Member:
    """A host of the pool and what the pool knows of it."""

    spec: HostSpec
    sandbox: DockerSandbox
    busy: int = 0
    lost: bool = False
    seeded: bool = False
    leases: int = 0
    sessions: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)   # image copies to this host, one at a time

    @property
    def url(self) -> str:
        return self.spec.url


class SandboxPool(Sandbox):
    """Several Docker daemons as one sandbox (see the module docstring)."""

    kind = "docker"

    def __init__(self, hosts: Sequence[HostSpec], *, image_labels: dict[str, str] | None = None, check: bool = True,
                 **limits):
        if not hosts:
            raise PoolConfigError(f"a sandbox pool needs at least one host; set {HOSTS_ENV}, e.g. {EXAMPLE}")
        self.image_labels = dict(image_labels or {})
        self.members = [Member(h, DockerSandbox(host=h.url, files=h.files, image_labels=image_labels, **limits))
                        for h in hosts]
        for m in self.members:
            m.sandbox.on_lost = lambda _sandbox, _session, m=m: self._mark_lost(m, "it stopped answering")
        self.limits = dict(self.members[0].sandbox.limits)
        self._cond = threading.Condition()
        self._local = threading.local()
        if check:
            self.check()

    # -- hosts ---------------------------------------------------------------------------------------------

    def check(self, timeout: float = 5.0) -> None:
        """Leave out every host whose daemon does not answer; SandboxError when none does."""
        for m in self.members:
            if not m.lost and not daemon_answers(timeout=timeout, host=m.url):
                self._mark_lost(m, f"its daemon does not answer within {timeout:.0f}s")
        if not self.live():
            raise SandboxError(f"no host of the sandbox pool answers ({', '.join(str(m.spec) for m in self.members)})"
                               f"; start their daemons or fix {HOSTS_ENV} / sandbox_hosts")

    def live(self) -> list[Member]:
        return [m for m in self.members if not m.lost]

    @property
    def capacity(self) -> int:
        """Sessions the pool runs at once: the sum of its live hosts' concurrencies."""
        return sum(m.spec.concurrency for m in self.live())

    def describe(self) -> str:
        return ", ".join(f"{m.spec}{' (lost)' if m.lost else ''}" for m in self.members)

    def dispatched(self) -> Counter:
        """host URL -> leases and sessions it ran (what the pool sent where)."""
        return Counter({m.url: m.leases + m.sessions for m in self.members})

    def _mark_lost(self, m: Member, why: str) -> None:
        with self._cond:
            if m.lost:
                return
            m.lost = True
            self._cond.notify_all()
        _warn(f"host {m.url} left the pool: {why}")

    def _acquire(self, prefer: set[str] | None = None) -> Member:
        """A slot on the live host with the most free slots for its concurrency (among `prefer`, host URLs, when
        one of those is free); waits while every host is full."""
        with self._cond:
            while True:
                live = self.live()
                if not live:
                    raise SandboxError("every host of the sandbox pool was lost during the run; check the daemons "
                                       f"({', '.join(m.url for m in self.members)}) and run again")
                free = [m for m in live if m.busy < m.spec.concurrency]
                if free:
                    free = [m for m in free if prefer and m.url in prefer] or free
                    m = min(free, key=lambda m: (m.busy / m.spec.concurrency, self.members.index(m)))
                    m.busy += 1
                    return m
                self._cond.wait()

    def _release(self, m: Member) -> None:
        with self._cond:
            m.busy -= 1
            self._cond.notify_all()

    def _current(self) -> Member | None:
        return getattr(self._local, "member", None)

    def _home(self) -> Member:
        """The host work outside a lease is done on: the leased one, else the first live host."""
        m = self._current()
        if m is not None:
            return m
        live = self.live()
        if not live:
            raise SandboxError("every host of the sandbox pool was lost; check the daemons and run again")
        return live[0]

    # -- images --------------------------------------------------------------------------------------------

    def _ensure_image(self, m: Member, ref: str) -> None:
        """`ref` on host `m`: copied from a live host that has it (save | load) when `m` has not."""
        if image_id(ref, host=m.url) is not None:
            return
        with m.lock:
            if image_id(ref, host=m.url) is not None:
                return
            source = next((o for o in self.live() if o is not m and image_id(ref, host=o.url) is not None), None)
            if source is None:
                raise SandboxError(f"image {ref} is on no host of the sandbox pool; prepare it first")
            copy_image(ref, source.url, m.url)

    def _seed(self, m: Member) -> None:
        """The base image on host `m` before its first session: copied from a host that has it, else built
        there (DockerSandbox.base_image)."""
        if m.seeded:
            return
        ref = os.environ.get("TASKMINE_BASE_IMAGE") or base_tag()
        if image_id(ref, host=m.url) is None and any(image_id(ref, host=o.url) for o in self.live() if o is not m):
            self._ensure_image(m, ref)
        _ = m.sandbox.base_image
        m.seeded = True

    @property
    def host(self) -> str:
        """The daemon image builders use now (environments.codeenv): the leased host, else the first live one."""
        return self._home().url

    @property
    def base_image(self) -> str:
        m = self._home()
        with using(m.url):
            self._seed(m)
        return m.sandbox.base_image

    def prepare(self, world_dir: Path, world_id: str | None = None) -> str:
        m = self._home()
        with using(m.url):
            self._seed(m)
            return m.sandbox.prepare(world_dir, world_id)

    def prune(self, keep_world_ids: set[str]) -> list[str]:
        removed: list[str] = []
        for m in self.live():
            with using(m.url):
                removed += [t for t in m.sandbox.prune(keep_world_ids) if t not in removed]
        return removed

    def sweep_once(self) -> None:
        for m in self.live():
            m.sandbox.sweep_once()

    # -- work ----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lease(self) -> Iterator[DockerSandbox]:
        """One slot of one host for the block: its DockerSandbox; within the block this thread's sessions, image
        builds and docker calls go to that host. Nested in a lease of this thread: the same host."""
        held = self._current()
        if held is not None:
            yield held.sandbox
            return
        m = self._ready(self._acquire)
        with self._cond:
            m.leases += 1
        self._local.member = m
        try:
            with using(m.url):
                yield m.sandbox
        finally:
            self._local.member = None
            self._release(m)

    def _ready(self, acquire: Callable[[], Member]) -> Member:
        """A slot (`acquire`) on a host whose base image is there; a host whose daemon no longer answers when
        that is checked leaves the pool and another slot is taken."""
        while True:
            m = acquire()
            try:
                with using(m.url):
                    self._seed(m)
                return m
            except SandboxError:
                self._release(m)
                if daemon_answers(timeout=5, host=m.url):
                    raise
                self._mark_lost(m, "it stopped answering")

    def call(self, fn: Callable[[Sandbox], T]) -> T:
        """`fn(sandbox)` on a lease (see `lease`); run again on another host when its host was lost during it
        (HostLost: the work's result is the host's failure), as long as a host it has not tried is left."""
        tried: set[str] = set()
        while True:
            with self.lease() as box:
                m = self._current()
                try:
                    result = fn(box)
                except HostLost:
                    if m is None or not m.lost:
                        raise
                    result = None
            if m is None or not m.lost:
                return result  # type: ignore[return-value]
            tried.add(m.url)
            if not [o for o in self.live() if o.url not in tried]:
                if result is None:
                    raise HostLost(f"host {m.url} was lost and no other host of the pool is left")
                return result
            _warn(f"running the work of a lost host ({m.url}) again on another host")

    def session(self, world_dir: Path | None = None, *, deadline_s: float = 600, image: str | None = None,
                mounts: tuple[Mount, ...] = (), env: dict[str, str] | None = None) -> DockerSession:
        held = self._current()
        if held is not None:
            return held.sandbox.session(world_dir, deadline_s=deadline_s, image=image, mounts=mounts, env=env)
        have = {m.url for m in self.live() if image is None or image_id(image, host=m.url) is not None}
        m = self._ready(lambda: self._acquire(prefer=have))
        try:
            with using(m.url):
                if image is not None:
                    self._ensure_image(m, image)
                s = m.sandbox.session(world_dir, deadline_s=deadline_s, image=image, mounts=mounts, env=env)
        except BaseException:
            self._release(m)
            raise
        with self._cond:
            m.sessions += 1
        s.on_close.append(lambda _s: self._release(m))
        return s
