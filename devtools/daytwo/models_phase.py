"""Several models on the day-two replay's twin (docs/day-two.md, "Several models"): the data-plane
twin's multi-model run (devtools/dataplane/multimodel.py) put into the replay's twin after the
day-two scenarios, in a namespace of its own.

The multi-model reference (MODELS_STACK) is scaled as `make dataplane-reference` scales it (one
instance per role per model, RANKS_PER_POD ranks per pod) and rendered with every model's
`serving.namespace` set to NAMESPACE, so none of its objects meets the day-two stack's (both
name their pool `glm52` in `llm-d`). Into the twin's API server go its InferencePools,
InferenceObjectives and the body-based router's ConfigMaps, and its pods, bound to one of the
process kubelet's nodes (a node the twin has, where kwok runs nothing; the process kubelet acts
on the day-two namespace only) and given their addresses as the data-plane twin gives them,
from FIRST_HOST on, above any address the process kubelet reaches in a replay. Its
DisaggregatedSets stay out: the twin's LWS controller would make groups of them that no node can
take. Its namespaces join the replay's pod network (the gateway stand-in's is the replay's own);
the real body-based router, one picker per pool and the gateway stand-in routing by the rendered
HTTPRoutes then route both passes, and the lines and goals are multimodel.py's. Each pod goes in
not Ready and is marked Ready once every endpoint of it a picker can pick answered a request sent
to it directly (multimodel.wait_endpoints); the phase's last line counts the decode ones.
"""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from devtools.dataplane import build, multimodel, netns, scaled, topology
from devtools.dataplane import run as dataplane
from devtools.twin import cluster

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

MODELS_STACK = "onprem-h100-multimodel"
NAMESPACE = "llm-d-models"
RANKS_PER_POD = 2
# Pod addresses of the multi-model pools (a few per model): above the process kubelet's (from
# topology.FIRST_POD_HOST, a few dozen per replay) and below the pickers' (multimodel.PICKER_HOST).
FIRST_HOST = 150
# veth indexes: above the Responses phase's (930 on), below the process kubelet's (1000 on).
FIRST_VETH = 950


def in_namespace(text: str, namespace: str) -> str:
    """The stack file with every model's `serving.namespace` set to `namespace` (`llmd-fleet:models`,
    or the one `llmd-fleet:serving` of a single-model stack); everything else as it is (pure)."""
    doc = yaml.safe_load(text)
    config = doc["config"]
    models = config.get("llmd-fleet:models")
    sections = [m.setdefault("serving", {}) for m in models] if models else [config["llmd-fleet:serving"]]
    for serving in sections:
        serving["namespace"] = namespace
    return str(yaml.safe_dump(doc, sort_keys=False))


# The LeaderWorkerSet labels the data-plane twin gives its pods: on the replay's twin the LWS
# controller's pod webhook (LWS v0.10.0 pkg/webhooks/pod_webhook.go `Default`, `mpod.kb.io`)
# defaults every pod carrying the set's name label and refuses one without the group size
# annotation its controller sets. These pods are not its: they go in without them (the pools
# select by their own labels, and nothing of the multi-model run reads these).
LWS_LABEL_PREFIX = "leaderworkerset.sigs.k8s.io/"


def moved(pools: list[topology.Topology], first_host: int) -> list[topology.Topology]:
    """The pools with their pods' addresses renumbered from `first_host` on, in order, none
    shared, and without the LeaderWorkerSet labels (LWS_LABEL_PREFIX); pure."""
    out = []
    host = first_host
    for topo in pools:
        pods = []
        for pod in topo.pods:
            labels = {k: v for k, v in pod.labels.items() if not k.startswith(LWS_LABEL_PREFIX)}
            pods.append(replace(pod, ip=f"{topology.POD_SUBNET}.{host}", labels=labels))
            host += 1
        out.append(replace(topo, pods=pods))
    if host - 1 >= multimodel.PICKER_HOST:
        raise ValueError(
            f"the multi-model pools' {host - first_host} pods reach host {host - 1}, the pickers' "
            f"addresses start at {multimodel.PICKER_HOST}"
        )
    return out


def new_spaces(spaces: list[tuple[str, str]], existing: set[str]) -> list[tuple[str, str]]:
    """The namespaces of `spaces` the replay's network does not have yet (`existing`: their
    names as netns.ns_name gives them), in order (pure)."""
    return [(name, ip) for name, ip in spaces if netns.ns_name(name) not in existing]


def pod_node(kubelet_nodes: frozenset[str], lost: set[str], existing: set[str]) -> str:
    """The node the multi-model pods are bound to: the last, by name, of the process kubelet's
    nodes that did not die in the replay and that the twin still has (a pod bound to a missing
    node is the pod garbage collector's); pure."""
    live = sorted((kubelet_nodes - lost) & existing)
    if not live:
        raise cluster.TwinError(
            "no node of the process kubelet's is left in the twin for the multi-model pods"
        )
    return live[-1]


def render_models(run: "Replay") -> tuple[str, Path]:
    """The scaled multi-model reference, in NAMESPACE, rendered; its stack name and render."""
    copy_dir = run.run_dir / "stacks-models"
    name = scaled.write_scaled(MODELS_STACK, run.root / "stacks", copy_dir)
    path = copy_dir / f"Pulumi.{name}.yaml"
    path.write_text(in_namespace(path.read_text(), NAMESPACE))
    out = run.run_dir / "render-models"
    subprocess.run(
        [
            str(Path(sys.executable).with_name("llmd-fleet")),
            "--stacks-dir",
            str(copy_dir),
            "render",
            name,
            "--out",
            str(out),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return name, out


def run_phase(run: "Replay") -> tuple[list[str], list[str]]:
    """Both passes of the multi-model run on the replay's twin, its pods bound to a node of the
    process kubelet's the twin still has (`pod_node`); the lines and failures."""
    if run.kubelet is None:
        return ["models: not run: the replay's twin has no process kubelet nodes"], []
    node = pod_node(
        run.kubelet.nodes, run.kubelet.lost, {n["metadata"]["name"] for n in run.kube.list("v1", "Node")}
    )
    name, render = render_models(run)
    docs = topology.load_manifests(render)
    pools = [topology.with_ranks_per_pod(t, RANKS_PER_POD) for t in topology.pool_topologies(render)]
    pools = moved(pools, FIRST_HOST)
    bins = {**run.bins, "bbr": build.ensure_bbr()}
    folder = run.run_dir / "models"
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    run.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    run.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": NAMESPACE},
        }
    )
    attached: list[str] = []

    def network(spaces: list[tuple[str, str]]) -> None:
        for i, (space, ip) in enumerate(new_spaces(spaces, set(netns.existing()))):
            netns.attach(space, ip, FIRST_VETH + i)
            attached.append(space)

    procs = dataplane.Processes([])
    result: dict[str, Any]
    try:
        result = multimodel.run(
            run.kube,
            render,
            pools,
            procs,
            bins,
            logs,
            folder,
            run.kubeconfig,
            cluster.load_state(run.root).ports["apiserver"],
            multimodel.last_model_route(docs),
            network=network,
            node=node,
            with_sets=False,
        )
    finally:
        procs.stop()
        for space in attached:
            netns.detach(space)
    models = multimodel.models_of(docs)
    (folder / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    pods = sum(len(t.pods) for t in pools)
    return [*multimodel.lines(result, models), *details(result, name, pods, node)], multimodel.checks(result)


def details(result: dict[str, Any], stack: str, pods: int, node: str) -> list[str]:
    """The phase's own lines: where the pools ran, and how many decode endpoints answered a
    request of their own before the measured ones (multimodel.wait_endpoints; prefill engines
    too, counted in the report), and how long routing took to serve every model after (pure)."""
    endpoints = result["endpoints"]
    return [
        f"day-two: models: {stack} in namespace {NAMESPACE} of the replay's twin, {pods} pods on "
        f"{node}, a request per model and adapter routed {result.get('warm_seconds', 0)} s after",
        f"day-two: models: {endpoints['decode']} decode endpoints answered before the measured "
        f"requests ({endpoints['seconds']:.0f} s)",
    ]
