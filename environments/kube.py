"""The Kubernetes sandbox backend: a pod per session through the official client (`kubernetes`), behind the same
`Sandbox`/`Session` interface as Docker (exec, read_file, write_file, close) and with the same supervisor inside.

The pod (`pod_manifest`):
- container `agent`: the session's image; PID 1 is `supervise init --deadline N`; uid 1000, read-only root file
  system, every capability dropped, no privilege escalation, the RuntimeDefault seccomp profile, memory and cpu
  limits; /tmp and /home/agent are memory-backed emptyDirs with a size limit; every `Mount` is an emptyDir it
  mounts read-only;
- container `helper`: the same image as images.HELPER_UID (not the agent's uid), the same emptyDirs read-write:
  the cluster cannot see this machine's folders, so the helper fills them (`supervise untar` over exec) and
  serves the tool socket (`supervise relay`, environments.relay, carried to the tool server on this machine).
  The agent can neither write what the helper filled nor signal it (another uid, another container);
- no service-account token, no service links, no host namespaces, restartPolicy Never and activeDeadlineSeconds
  (the cluster ends the pod even when this process is gone; `sweep` deletes what is left), label
  `taskmine.sandbox=1`, annotations with the owner (host, pid and its start) and the deadline;
- no network: a NetworkPolicy that denies all ingress and egress to pods labelled `taskmine.sandbox=1`
  (`ensure_network_policy`, created once per namespace). The cluster's network plugin must enforce
  NetworkPolicy (most do; kubenet does not): `network_isolated` reports what was asked, not what was measured.

Exec is `connect_get_namespaced_pod_exec` over the websocket channel protocol (v5 or v4), binary. Nothing here
needs to close stdin (the v4 protocol cannot): `write --size`, `untar --size`, relay frames with a BYE. Extra
environment variables of one command are passed as `env -- K=V ... python3 -I supervise run ...` (exec has no
env of its own); the session's own go into the container spec.

Images: the cluster pulls them. With a registry (`registry=`, TASKMINE_KUBE_REGISTRY) every image the backend
uses (the base image, a code task's environment image, environments.codeenv) is built with the local Docker
daemon, tagged `<registry>/<name>:<tag>` and pushed there (`publish`); without one, the local name is used as
is (a cluster whose nodes have it: kind/minikube `load`, a node-local daemon). `TASKMINE_KUBE_IMAGE` names a
base image the cluster already has. Worlds are never baked into task images here: a session copies its world
folder in like any other mount.

Configuration: namespace (TASKMINE_KUBE_NAMESPACE, default "default"), kubeconfig context
(TASKMINE_KUBE_CONTEXT) and file (KUBECONFIG), else the in-cluster service account.

Not covered: a pids limit (a kubelet setting, podPidsLimit, not a pod field); an emptyDir over its sizeLimit
gets the pod evicted, where Docker's tmpfs says ENOSPC (the command fails either way; the pod's end is reported
as the session's); `kill_others` kills the agent container's processes (the helper is another container).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import time
import uuid
from pathlib import Path

from environments import relay, supervise
from environments.docker_cli import SandboxError, docker
from environments.images import AGENT_UID, HELPER_UID, SUPERVISE_PATH, ensure_base_image
from environments.sandbox import (
    FRAME_LIMIT,
    HOST_GRACE_S,
    LABEL,
    OUTPUT_LIMIT,
    ExecResult,
    Mount,
    Sandbox,
    Session,
    _check_env,
    _exec_result,
    _frame,
    owner_alive,
    owner_tag,
)

POLICY_NAME = "taskmine-sandbox-deny-all"
READY_TIMEOUT_S = 300
CHUNK = 512 << 10             # bytes per websocket frame of stdin
STDIN_CHANNEL, STDOUT_CHANNEL, STDERR_CHANNEL, ERROR_CHANNEL = 0, 1, 2, 3
FAILED_WAITING = {"ErrImagePull": "the image cannot be pulled", "ImagePullBackOff": "the image cannot be pulled",
                  "InvalidImageName": "the image name is invalid",
                  "CreateContainerConfigError": "the container configuration is refused",
                  "CreateContainerError": "the container cannot be created"}


def _quantity(value: str) -> str:
    """A Docker-style size (1g, 256m) as a Kubernetes quantity (1Gi, 256Mi); Kubernetes ones pass."""
    m = re.fullmatch(r"(\d+)([kmgKMG])?", value.strip())
    if not m:
        return value
    number, unit = m.groups()
    return number + ({"k": "Ki", "m": "Mi", "g": "Gi"}[unit.lower()] if unit else "")


def _mib(m: Mount) -> int:
    """The emptyDir size limit of a copied mount: its files and a margin (a socket folder: a little)."""
    return 1 if m.relay else (relay.tree_bytes(Path(m.source)) * 5 // 4 >> 20) + 16


def pod_manifest(name: str, image: str, deadline_s: float, mounts: tuple[Mount, ...] = (),
                 env: dict[str, str] | None = None, *, memory: str = "1Gi", cpus: float = 1.0,
                 tmpfs_size: str = "256Mi", pull_policy: str = "IfNotPresent") -> dict:
    """The pod of one session (see the module docstring); every hardening field lives here (tests read it)."""
    targets = [m.target for m in mounts]
    for t in targets:
        if any(o != t and t.startswith(o.rstrip("/") + "/") for o in targets):
            raise SandboxError(f"mount {t} is inside another mount: the kubernetes backend mounts each folder as "
                               "its own volume; give them separate targets")
    init = ["python3", "-I", SUPERVISE_PATH, "init", "--deadline", f"{deadline_s:.0f}"]

    def security(uid: int) -> dict:
        return {"runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True, "privileged": False, "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"}}

    limits = {"memory": _quantity(memory), "cpu": f"{cpus:g}"}
    volumes = [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(tmpfs_size)}},
               {"name": "home", "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(tmpfs_size)}}]
    agent_mounts = [{"name": "tmp", "mountPath": "/tmp"}, {"name": "home", "mountPath": "/home/agent"}]
    helper_mounts = []
    for i, m in enumerate(mounts):
        volumes.append({"name": f"m{i}", "emptyDir": {"medium": "Memory", "sizeLimit": f"{_mib(m)}Mi"}})
        agent_mounts.append({"name": f"m{i}", "mountPath": m.target, "readOnly": True})
        helper_mounts.append({"name": f"m{i}", "mountPath": m.target})
    agent_env = [{"name": "TASKMINE_WORLD", "value": "/world"},
                 *({"name": k, "value": v} for k, v in _check_env(env).items())]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {LABEL: "1"},
                     "annotations": {"taskmine.owner": owner_tag(),
                                     "taskmine.deadline": f"{time.time() + deadline_s:.0f}"}},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": int(deadline_s) + HOST_GRACE_S,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "hostNetwork": False, "hostPID": False, "hostIPC": False,
            "shareProcessNamespace": False,
            "terminationGracePeriodSeconds": 0,
            "hostname": "sandbox",
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "agent", "image": image, "imagePullPolicy": pull_policy, "command": init,
                 "workingDir": "/home/agent", "env": agent_env, "securityContext": security(AGENT_UID),
                 "resources": {"limits": limits, "requests": limits}, "volumeMounts": agent_mounts},
                {"name": "helper", "image": image, "imagePullPolicy": pull_policy, "command": init,
                 "workingDir": "/", "securityContext": security(HELPER_UID),
                 "resources": {"limits": {"memory": "128Mi", "cpu": "0.2"},
                               "requests": {"memory": "64Mi", "cpu": "0.05"}},
                 "volumeMounts": helper_mounts},
            ],
            "volumes": volumes,
        },
    }


NETWORK_POLICY = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": POLICY_NAME},
    # no rules under either type: nothing in, nothing out
    "spec": {"podSelector": {"matchLabels": {LABEL: "1"}}, "policyTypes": ["Ingress", "Egress"]},
}


def _api_error(exc: Exception, what: str) -> SandboxError:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None) or type(exc).__name__
    body = getattr(exc, "body", None)
    with contextlib.suppress(ValueError, TypeError):
        reason = json.loads(body).get("message") or reason
    hint = {401: "check the kubeconfig's credentials", 403: "the account lacks the RBAC permission",
            404: "check the namespace (TASKMINE_KUBE_NAMESPACE)"}.get(status or 0, "is the API server reachable?")
    return SandboxError(f"kubernetes: could not {what}: {status or ''} {str(reason)[:200]}; {hint}".replace("  ", " "))


class KubeStream:
    """A process in a pod, over the exec websocket, as a `relay.Stream` (binary stdin, stdout)."""

    def __init__(self, ws):
        self.ws = ws
        self.buf = bytearray()

    def write(self, data: bytes) -> None:
        try:
            for i in range(0, len(data), CHUNK):
                self.ws.write_stdin(data[i:i + CHUNK])
        except Exception as exc:   # websocket-client raises its own and socket errors: the stream is gone
            raise SandboxError("the process in the pod ended early") from exc

    def _pull(self, timeout: float) -> None:
        try:
            self.ws.update(timeout=timeout)
            self.buf += self.ws.read_channel(STDOUT_CHANNEL) or b""
            self.ws.read_channel(STDERR_CHANNEL)
        except Exception:   # closed under us (close() from another thread): what was read stays readable
            with contextlib.suppress(Exception):
                self.ws.close()

    def read(self, n: int) -> bytes:
        while not self.buf and self.ws.is_open():
            self._pull(1.0)
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


def _exit_code(status: bytes | str | None) -> int | None:
    """The exit code in an exec's status (channel 3): Success is 0, a NonZeroExitCode cause its number."""
    try:
        value = json.loads(status or b"")
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    if value.get("status") == "Success":
        return 0
    for cause in (value.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode" and str(cause.get("message", "")).isdigit():
            return int(cause["message"])
    return None


class _Bounded:
    def __init__(self, limit: int):
        self.buf, self.limit = bytearray(), limit

    def add(self, data: bytes | None) -> None:
        if data:
            self.buf += data
            if len(self.buf) > self.limit:
                del self.buf[:len(self.buf) - self.limit]

    def text(self) -> str:
        return bytes(self.buf).decode("utf-8", "replace")


class KubeSession(Session):
    kind = "kubernetes"

    def __init__(self, sandbox: KubernetesSandbox, image: str, deadline_s: float, mounts: tuple[Mount, ...] = (),
                 env: dict[str, str] | None = None):
        self.sandbox, self.image = sandbox, image
        self.name = f"taskmine-{uuid.uuid4().hex[:24]}"
        self.deadline = time.time() + deadline_s
        self.relays: list[relay.SocketRelay] = []
        self.network_isolated = True   # the NetworkPolicy exists (ensure_network_policy); enforced by the CNI
        self._closed = False
        manifest = pod_manifest(self.name, image, deadline_s, mounts, env, **sandbox.pod_options)
        try:
            sandbox.core().create_namespaced_pod(sandbox.namespace, manifest)
        except Exception as exc:   # the client's ApiException, urllib3's connection errors
            raise _api_error(exc, f"create pod {self.name}") from None
        try:
            self.image_digest = self._wait_running()
            for m in mounts:
                if m.relay:
                    self.relays += relay.relay_sockets(self._helper, Path(m.source), m.target)
                else:
                    relay.copy_in(self._helper, Path(m.source), m.target)
        except BaseException:
            self.close()
            raise

    def _wait_running(self) -> str | None:
        """Wait until both containers run; the agent's image ID. A pod that cannot start is a SandboxError."""
        end = time.monotonic() + self.sandbox.ready_timeout_s
        while True:
            try:
                pod = self.sandbox.core().read_namespaced_pod(self.name, self.sandbox.namespace)
            except Exception as exc:
                raise _api_error(exc, f"read pod {self.name}") from None
            status = pod.status
            phase = getattr(status, "phase", None)
            states = {c.name: c for c in (getattr(status, "container_statuses", None) or [])}
            for c in states.values():
                waiting = getattr(c.state, "waiting", None) if c.state else None
                if waiting is not None and waiting.reason in FAILED_WAITING:
                    raise SandboxError(f"pod {self.name}: {FAILED_WAITING[waiting.reason]} ({waiting.reason}: "
                                       f"{(waiting.message or '')[:200]}); push {self.image} to a registry the "
                                       "cluster reads (TASKMINE_KUBE_REGISTRY) or load it into its nodes")
            if phase in ("Failed", "Succeeded"):
                raise SandboxError(f"pod {self.name} ended before its first command ({phase}: "
                                   f"{getattr(status, 'reason', None) or getattr(status, 'message', None) or '?'})")
            if phase == "Running" and len(states) == 2 and all(c.state and c.state.running for c in states.values()):
                agent = states.get("agent")
                return getattr(agent, "image_id", None) or None
            if time.monotonic() > end:
                raise SandboxError(f"pod {self.name} is not running after {self.sandbox.ready_timeout_s:.0f}s "
                                   f"(phase {phase}); is the cluster short of room for it?")
            time.sleep(0.5)

    # -- exec -------------------------------------------------------------------------------------------------

    def _open(self, container: str, argv: list[str], stdin: bool):
        from kubernetes.stream import stream   # the client loads with the backend's first session, not with taskmine

        try:
            return stream(self.sandbox.core().connect_get_namespaced_pod_exec, self.name, self.sandbox.namespace,
                          container=container, command=argv, stdin=stdin, stdout=True, stderr=True, tty=False,
                          _preload_content=False, binary=True)
        except Exception as exc:
            raise _api_error(exc, f"exec in pod {self.name}") from None

    def _helper(self, argv: list[str]) -> KubeStream:
        """The supervisor in the helper container (uid HELPER_UID) as a stream."""
        return KubeStream(self._open("helper", ["python3", "-I", SUPERVISE_PATH, *argv], stdin=True))

    def _run(self, argv: list[str], timeout_s: float,
             stdin: bytes | None = None) -> tuple[bool, int | None, str, str]:
        """Run argv in the agent container: (ended in time, exit code or None, stdout, stderr)."""
        ws = self._open("agent", argv, stdin is not None)
        out, err = _Bounded(FRAME_LIMIT), _Bounded(OUTPUT_LIMIT)
        status = b""
        try:
            if stdin is not None:
                KubeStream(ws).write(stdin)
            end = time.monotonic() + timeout_s
            while ws.is_open():
                if time.monotonic() > end:
                    return False, None, out.text(), err.text()
                try:
                    ws.update(timeout=min(1.0, max(0.0, end - time.monotonic())))
                except Exception:   # the connection dropped: what arrived is all there is
                    break
                out.add(ws.read_channel(STDOUT_CHANNEL))
                err.add(ws.read_channel(STDERR_CHANNEL))
                status += ws.read_channel(ERROR_CHANNEL) or b""
            out.add(ws.read_channel(STDOUT_CHANNEL))
            err.add(ws.read_channel(STDERR_CHANNEL))
            status += ws.read_channel(ERROR_CHANNEL) or b""
        finally:
            with contextlib.suppress(Exception):
                ws.close()
        return True, _exit_code(status), out.text(), err.text()

    def _call(self, argv: list[str], timeout_s: float, stdin: bytes | None = None) -> tuple[dict | None, str]:
        if self._closed:
            raise SandboxError(f"session {self.name} is closed")
        left = self.deadline - time.time()
        wait = min(timeout_s, max(left, 1)) + HOST_GRACE_S
        ended, _code, out, err = self._run(argv, wait, stdin)
        if not ended:   # the supervisor in the pod did not end it: the pod is unhealthy
            self.close()
            raise SandboxError(f"exec in pod {self.name} did not return within {wait:.0f}s; the pod was deleted")
        return _frame(out), err

    def _pod_alive(self) -> bool:
        try:
            pod = self.sandbox.core().read_namespaced_pod(self.name, self.sandbox.namespace)
        except Exception:
            return False
        return getattr(pod.status, "phase", None) == "Running"

    def _supervise(self, *argv: str, env: dict[str, str] | None = None) -> list[str]:
        prefix = ["env", "--", *(f"{k}={v}" for k, v in env.items())] if env else []
        return [*prefix, "python3", "-I", SUPERVISE_PATH, *argv]

    def exec(self, command: str, *, timeout_s: float = 120, env: dict | None = None,
             kill_others: bool = True) -> ExecResult:
        extra = _check_env(env)
        left = self.deadline - time.time()
        timeout_s = max(0.1, min(timeout_s, left))
        started = time.monotonic()
        frame, err = self._call(self._supervise("run", "--timeout", f"{timeout_s:.3f}",
                                                *(["--kill-others"] if kill_others else []), "--", command,
                                                env=extra), timeout_s)
        if frame is None:
            why = "the command killed its supervisor (no result)" if self._pod_alive() else \
                "the pod ended during the command" if left > timeout_s else "the session's deadline passed"
            return _exec_result(None, time.monotonic() - started, err, why)
        return _exec_result(frame, time.monotonic() - started, err, "")

    def read_file(self, path: str, limit: int = supervise.READ_LIMIT) -> bytes:
        frame, err = self._call(self._supervise("read", "--limit", str(limit), path), 60)
        if frame is None or not isinstance(frame.get("data"), str):
            raise SandboxError(f"could not read {path} in pod {self.name}: {err.strip()[-200:] or 'no result'}")
        if frame.get("error"):
            raise SandboxError(f"{path} {frame['error']}")
        return base64.b64decode(frame["data"])

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        frame, err = self._call(self._supervise("write", "--size", str(len(data)), "--mode", f"{mode:o}",
                                                "--limit", str(len(data)), path), 60, stdin=data)
        if frame is None or frame.get("ok") is not True:
            why = (frame or {}).get("error") or err.strip()[-200:] or "no result"
            raise SandboxError(f"could not write {path} in pod {self.name}: {why}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for r in self.relays:
            r.close()
        with contextlib.suppress(Exception):   # gone already, or the API is down: `sweep` deletes it later
            self.sandbox.core().delete_namespaced_pod(self.name, self.sandbox.namespace, grace_period_seconds=0)


class KubernetesSandbox(Sandbox):
    """Sessions as pods in a Kubernetes namespace (see the module docstring)."""

    kind = "kubernetes"

    def __init__(self, namespace: str | None = None, *, context: str | None = None, config_file: str | None = None,
                 api_client=None, base_image: str | None = None, registry: str | None = None, memory: str = "1Gi",
                 cpus: float = 1.0, tmpfs_size: str = "256Mi", pull_policy: str = "IfNotPresent",
                 ready_timeout_s: float = READY_TIMEOUT_S):
        self.namespace = namespace or os.environ.get("TASKMINE_KUBE_NAMESPACE") or "default"
        self.context = context or os.environ.get("TASKMINE_KUBE_CONTEXT") or None
        self.config_file = config_file
        self.registry = (registry or os.environ.get("TASKMINE_KUBE_REGISTRY") or "").rstrip("/") or None
        self._base = base_image or os.environ.get("TASKMINE_KUBE_IMAGE") or None
        self.pod_options = {"memory": memory, "cpus": cpus, "tmpfs_size": tmpfs_size, "pull_policy": pull_policy}
        self.limits = {"memory": _quantity(memory), "cpus": cpus, "tmpfs_size": _quantity(tmpfs_size)}
        self.ready_timeout_s = ready_timeout_s
        self._client = api_client
        self._core = None
        self._policy = False
        self._published: dict[str, str] = {}

    def core(self):
        """The CoreV1Api (made on first use: the kubeconfig, else the in-cluster service account)."""
        if self._core is None:
            from kubernetes import client, config   # loaded on first use: taskmine starts without it

            if self._client is None:
                try:
                    self._client = config.new_client_from_config(config_file=self.config_file, context=self.context)
                except Exception:   # no kubeconfig: maybe we run in a pod
                    try:
                        config.load_incluster_config()
                    except config.ConfigException as exc:
                        raise SandboxError("kubernetes: no kubeconfig (KUBECONFIG, ~/.kube/config) and not in a "
                                           f"cluster ({exc}); point KUBECONFIG at the cluster") from None
                    self._client = client.ApiClient()
            self._core = client.CoreV1Api(self._client)
        return self._core

    def ensure_network_policy(self) -> None:
        """The namespace's deny-all NetworkPolicy for sandbox pods (created when missing; once per sandbox)."""
        if self._policy:
            return
        from kubernetes import client   # loaded on first use, as in `core`
        from kubernetes.client.rest import ApiException

        net = client.NetworkingV1Api(self.core().api_client)
        try:
            net.read_namespaced_network_policy(POLICY_NAME, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise _api_error(exc, f"read NetworkPolicy {POLICY_NAME}") from None
            try:
                net.create_namespaced_network_policy(self.namespace, NETWORK_POLICY)
            except ApiException as exc2:
                if exc2.status != 409:   # made by another process meanwhile
                    raise _api_error(exc2, f"create NetworkPolicy {POLICY_NAME} (sandbox pods must have no "
                                           "network; an admin can apply it: docs/architecture.md)") from None
        except Exception as exc:
            raise _api_error(exc, f"read NetworkPolicy {POLICY_NAME}") from None
        self._policy = True

    def publish(self, ref: str) -> str:
        """The name the cluster pulls a local image `ref` by: pushed to the registry when one is set."""
        if not self.registry:
            return ref
        if ref not in self._published:
            target = f"{self.registry}/{ref.rsplit('/', 1)[-1]}"
            docker("tag", ref, target, timeout=60)
            docker("push", target, timeout=1800)
            self._published[ref] = target
        return self._published[ref]

    @property
    def base_image(self) -> str:
        if self._base is None:
            self._base = self.publish(ensure_base_image())
        return self._base

    def sweep_once(self) -> None:
        if not type(self)._swept:
            type(self)._swept = True
            with contextlib.suppress(SandboxError):
                self.sweep()

    def sweep(self, now: float | None = None) -> int:
        """Delete the sandbox pods that ended, whose owner is gone or whose deadline passed long ago."""
        now = time.time() if now is None else now
        try:
            pods = self.core().list_namespaced_pod(self.namespace, label_selector=f"{LABEL}=1").items
        except Exception as exc:
            raise _api_error(exc, "list the sandbox pods") from None
        removed = 0
        for pod in pods:
            notes = pod.metadata.annotations or {}
            deadline = notes.get("taskmine.deadline", "")
            expired = deadline.isdigit() and float(deadline) + HOST_GRACE_S < now
            ended = getattr(pod.status, "phase", None) in ("Succeeded", "Failed")
            if ended or expired or owner_alive(notes.get("taskmine.owner", "")) is False:
                with contextlib.suppress(Exception):
                    self.core().delete_namespaced_pod(pod.metadata.name, self.namespace, grace_period_seconds=0)
                    removed += 1
        return removed

    def session(self, world_dir: Path | None = None, *, deadline_s: float = 600, image: str | None = None,
                mounts: tuple[Mount, ...] = (), env: dict[str, str] | None = None) -> KubeSession:
        self.sweep_once()
        self.ensure_network_policy()
        if world_dir is not None:
            if not Path(world_dir).is_dir():
                raise SandboxError(f"world directory {world_dir} does not exist")
            mounts = (Mount(Path(world_dir), "/world"), *mounts)
        return KubeSession(self, self.publish(image) if image else self.base_image, deadline_s, mounts, env)
