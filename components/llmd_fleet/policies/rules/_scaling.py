"""Autoscaled DisaggregatedSet roles seen at their maximum.

A role with `scaling.mode: External` renders no `spec.replicas` (an external autoscaler drives its
DisaggregatedSetRoleScaler `<set>-<role>`, kubernetes-sigs/lws PR #922), so rules that count pods
from replicas would count one group. `at_autoscaling_maxima` gives such a role the most replicas
its autoscaler may set: a KEDA ScaledObject's `maxReplicaCount` (KEDA's default 100 when unset,
apis/keda/v1alpha1/scaledobject_types.go) or an autoscaling/v2 HPA's `maxReplicas`.
"""

import copy
import dataclasses

from llmd_fleet.policies.rules._base import Resource, as_int, dig

ROLE_SCALER_KIND = "DisaggregatedSetRoleScaler"
KEDA_DEFAULT_MAX = 100


def external_roles(resource: Resource) -> set[str]:
    """Names of a DisaggregatedSet's roles whose replicas an external autoscaler sets."""
    if not (resource.is_kubernetes_object and resource.kind == "DisaggregatedSet"):
        return set()
    roles = dig(resource.props, "spec", "roles") or []
    return {
        str(r.get("name"))
        for r in roles
        if isinstance(r, dict) and dig(r, "scaling", "mode") == "External" and r.get("name")
    }


def autoscaler_maxima(resources: list[Resource]) -> dict[tuple[str, str], tuple[int, Resource]]:
    """(namespace, role scaler name) -> (most replicas its autoscaler sets, the autoscaler)."""
    found: dict[tuple[str, str], tuple[int, Resource]] = {}
    for r in resources:
        if not r.is_kubernetes_object or r.kind not in ("ScaledObject", "HorizontalPodAutoscaler"):
            continue
        spec = r.props.get("spec") or {}
        target = spec.get("scaleTargetRef") or {}
        if target.get("kind") != ROLE_SCALER_KIND or not target.get("name"):
            continue
        if r.kind == "ScaledObject":
            maximum = as_int(spec.get("maxReplicaCount"))
            maximum = KEDA_DEFAULT_MAX if maximum is None else maximum
        else:
            maximum = as_int(spec.get("maxReplicas")) or 0
        found[(r.namespace, str(target["name"]))] = (maximum, r)
    return found


def at_autoscaling_maxima(resources: list[Resource]) -> list[Resource]:
    """The resources with every bounded External role's replicas set to its autoscaler's
    maximum (roles no autoscaler bounds are left as rendered)."""
    maxima = autoscaler_maxima(resources)
    if not maxima:
        return resources
    result = []
    for resource in resources:
        roles = external_roles(resource)
        if not roles:
            result.append(resource)
            continue
        props = copy.deepcopy(resource.props)
        for role in dig(props, "spec", "roles") or []:
            bound = maxima.get((resource.namespace, f"{resource.object_name}-{role.get('name')}"))
            if role.get("name") in roles and bound is not None and isinstance(role.get("spec"), dict):
                role["spec"]["replicas"] = bound[0]
        result.append(dataclasses.replace(resource, props=props))
    return result
