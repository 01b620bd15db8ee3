"""examples/existing_cluster.py: the components imported into a program of one's own, on a
Kubernetes provider that program owns."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime import MockResourceArgs

from examples.existing_cluster import add_llmd_serving
from llmd_fleet.cli.synth import RecordingMocks
from llmd_fleet.core.problems import ConfigError
from tests.support import stack_raw_config, start_mock_engine


class ProviderMocks(RecordingMocks):
    """RecordingMocks that also note which provider each custom resource was given."""

    def __init__(self) -> None:
        super().__init__()
        self.providers: dict[str, str | None] = {}

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        if args.custom and not args.typ.startswith("pulumi:providers:"):
            self.providers[f"{args.typ}::{args.name}"] = args.provider
        return super().new_resource(args)


@pytest.fixture
def engine() -> ProviderMocks:
    mocks = start_mock_engine(ProviderMocks(), project="platform")
    return mocks


@pulumi.runtime.test
def test_every_object_lands_on_the_programs_own_provider(engine):
    provider = k8s.Provider("gpu-cluster", kubeconfig="apiVersion: v1\nkind: Config\n")
    fleet = add_llmd_serving(stack_raw_config("onprem-h100"), provider, pulumi.Output.secret("test-password"))

    def check(args):
        provider_urn, provider_id = args[0], args[1]
        types = {r.type for r in engine.created}
        assert "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet" in types
        assert "kubernetes:inference.networking.k8s.io/v1:InferencePool" in types
        assert "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute" in types
        assert "kubernetes:helm.sh/v3:Release" in types
        # Nothing of a cloud, and no provider but the program's.
        assert not [t for t in types if t.split(":")[0] in {"aws", "gcp", "docker-build"}]
        assert [r.name for r in engine.created if r.type == "pulumi:providers:kubernetes"] == ["gpu-cluster"]
        assert engine.providers and set(engine.providers.values()) == {f"{provider_urn}::{provider_id}"}

    return pulumi.Output.all(
        provider.urn, provider.id, fleet.serving.disaggregated_set.urn, fleet.router.inference_pool.urn
    ).apply(check)


@pulumi.runtime.test
def test_bad_settings_are_refused_before_anything_is_declared(engine):
    settings = stack_raw_config("onprem-h100")
    settings["serving"]["roles"]["decode"]["dataParallel"] = 48
    provider = k8s.Provider("gpu-cluster", kubeconfig="apiVersion: v1\nkind: Config\n")
    with pytest.raises(ConfigError) as caught:
        add_llmd_serving(settings, provider)
    assert "llmd-fleet:serving.roles.decode.dataParallel" in str(caught.value)

    def check(_):
        # Only the program's own provider was registered once every registration had finished.
        assert [r.type for r in engine.created] == ["pulumi:providers:kubernetes"]

    return provider.urn.apply(check)


@pulumi.runtime.test
def test_the_nic_device_class_the_claims_name_is_declared_on_a_preinstalled_platform(engine):
    # The quickstart's settings: platform preinstalled, so no chart at all, but the DeviceClass the
    # serving pods' ResourceClaimTemplate names exists (without it the pods stay Pending).
    provider = k8s.Provider("gpu-cluster", kubeconfig="apiVersion: v1\nkind: Config\n")
    fleet = add_llmd_serving(stack_raw_config("quickstart-h100"), provider)

    def check(_):
        classes = [r for r in engine.created if r.type == "kubernetes:resource.k8s.io/v1:DeviceClass"]
        assert [c.inputs["metadata"]["name"] for c in classes] == ["rdma-nic.llmd-fleet.io"]
        (template,) = [
            r for r in engine.created if r.type == "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
        ]
        named = {
            r["exactly"]["deviceClassName"] for r in template.inputs["spec"]["spec"]["devices"]["requests"]
        }
        assert "rdma-nic.llmd-fleet.io" in named
        assert not [r for r in engine.created if r.type == "kubernetes:helm.sh/v3:Release"]

    return fleet.serving.disaggregated_set.urn.apply(check)


def test_check_settings_runs_the_checks_of_llmd_fleet_check_on_a_programs_settings():
    from llmd_fleet import PlanError, check_settings

    assert check_settings(stack_raw_config("quickstart-h100")) == []
    settings = stack_raw_config("quickstart-h100")
    settings["serving"]["roles"]["decode"]["dataParallel"] = 6
    with pytest.raises((ConfigError, PlanError)) as caught:
        check_settings(settings)
    assert "llmd-fleet:serving.roles.decode" in str(caught.value)


def test_the_example_imports_only_the_public_api():
    """examples/existing_cluster.py is what a platform team copies: every llmd_fleet name it uses
    comes from `llmd_fleet` itself and is in its `__all__`, none from an internal module."""
    import ast

    import llmd_fleet
    from tests.support import REPO

    tree = ast.parse((REPO / "examples" / "existing_cluster.py").read_text())
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmd_fleet"):
            assert node.module == "llmd_fleet", f"line {node.lineno}: imports {node.module}"
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            assert not [a.name for a in node.names if a.name.startswith("llmd_fleet")], node.lineno
    assert imported and set(imported) <= set(llmd_fleet.__all__)


@pulumi.runtime.test
def test_the_example_releases_the_platform_with_install(engine):
    """onprem-h100's settings (`target.platform: install`): the GPU Operator, the DRA driver and
    DRANET are released, and the NIC DeviceClass declared, as the stack program does."""
    provider = k8s.Provider("gpu-cluster", kubeconfig="apiVersion: v1\nkind: Config\n")
    fleet = add_llmd_serving(stack_raw_config("onprem-h100"), provider, pulumi.Output.secret("pw"))

    def check(_):
        releases = {r.inputs["name"] for r in engine.created if r.type == "kubernetes:helm.sh/v3:Release"}
        assert {"gpu-operator", "dra-driver-nvidia-gpu", "dranet"} <= releases
        classes = [r for r in engine.created if r.type == "kubernetes:resource.k8s.io/v1:DeviceClass"]
        assert "rdma-nic.llmd-fleet.io" in [c.inputs["metadata"]["name"] for c in classes]

    return fleet.serving.disaggregated_set.urn.apply(check)
