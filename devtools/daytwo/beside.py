"""A scaled reference stack beside the day-two deployment, on the replay's twin (docs/day-two.md,
"Several models" and "The reference with precise prefix routing"): what the multi-model phase
(models_phase.py) and the reference phase (reference_phase.py) share.

The stack is scaled as `make dataplane-reference` scales it (devtools/dataplane/scaled.py) and
rendered with its `serving.namespace` (every model's) set to a namespace of its own, so none of
its objects meets the day-two stack's (all of them name their pool `glm52` in `llm-d`). Its pods
are put into the twin's API server as the data-plane twin puts them (devtools/dataplane/run.py
`pod_object`, `pod_status`), bound to one of the process kubelet's nodes (a node the twin has,
where kwok runs nothing; the process kubelet acts on the day-two namespace only), without the
LeaderWorkerSet labels, with addresses of their own above any the process kubelet reaches in a
replay. Their DisaggregatedSets stay out: the twin's LWS controller would make groups of them that
no node can take. Their namespaces join the replay's pod network (`Network`).
"""

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from devtools.dataplane import netns, scaled, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import serving
from devtools.twin import cluster
from devtools.twin.kube import Kube

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay


def in_namespace(text: str, namespace: str) -> str:
    """The stack file with every model's `serving.namespace` set to `namespace` (`llmd-fleet:models`,
    or the one `llmd-fleet:serving` of a single-model stack); everything else as it is (pure)."""
    doc = yaml.safe_load(text)
    config = doc["config"]
    models = config.get("llmd-fleet:models")
    sections = [m.setdefault("serving", {}) for m in models] if models else [config["llmd-fleet:serving"]]
    for section in sections:
        section["namespace"] = namespace
    return str(yaml.safe_dump(doc, sort_keys=False))


# The LeaderWorkerSet labels the data-plane twin gives its pods: on the replay's twin the LWS
# controller's pod webhook (LWS v0.10.0 pkg/webhooks/pod_webhook.go `Default`, `mpod.kb.io`)
# defaults every pod carrying the set's name label and refuses one without the group size
# annotation its controller sets. These pods are not its: they go in without them (the pools
# select by their own labels, and nothing of the phases reads these).
LWS_LABEL_PREFIX = "leaderworkerset.sigs.k8s.io/"


def moved(
    pools: list[topology.Topology], first_host: int, limit: int, whose: str, limit_whose: str
) -> list[topology.Topology]:
    """The pools with their pods' addresses renumbered from `first_host` on, in order, none
    shared, and without the LeaderWorkerSet labels (LWS_LABEL_PREFIX); pure. ValueError when
    they would reach `limit` (the first address of `limit_whose`; `whose` names the pods)."""
    out = []
    host = first_host
    for topo in pools:
        pods = []
        for pod in topo.pods:
            labels = {k: v for k, v in pod.labels.items() if not k.startswith(LWS_LABEL_PREFIX)}
            pods.append(replace(pod, ip=f"{topology.POD_SUBNET}.{host}", labels=labels))
            host += 1
        out.append(replace(topo, pods=pods))
    if host - 1 >= limit:
        raise ValueError(
            f"{whose} {host - first_host} pods reach host {host - 1}, {limit_whose} "
            f"addresses start at {limit}"
        )
    return out


def new_spaces(spaces: list[tuple[str, str]], existing: set[str]) -> list[tuple[str, str]]:
    """The namespaces of `spaces` the replay's network does not have yet (`existing`: their
    names as netns.ns_name gives them), in order (pure)."""
    return [(name, ip) for name, ip in spaces if netns.ns_name(name) not in existing]


def pod_node(kubelet_nodes: frozenset[str], lost: set[str], existing: set[str]) -> str:
    """The node the pods are bound to: the last, by name, of the process kubelet's nodes that
    did not die in the replay and that the twin still has (a pod bound to a missing node is the
    pod garbage collector's); pure."""
    live = sorted((kubelet_nodes - lost) & existing)
    if not live:
        raise cluster.TwinError("no node of the process kubelet's is left in the twin for the pods")
    return live[-1]


def live_node(run: "Replay") -> str:
    """`pod_node` of `run`'s process kubelet and twin (the caller checked it has a kubelet)."""
    assert run.kubelet is not None
    existing = {n["metadata"]["name"] for n in run.kube.list("v1", "Node")}
    return pod_node(run.kubelet.nodes, run.kubelet.lost, existing)


def render_scaled(run: "Replay", stack: str, namespace: str, tag: str) -> tuple[str, Path]:
    """`stack` scaled as `make dataplane-reference` scales it, in `namespace`, rendered under the
    replay's folder (`stacks-<tag>`, `render-<tag>`; once: `Replay.prepare` renders it first); its
    stack name and render."""
    copy_dir = run.run_dir / f"stacks-{tag}"
    name = scaled.write_scaled(stack, run.root / "stacks", copy_dir)
    path = copy_dir / f"Pulumi.{name}.yaml"
    path.write_text(in_namespace(path.read_text(), namespace))
    out = run.run_dir / f"render-{tag}"
    serving.rendered_into(copy_dir, name, out)
    return name, out


def namespace_objects(namespace: str) -> list[dict[str, Any]]:
    """The Namespace and its default ServiceAccount (no controller manager makes it on the twin,
    and the ServiceAccount admission needs it); pure."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": namespace},
        },
    ]


def pod_objects(topo: topology.Topology, node: str) -> list[dict[str, Any]]:
    """The data-plane twin's pod objects of `topo`, bound to `node` (pure)."""
    out = []
    for pod in topo.pods:
        obj = dataplane.pod_object(pod, topo.namespace)
        obj["spec"]["nodeName"] = node
        out.append(obj)
    return out


def apply_pods(kube: Kube, topo: topology.Topology, node: str) -> None:
    """`pod_objects` into the API server, each with its address in its status as a kubelet sets it."""
    for obj, pod in zip(pod_objects(topo, node), topo.pods, strict=True):
        kube.apply(obj)
        kube.request(
            "PATCH",
            kube.object_path(obj) + "/status",
            dataplane.pod_status(pod.ip),
            "application/merge-patch+json",
        )


class Network:
    """Namespaces added to the replay's pod network (veth indexes from `first_veth`), the ones it
    already has left alone; `close` deletes the added ones."""

    def __init__(self, first_veth: int) -> None:
        self.first_veth = first_veth
        self.attached: list[str] = []

    def __call__(self, spaces: list[tuple[str, str]]) -> None:
        for name, ip in new_spaces(spaces, set(netns.existing())):
            netns.attach(name, ip, self.first_veth + len(self.attached))
            self.attached.append(name)

    def close(self) -> None:
        for name in self.attached:
            netns.detach(name)
        self.attached = []
