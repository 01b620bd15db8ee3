"""The checks with the real LWS controller as `make e2e` runs them (devtools/twin/e2e.py calls
these): the held-back DisaggregatedSet through the controller's webhook, then steps 1 to 4
(devtools/twin/lws_checks.py, lws_node_loss.py) on the fixed stack, and step 5 (lws_scale.py)
with the autoscale stack's rendering.
"""

from typing import Any

from devtools.twin import lws
from devtools.twin.kube import ApiError, Kube
from devtools.twin.lws_checks import (
    AUTOSCALE_STACK,
    DAY_TWO_CHECKS,
    Fleet,
    Reporter,
    controller_pods,
    disruption,
    rollout,
)
from devtools.twin.lws_node_loss import node_loss
from devtools.twin.lws_scale import scale


def held_back(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the controller would act on at once: applied after the preflight Job, as the program
    orders it (the DisaggregatedSet depends on the preflight Job)."""
    return [o for o in objects if o["kind"] == "DisaggregatedSet"]


def serving(kube: Kube, held: list[dict[str, Any]], rules: dict[str, int], stack: str,
            report: Reporter, day_two_checks: bool = True) -> Fleet | None:  # fmt: skip
    """The held-back DisaggregatedSet through the real webhook, then steps 1 to 3. Without
    `day_two_checks` the rollout and the node loss with a spare node are left to `make day-two`,
    which runs both under traffic (DAY_TWO_CHECKS says so in the figures)."""
    from devtools.twin import cluster, manifests
    from llmd_fleet.cli.stack_file import read_stack_file, stack_config

    if not held:
        report.figure("DisaggregatedSet", "none in the stack")
        return None
    ds = held[0]
    refusal = lws.webhook_refusal(kube, ds)
    report.figure(
        "DisaggregatedSet webhook refuses a rollout partition (dry run)",
        refusal.split("denied the request: ", 1)[-1] if refusal else "ACCEPTED",
    )
    report.check(bool(refusal), "the LWS DisaggregatedSet webhook accepted a rollout partition")
    kube.apply(ds)
    stored = kube.read(ds)
    added = manifests.server_added(ds, stored)
    kind = f"{ds['apiVersion']}/{ds['kind']}"
    report.figure(
        f"DisaggregatedSet {ds['metadata']['namespace']}/{ds['metadata']['name']} (after the preflight Job)",
        f"admitted by the LWS webhook, {len(added)} fields defaulted, {rules.get(kind, 0)} CEL rules passed",
    )
    fleet = Fleet(kube, ds)
    print("e2e: the LWS controller creates the DisaggregatedSet's groups")
    controller_pods(fleet, report)
    if day_two_checks:
        print("e2e: a decode-only template change rolls out")
        rollout(fleet, report)
    else:
        report.figure(*DAY_TWO_CHECKS)
    print("e2e: the decode PodDisruptionBudget against the Eviction API, as a drain meets it")
    disruption(fleet, report)
    print(
        "e2e: node loss, "
        + ("with a spare node and without one" if day_two_checks else "without a spare node")
    )
    config = stack_config(read_stack_file(cluster.PROJECT_ROOT / "stacks", stack))
    gpu_groups = {n: g for n, g in config.fleet.node_groups.items() if g.accelerator_allocation == "dra"}
    node_loss(fleet, gpu_groups, report, spare_case=day_two_checks)
    return fleet


def scale_stack(kube: Kube, fleet: Fleet, report: Reporter) -> None:
    """Step 4 with the autoscale stack's rendering."""
    from devtools.twin import cluster, manifests

    print(f"e2e: External scaling ({AUTOSCALE_STACK}) through the DisaggregatedSetRoleScalers' /scale")
    objects = manifests.render(AUTOSCALE_STACK, cluster.twin_dir() / "rendered" / AUTOSCALE_STACK)

    def apply_all(items: list[dict[str, Any]]) -> None:
        # The fabric preflight Job ran before the fixed stack's serving (step 4); a Job's pod
        # template cannot be changed, and the scaling check does not need it again.
        items = [o for o in items if o["kind"] != "Job"]
        namespaced = {
            f"{o['apiVersion']}/{o['kind']}": kube.resource(o["apiVersion"], o["kind"]).namespaced
            for o in items
        }
        for obj in manifests.apply_order(items, namespaced):
            try:
                kube.apply(obj)
            except ApiError as error:
                report.check(False, f"{AUTOSCALE_STACK}: refused: {error}")

    scale(kube, fleet, objects, apply_all, report)
