"""Model serving: namespace, Hugging Face token Secret and the prefill/decode DisaggregatedSet."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.config.model import served_model_names
from llmd_fleet.core.pod_context import pod_security_labels
from llmd_fleet.labels import common_labels, serving_labels
from llmd_fleet.layers.modelexpress.component import ModelExpressServer
from llmd_fleet.layers.preflight.component import FabricPreflight
from llmd_fleet.layers.serving.pod import PodInputs, disaggregated_set_spec
from llmd_fleet.layers.serving.specs import HF_TOKEN_SECRET, role_budget_name, role_budget_spec
from llmd_fleet.plan.fleet import FleetPlan
from llmd_fleet.platform.dra import claim_template_name, claim_template_spec
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.assembly import Assembly
    from llmd_fleet.stack.model import StackConfig


class ModelServingArgs(TypedDict):
    """Arguments of `ModelServing`."""

    config: StackConfig
    """The validated stack config; `serving` names the namespace and the DisaggregatedSet, `model`
    labels the pods."""
    plan: FleetPlan
    """The fleet plan; one pod template per role, one ResourceClaimTemplate per node group and claim
    shape."""
    hf_token: pulumi.Input[str] | None
    """Hugging Face token (a secret); when set, the Secret `llm-d-hf-token` is created and the pods
    read HF_TOKEN from it; None: no Secret, and no HF_TOKEN in the pods."""
    engine_image: pulumi.Input[str]
    """The image every engine container runs (`serving_image`, llmd_fleet/images/build.py), and the
    fabric preflight's probe (`serving.preflight`, `FabricPreflight`)."""
    beside: NotRequired[ModelServing]
    """The stable revision's `ModelServing` when this one is its canary (layers/serving/canary.py):
    the namespace, token Secret and ResourceClaimTemplates are that one's, not declared again
    (default none)."""
    alongside: NotRequired[ModelServing | None]
    """With `llmd-fleet:models`: the first model's ModelServing in the same namespace, whose
    namespace and token Secret this model shares instead of declaring them again, and its
    ResourceClaimTemplates where this model's roles use the same node group and claim shape (default
    none)."""


class ModelServing(pulumi.ComponentResource):
    """One DisaggregatedSet with a prefill and a decode role, each a multi-node LWS template."""

    disaggregated_set: k8s.apiextensions.CustomResource
    disruption_budgets: dict[str, k8s.policy.v1.PodDisruptionBudget]
    """One per role (`<set>-<role>`): at most one group of the role disrupted by drains at a time."""
    modelexpress: ModelExpressServer | None
    """The ModelExpress server, with `serving.weightLoading: modelexpress`."""
    namespace: pulumi.Resource
    """The serving namespace (a canary's is the stable revision's)."""
    token_secret: pulumi.Resource | None
    """The Hugging Face token Secret, if any (a canary's is the stable revision's)."""
    claim_templates: dict[str, pulumi.Resource]
    """The ResourceClaimTemplates by name (a canary's are the stable revision's; a second model's
    include those it shares with the first)."""

    def __init__(self, name: str, args: ModelServingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:serving:ModelServing", name, {}, opts)
        config, plan = args["config"], args["plan"]
        serving = config.serving
        child = pulumi.ResourceOptions(parent=self)
        beside = args.get("beside")
        if beside is not None:
            self.modelexpress = None
            self.namespace, self.token_secret = beside.namespace, beside.token_secret
            self.claim_templates = beside.claim_templates
            self._declare_set(
                name,
                config,
                plan,
                args,
                beside.namespace,
                beside.token_secret,
                list(beside.claim_templates.values()),
            )
            return
        alongside = args.get("alongside")
        namespace: pulumi.Resource
        if alongside is not None:
            namespace = alongside.namespace
        else:
            namespace = self._declare_namespace(name, config, child)
        self.namespace = namespace
        after_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        hf_token = args.get("hf_token")
        token_secret = alongside.token_secret if alongside is not None else None
        if hf_token is not None and alongside is None:
            token_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=HF_TOKEN_SECRET,
                    namespace=serving.namespace,
                    labels=common_labels("serving", serving.name),
                ),
                type="Opaque",
                string_data={"HF_TOKEN": pulumi.Output.secret(hf_token)},
                opts=after_namespace,
            )
        # One ResourceClaimTemplate per node group and claim shape: each pod gets its own claim
        # on the devices of the node it lands on (shared by the models of one stack).
        shapes = {
            claim_template_name(r.node_group, r.claim): r.claim for r in plan.roles if r.claim is not None
        }
        shared = alongside.claim_templates if alongside is not None else {}
        claim_templates: list[pulumi.Resource] = [shared[n] for n in sorted(shapes) if n in shared]
        self.claim_templates = dict(shared)
        for template_name, shape in sorted(shapes.items()):
            if template_name in shared:
                continue
            claim_templates.append(
                k8s.resource.v1.ResourceClaimTemplate(
                    f"{name}-{template_name}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=template_name,
                        namespace=serving.namespace,
                        labels=common_labels("model-server", serving.name),
                    ),
                    spec=cast(
                        k8s.resource.v1.ResourceClaimTemplateSpecArgsDict,
                        {"spec": claim_template_spec(shape)},
                    ),
                    opts=after_namespace,
                )
            )
            self.claim_templates[template_name] = claim_templates[-1]
        self.token_secret = token_secret
        # With ModelExpress, its server comes first: pods that start without it load from the hub.
        self.modelexpress = None
        if serving.weight_loading == "modelexpress":
            self.modelexpress = ModelExpressServer(
                f"{name}-modelexpress",
                {"config": config, "install_crds": config.target.installs_platform},
                opts=after_namespace,
            )
        # The fabric preflight (llmd_fleet/layers/preflight/component.py) on the same claim templates; with
        # gateServing the DisaggregatedSet is created only once its Job has completed.
        gate: list[pulumi.Resource] = []
        if serving.preflight.enabled:
            preflight = FabricPreflight(
                f"{name}-preflight",
                {"config": config, "plan": plan, "engine_image": args["engine_image"]},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, *claim_templates]),
            )
            if serving.preflight.gate_serving:
                gate.append(preflight.job)
        self._declare_set(
            name, config, plan, args, namespace, token_secret, [*claim_templates, *gate], self.modelexpress
        )

    def _declare_namespace(
        self, name: str, config: StackConfig, child: pulumi.ResourceOptions
    ) -> pulumi.Resource:
        """The serving namespace (the first model's, or the only one)."""
        serving = config.serving
        namespace: pulumi.Resource = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=serving.namespace,
                # Pod Security `privileged`: the serving pods add IPC_LOCK and SYS_RAWIO, which
                # `baseline` refuses (it admits only the runtime's default capabilities), and
                # mount hostPath volumes for a local-NVMe KV tier and, on GKE, the TCPXO
                # libraries, aperture devices and /sys. The router (EPP, tokenizer) and the
                # gateway proxies share this namespace: the InferencePool, its EPP and the pods
                # it selects live together. The router's own pods would pass `restricted`
                # (tests/stacks/test_security.py), so moving it out needs no change to its pods.
                # The simulator's pods pass `restricted`; the namespace stays at `baseline` for
                # the gateway proxies the implementation creates here (not rendered).
                labels={
                    **common_labels("serving", serving.name),
                    **pod_security_labels("privileged" if serving.engine == "vllm" else "baseline"),
                },
            ),
            opts=child,
        )
        return namespace

    def _declare_set(
        self,
        name: str,
        config: StackConfig,
        plan: FleetPlan,
        args: ModelServingArgs,
        namespace: pulumi.Resource,
        token_secret: pulumi.Resource | None,
        after: list[pulumi.Resource],
        modelexpress: pulumi.Resource | None = None,
    ) -> None:
        """The DisaggregatedSet and its roles' PodDisruptionBudgets, after `namespace`, the token
        Secret, `after` (claim templates, the preflight gate) and the ModelExpress server."""
        serving = config.serving
        after_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        engine_version = (
            versions().image("inference-sim").tag
            if serving.engine == "simulator"
            else versions().vllm.version
        )
        inputs: dict[str, PodInputs] = {
            role.name: PodInputs(
                instance=serving.name,
                labels=serving_labels(
                    serving.name,
                    role.name,
                    served_model_names(config.model)[0],
                    engine_version,
                    serving.engine,
                ),
                hf_token_secret=HF_TOKEN_SECRET if token_secret is not None else None,
                engine_image=args["engine_image"],
            )
            for role in plan.roles
        }
        self.disaggregated_set = k8s.apiextensions.CustomResource(
            f"{name}-disaggregated-set",
            api_version="disaggregatedset.x-k8s.io/v1",
            kind="DisaggregatedSet",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=serving.name,
                namespace=serving.namespace,
                labels=common_labels("model-server", serving.name),
            ),
            spec=disaggregated_set_spec(config, plan, inputs),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[namespace, *after]
                + ([token_secret] if token_secret is not None else [])
                + ([modelexpress] if modelexpress is not None else []),
            ),
        )
        # One PodDisruptionBudget per role (role_budget_spec): a drain (a node-pool upgrade)
        # takes down at most one group of each role at a time.
        self.disruption_budgets = {
            role.name: k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb-{role.name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=role_budget_name(config, role.name),
                    namespace=serving.namespace,
                    labels=common_labels("model-server", serving.name),
                ),
                spec=cast(k8s.policy.v1.PodDisruptionBudgetSpecArgsDict, role_budget_spec(config, role.name)),
                opts=after_namespace,
            )
            for role in plan.roles
        }
        self.register_outputs({"disaggregatedSet": serving.name})


def declare(ctx: Assembly) -> ModelServing:
    """The layer's builder (its registry record's `Declaration`): the model's DisaggregatedSet,
    after the LWS controller and the node setup the program was given; with several models, each
    after the first model's (`alongside`: their shared namespace objects)."""
    args: ModelServingArgs = {
        "config": ctx.config,
        "plan": ctx.plan,
        "hf_token": ctx.args.get("hf_token"),
        "engine_image": ctx.args["engine_image"],
    }
    if ctx.several_models:
        earlier = ctx.declared.get("serving", ())
        args["alongside"] = cast(ModelServing, earlier[0]) if earlier else None
    platform = [ctx.lws] if ctx.lws is not None else []
    return ModelServing(
        ctx.config.serving.name, args, opts=ctx.options(*platform, *ctx.args.get("serving_after", []))
    )
