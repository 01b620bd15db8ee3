"""`llmd-fleet:index:Fleet`: the whole fleet as one component that YAML, TypeScript and other
Pulumi languages declare through the component provider in provider/ (docs/components.md).

Its inputs are the stack config's keys, generated from the config models (inputs.py); the
component validates them with `parse_config`, the function a stack's config goes through, so a bad
input gets the stack file's error naming the same key (`llmd-fleet:serving.roles.decode...`), and
plans the fleet with `plan_models`. It then declares what the stack program declares for the same
settings (`declare_fleet` of llmd_fleet/program.py), every resource a child of the component.

The Kubernetes provider comes from the `kubeconfig` secret input (the ambient kubeconfig when
unset, and `target.kubeconfigContext` chooses the context), made inside the component exactly as
the stack program's `OnPremCluster` makes it; a `providers` option is not used. The secrets
(`hfToken`, `kubeconfig`, `registryPassword`, `responsesDbPassword`) are wrapped as Pulumi secrets
whatever the program passed. Only the target kinds that reach an existing cluster through a
kubeconfig are accepted (onprem, local): gke and eks create their cluster with the cloud
providers and stay in Python programs.

Outputs: `gatewayAddress` (the Gateway's first address, none until a controller gives one),
`pools` (the InferencePools' names) and `namespaces` (the namespaces the fleet creates).
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.core.problems import PROJECT, ConfigError
from llmd_fleet.facade import inputs
from llmd_fleet.plan.fleet import FleetPlan, PlanError
from llmd_fleet.stack.model import SECRET_KEYS, StackConfig
from llmd_fleet.stack.parse import KUBECONFIG_KINDS, check_stack_secrets, parse_config
from llmd_fleet.stack.plans import plan_models
from llmd_fleet.targets.specs import SPECS

PACKAGE = PROJECT
TYPE = f"{PACKAGE}:index:Fleet"

if TYPE_CHECKING:
    FleetArgs = Mapping[str, Any]
else:
    FleetArgs = inputs.load().FleetArgs


def _plain(value: Any) -> Any:
    """An input as a stack file's YAML would hold it: Pulumi's wire format carries every number as
    a double, so an integral float becomes an int (the config models are strict; a float field
    accepts an int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def validate(args: Mapping[str, Any]) -> tuple[StackConfig, FleetPlan]:
    """The component's inputs through the stack config's validation and the plan. Raises
    ConfigError (naming `llmd-fleet:<key path>`, as for a stack file) or PlanError."""
    raw = {key: _plain(value) for key, value in args.items() if value is not None}
    target = raw.get("target")
    kind = target.get("kind") if isinstance(target, Mapping) else None
    if kind in SPECS and kind not in KUBECONFIG_KINDS:
        allowed = " or ".join(KUBECONFIG_KINDS)
        raise ConfigError(
            [
                (
                    f"{PROJECT}:target.kind",
                    f"the Fleet component deploys kinds {allowed} (an existing cluster); {kind} creates "
                    "its cluster with the cloud's providers and is deployed from a Python program "
                    "(docs/components.md)",
                )
            ]
        )
    # The secrets' values never reach the config models: only whether each is set (as a secret:
    # the component makes every one a Pulumi secret).
    present = frozenset(key for key in SECRET_KEYS if key in raw)
    for key in present:
        raw[key] = ""
    config = check_stack_secrets(parse_config(raw, present))
    if config.images.build:
        raise ConfigError(
            [
                (
                    f"{PROJECT}:images.build",
                    "the Fleet component runs the upstream serving image; the image build is "
                    "declared from a Python program (docs/components.md)",
                )
            ]
        )
    # With `llmd-fleet:models` every model is planned on its share (the first model's plan returned).
    return config, plan_models(config)[0]


class InputSecrets:
    """The component's secret inputs as `declare_fleet` reads secrets (`get_secret(key)`)."""

    def __init__(self, args: Mapping[str, Any]):
        self._values = {key: args[key] for key in SECRET_KEYS if args.get(key) is not None}

    def get_secret(self, key: str) -> pulumi.Output[str] | None:
        value = self._values.get(key)
        return pulumi.Output.secret(value) if value is not None else None


def declared_namespaces(root: pulumi.Resource) -> list[k8s.core.v1.Namespace]:
    """Every Namespace declared under `root` (its children, theirs, and so on). The SDK keeps each
    resource's children in `_childResources`; no public accessor exists."""
    found: list[k8s.core.v1.Namespace] = []
    stack = [root]
    while stack:
        resource = stack.pop()
        children: set[pulumi.Resource] = getattr(resource, "_childResources", set())
        for child in children:
            if isinstance(child, k8s.core.v1.Namespace):
                found.append(child)
            stack.append(child)
    return found


class Fleet(pulumi.ComponentResource):
    """An llm-d inference fleet on an existing Kubernetes cluster: prefill and decode engines as a
    DisaggregatedSet, the gateway, the endpoint picker and its InferencePool, the NetworkPolicies
    and the optional layers (observability, autoscaling, Responses API), sized and checked from one
    stack configuration."""

    gateway_address: pulumi.Output[str | None]
    """The Gateway's first address (none until a gateway controller gives it one)."""
    pools: pulumi.Output[list[str]]
    """The InferencePools of the fleet (their names)."""
    namespaces: pulumi.Output[list[str]]
    """The namespaces the fleet creates."""

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, {}, opts)
        from llmd_fleet.program import declare_fleet

        try:
            config, plan = validate(args)
        except (ConfigError, PlanError) as error:
            # One message, the stack file's, without a traceback of this module.
            raise pulumi.RunError(str(error)) from None
        fleet = declare_fleet(config, plan, InputSecrets(args), parent=self)
        self.gateway_address = fleet.gateway.address
        pool_name = config.serving.name
        self.pools = fleet.router.inference_pool.id.apply(lambda _: [pool_name])
        names = [
            ns.metadata.apply(lambda m: str(m["name"] if isinstance(m, dict) else m.name))
            for ns in declared_namespaces(self)
        ]
        self.namespaces = pulumi.Output.all(*names).apply(lambda found: sorted(set(found)))
        self.register_outputs(
            {"gatewayAddress": self.gateway_address, "pools": self.pools, "namespaces": self.namespaces}
        )
