"""Calling the policy pack's rules the way the analyzer does: props in engine format through a
protobuf Struct, deserialized and wrapped in pulumi_policy's unknown-checking proxies; fixtures from
the real stack program under the mock engine, edited one setting at a time."""

import copy
import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pulumi_kubernetes as k8s
import yaml
from google.protobuf import json_format, struct_pb2  # type: ignore[import-untyped]
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from llmd_fleet.cli.policy_check import (
    resource_urn,
)
from llmd_fleet.cli.synth import Recorded
from llmd_fleet.policies.pack import all_policies
from llmd_fleet.policies.rules import _k8s
from llmd_fleet.versions import versions
from tests.support import REFERENCE_STACK, STACKS_DIR
from tests.support import record as record  # the policy tests take it from here with the rest

# The cloud SDKs are loaded at run time: they are large enough that type-checking them would
# dominate `make test`, and these tests only register their resources under mocks.
aws: Any = importlib.import_module("pulumi_aws")
gcp: Any = importlib.import_module("pulumi_gcp")

POLICIES = {p.name: p for p in all_policies()}
OPTS = PolicyResourceOptions(
    protect=False,
    ignore_changes=[],
    delete_before_replace=None,
    aliases=[],
    custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
    additional_secret_outputs=[],
)
DSET = "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet"


# ---------------------------------------------------------------------------------------------
# Helpers: analyzer-shaped args, fixtures under the mock engine, edits of recorded resources
# ---------------------------------------------------------------------------------------------


_WIRE: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}


def _props(inputs: dict[str, Any]) -> Any:
    """Inputs as the analyzer hands them to a rule (Struct round trip, secrets unwrapped, proxied)."""
    cached = _WIRE.get(id(inputs))
    if cached is None or cached[0] is not inputs:
        struct = struct_pb2.Struct()
        struct.update(inputs)
        cached = _WIRE[id(inputs)] = (inputs, json_format.MessageToDict(struct))
    return unknown_checking_proxy(deserialize_properties(copy.deepcopy(cached[1])))


def violations(name: str, resources: list[Recorded], config: dict[str, Any] | None = None) -> list[str]:
    """Messages policy `name` reports over the resources (per resource, or once for the stack)."""
    policy = POLICIES[name]
    found: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append(message)

    if isinstance(policy, StackValidationPolicy):
        stack = [
            PolicyResource(
                r.type,
                _props(r.inputs),
                resource_urn("test", r.type, r.name),
                r.name,
                OPTS,
                None,
                None,
                [],
                {},
            )
            for r in resources
        ]
        policy.validate(StackValidationArgs(stack, config), report)
    else:
        assert isinstance(policy, ResourceValidationPolicy)
        for r in resources:
            args = ResourceValidationArgs(
                r.type, _props(r.inputs), resource_urn("test", r.type, r.name), r.name, OPTS, None, config
            )
            policy.validate(args, report)
    return found


def one(resources: list[Recorded], type_suffix: str, name: str | None = None) -> Recorded:
    found = [r for r in resources if r.type.endswith(type_suffix) and (name is None or name in r.name)]
    assert len(found) == 1, [r.name for r in found]
    return found[0]


def edited(
    resources: list[Recorded], target: Recorded, edit: Callable[[dict[str, Any]], None]
) -> list[Recorded]:
    """The resources with a deep-copied, edited `target`."""
    inputs = copy.deepcopy(target.inputs)
    edit(inputs)
    return [dataclasses.replace(r, inputs=inputs) if r is target else r for r in resources]


def without(resources: list[Recorded], type_suffix: str) -> list[Recorded]:
    return [r for r in resources if not r.type.endswith(type_suffix)]


def role_pod(dset_inputs: dict[str, Any], role: str) -> dict[str, Any]:
    spec = next(r["spec"] for r in dset_inputs["spec"]["roles"] if r["name"] == role)
    return spec["leaderWorkerTemplate"]["workerTemplate"]


def pod_container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    spec = pod["spec"]
    return next(c for c in spec.get("containers", []) + spec.get("initContainers", []) if c["name"] == name)


def edit_script(role: str, old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def edit(inputs: dict[str, Any]) -> None:
        engine = pod_container(role_pod(inputs, role), _k8s.ENGINE_CONTAINER)
        assert old in engine["command"][2], old
        engine["command"][2] = engine["command"][2].replace(old, new)

    return edit


def deployment(
    name: str,
    containers: list[dict[str, Any]],
    *,
    replicas: int = 2,
    namespace: str = "llm-d",
    labels: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
    kind: str = "Deployment",
) -> Callable[[], None]:
    """A real pulumi_kubernetes Deployment (or DaemonSet) to register under mocks."""
    labels = labels or {"app": name}

    def build() -> None:
        template = {"metadata": {"labels": labels}, "spec": {"containers": containers, **(pod_spec or {})}}
        meta = k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace, labels=labels)
        selector = k8s.meta.v1.LabelSelectorArgs(match_labels=labels)
        if kind == "DaemonSet":
            k8s.apps.v1.DaemonSet(
                name, metadata=meta, spec=cast(Any, {"selector": selector, "template": template})
            )
        else:
            k8s.apps.v1.Deployment(
                name,
                metadata=meta,
                spec=cast(Any, {"replicas": replicas, "selector": selector, "template": template}),
            )

    return build


SMALL = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
PINNED = versions().image("vllm").ref


def stack_dir(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{REFERENCE_STACK}.yaml").read_text())
    edit(document["config"])
    (stacks / f"Pulumi.{REFERENCE_STACK}.yaml").write_text(yaml.safe_dump(document))
    return stacks


def p5_node_group(nodes: int, **extra: Any) -> aws.eks.NodeGroup:
    """A p5.48xlarge managed node group of `nodes` nodes (plus any NodeGroup arguments)."""
    return aws.eks.NodeGroup(
        "p5",
        cluster_name="c",
        node_role_arn="arn:aws:iam::0:role/n",
        subnet_ids=["s"],
        instance_types=["p5.48xlarge"],
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(desired_size=nodes, max_size=nodes, min_size=0),
        **extra,
    )
