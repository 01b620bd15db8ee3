"""Components and the whole program under Pulumi's mock engine: what is actually registered."""

import pulumi
import pytest

from llmd_fleet.cli.synth import REDACTED, RecordingMocks, clean
from llmd_fleet.layers.serving.component import ModelServing
from llmd_fleet.layers.serving.specs import HF_TOKEN_SECRET
from llmd_fleet.plan.fleet import plan_fleet
from llmd_fleet.platform.lws import LeaderWorkerSetController
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.versions import versions
from tests.support import ENGINE_IMAGE, set_stack_config, start_mock_engine


@pytest.fixture
def engine():
    mocks = start_mock_engine(RecordingMocks())
    return mocks


def _by_type(engine, type_token):
    return [r for r in engine.created if r.type == type_token]


@pulumi.runtime.test
def test_serving_registers_a_disaggregated_set_under_the_component(engine, raw_config):
    config = parse_config(raw_config)
    serving = ModelServing(
        "glm52",
        {"config": config, "plan": plan_fleet(config), "hf_token": None, "engine_image": ENGINE_IMAGE},
    )

    def check(urn):
        assert (
            "llmd-fleet:serving:ModelServing$kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet" in urn
        )
        (dset,) = _by_type(engine, "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet")
        spec = clean(dset.inputs)["spec"]
        roles = {r["name"]: r["spec"] for r in spec["roles"]}
        assert roles["prefill"]["replicas"] == 7 and roles["prefill"]["leaderWorkerTemplate"]["size"] == 4
        assert roles["decode"]["replicas"] == 5 and roles["decode"]["leaderWorkerTemplate"]["size"] == 8
        assert roles["prefill"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
            "maxSurge": 0,
            "maxUnavailable": 1,
        }
        # All 68 nodes are in use: decode cannot surge (llmd_fleet/plan/fleet.py rollouts_for).
        assert roles["decode"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
            "maxSurge": 0,
            "maxUnavailable": 1,
        }
        decode_pod = roles["decode"]["leaderWorkerTemplate"]["workerTemplate"]
        assert decode_pod["metadata"]["labels"]["llm-d.ai/role"] == "decode"
        (sidecar,) = decode_pod["spec"]["initContainers"]
        assert (
            sidecar["restartPolicy"] == "Always"
            and sidecar["image"] == versions().image("routing-sidecar").ref
        )
        (engine_container,) = decode_pod["spec"]["containers"]
        assert engine_container["resources"]["claims"] == [{"name": "accelerators"}]
        assert "nvidia.com/gpu" not in engine_container["resources"]["limits"]
        assert (
            engine_container["startupProbe"]["failureThreshold"]
            * engine_container["startupProbe"]["periodSeconds"]
            == 45 * 60
        )
        shm = f"{plan_fleet(config).role('decode').shm_gib}Gi"
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}} in decode_pod["spec"][
            "volumes"
        ]
        assert "initContainers" not in roles["prefill"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        # No token configured: no Secret and no HF_TOKEN env.
        assert not _by_type(engine, "kubernetes:core/v1:Secret")
        assert all(e["name"] != "HF_TOKEN" for e in engine_container["env"])

    return serving.disaggregated_set.urn.apply(check)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pulumi.runtime.test
def test_hf_token_is_a_secret_reference(engine, raw_config):
    config = parse_config(raw_config, frozenset({"hfToken"}))
    token = pulumi.Output.secret("hf_do_not_print_me")
    serving = ModelServing(
        "glm52",
        {"config": config, "plan": plan_fleet(config), "hf_token": token, "engine_image": ENGINE_IMAGE},
    )

    def check(_):
        (secret,) = _by_type(engine, "kubernetes:core/v1:Secret")
        # The secret marking covers the whole map: neither key nor value is rendered.
        assert clean(secret.inputs)["stringData"] == {"HF_TOKEN": REDACTED}
        (dset,) = _by_type(engine, "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet")
        assert "hf_do_not_print_me" not in repr(clean(dset.inputs))
        env = clean(dset.inputs)["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"][
            "spec"
        ]["containers"][0]["env"]
        assert {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": "HF_TOKEN"}},
        } in env

    return serving.disaggregated_set.urn.apply(check)


@pulumi.runtime.test
def test_lws_release_comes_from_the_version_matrix(engine):
    lws = LeaderWorkerSetController("lws", {"chart": versions().chart("lws")})

    def check(urn):
        assert "llmd-fleet:platform:LeaderWorkerSetController$kubernetes:helm.sh/v3:Release" in urn
        (release,) = _by_type(engine, "kubernetes:helm.sh/v3:Release")
        inputs = clean(release.inputs)
        assert inputs["chart"] == versions().chart("lws").chart
        assert inputs["version"] == versions().chart("lws").version
        assert inputs["values"]["enableDisaggregatedSet"] is True
        assert inputs["namespace"] == "lws-system"

    return lws.release.urn.apply(check)


@pulumi.runtime.test
def test_whole_program_uses_one_provider(engine, raw_config):
    from llmd_fleet.program import build_fleet, load

    set_stack_config(
        raw_config, {"kubeconfig": "apiVersion: v1\nkind: Config\n", "responsesDbPassword": "test-password"}
    )
    config, plan = load()
    fleet = build_fleet(config, plan)

    def check(_):
        providers = _by_type(engine, "pulumi:providers:kubernetes")
        assert len(providers) == 1
        assert clean(providers[0].inputs)["kubeconfig"] == REDACTED
        assert clean(providers[0].inputs)["enableServerSideApply"] == "true"
        types = sorted({r.type for r in engine.created})
        assert "kubernetes:helm.sh/v3:Release" in types and "kubernetes:core/v1:Namespace" in types

    assert fleet.lws is not None  # the reference stack installs its platform
    return pulumi.Output.all(fleet.serving.disaggregated_set.urn, fleet.lws.release.urn).apply(check)
