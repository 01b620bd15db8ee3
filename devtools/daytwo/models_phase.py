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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.dataplane import build, multimodel, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import beside
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


# The shared pieces (beside.py), under the names this module has always had.
in_namespace = beside.in_namespace
new_spaces = beside.new_spaces
pod_node = beside.pod_node
LWS_LABEL_PREFIX = beside.LWS_LABEL_PREFIX


def moved(pools: list[topology.Topology], first_host: int) -> list[topology.Topology]:
    """The pools with their pods' addresses renumbered from `first_host` on, below the pickers'
    (multimodel.PICKER_HOST), without the LeaderWorkerSet labels (beside.moved); pure."""
    return beside.moved(pools, first_host, multimodel.PICKER_HOST, "the multi-model pools'", "the pickers'")


def render_models(run: "Replay") -> tuple[str, Path]:
    """The scaled multi-model reference, in NAMESPACE, rendered; its stack name and render."""
    return beside.render_scaled(run, MODELS_STACK, NAMESPACE, "models")


def run_phase(run: "Replay") -> tuple[list[str], list[str]]:
    """Both passes of the multi-model run on the replay's twin, its pods bound to a node of the
    process kubelet's the twin still has (`pod_node`); the lines and failures."""
    if run.kubelet is None:
        return ["models: not run: the replay's twin has no process kubelet nodes"], []
    node = beside.live_node(run)
    name, render = render_models(run)
    docs = topology.load_manifests(render)
    pools = [topology.with_ranks_per_pod(t, RANKS_PER_POD) for t in topology.pool_topologies(render)]
    pools = moved(pools, FIRST_HOST)
    bins = {**run.bins, "bbr": build.ensure_bbr()}
    folder = run.run_dir / "models"
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for obj in beside.namespace_objects(NAMESPACE):
        run.kube.apply(obj)
    network = beside.Network(FIRST_VETH)

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
        network.close()
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
