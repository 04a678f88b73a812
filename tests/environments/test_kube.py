"""The Kubernetes sandbox backend (environments.kube), as far as this machine allows.

There is no Kubernetes cluster here. These tests run the backend, through the official `kubernetes` client, against
a stand-in API server (kube_standin.py) that speaks the subset of the API the backend uses: pods created, read,
listed and deleted, a NetworkPolicy read and created, and exec over the websocket channel protocol (v4: stdin can
never be closed). The stand-in runs each pod for real on the local Docker daemon (a container per pod container,
a shared tmpfs volume per emptyDir), so what runs in the pod is the real supervisor, copy and relay.

Not run here (no cluster): scheduling and image pulls (`registry=`: the push and the cluster's pull), the
NetworkPolicy's enforcement by a network plugin, activeDeadlineSeconds, emptyDir size-limit evictions, seccomp
and a kubelet's pids limit; the v5 protocol; authentication. docs/architecture.md says how to run the backend on
a real cluster.
"""

from __future__ import annotations

import json
import os

import pytest
from kube_standin import StandIn
from tiny_company import episode_world

from environments.docker_cli import SandboxError
from environments.episode import Episode
from environments.kube import NETWORK_POLICY, POLICY_NAME, KubernetesSandbox, _exit_code, pod_manifest
from environments.sandbox import Mount


def test_the_pod_carries_every_hardening_field(tmp_path):
    (tmp_path / "view").mkdir()
    pod = pod_manifest("taskmine-x", "img:1", 600, (Mount(tmp_path / "s", "/run/company", relay=True),
                                                    Mount(tmp_path / "view", "/world/git")), {"A": "b"},
                       memory="1g", cpus=1.5)
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert not spec["hostNetwork"] and not spec["hostPID"] and not spec["hostIPC"]
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] >= 600
    agent, helper = spec["containers"]
    for c, uid in ((agent, 1000), (helper, 1001)):
        sc = c["securityContext"]
        assert (sc["runAsUser"], sc["runAsNonRoot"], sc["allowPrivilegeEscalation"], sc["readOnlyRootFilesystem"],
                sc["capabilities"], sc["seccompProfile"]) == (uid, True, False, True, {"drop": ["ALL"]},
                                                              {"type": "RuntimeDefault"})
        assert c["command"][:4] == ["python3", "-I", "/usr/local/lib/taskmine/supervise", "init"]
    assert agent["resources"]["limits"] == {"memory": "1Gi", "cpu": "1.5"}
    # the agent mounts every copied folder read-only; only the helper writes them
    assert [(m["mountPath"], m.get("readOnly", False)) for m in agent["volumeMounts"]] == [
        ("/tmp", False), ("/home/agent", False), ("/run/company", True), ("/world/git", True)]
    assert [(m["mountPath"], m.get("readOnly", False)) for m in helper["volumeMounts"]] == [
        ("/run/company", False), ("/world/git", False)]
    assert all(v["emptyDir"]["medium"] == "Memory" and v["emptyDir"]["sizeLimit"] for v in spec["volumes"])
    assert {"name": "A", "value": "b"} in agent["env"] and "docker.sock" not in json.dumps(pod)
    assert NETWORK_POLICY["spec"] == {"podSelector": {"matchLabels": {"taskmine.sandbox": "1"}},
                                      "policyTypes": ["Ingress", "Egress"]}


def test_nested_mounts_are_refused_with_a_reason(tmp_path):
    with pytest.raises(SandboxError, match="inside another mount"):
        pod_manifest("p", "img", 60, (Mount(tmp_path, "/world"), Mount(tmp_path, "/world/git")))


def test_exit_codes_of_the_exec_status_channel():
    assert _exit_code(b'{"metadata":{},"status":"Success"}') == 0
    assert _exit_code(b'{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":'
                      b'[{"reason":"ExitCode","message":"3"}]}}') == 3
    assert _exit_code(b"") is None and _exit_code(b"[]") is None


@pytest.fixture
def kube(docker_sandbox):
    """The backend against the stand-in (whose pods run on the local Docker daemon)."""
    from kubernetes import client

    standin = StandIn()
    cfg = client.Configuration()
    cfg.host = standin.url
    box = KubernetesSandbox("taskmine-test", api_client=client.ApiClient(cfg), base_image=docker_sandbox.base_image)
    yield box, standin
    standin.close()


@pytest.mark.docker
def test_a_command_in_a_pod_sees_its_world_read_only_as_the_agent(kube, tmp_path):
    box, standin = kube
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "issue.json").write_text('{"key": "PROJ-7"}')
    r = box.run(tmp_path / "w", "cat /world/issue.json; echo; id -u; echo $TASKMINE_WORLD $EXTRA; "
                                "touch /world/x 2>&1; touch /x 2>&1; exit 3", timeout_s=60, env={"EXTRA": "yes"})
    assert r.sandbox == "kubernetes" and r.exit_code == 3 and r.image_digest
    assert r.stdout.splitlines() == ['{"key": "PROJ-7"}', "1000", "/world yes",
                                     "touch: cannot touch '/world/x': Read-only file system",
                                     "touch: cannot touch '/x': Read-only file system"]
    assert POLICY_NAME in standin.policies                      # created once, before the first pod
    assert {e["subprotocol"] for e in standin.execs} == {"v4.channel.k8s.io"}
    assert [e["container"] for e in standin.execs] == ["helper", "agent"]   # the copy as the helper
    assert standin.pods == {} and len(standin.deleted) == 1     # the pod is gone with the session


@pytest.mark.docker
def test_an_episode_in_a_pod_uses_the_tools_git_and_files(kube, tmp_path):
    """The Episode as validation runs it: the git view copied into the pod, the tool socket relayed to the tool
    server on this machine, files written and read back without an end of input."""
    box, standin = kube
    worlds, world, shas = episode_world(tmp_path)
    with Episode(worlds, world, box) as ep:
        r = ep.exec("company jira show PROJ-1 | head -1; git -C ~/repo log --all --format=%s; "
                    "touch /run/company/x /world/git/x 2>&1 | wc -l; "
                    f"company answer --sha {shas['Add the CSV export'][:7]}")
        assert "PROJ-1: Login times out after password reset" in r.stdout
        assert "Add the CSV export\nAdd the login module" in r.stdout and "session pool" not in r.stdout
        assert "\n2\n" in r.stdout and "recorded #1: answer" in r.stdout
        assert [e.action.sha for e in ep.actions] == [shas["Add the CSV export"][:7]]
        data = os.urandom(3 << 20)
        ep.session.write_file("/home/agent/blob.bin", data, 0o600)
        assert ep.session.read_file("/home/agent/blob.bin") == data
        assert ep.exec("stat -c %a%U /home/agent/blob.bin").stdout.strip() == "600agent"
        pod = next(iter(standin.pods))
    assert pod in standin.deleted and standin.pods == {}


@pytest.mark.docker
def test_a_pod_that_cannot_start_is_one_line_and_is_deleted(kube):
    box, standin = kube
    with pytest.raises(SandboxError) as err:
        box.session(image="taskmine-no-such-image:0")
    assert "\n" not in str(err.value) and "cannot be pulled (ErrImagePull" in str(err.value)
    assert "TASKMINE_KUBE_REGISTRY" in str(err.value) and standin.pods == {}


@pytest.mark.docker
def test_sweep_deletes_pods_whose_owner_is_gone(kube):
    box, standin = kube
    s = box.session(deadline_s=120)
    standin.pods[s.name]["metadata"]["annotations"]["taskmine.owner"] = f"{os.uname().nodename}:999999999:1"
    assert box.sweep() == 1 and s.name not in standin.pods
    s.close()                                     # already gone: closing says nothing
