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
from tests.conftest import stack_raw_config


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
    mocks = ProviderMocks()
    pulumi.runtime.set_mocks(mocks, project="platform", stack="test", preview=False)
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
