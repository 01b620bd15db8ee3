"""`llmd-fleet status`: recorded API answers for each state of a fleet (all ready, loading, no
leader, preflight failed), the kubeconfig and cluster refusals, one request to a loopback server,
and the watch loop."""

import base64
import json
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llmd_fleet.cli.main import run
from llmd_fleet.cli.stack_file import read_stack_file, stack_config
from llmd_fleet.cli.status import (
    GROUP_INDEX,
    LWS_NAME,
    StatusError,
    chat_request,
    gateway_url,
    pod_reason,
    read_status,
    watch,
)
from llmd_fleet.cluster.client import ClusterError, KubeconfigError, kubeconfig_paths, load_client
from llmd_fleet.layers.preflight.specs import job_name
from llmd_fleet.layers.router.specs import RouterNames
from llmd_fleet.layers.serving.specs import pool_selector
from llmd_fleet.stack.model import StackConfig
from tests.support import REFERENCE_STACK, STACKS_DIR, serve_in_background

NOW = datetime(2026, 10, 1, 12, 0, 0, tzinfo=UTC)
SIZES = {"prefill": 2, "decode": 4}
DESIRED = {"prefill": 3, "decode": 2}


def _config(stack: str = REFERENCE_STACK) -> StackConfig:
    return stack_config(read_stack_file(STACKS_DIR, stack))


def _stamp(delta: timedelta) -> str:
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def _pod(config: StackConfig, role: str, group: int, index: int, ready: bool) -> dict[str, Any]:
    lws = f"{config.serving.name}-{role}"
    return {
        "metadata": {
            "name": f"{lws}-{group}-{index}",
            "labels": pool_selector(config) | {"llm-d.ai/role": role, LWS_NAME: lws, GROUP_INDEX: str(group)},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


class FakeApi:
    """An API server's recorded answers, keyed by path; lists filtered by their label selector."""

    def __init__(
        self,
        config: StackConfig,
        loaded_groups: dict[str, int],
        leader: str | None = "epp-0",
        lease_renewed_s: float = 3,
        job: str | None = "Complete",
    ) -> None:
        ns, name = config.serving.namespace, config.serving.name
        self.pods = [
            _pod(config, role, group, index, ready=group < loaded_groups[role])
            for role in ("prefill", "decode")
            for group in range(DESIRED[role])
            for index in range(SIZES[role])
        ]
        # Another stack's pod in the same namespace: never counted.
        self.pods.append(_pod(config, "decode", 0, 0, True) | {"metadata": {"name": "x", "labels": {}}})
        lease = RouterNames(pool=name, namespace=ns).leader_lease
        self.objects: dict[str, Any] = {
            f"/apis/disaggregatedset.x-k8s.io/v1/namespaces/{ns}/disaggregatedsets/{name}": {
                "spec": {
                    "roles": [
                        {
                            "name": role,
                            "spec": {
                                "replicas": DESIRED[role],
                                "leaderWorkerTemplate": {"size": SIZES[role]},
                            },
                        }
                        for role in ("prefill", "decode")
                    ]
                }
            },
            f"/apis/inference.networking.k8s.io/v1/namespaces/{ns}/inferencepools/{name}": {
                "spec": {"selector": {"matchLabels": pool_selector(config)}}
            },
            f"/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/gateways/llm-d-inference-gateway": {
                "status": {"addresses": [{"type": "IPAddress", "value": "10.0.0.7"}]}
            },
        }
        if leader is not None:
            self.objects[f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{lease}"] = {
                "spec": {
                    "holderIdentity": leader,
                    "leaseDurationSeconds": 15,
                    "acquireTime": _stamp(timedelta(minutes=41)),
                    "renewTime": _stamp(timedelta(seconds=lease_renewed_s)),
                }
            }
        if job is not None:
            self.objects[f"/apis/batch/v1/namespaces/{ns}/jobs/{job_name(config)}"] = {
                "status": {"conditions": [{"type": job, "status": "True", "reason": "BackoffLimitExceeded"}]}
                if job != "running"
                else {"active": 2}
            }
        self.pods_path = f"/api/v1/namespaces/{ns}/pods"

    def __call__(self, path: str, params: dict[str, str] | None) -> Any:
        if path == self.pods_path:
            wanted = dict(kv.split("=") for kv in (params or {})["labelSelector"].split(","))
            return {"items": [p for p in self.pods if wanted.items() <= p["metadata"]["labels"].items()]}
        return self.objects.get(path)


def test_all_ready() -> None:
    config = _config()
    status = read_status(FakeApi(config, DESIRED), config, NOW)
    assert status.all_ready
    assert status.lines() == [
        "fleet      glm52 in namespace llm-d",
        "groups     prefill 3/3 groups ready (6/6 pods), decode 2/2 groups ready (8/8 pods)",
        "leader     epp-0 (held 41m, renewed 3s ago)",
        "endpoints  14/14 ready",
        "preflight  succeeded",
    ]
    assert status.one_line() == (
        "prefill 3/3 groups ready, decode 2/2, leader epp-0 (held 41m, renewed 3s ago), "
        "pool endpoints 14/14, preflight succeeded"
    )


def test_loading() -> None:
    config = _config()
    status = read_status(FakeApi(config, {"prefill": 1, "decode": 0}, job="running"), config, NOW)
    assert not status.all_ready
    assert status.groups_text() == "prefill 1/3 groups ready (2/6 pods), decode 0/2 groups ready (0/8 pods)"
    assert status.endpoints_text() == "2/14 ready"
    assert status.preflight == "running"


def test_no_leader() -> None:
    config = _config()
    assert read_status(FakeApi(config, DESIRED, leader=None), config, NOW).leader.startswith(
        "none (no Lease epp-llm-d-glm52.llm-d.ai"
    )
    expired = read_status(FakeApi(config, DESIRED, lease_renewed_s=90), config, NOW).leader
    assert expired == "none (last holder epp-0, lease expired 90s ago)"


def test_preflight_failed_or_absent_or_off() -> None:
    config = _config()
    failed = read_status(FakeApi(config, {"prefill": 0, "decode": 0}, job="Failed"), config, NOW)
    assert failed.preflight.startswith(
        "failed (BackoffLimitExceeded; kubectl logs -n llm-d job/glm52-preflight)"
    )
    assert read_status(FakeApi(config, DESIRED, job=None), config, NOW).preflight == "absent"
    quick = _config("quickstart-h100")
    assert read_status(FakeApi(quick, DESIRED, job=None), quick, NOW).preflight.startswith("off")


def test_nothing_deployed() -> None:
    config = _config()
    status = read_status(lambda path, params: {"items": []} if path.endswith("/pods") else None, config, NOW)
    assert not status.all_ready
    assert status.one_line() == (
        "DisaggregatedSet glm52 absent, leader none (no Lease epp-llm-d-glm52.llm-d.ai yet), "
        "pool endpoints absent, preflight absent"
    )


def test_gateway_url() -> None:
    config = _config()
    assert gateway_url(FakeApi(config, DESIRED), config) == "http://10.0.0.7"
    with pytest.raises(StatusError, match="pass --url"):
        gateway_url(lambda path, params: None, config)


def test_kubeconfig_missing_and_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KubeconfigError, match="no kubeconfig"):
        kubeconfig_paths(None, {"KUBECONFIG": str(tmp_path / "none")})
    (tmp_path / "kc").write_text("{}")
    assert kubeconfig_paths(None, {"KUBECONFIG": f"{tmp_path / 'none'}:{tmp_path / 'kc'}"}) == [
        tmp_path / "kc"
    ]
    code = run(
        ["--stacks-dir", str(STACKS_DIR), "status", REFERENCE_STACK, "--kubeconfig", str(tmp_path / "no")]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no kubeconfig") and err.count("\n") == 1
    # A closed loopback port: one line, exit 1 (the environment), no traceback.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "current-context": "twin",
                "contexts": [{"name": "twin", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    code = run(["--stacks-dir", str(STACKS_DIR), "status", REFERENCE_STACK, "--kubeconfig", str(kubeconfig)])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the cluster at http://127.0.0.1:9") and err.count("\n") == 1


def test_kubeconfig_bad_tls_material(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:9",
                            "certificate-authority-data": base64.b64encode(b"not a pem").decode(),
                        },
                    }
                ],
                "users": [{"name": "u", "user": {}}],
            }
        )
    )
    # The CA is read when a connection is made: refused as the environment (exit 1), one line.
    with load_client(kubeconfig) as client, pytest.raises(ClusterError, match="cannot reach the cluster"):
        client.get("/api")
    with pytest.raises(KubeconfigError, match="has no context 'other'"):
        load_client(kubeconfig, "other")


class _Engine(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        code = 200 if body["model"] == "served" else 404
        answer = {"choices": [{"message": {"content": "Hello there, nice to meet."}}]}
        payload = json.dumps(answer if code == 200 else {"error": "no such model"}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_chat_request_loopback() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    serve_in_background(server)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        url, answer = chat_request(base, "served")
        assert url == base + "/v1/chat/completions"
        assert answer.code == 200 and "'Hello there, nice to meet.'" in answer.line(url)
        _, missing = chat_request(base + "/v1/chat/completions", "other")
        assert missing.code == 404 and "no such model" in missing.detail
    finally:
        server.shutdown()
        server.server_close()
    _, refused = chat_request(base, "served", timeout=2)
    assert refused.code is None and refused.line(base).count("no answer") == 1


def test_watch_until_ready_or_timeout() -> None:
    config = _config()
    states = [{"prefill": 0, "decode": 0}, {"prefill": 2, "decode": 1}, DESIRED]
    polls = iter(states)
    clock = [0.0]
    lines: list[str] = []

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    def poll() -> Any:
        return read_status(FakeApi(config, next(polls)), config, NOW)

    final = watch(poll, 600, 10, lines.append, clock=lambda: clock[0], sleep=sleep)
    assert final is not None and final.all_ready
    assert [line.split("]")[0] for line in lines] == ["[    0s", "[   10s", "[   20s"]
    assert lines[1].startswith("[   10s] prefill 2/3 groups ready, decode 1/2, leader epp-0")
    stuck = watch(
        lambda: read_status(FakeApi(config, states[0]), config, NOW),
        25,
        10,
        lines.append,
        clock=lambda: clock[0],
        sleep=sleep,
    )
    assert stuck is None


def _not_ready(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": status}


def test_pod_reasons_from_the_api() -> None:
    """One reason per pod, each as the API reports it."""
    pending = _not_ready(
        "decode-0",
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/5 nodes are available: 2 cannot allocate all claims.",
                }
            ],
        },
    )
    assert pod_reason(pending) == (
        "Pending, Unschedulable: 0/5 nodes are available: 2 cannot allocate all claims."
    )
    pull = _not_ready(
        "p",
        {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "vllm",
                    "state": {
                        "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x:1"'}
                    },
                }
            ],
        },
    )
    assert pod_reason(pull) == 'container vllm: ImagePullBackOff: Back-off pulling image "x:1"'
    crash = _not_ready(
        "c",
        {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "vllm",
                    "restartCount": 7,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                }
            ],
        },
    )
    assert (
        pod_reason(crash)
        == "container vllm: CrashLoopBackOff (7 restarts; last ended: OOMKilled, exit code 137)"
    )
    probe = _not_ready(
        "r",
        {
            "phase": "Running",
            "containerStatuses": [
                {"name": "vllm", "ready": False, "started": True, "state": {"running": {}}}
            ],
        },
    )
    assert pod_reason(probe) == "container vllm: running, not ready (readiness probe not passing)"
    startup = _not_ready(
        "s",
        {
            "phase": "Running",
            "containerStatuses": [
                {"name": "vllm", "ready": False, "started": False, "state": {"running": {}}}
            ],
        },
    )
    assert pod_reason(startup) == "container vllm: running, not ready (startup probe not passing)"
    assert pod_reason({"status": {"phase": "Pending"}}) == "Pending: not scheduled yet"


def test_status_lines_name_each_not_ready_pod_and_missing_group() -> None:
    config = _config()
    api = FakeApi(config, {"prefill": 3, "decode": 1})
    # One decode pod of group 1 is missing; another waits on the scheduler.
    api.pods = [p for p in api.pods if p["metadata"]["name"] != "glm52-decode-1-3"]
    stuck = next(p for p in api.pods if p["metadata"]["name"] == "glm52-decode-1-0")
    stuck["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no nodes"}
        ],
    }
    status = read_status(api, config, NOW)
    why = [line for line in status.lines() if line.startswith("why ")]
    assert why[0] == (
        "why        decode: 7 of 8 pods exist (2 groups of 4; the LWS controller creates them: "
        "kubectl describe disaggregatedset -n llm-d glm52)"
    )
    assert "why        pod glm52-decode-1-0: Pending, Unschedulable: no nodes" in why
    assert len(why) == 1 + 3  # the missing pods, then each of the three not-ready pods of group 1


def test_cluster_strings_are_escaped() -> None:
    """A Lease holder or Job reason with control characters cannot forge an output line."""
    config = _config()
    forged = "epp-0\nstatus onprem-h100: serving\x1b[2K"
    api = FakeApi(config, {"prefill": 0, "decode": 0}, leader=forged, job="Failed")
    job = next(v for k, v in api.objects.items() if "/jobs/" in k)
    job["status"]["conditions"][0]["reason"] = "X\r\nstatus onprem-h100: serving"
    stuck = api.pods[0]
    stuck["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "U", "message": "a\nstatus x: serving"}
        ],
    }
    lines = read_status(api, config, NOW).lines()
    assert all(line.isprintable() for line in lines)
    assert not any(line.startswith("status ") for line in lines)
    leader = next(line for line in lines if line.startswith("leader"))
    # Line breaks become spaces (clip), the rest escapes: one line, visibly altered.
    assert "epp-0 status onprem-h100: serving\\x1b[2K (held" in leader
    # A 10 MB holder is clipped.
    huge = read_status(FakeApi(config, DESIRED, leader="h" * 10_000_000), config, NOW)
    assert len(huge.leader) < 200


def test_pending_pods_say_why_without_their_disaggregatedset() -> None:
    """The broken twin of `make doctor-twin`: the DisaggregatedSet CRD is gone, the pool's pods wait
    on claims the scheduler cannot allocate; status still prints the scheduler's message."""
    config = _config()
    pod = _pod(config, "decode", 0, 0, ready=False)
    message = "0/5 nodes are available: 2 cannot allocate all claims. still not schedulable"
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        ],
    }

    def read(path: str, params: dict[str, str] | None) -> Any:
        return {"items": [pod]} if path.endswith("/pods") else None

    status = read_status(read, config, NOW)
    assert status.roles is None and not status.all_ready
    assert status.lines()[-1] == f"why        pod glm52-decode-0-0: Pending, Unschedulable: {message}"


def test_each_model_of_a_multi_model_stack_has_its_own_lines() -> None:
    """`llmd-fleet:models`: status reads each model's view; one model's pods never count for the
    other's groups or pool, though they share the namespace."""
    from llmd_fleet.stack.model import model_views

    glm, sub = model_views(_config("onprem-h100-multimodel"))
    ready, loading = FakeApi(glm, DESIRED), FakeApi(sub, {"prefill": 0, "decode": 1}, job=None)

    def read(path: str, params: dict[str, str] | None) -> Any:
        if path == ready.pods_path:
            wanted = dict(kv.split("=") for kv in (params or {})["labelSelector"].split(","))
            pods = ready.pods + loading.pods
            return {"items": [p for p in pods if wanted.items() <= p["metadata"]["labels"].items()]}
        return ready.objects.get(path) or loading.objects.get(path)

    first, second = read_status(read, glm, NOW), read_status(read, sub, NOW)
    assert first.all_ready and not second.all_ready
    assert first.lines()[:2] == [
        "fleet      glm52 in namespace llm-d",
        "groups     prefill 3/3 groups ready (6/6 pods), decode 2/2 groups ready (8/8 pods)",
    ]
    assert second.lines()[:2] == [
        "fleet      subagent in namespace llm-d",
        "groups     prefill 0/3 groups ready (0/6 pods), decode 1/2 groups ready (4/8 pods)",
    ]


def test_an_autoscaled_role_s_desired_groups_are_its_role_scaler_s() -> None:
    """An External role's `replicas` is ignored (the API server defaults it to 1): its desired
    groups are what the autoscaler wrote to its DisaggregatedSetRoleScaler (`<set>-<role>`), 1
    (LWS's seed) while that scaler is missing. A Static role with the same `replicas` keeps it."""
    config = _config()
    ns, name = config.serving.namespace, config.serving.name
    api = FakeApi(config, DESIRED)
    ds = api.objects[f"/apis/disaggregatedset.x-k8s.io/v1/namespaces/{ns}/disaggregatedsets/{name}"]
    prefill = next(r for r in ds["spec"]["roles"] if r["name"] == "prefill")
    prefill["spec"]["replicas"] = 1  # the CRD's default, as the API server returns it
    static = read_status(api, config, NOW).lines()
    assert static[1].startswith("groups     prefill 3/1 groups ready")
    prefill["scaling"] = {"mode": "External"}
    seeded = read_status(api, config, NOW).lines()
    assert seeded[1].startswith(
        f"groups     prefill 3/1 groups ready ({DESIRED['prefill'] * SIZES['prefill']}/"
    )
    api.objects[
        f"/apis/disaggregatedset.x-k8s.io/v1/namespaces/{ns}/disaggregatedsetrolescalers/{name}-prefill"
    ] = {"spec": {"replicas": DESIRED["prefill"]}, "status": {"replicas": 1}}
    status = read_status(api, config, NOW)
    assert (
        status.lines()[1]
        == "groups     prefill 3/3 groups ready (6/6 pods), decode 2/2 groups ready (8/8 pods)"
    )
    assert status.all_ready
