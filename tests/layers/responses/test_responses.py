"""The Responses API with `previous_response_id` (`components/llmd_fleet/layers/responses/`,
`docs/responses.md`): the config section, a `/v1/responses` request followed through the rendered
HTTPRoutes to the agentic API and its database Secret, the database of every target, and that
serving changes replace no part of it."""

import copy
import functools
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pulumi
import pytest
import yaml

from llmd_fleet.cli.main import run
from llmd_fleet.cli.render import render_files
from llmd_fleet.cli.synth import _SECRET_SIG, _SECRET_SIG_KEY, RecordingMocks, Synthesis, clean, synthesize
from llmd_fleet.layers.gateway.specs import GATEWAY_NAME_LABEL
from llmd_fleet.layers.responses.component import database_url
from llmd_fleet.layers.responses.config import ResponsesConfig, ResponsesDatabaseConfig, S3BackupConfig
from llmd_fleet.stack.parse import parse_config
from llmd_fleet.targets.eks.config import EksTarget, ResponsesEksDatabaseConfig, database_subnet_cidrs
from llmd_fleet.targets.gke.config import GkeTarget, ResponsesGkeDatabaseConfig, default_gateway_address
from llmd_fleet.targets.onprem.config import ResponsesOnpremDatabaseConfig
from llmd_fleet.versions import version_tuple, versions
from tests.helpers import restricted_violations
from tests.httproutes import route_request
from tests.support import (
    STACKS_DIR,
    problems_by_key,
    responses_stacks,
    stack_raw_config,
    start_mock_engine,
    vllm_stacks,
)

GATEWAY = "llm-d-inference-gateway"
POOL = "glm52"
CLIENT_HOST = "llm.example.com"
DATABASE_TYPES = {
    "gke-h100": (
        "gcp:sql/databaseInstance:DatabaseInstance",
        "gcp:sql/database:Database",
        "gcp:sql/user:User",
        "gcp:compute/globalAddress:GlobalAddress",
        "gcp:servicenetworking/connection:Connection",
    ),
    "eks-h100": (
        "aws:rds/instance:Instance",
        "aws:rds/subnetGroup:SubnetGroup",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/securityGroup:SecurityGroup",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    ),
}


def _raw(stack: str) -> dict[str, Any]:
    return copy.deepcopy(stack_raw_config(stack))


def _document(stack: str) -> dict[str, Any]:
    return yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())


def _synthesize_variant(tmp_path: Path, stack: str, edit: Any) -> Synthesis:
    document = _document(stack)
    edit(document["config"])
    directory = tmp_path / f"variant-{len(list(tmp_path.iterdir()))}"
    directory.mkdir()
    (directory / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return synthesize(directory, stack)


@functools.cache
def _synthesis(stack: str) -> Synthesis:
    return synthesize(STACKS_DIR, stack)


def _reveal(value: Any) -> Any:
    """An input with its secret wrappers taken off (what the engine would receive decrypted)."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            return _reveal(value.get("value"))
        return {k: _reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_reveal(v) for v in value]
    return value


def _objects(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


# -- config ----------------------------------------------------------------------------------------


def test_responses_is_on_in_every_reference_stack_with_a_backup_choice_on_prem():
    # Every GPU stack carries the Responses layer, but a stack that leaves every optional layer off
    # (no Responses, autoscaling, ModelExpress or preflight: the quickstart's shape), read from its
    # own config.
    for stack in vllm_stacks():
        config = parse_config(_raw(stack))
        if config.models:
            continue  # several models run without the Responses layer (refused with models)
        if stack not in responses_stacks():
            serving = config.serving
            optional = (
                serving.autoscaling,
                serving.weight_loading == "modelexpress",
                serving.preflight.enabled,
            )
            assert config.responses is None and not any(optional), stack
        else:
            assert config.responses is not None, stack
    assert responses_stacks(), "the reference stacks carry the Responses layer"
    onprem = parse_config(_raw("onprem-h100")).responses
    assert onprem is not None and isinstance(onprem.backup, S3BackupConfig)
    # The stack files carry the password as a secret (a placeholder ciphertext).
    for stack in responses_stacks():
        assert set(_document(stack)["config"]["llmd-fleet:responsesDbPassword"]) == {"secure"}


def test_on_prem_needs_an_explicit_backup_choice():
    raw = _raw("onprem-h100")
    del raw["responses"]["backup"]
    problem = problems_by_key(raw)["llmd-fleet:responses.backup"]
    assert "required on kind onprem" in problem and "`none`" in problem
    raw["responses"]["backup"] = "none"
    config = parse_config(raw)
    assert config.responses is not None and config.responses.backup == "none"
    raw["responses"]["backup"] = "off"
    assert "must be `none` or a mapping" in problems_by_key(raw)["llmd-fleet:responses.backup"]


@pytest.mark.parametrize(
    ("stack", "edit", "key", "words"),
    [
        ("gke-h100", lambda r: r.update(backup="none"), "backup", "only for kind onprem"),
        ("eks-h100", lambda r: r["database"].update(gke={}), "database.gke", "only for kind gke"),
        ("onprem-h100", lambda r: r["database"].update(eks={}), "database.eks", "only for kind eks"),
        (
            "gke-h100",
            lambda r: r["database"]["gke"].update(tier="db-custom-4-16384"),
            "database.gke.tier",
            "takes only db-perf-optimized-N-*",
        ),
        (
            "gke-h100",
            lambda r: r["database"]["gke"].update(edition="ENTERPRISE"),
            "database.gke.tier",
            "takes no db-perf-optimized-N-*",
        ),
        (
            "gke-h100",
            lambda r: r["database"]["gke"].update(privateServiceCidr="10.64.0.0/16"),
            "database.gke.privateServiceCidr",
            "overlaps target.gke.network.podCidr",
        ),
        (
            "gke-h100",
            lambda r: r["database"]["gke"].update(privateServiceCidr="10.98.0.0/26"),
            "database.gke.privateServiceCidr",
            "must be a /16 to /24",
        ),
        (
            "gke-h100",
            lambda r: r["database"]["gke"].update(gatewayAddress="10.0.15.255"),
            "database.gke.gatewayAddress",
            "other than the four GCE reserves",
        ),
        (
            "gke-h100",
            lambda r: r["database"]["gke"].update(gatewayAddress="10.1.0.5"),
            "database.gke.gatewayAddress",
            "must be an address of target.gke.network.nodeCidr",
        ),
        (
            "eks-h100",
            lambda r: r["database"].update(storageGiB=500, maxStorageGiB=100),
            "database.maxStorageGiB",
            "at least storageGiB",
        ),
    ],
)
def test_cross_field_rules_name_the_key(stack, edit, key, words):
    raw = _raw(stack)
    edit(raw["responses"])
    problems = problems_by_key(raw)
    assert words in problems[f"llmd-fleet:responses.{key}"], problems


def test_a_gateway_address_needs_the_managed_gateway():
    raw = _raw("gke-h100")
    raw["gateway"] = {"implementation": "istio"}
    raw["responses"]["database"]["gke"]["gatewayAddress"] = "10.0.15.200"
    assert "gke-l7-rilb" in problems_by_key(raw)["llmd-fleet:responses.database.gke.gatewayAddress"]


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (lambda r: r.update(replicas=1), "replicas", "must be >= 2 replicas"),
        (lambda r: r.update(replicas=500), "replicas", "must be <= 20 replicas"),
        (
            lambda r: r["database"].update(backupRetentionDays=90),
            "database.backupRetentionDays",
            "<= 35 days",
        ),
        (lambda r: r["database"].update(name="pg_store"), "database.name", "reserved"),
        (lambda r: r["database"].update(user="Agentic"), "database.user", "PostgreSQL identifier"),
        (lambda r: r["backup"].update(endpoint="https://s3.lab/bucket"), "backup.endpoint", "no path"),
        (lambda r: r["backup"].update(endpoint="$(id)"), "backup.endpoint", "http(s) URL"),
        (lambda r: r["backup"].update(bucket="Bad_Bucket"), "backup.bucket", "S3 bucket name"),
        (lambda r: r["backup"].update(credentialsSecret="a b"), "backup.credentialsSecret", "DNS-1123"),
        (lambda r: r.update(name="Agentic API"), "name", "DNS-1123"),
        (lambda r: r.update(unknown=1), "unknown", "unknown key"),
    ],
)
def test_field_rules_name_the_key(edit, key, words):
    raw = _raw("onprem-h100")
    edit(raw["responses"])
    problems = problems_by_key(raw)
    assert words in problems[f"llmd-fleet:responses.{key}"], problems


def test_every_responses_field_is_documented():
    models = (
        ResponsesConfig,
        ResponsesDatabaseConfig,
        ResponsesGkeDatabaseConfig,
        ResponsesEksDatabaseConfig,
        ResponsesOnpremDatabaseConfig,
        S3BackupConfig,
    )
    undocumented = [
        f"{m.__name__}.{n}" for m in models for n, f in m.model_fields.items() if not f.description
    ]
    assert undocumented == []


def _stack_dir(tmp_path: Path, stack: str, password: Any) -> Path:
    document = _document(stack)
    if password is None:
        del document["config"]["llmd-fleet:responsesDbPassword"]
    else:
        document["config"]["llmd-fleet:responsesDbPassword"] = password
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return tmp_path


@pytest.mark.parametrize(
    ("password", "words"),
    [
        (None, "llmd-fleet:responsesDbPassword: required with llmd-fleet:responses"),
        ("hunter2-in-the-clear", "llmd-fleet:responsesDbPassword: must be a secret"),
    ],
)
def test_the_password_is_a_required_secret(tmp_path, capsys, password, words):
    stacks = _stack_dir(tmp_path, "eks-h100", password)
    out = tmp_path / "out"
    assert run(["--stacks-dir", str(stacks), "render", "eks-h100", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert words in err and "hunter2" not in err and not out.exists()


# -- pure builders ----------------------------------------------------------------------------------


def test_the_database_url_carries_any_password_and_requires_tls():
    password = "p@ss:w/rd#?%& x"
    url = database_url("agentic_api", password, "db.internal", 5432, "agentic_api")
    parts = urlsplit(url)
    assert parts.scheme == "postgresql" and parts.hostname == "db.internal" and parts.port == 5432
    assert unquote(parts.username or "") == "agentic_api" and unquote(parts.password or "") == password
    assert parts.path == "/agentic_api" and parts.query == "sslmode=require"


def test_derived_addresses():
    assert default_gateway_address("10.0.0.0/20") == "10.0.15.252"
    cidrs = database_subnet_cidrs("10.64.0.0/16")
    assert cidrs == {"database-capacity": "10.64.192.0/24", "database-secondary": "10.64.193.0/24"}
    import ipaddress

    from llmd_fleet.targets.eks.config import subnet_cidrs

    taken = [ipaddress.IPv4Network(c) for c in subnet_cidrs("10.64.0.0/16").values()]
    assert not any(ipaddress.IPv4Network(c).overlaps(t) for c in cidrs.values() for t in taken)


def test_cloud_sql_keeps_fewer_days_of_logs_than_backups():
    from llmd_fleet.targets.gke.database import log_retention_days

    assert [log_retention_days(d) for d in (2, 5, 8, 14, 35)] == [1, 4, 7, 7, 7]


# -- a /v1/responses request through the rendered objects -------------------------------------------


@pytest.mark.parametrize("stack", responses_stacks())
def test_a_responses_request_reaches_the_agentic_api_and_its_database_secret(stack, rendered):
    objects = rendered(stack)
    routes = [o for o in objects if o["kind"] == "HTTPRoute"]
    # Clients: the Responses, Conversations and Messages APIs and the model list go to the agentic
    # API (llm-d's agentic-api guide routes), everything else to the pool as before.
    for path in (
        "/v1/responses",
        "/v1/responses/resp_0123/cancel",
        "/v1/conversations",
        "/v1/messages",
        "/v1/models",
        "/v1/models/zai-org/GLM-5.2-FP8",
    ):
        match = route_request(routes, GATEWAY, CLIENT_HOST, path)
        assert match is not None and match.route == "agentic-api", path
        (backend,) = match.backend_refs
        assert backend == {"group": "", "kind": "Service", "name": "agentic-api", "port": 9000}
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/responsesX", "/health"):
        match = route_request(routes, GATEWAY, CLIENT_HOST, path)
        assert match is not None and match.route == POOL, path
        assert [b["kind"] for b in match.backend_refs] == ["InferencePool"]
    # The Service's port reaches the agentic API's pods.
    service = _objects(objects, "Service")["agentic-api"]
    (port,) = service["spec"]["ports"]
    deployment = _objects(objects, "Deployment")["agentic-api"]
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert port["port"] == 9000 and port["targetPort"] == "http"
    assert {"name": "http", "containerPort": 9000, "protocol": "TCP"} in container["ports"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    # ... whose DATABASE_URL comes from the connection Secret, by reference and never rendered.
    (env,) = [e for e in container["env"] if e["name"] == "DATABASE_URL"]
    reference = env["valueFrom"]["secretKeyRef"]
    secret = _objects(objects, "Secret")[reference["name"]]
    assert secret["stringData"] == {reference["key"]: "[secret]"}


@pytest.mark.parametrize("stack", responses_stacks())
def test_the_agentic_apis_own_requests_go_to_the_pool_through_the_gateway(stack, rendered):
    objects = rendered(stack)
    routes = [o for o in objects if o["kind"] == "HTTPRoute"]
    (container,) = _objects(objects, "Deployment")["agentic-api"]["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    upstream = urlsplit(args[args.index("--llm-api-base") + 1])
    assert upstream.hostname is not None
    # Its host ranks above the client route's path, so a turn never loops back into it.
    for path in ("/v1/responses", "/v1/chat/completions"):
        match = route_request(routes, GATEWAY, upstream.hostname, path)
        assert match is not None and match.route == "agentic-api-upstream", path
        assert match.backend_refs == (
            {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": POOL},
        )
    spec = _objects(objects, "Deployment")["agentic-api"]["spec"]["template"]["spec"]
    gateway = _objects(objects, "Gateway")[GATEWAY]
    if stack == "gke-h100":
        # GKE's managed gateway: the host is mapped to the address the stack reserves for it,
        # and the Gateway takes that address by name.
        (alias,) = spec["hostAliases"]
        assert alias["hostnames"] == [upstream.hostname]
        (address,) = [
            clean(r.inputs) for r in _synthesis(stack).resources if r.type == "gcp:compute/address:Address"
        ]
        assert alias["ip"] == address["address"] and address["addressType"] == "INTERNAL"
        assert gateway["spec"]["addresses"] == [{"type": "NamedAddress", "value": address["name"]}]
    else:
        # In-cluster gateways: the host is a Service over the Gateway's proxy pods.
        name, namespace, _ = upstream.hostname.split(".", 2)
        service = _objects(objects, "Service")[name]
        assert service["metadata"]["namespace"] == namespace
        assert service["spec"]["selector"] == {GATEWAY_NAME_LABEL: GATEWAY}
        assert "addresses" not in gateway["spec"] and "hostAliases" not in spec


def test_the_on_prem_connection_secret_names_the_clusters_primary_and_owner():
    synthesis = _synthesis("onprem-h100")
    (secret,) = [r for r in synthesis.resources if r.name == "responses-connection"]
    url = urlsplit(_reveal(secret.inputs)["stringData"]["database-url"])
    (cluster,) = [clean(r.inputs) for r in synthesis.resources if r.type.endswith(":Cluster")]
    (owner,) = [r for r in synthesis.resources if r.name == "responses-postgres-owner"]
    owner_data = _reveal(owner.inputs)["stringData"]
    initdb = cluster["spec"]["bootstrap"]["initdb"]
    assert url.hostname == f"{cluster['metadata']['name']}-rw.{cluster['metadata']['namespace']}.svc"
    assert url.username == initdb["owner"] == owner_data["username"] and url.path == f"/{initdb['database']}"
    assert unquote(url.password or "") == owner_data["password"]
    assert initdb["secret"]["name"] == owner.inputs["metadata"]["name"]
    # The same Secret keeps the role's password in sync: rotating it rotates the database's.
    (role,) = cluster["spec"]["managed"]["roles"]
    assert role["name"] == initdb["owner"] and role["passwordSecret"] == initdb["secret"]
    assert owner.inputs["metadata"]["labels"]["cnpg.io/reload"] == "true"


@pytest.mark.parametrize(
    ("stack", "user_type"), [("gke-h100", "gcp:sql/user:User"), ("eks-h100", "aws:rds/instance:Instance")]
)
def test_the_cloud_connection_secret_names_the_managed_databases_owner(stack, user_type):
    synthesis = _synthesis(stack)
    (secret,) = [r for r in synthesis.resources if r.name == "responses-connection"]
    url = urlsplit(_reveal(secret.inputs)["stringData"]["database-url"])
    (user,) = [_reveal(r.inputs) for r in synthesis.resources if r.type == user_type]
    login = user.get("username") or user.get("name")
    assert url.username == login == "agentic_api" and unquote(url.password or "") == user["password"]
    assert url.query == "sslmode=require"


# -- the databases -----------------------------------------------------------------------------------


def _cloud(synthesis: Synthesis, type_token: str) -> list[dict[str, Any]]:
    return [clean(r.inputs) for r in synthesis.resources if r.type == type_token]


def test_gke_cloud_sql_is_private_regional_backed_up_and_protected():
    synthesis = _synthesis("gke-h100")
    (instance,) = _cloud(synthesis, "gcp:sql/databaseInstance:DatabaseInstance")
    settings = instance["settings"]
    assert instance["databaseVersion"] == f"POSTGRES_{versions().software['postgresql-major']}"
    assert instance["deletionProtection"] is True and settings["deletionProtectionEnabled"] is True
    assert settings["availabilityType"] == "REGIONAL" and settings["edition"] == "ENTERPRISE_PLUS"
    backups = settings["backupConfiguration"]
    assert backups["enabled"] is True and backups["pointInTimeRecoveryEnabled"] is True
    assert backups["backupRetentionSettings"]["retainedBackups"] == 14 and settings["retainBackupsOnDelete"]
    ip = settings["ipConfiguration"]
    (network,) = [r for r in synthesis.resources if r.name == "cluster-network-primary"]
    assert ip == {"ipv4Enabled": False, "privateNetwork": f"{network.name}-id", "sslMode": "ENCRYPTED_ONLY"}
    # Private Service Access: the configured range, peered with the service producer network.
    (peering,) = _cloud(synthesis, "gcp:compute/globalAddress:GlobalAddress")
    assert peering["purpose"] == "VPC_PEERING" and peering["addressType"] == "INTERNAL"
    assert (peering["address"], peering["prefixLength"]) == ("10.98.0.0", 20)
    assert peering["network"] == ip["privateNetwork"]
    (connection,) = _cloud(synthesis, "gcp:servicenetworking/connection:Connection")
    assert connection["service"] == "servicenetworking.googleapis.com"
    assert (
        connection["reservedPeeringRanges"] == [peering["name"]]
        and connection["network"] == peering["network"]
    )


def test_eks_rds_is_multi_az_encrypted_private_and_protected():
    synthesis = _synthesis("eks-h100")
    (instance,) = _cloud(synthesis, "aws:rds/instance:Instance")
    assert (
        instance["engine"] == "postgres"
        and instance["engineVersion"] == versions().software["postgresql-major"]
    )
    assert instance["multiAz"] is True and instance["storageEncrypted"] is True
    assert instance["publiclyAccessible"] is False and instance["deletionProtection"] is True
    assert instance["skipFinalSnapshot"] is False and instance["backupRetentionPeriod"] == 14
    (group,) = _cloud(synthesis, "aws:rds/subnetGroup:SubnetGroup")
    assert instance["dbSubnetGroupName"] == group["name"]
    subnets = {
        r.name: clean(r.inputs) for r in synthesis.resources if r.name.startswith("responses-db-database-")
    }
    assert sorted(f"{s}-id" for s in subnets) == sorted(group["subnetIds"])
    assert {s["cidrBlock"] for s in subnets.values()} == set(database_subnet_cidrs("10.64.0.0/16").values())
    assert {s["availabilityZone"] for s in subnets.values()} == {"us-east-2a", "us-east-2b"}
    assert not any(s.get("mapPublicIpOnLaunch") for s in subnets.values())
    # No route table of the fleet (NAT or internet gateway) is associated with them.
    associations = _cloud(synthesis, "aws:ec2/routeTableAssociation:RouteTableAssociation")
    assert not {a["subnetId"] for a in associations} & set(group["subnetIds"])
    # The security group admits 5432 by one rule, from a security group, and nothing else.
    (sg,) = [r for r in synthesis.resources if r.name == "responses-db-security-group"]
    assert instance["vpcSecurityGroupIds"] == [f"{sg.name}-id"]
    rules = [
        (r.type, clean(r.inputs))
        for r in synthesis.resources
        if r.type.startswith("aws:vpc/securityGroup")
        and clean(r.inputs)["securityGroupId"] == f"{sg.name}-id"
    ]
    assert [(t.rsplit(":", 1)[1], i["fromPort"], i["toPort"], i["ipProtocol"]) for t, i in rules] == [
        ("SecurityGroupIngressRule", 5432, 5432, "tcp")
    ]
    assert "cidrIpv4" not in rules[0][1] and "cidrIpv6" not in rules[0][1]


@pulumi.runtime.test
def test_the_rds_security_group_admits_the_clusters_security_group():
    from llmd_fleet.targets.eks.database import EksResponses

    mocks = start_mock_engine(RecordingMocks())
    config = parse_config(_raw("eks-h100"))
    assert isinstance(config.target, EksTarget) and config.responses is not None
    store = EksResponses(
        "responses-db",
        {
            "eks": config.target.eks,
            "responses": config.responses,
            "cluster_name": "llmd-test",
            "vpc_id": "vpc-0123",
            "cluster_security_group_id": pulumi.Output.from_input("sg-0cluster"),
            "password": pulumi.Output.secret("test-password"),
            "tags": {},
        },
    )

    def check(_):
        (rule,) = [clean(r.inputs) for r in mocks.created if r.type.endswith(":SecurityGroupIngressRule")]
        assert rule["referencedSecurityGroupId"] == "sg-0cluster" and rule["fromPort"] == 5432
        assert store.instance._protect

    return store.instance.urn.apply(check)


@pulumi.runtime.test
def test_the_cloud_sql_instance_is_protected_in_pulumi():
    from llmd_fleet.targets.gke.database import GkeResponses

    start_mock_engine(RecordingMocks())
    config = parse_config(_raw("gke-h100"))
    assert isinstance(config.target, GkeTarget) and config.responses is not None
    store = GkeResponses(
        "responses-db",
        {
            "gke": config.target.gke,
            "responses": config.responses,
            "gateway_implementation": "gke-l7-rilb",
            "network": "n",
            "subnet": "s",
            "password": "x",
        },
    )
    return store.instance.urn.apply(lambda _: store.instance._protect or pytest.fail("not protected"))


def test_on_prem_runs_cloudnative_pg_with_three_instances_and_backups(rendered):
    objects = rendered("onprem-h100")
    (cluster,) = _objects(objects, "Cluster").values()
    spec = cluster["spec"]
    assert spec["instances"] == 3 and spec["imageName"] == versions().image("cnpg-postgresql").ref
    assert spec["affinity"] == {
        "enablePodAntiAffinity": True,
        "podAntiAffinityType": "required",
        "topologyKey": "kubernetes.io/hostname",
    }
    store = spec["backup"]["barmanObjectStore"]
    assert store["destinationPath"] == "s3://llmd-responses/"
    assert store["endpointURL"] == "https://s3.example.internal:9000"
    credentials = store["s3Credentials"]
    assert {credentials[k]["name"] for k in ("accessKeyId", "secretAccessKey")} == {"responses-backup-s3"}
    (backup,) = _objects(objects, "ScheduledBackup").values()
    assert backup["spec"]["cluster"] == {"name": cluster["metadata"]["name"]}
    assert backup["spec"]["method"] == "barmanObjectStore"
    # The operator from the pinned chart, in a namespace of its own at Pod Security `restricted`.
    release = yaml.safe_load(Path(_render_dir("onprem-h100"), "helm", "cnpg-system.cnpg.yaml").read_text())
    chart = versions().chart("cloudnative-pg")
    assert (release["chart"], release["version"], release["repository"]) == (
        chart.chart,
        chart.version,
        chart.repository,
    )
    namespace = _objects(objects, "Namespace")["cnpg-system"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_in_tree_barman_backups_need_an_operator_older_than_1_31():
    """CloudNativePG removes `spec.backup.barmanObjectStore` in 1.31 (its 1.30 release notes):
    the pinned operator must stay below it until the Barman Cloud plugin replaces it here."""
    assert version_tuple(versions().software["cloudnative-pg"])[:2] < (1, 31)


def test_backup_none_renders_no_backup(tmp_path):
    def no_backup(config: dict[str, Any]) -> None:
        config["llmd-fleet:responses"]["backup"] = "none"

    synthesis = _synthesize_variant(tmp_path, "onprem-h100", no_backup)
    (cluster,) = [clean(r.inputs) for r in synthesis.resources if r.type.endswith(":Cluster")]
    assert "backup" not in cluster["spec"]
    assert not [r for r in synthesis.resources if r.type.endswith(":ScheduledBackup")]
    (policy,) = [clean(r.inputs) for r in synthesis.resources if r.name == "network-policies-response-store"]
    assert not [rule for rule in policy["spec"]["egress"] if "ipBlock" in str(rule)]


@functools.cache
def _render_dir(stack: str) -> str:
    import tempfile

    out = Path(tempfile.mkdtemp(prefix=f"responses-{stack}-")) / "out"
    assert run(["render", stack, "--out", str(out)]) == 0
    return str(out)


# -- the agentic API's pods ----------------------------------------------------------------------------


@pytest.mark.parametrize("stack", responses_stacks())
def test_the_agentic_api_is_highly_available_and_hardened(stack, rendered):
    objects = rendered(stack)
    deployment = _objects(objects, "Deployment")["agentic-api"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert container["image"] == versions().image("agentic-api").ref
    assert restricted_violations(spec) == []
    assert spec["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(container)
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    pdb = _objects(objects, "PodDisruptionBudget")["agentic-api"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    wanted = selector.get("matchLabels") or {}
    return bool(wanted) and wanted.items() <= labels.items()


@pytest.mark.parametrize("stack", responses_stacks())
def test_the_agentic_api_starts_on_its_read_only_root_and_outlasts_the_model_load(stack, rendered):
    objects = rendered(stack)
    config = parse_config(stack_raw_config(stack), stack)
    deployment = _objects(objects, "Deployment")["agentic-api"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # Its home (config.toml at every start) is a mounted emptyDir, not the read-only root.
    home = env["AGENTIC_API_HOME"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert home in mounts and "emptyDir" in volumes[mounts[home]]
    assert not [m for m in container["volumeMounts"] if m.get("readOnly")]
    # It waits for the upstream's /health as long as a fresh fleet loads the model, and the
    # startup probe outlasts that wait plus the database start (it listens only afterwards).
    args = container["args"]
    load_seconds = config.serving.model_load_seconds
    assert int(_flag(args, "--llm-ready-timeout-s")) == load_seconds
    probe = container["startupProbe"]
    assert probe["httpGet"]["path"] == "/health"
    assert probe["periodSeconds"] * probe["failureThreshold"] >= load_seconds + 60
    # The body limit covers a client that resends the whole served window (8 bytes a token),
    # and is never below the binary's own default of 10 MiB.
    roles = config.serving.roles
    window = min(roles.prefill.max_model_len, roles.decode.max_model_len)
    limit = int(_flag(args, "--max-request-body-size-bytes"))
    assert limit >= 10 * 1024 * 1024 and limit >= min(window, config.workload.input_tokens_p99) * 8


@pytest.mark.parametrize("stack", responses_stacks())
def test_nothing_scrapes_the_agentic_api_which_has_no_metrics_endpoint(stack, rendered):
    # Its metrics go out over OTLP/HTTP only (no /metrics); the fleet has no OTLP collector, so
    # no monitor selects its pods and no exporter is configured.
    objects = rendered(stack)
    deployment = _objects(objects, "Deployment")["agentic-api"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    monitors = [o for o in objects if o["kind"] in ("PodMonitor", "ServiceMonitor", "PodMonitoring")]
    assert monitors  # the stack does scrape the fleet
    services = {
        name: s
        for name, s in _objects(objects, "Service").items()
        if s["spec"].get("selector", {}).items() <= labels.items()
    }
    for monitor in monitors:
        selector = monitor["spec"].get("selector") or {}
        assert not _matches(selector, labels), monitor["metadata"]["name"]
        for service in services.values():
            assert not _matches(selector, service["metadata"].get("labels") or {}), monitor["metadata"][
                "name"
            ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert not [e for e in container["env"] if e["name"].startswith("OTEL_")]


def test_gke_backend_policies_of_the_agentic_api(rendered):
    objects = rendered("gke-h100")
    target = {"group": "", "kind": "Service", "name": "agentic-api"}
    policies = {o["kind"]: o for o in objects if o.get("spec", {}).get("targetRef") == target}
    assert set(policies) == {"HealthCheckPolicy", "GCPBackendPolicy"}
    check = policies["HealthCheckPolicy"]["spec"]["default"]["config"]["httpHealthCheck"]
    assert check == {"portSpecification": "USE_SERVING_PORT", "requestPath": "/health"}
    assert policies["GCPBackendPolicy"]["spec"]["default"]["timeoutSec"] == 1800
    # GKE implements no HTTPRoute timeouts: none on the agentic API's routes either.
    routes = [o for o in objects if o["kind"] == "HTTPRoute"]
    assert not [r for r in routes for rule in r["spec"]["rules"] if "timeouts" in rule]


# -- serving changes leave the database alone ---------------------------------------------------------


def _serving_change(config: dict[str, Any]) -> None:
    serving = config["llmd-fleet:serving"]
    serving["name"] = "glm52b"
    serving["roles"]["prefill"].update(instances=6, maxNumBatchedTokens=8192)
    serving["roles"]["decode"].update(maxNumSeqs=32, gpuMemoryUtilization=0.9)
    if "autoscaling" in serving:
        # An autoscaled prefill starts at its minimum, which must be the new instance count.
        serving["autoscaling"]["prefill"].update(minInstances=6, maxInstances=6)
    config["llmd-fleet:router"] = {"replicas": 3}


def _database_inputs(synthesis: Synthesis) -> dict[tuple[str, str], dict[str, Any]]:
    """Every recorded input of the response store's resources, by (type, logical name)."""
    stack = synthesis.stack
    if stack in DATABASE_TYPES:
        kinds = DATABASE_TYPES[stack]
        found = {
            (r.type, r.name): _reveal(r.inputs)
            for r in synthesis.resources
            if r.type in kinds and r.name.startswith("responses-db")
        }
    else:
        # On-prem: the CloudNativePG Cluster, its backup schedule, owner Secret and operator.
        found = {
            (r.type, r.name): _reveal(r.inputs)
            for r in synthesis.resources
            if r.name.startswith(("responses-postgres", "responses-cnpg"))
        }
    assert found
    return found


@pytest.mark.parametrize("stack", responses_stacks())
def test_a_serving_change_replaces_no_database_resource(tmp_path, stack):
    before = _synthesis(stack)
    after = _synthesize_variant(tmp_path, stack, _serving_change)
    assert render_files(before).keys() != render_files(after).keys(), "the serving objects changed"
    old, new = _database_inputs(before), _database_inputs(after)
    assert old.keys() == new.keys() and len(old) >= 4
    for key in old:
        assert old[key] == new[key], key


@pytest.mark.parametrize(
    ("stack", "edit"),
    [
        ("gke-h100", lambda c: c["llmd-fleet:responses"]["database"].update(storageGiB=400)),
        ("eks-h100", lambda c: c["llmd-fleet:responses"]["database"].update(backupRetentionDays=21)),
        ("onprem-h100", lambda c: c["llmd-fleet:responses"]["database"].update(storageGiB=400)),
    ],
)
def test_a_database_setting_does_change_its_inputs(tmp_path, stack, edit):
    """The comparison above sees database changes: the test can fail."""
    old, new = (
        _database_inputs(_synthesis(stack)),
        _database_inputs(_synthesize_variant(tmp_path, stack, edit)),
    )
    assert [key for key in old if old[key] != new[key]]
