"""A stand-in for the Kubernetes API server, for the kubernetes sandbox backend's tests (environments.kube).

There is no cluster on this machine. This is a real HTTP server on 127.0.0.1 (random port) that speaks the
subset of the Kubernetes API the backend uses, so the official client (`kubernetes`) runs unchanged against it:

- pods: `POST /api/v1/namespaces/{ns}/pods`, `GET .../pods/{name}`, `GET .../pods?labelSelector=k=v`,
  `DELETE .../pods/{name}`; an unknown pod is a 404 `Status`, a name taken a 409;
- network policies: `GET|POST /apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies[/{name}]` (stored);
- exec: `GET .../pods/{name}/exec?command=...&container=...&stdin=...` upgraded to a websocket with the channel
  protocol `v4.channel.k8s.io` (never v5, so stdin cannot be closed: what older clusters do), the frame
  codec from the `websockets` library's sans-I/O protocol; the exit status on channel 3 as the API server
  sends it (`Success`, or `Failure` with an `ExitCode` cause).

A pod runs for real on the local Docker daemon, as a kubelet would run it: each container of the pod is a
Docker container (--network none, the securityContext's uid and gid, a read-only root, dropped capabilities,
no-new-privileges, its memory and cpu limits, its command as entrypoint, its env and working directory), each
emptyDir a tmpfs Docker volume the pod's containers share (mounted read-only where the pod says readOnly), so
exec, the helper's file copies and the relayed tool socket cross containers as they do in a pod. An exec is
`docker exec -i` in that container (as its user, as a kubelet's is).

Not emulated: scheduling, image pulls (the image must be on the local daemon; a pod whose image is not there
reports ErrImagePull, as a kubelet that cannot pull it), NetworkPolicy enforcement (the
policy is stored; every container has no network anyway), activeDeadlineSeconds, requests, seccomp profiles,
the v5 protocol, authentication. What was asked is kept: `pods` (name -> manifest as created), `policies`,
`execs` (container, argv, subprotocol), `deleted`.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from websockets.datastructures import Headers
from websockets.exceptions import InvalidState
from websockets.frames import Opcode
from websockets.http11 import Request
from websockets.protocol import Protocol, Side, State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

V4 = Subprotocol("v4.channel.k8s.io")
POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(/exec)?$")
POLICY = re.compile(r"^/apis/networking\.k8s\.io/v1/namespaces/([^/]+)/networkpolicies(?:/([^/]+))?$")


def _docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class StandIn:
    """The server (see the module docstring); `url` for the client's Configuration.host; `close()` deletes every
    pod's containers and volumes."""

    def __init__(self) -> None:
        self.pods: dict[str, dict] = {}
        self.policies: dict[str, dict] = {}
        self.execs: list[dict] = []
        self.deleted: list[str] = []
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args) -> None:
                pass

            def _json(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if m := POD.match(url.path):
                    ns, name, exec_ = m.groups()
                    if exec_:
                        return standin._exec(self, ns, name, parse_qs(url.query))
                    if name is None:
                        wanted = dict(kv.split("=", 1) for kv in parse_qs(url.query).get("labelSelector", [""])[0]
                                      .split(",") if "=" in kv)
                        items = [standin._pod_view(p) for p in list(standin.pods.values())
                                 if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]
                        return self._json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
                    if name not in standin.pods:
                        return self._json(404, _status(404, "NotFound", f'pods "{name}" not found'))
                    return self._json(200, standin._pod_view(standin.pods[name]))
                if m := POLICY.match(url.path):
                    _, name = m.groups()
                    if name in standin.policies:
                        return self._json(200, standin.policies[name])
                    return self._json(404, _status(404, "NotFound", f'networkpolicies "{name}" not found'))
                self._json(404, _status(404, "NotFound", f"the stand-in does not serve {url.path}"))

            def do_POST(self) -> None:
                url = urlparse(self.path)
                body = self._body()
                if (m := POD.match(url.path)) and not m.group(2):
                    name = body["metadata"]["name"]
                    if name in standin.pods:
                        return self._json(409, _status(409, "AlreadyExists", f'pods "{name}" already exists'))
                    try:
                        standin._start(name, body)
                    except subprocess.CalledProcessError as exc:
                        return self._json(422, _status(422, "Invalid", exc.stderr.strip()[-300:]))
                    return self._json(201, standin._pod_view(body))
                if (m := POLICY.match(url.path)) and not m.group(2):
                    name = body["metadata"]["name"]
                    if name in standin.policies:
                        return self._json(409, _status(409, "AlreadyExists", "exists"))
                    standin.policies[name] = body
                    return self._json(201, body)
                self._json(404, _status(404, "NotFound", url.path))

            def do_DELETE(self) -> None:
                m = POD.match(urlparse(self.path).path)
                self._body()
                if not m or m.group(2) not in standin.pods:
                    return self._json(404, _status(404, "NotFound", "no such pod"))
                pod = standin._stop(m.group(2))
                self._json(200, pod)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # -- pods as Docker containers -------------------------------------------------------------------------------

    def _container(self, pod: str, container: str) -> str:
        return f"{pod}-{container}"

    def _start(self, name: str, pod: dict) -> None:
        spec = pod["spec"]
        volumes = {}
        for v in spec.get("volumes") or []:
            vol = f"{name}-{v['name']}"
            _docker("volume", "create", "--driver", "local", "--opt", "type=tmpfs", "--opt", "device=tmpfs",
                    "--opt", "o=size=64m,mode=0777", vol)
            volumes[v["name"]] = vol
        with self._lock:
            self.pods[name] = pod
        missing = [c["image"] for c in spec["containers"] if _docker("image", "inspect", c["image"],
                                                                       check=False).returncode != 0]
        if missing:   # a kubelet would try to pull it and report ErrImagePull on the container's status
            pod["_pull_error"] = missing[0]
            return
        for c in spec["containers"]:
            sc = c.get("securityContext") or {}
            limits = (c.get("resources") or {}).get("limits") or {}
            args = ["create", "--name", self._container(name, c["name"]), "--network", "none",
                    "--label", "taskmine.kube-standin=1", "--hostname", spec.get("hostname") or name,
                    "--log-driver", "none"]
            if "runAsUser" in sc:
                args += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
            if sc.get("readOnlyRootFilesystem"):
                args.append("--read-only")
            if "ALL" in ((sc.get("capabilities") or {}).get("drop") or []):
                args += ["--cap-drop", "ALL"]
            if sc.get("allowPrivilegeEscalation") is False:
                args += ["--security-opt", "no-new-privileges"]
            if "memory" in limits:
                args += ["--memory", limits["memory"].replace("Gi", "g").replace("Mi", "m")]
            if "cpu" in limits:
                args += ["--cpus", str(limits["cpu"])]
            if c.get("workingDir"):
                args += ["--workdir", c["workingDir"]]
            for e in c.get("env") or []:
                args += ["--env", f"{e['name']}={e['value']}"]
            for vm in c.get("volumeMounts") or []:
                args += ["--mount", f"type=volume,source={volumes[vm['name']]},target={vm['mountPath']}"
                                    + (",readonly" if vm.get("readOnly") else "")]
            command = c["command"]
            _docker(*args, "--entrypoint", command[0], c["image"], *command[1:])
        for c in spec["containers"]:
            _docker("start", self._container(name, c["name"]))
        pod["status"] = {"phase": "Running"}

    def _pod_view(self, pod: dict) -> dict:
        """The pod with its status as the containers stand now (a container that exited ends the pod)."""
        name = pod["metadata"]["name"]
        if pod.get("_pull_error"):
            waiting = {"waiting": {"reason": "ErrImagePull", "message": f'pull access denied for {pod["_pull_error"]}'}}
            return {**{k: v for k, v in pod.items() if k != "_pull_error"},
                    "status": {"phase": "Pending", "containerStatuses": [
                        {"name": c["name"], "ready": False, "restartCount": 0, "image": c["image"], "imageID": "",
                         "state": waiting} for c in pod["spec"]["containers"]]}}
        statuses, phase = [], "Running"
        for c in pod["spec"]["containers"]:
            proc = _docker("inspect", "--format", "{{json .State}}|{{.Image}}", self._container(name, c["name"]),
                           check=False)
            if proc.returncode != 0:
                phase = "Failed"
                continue
            state_json, image_id = proc.stdout.strip().rsplit("|", 1)
            state = json.loads(state_json)
            if state.get("Running"):
                st = {"running": {"startedAt": state.get("StartedAt")}}
            else:
                phase = "Failed" if state.get("ExitCode") else "Succeeded"
                st = {"terminated": {"exitCode": state.get("ExitCode", 0), "reason": "Completed"}}
            statuses.append({"name": c["name"], "ready": bool(state.get("Running")), "restartCount": 0,
                             "image": c["image"], "imageID": image_id, "state": st})
        return {**pod, "status": {"phase": phase, "containerStatuses": statuses}}

    def _stop(self, name: str) -> dict:
        with self._lock:
            pod = self.pods.pop(name)
            self.deleted.append(name)
        ids = [self._container(name, c["name"]) for c in pod["spec"]["containers"]]
        _docker("rm", "--force", *ids, check=False)
        vols = [f"{name}-{v['name']}" for v in pod["spec"].get("volumes") or []]
        if vols:
            _docker("volume", "rm", "--force", *vols, check=False)
        return pod

    # -- exec over the websocket channel protocol ------------------------------------------------------------------

    def _exec(self, handler: BaseHTTPRequestHandler, ns: str, name: str, query: dict) -> None:
        if name not in self.pods:
            return handler._json(404, _status(404, "NotFound", f'pods "{name}" not found'))  # type: ignore[attr-defined]
        container = (query.get("container") or [self.pods[name]["spec"]["containers"][0]["name"]])[0]
        argv = query.get("command") or []
        stdin = (query.get("stdin") or ["false"])[0].lower() == "true"
        handshake = ServerProtocol(subprotocols=[V4])
        response = handshake.accept(Request(handler.path, Headers(list(handler.headers.items()))))
        handshake.send_response(response)
        sock = handler.connection
        sock.sendall(b"".join(handshake.data_to_send()))
        if response.status_code != 101:
            return
        # the frames: a protocol in the open state (http.server has parsed the request already)
        proto = Protocol(Side.SERVER, state=State.OPEN, max_size=None)
        self.execs.append({"pod": name, "container": container, "argv": argv,
                           "subprotocol": response.headers.get("Sec-WebSocket-Protocol")})
        proc = subprocess.Popen(["docker", "exec", *(["-i"] if stdin else []), self._container(name, container),
                                 *argv], stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        send_lock = threading.Lock()

        def send(channel: int, data: bytes) -> None:
            with send_lock, contextlib.suppress(OSError, InvalidState):   # the client may have gone
                proto.send_binary(bytes([channel]) + data)
                sock.sendall(b"".join(proto.data_to_send()))

        def pump(stream, channel: int) -> None:
            while chunk := stream.read1(65536):
                send(channel, chunk)

        pumps = [threading.Thread(target=pump, args=(proc.stdout, 1), daemon=True),
                 threading.Thread(target=pump, args=(proc.stderr, 2), daemon=True)]
        for t in pumps:
            t.start()

        def read_client() -> None:
            """Client frames: channel 0 to the process's stdin; a close (or a dropped connection) ends it."""
            try:
                while True:   # rfile: its buffer may hold frames the client sent with the upgrade request
                    data = handler.rfile.read1(1 << 16)
                    if not data:
                        break
                    with send_lock:
                        proto.receive_data(data)
                        events = proto.events_received()
                        sock.sendall(b"".join(proto.data_to_send()))
                    for ev in events:
                        if ev.opcode == Opcode.CLOSE:
                            raise EOFError
                        if ev.opcode in (Opcode.BINARY, Opcode.TEXT) and ev.data[:1] == b"\0" and proc.stdin:
                            proc.stdin.write(ev.data[1:])
                            proc.stdin.flush()
            except (OSError, EOFError, ValueError):
                pass
            if proc.poll() is None:
                proc.kill()

        reader = threading.Thread(target=read_client, daemon=True)
        reader.start()
        code = proc.wait()
        for t in pumps:
            t.join(timeout=10)
        status = {"metadata": {}, "status": "Success"} if code == 0 else {
            "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
        send(3, json.dumps(status).encode())
        with send_lock, contextlib.suppress(Exception):   # the client may have closed first
            proto.send_close()
            sock.sendall(b"".join(proto.data_to_send()))
        time.sleep(0.05)
        handler.close_connection = True

    def close(self) -> None:
        for name in list(self.pods):
            self._stop(name)
        self.server.shutdown()
        self.server.server_close()
