"""Voluntary disruptions of the serving roles: a PodDisruptionBudget per role lets drains (node-pool
upgrades, `kubectl drain`) take down one group of the role at a time, and never none.

Facts used: a DisaggregatedSet role runs as LeaderWorkerSet groups of `size` pods, and with
`restartPolicy: RecreateGroupOnPodRestart` one evicted pod takes its whole group down until every
pod of it is Ready again. The DisaggregatedSet controller labels every pod it creates with
`disaggregatedset.x-k8s.io/name` and `disaggregatedset.x-k8s.io/role`, besides the template's
own labels (GenerateLabels in the pinned LWS release's pkg/utils/disaggregatedset/utils.go). The
Eviction API refuses an eviction (429) once the budget's allowed disruptions are used;
`maxUnavailable` and `minAvailable` count pods (a percentage of the selected pods,
maxUnavailable rounded up).
"""

import math
from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import Report, Resource, as_int, dig, stack_rule
from llmd_fleet.policies.rules._k8s import PodTemplate, all_pod_templates, selector_matches

# Set by the DisaggregatedSet controller on every pod it creates (see the module docstring).
DS_NAME_LABEL = "disaggregatedset.x-k8s.io/name"
DS_ROLE_LABEL = "disaggregatedset.x-k8s.io/role"


def controller_labels(template: PodTemplate) -> dict[str, str]:
    """The labels a pod of a DisaggregatedSet role carries: its template's, plus the controller's."""
    return {
        **template.labels,
        DS_NAME_LABEL: template.workload.object_name,
        DS_ROLE_LABEL: str(template.role),
    }


def pods_allowed_down(pdb: Resource, pods: int) -> int | None:
    """How many of `pods` selected pods the budget lets evictions take down at once; None when it
    sets neither field (then it only blocks the eviction of pods without a scalable controller)."""
    spec = pdb.props.get("spec") or {}

    def amount(value: Any, round_up: bool) -> int:
        if isinstance(value, str) and value.endswith("%"):
            share = float(value[:-1]) / 100 * pods
            return math.ceil(share) if round_up else math.floor(share)
        return as_int(value) or 0

    if spec.get("maxUnavailable") is not None:
        # The disruption controller rounds a maxUnavailable percentage up.
        return amount(spec["maxUnavailable"], round_up=True)
    if spec.get("minAvailable") is not None:
        return max(0, pods - amount(spec["minAvailable"], round_up=True))
    return None


def _check_role_budgets(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    pdbs = [r for r in resources if r.is_kubernetes_object and r.kind == "PodDisruptionBudget"]
    roles: dict[tuple[str, str], list[PodTemplate]] = {}
    for template in all_pod_templates(resources):
        if template.workload.kind == "DisaggregatedSet" and template.role:
            roles.setdefault((template.workload.urn, template.role), []).append(template)
    for templates in roles.values():
        first = templates[0]
        size = first.group_size
        pods = sum(t.pods or 0 for t in templates)
        matching = [
            p
            for p in pdbs
            if p.namespace == first.workload.namespace
            and all(
                selector_matches(dig(p.props, "spec", "selector"), controller_labels(t)) for t in templates
            )
        ]
        if not matching:
            report(
                f"{first.where()}: no PodDisruptionBudget selects its pods, so a drain (a node-pool "
                f"upgrade) may take down any number of its groups of {size} at once",
                first.workload,
            )
            continue
        for pdb in matching:
            allowed = pods_allowed_down(pdb, pods)
            if allowed is None:
                continue
            if allowed > 1:
                report(
                    f"{first.where()}: {pdb.ref()} lets evictions take down {allowed} pods at once, "
                    f"each in another group of {size} (one evicted pod restarts its whole group); "
                    "set maxUnavailable: 1",
                    pdb,
                )
            elif allowed < 1:
                report(
                    f"{first.where()}: {pdb.ref()} allows no eviction at all, so every drain of a "
                    "node it runs on blocks (GKE evicts anyway once its wait runs out; an EKS "
                    "managed node group update fails); set maxUnavailable: 1",
                    pdb,
                )


serving_role_pdb = stack_rule(
    name="serving-role-pdb",
    description="Every serving role has a PodDisruptionBudget letting drains take down one of its "
    "groups at a time.",
    remediation="Add a policy/v1 PodDisruptionBudget per DisaggregatedSet role in its namespace, "
    "selecting `disaggregatedset.x-k8s.io/name: <set>` and `disaggregatedset.x-k8s.io/role: <role>` "
    "(the controller's labels, on every revision's pods), with `maxUnavailable: 1` and "
    "`unhealthyPodEvictionPolicy: AlwaysAllow`.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_role_budgets,
    tags=["serving", "availability"],
)

POLICIES = [serving_role_pdb]
