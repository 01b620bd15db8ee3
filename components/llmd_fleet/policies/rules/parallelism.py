"""Parallelism and prefill/decode agreement of the vLLM engines."""

from typing import Any

from pulumi_policy import EnforcementLevel, Severity

from llmd_fleet.policies.rules._base import Report, Resource, schema, stack_rule
from llmd_fleet.policies.rules._config import GPU_DEVICE_CLASSES, GPU_RESOURCES
from llmd_fleet.policies.rules._dra import with_stack_classes
from llmd_fleet.policies.rules._k8s import MODEL_LABEL, SIDECAR_CONTAINER, container, env_literal
from llmd_fleet.policies.rules._serve import ServeArgs, container_flags, data_parallel_local, pd_connectors
from llmd_fleet.policies.rules._serving import ServingRole, group_gpus, pod_gpus, serving_roles, stack_claims

# All-to-all kernels that only exist for expert-parallel MoE layers.
_EP_ONLY_ALL2ALL = ("deepep", "pplx", "mori", "nixl_ep", "moonep", "flashinfer")


def _size(args: ServeArgs, flag: str) -> int | None:
    """A parallel size flag (1 when absent, None when present but symbolic)."""
    if not args.has(flag):
        return 1
    return args.int_value(flag)


def _check_parallelism(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    cfg = with_stack_classes(resources, cfg)
    claims = stack_claims(resources)
    experts = cfg["expertCount"]
    for role in serving_roles(resources):
        args, where = role.args, role.where()
        tp = _size(args, "--tensor-parallel-size")
        pp = _size(args, "--pipeline-parallel-size")
        dp = _size(args, "--data-parallel-size")
        if tp is None or pp is None or dp is None:
            continue
        local = data_parallel_local(args, role.group_size)
        for template in role.templates:
            gpus = pod_gpus(template, claims, cfg)
            if gpus is None or local is None:
                continue
            ranks = local * tp * pp
            if gpus != ranks and not (gpus == 0 and ranks == 1):
                report(
                    f"{where}: each pod runs {local} local DP rank(s) x TP {tp} x PP {pp} = {ranks} GPUs "
                    f"but gets {gpus} GPUs ({template.path})",
                    role.workload,
                )
        group = group_gpus(role, claims, cfg)
        world = dp * tp * pp
        if group is not None and group != world and not (group == 0 and world == 1):
            report(
                f"{where}: TP {tp} x DP {dp} x PP {pp} = {world} ranks, but one instance "
                f"({role.group_size} pod(s)) has {group} GPUs",
                role.workload,
            )
        expert_parallel = args.bool_value("--enable-expert-parallel")
        if expert_parallel:
            ep = tp * dp
            if experts and experts % ep:
                report(
                    f"{where}: expert parallelism shards the model's {experts} experts over "
                    f"EP = TP x DP = {ep} ranks, which does not divide them",
                    role.workload,
                )
        backend = args.value("--all2all-backend") or ""
        if backend.startswith(_EP_ONLY_ALL2ALL) and not expert_parallel:
            report(
                f"{where}: --all2all-backend {backend} needs --enable-expert-parallel (EP = TP x DP)",
                role.workload,
            )
        engine = container(role.worker.spec, args.container_name)
        if engine is not None:
            for env_name, value in (("DP_SIZE_LOCAL", local), ("TP_SIZE", tp)):
                literal = env_literal(engine.spec, env_name)
                if literal is not None and value is not None and literal.strip() != str(value):
                    report(
                        f"{where}: env {env_name}={literal} disagrees with the vLLM command ({value})",
                        role.workload,
                    )


parallelism_matches_gpus = stack_rule(
    name="parallelism-matches-gpus",
    description="Every vLLM instance's TP x DP (x PP) equals the GPUs of its LWS group and expert "
    "parallelism spans exactly those ranks.",
    remediation="Make `--data-parallel-size` x `--tensor-parallel-size` equal the instance's GPUs "
    "(pods per LWS group x GPUs per pod) and `--data-parallel-size-local` x TP equal the GPUs of one "
    "pod; in the stack config that is serving.roles.<role>.dataParallel/tensorParallel against "
    "nodesPerInstance x gpusPerNode. Keep EP = TP x DP a divisor of the model's experts.",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    check=_check_parallelism,
    config=schema(
        {
            "expertCount": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Routed experts per MoE layer of the served model; EP must divide it "
                "(0: not checked).",
            },
            "gpuResources": GPU_RESOURCES,
            "gpuDeviceClasses": GPU_DEVICE_CLASSES,
        }
    ),
    tags=["parallelism", "serving"],
)


def _group_key(role: ServingRole) -> tuple[str, ...]:
    """Roles that hand KV to each other: the roles of one DisaggregatedSet, otherwise the
    workloads of one namespace serving the same model."""
    if role.workload.kind == "DisaggregatedSet":
        return ("set", role.workload.urn)
    model = role.worker.labels.get(MODEL_LABEL) or role.args.model or ""
    return ("model", role.workload.namespace, model)


def _speculative(args: ServeArgs) -> tuple[Any, Any]:
    config = args.json_value("--speculative-config") or {}
    return config.get("method"), config.get("num_speculative_tokens")


# Routing-sidecar --kv-connector values and the vLLM connectors they drive.
_SIDECAR_CONNECTORS = {"nixlv2": "Nixl", "nixl": "Nixl", "mooncake": "Mooncake"}


def _compare(prefill: ServingRole, decode: ServingRole, report: Report) -> None:
    where = f"{decode.workload.ref()} ({prefill.name} -> {decode.name})"
    p_conn, d_conn = pd_connectors(prefill.args), pd_connectors(decode.args)
    if not p_conn or not d_conn:
        missing = prefill.name if not p_conn else decode.name
        report(f"{where}: role {missing} has no KV connector in --kv-transfer-config", decode.workload)
        return
    p_names, d_names = sorted(c.name for c in p_conn), sorted(c.name for c in d_conn)
    if p_names != d_names:
        report(f"{where}: KV connectors differ: prefill {p_names}, decode {d_names}", decode.workload)
    for conn in p_conn:
        if conn.role not in ("kv_producer", "kv_both"):
            report(
                f"{where}: prefill's {conn.name} has kv_role {conn.role!r}, not kv_producer", decode.workload
            )
    for conn in d_conn:
        if conn.role not in ("kv_consumer", "kv_both"):
            report(
                f"{where}: decode's {conn.name} has kv_role {conn.role!r}, not kv_consumer", decode.workload
            )
    for p in p_conn:
        d = next((c for c in d_conn if c.name == p.name), None)
        if d is None:
            continue
        for key, default in (("kv_buffer_device", "cuda"),):
            if p.config.get(key, default) != d.config.get(key, default):
                report(
                    f"{where}: {p.name} {key} differs: prefill {p.config.get(key, default)!r}, "
                    f"decode {d.config.get(key, default)!r}",
                    decode.workload,
                )
        p_extra, d_extra = (
            p.config.get("kv_connector_extra_config") or {},
            d.config.get("kv_connector_extra_config") or {},
        )
        if p_extra.get("backends") != d_extra.get("backends"):
            report(
                f"{where}: {p.name} backends differ: prefill {p_extra.get('backends')}, "
                f"decode {d_extra.get('backends')}",
                decode.workload,
            )
    for flag, default in (("--block-size", "default"), ("--kv-cache-dtype", "auto")):
        p_value, d_value = prefill.args.raw(flag) or default, decode.args.raw(flag) or default
        if p_value != d_value:
            report(f"{where}: {flag} differs: prefill {p_value}, decode {d_value}", decode.workload)
    if _speculative(prefill.args) != _speculative(decode.args):
        report(
            f"{where}: speculative decoding differs (method, tokens): prefill "
            f"{_speculative(prefill.args)}, decode {_speculative(decode.args)}",
            decode.workload,
        )
    sidecar = container(decode.worker.spec, SIDECAR_CONTAINER)
    if sidecar is not None:
        kind = container_flags(sidecar).value("--kv-connector") or "nixlv2"
        family = _SIDECAR_CONNECTORS.get(kind)
        if family and not any(c.name.startswith(family) for c in d_conn):
            report(
                f"{where}: the routing sidecar drives --kv-connector={kind} but decode's vLLM uses {d_names}",
                decode.workload,
            )


def _check_pd(resources: list[Resource], cfg: dict[str, Any], report: Report) -> None:
    groups: dict[tuple[str, ...], list[ServingRole]] = {}
    for role in serving_roles(resources):
        if role.kind:
            groups.setdefault(_group_key(role), []).append(role)
    for roles in groups.values():
        for prefill in (r for r in roles if r.kind == "prefill"):
            for decode in (r for r in roles if r.kind == "decode"):
                _compare(prefill, decode, report)


pd_kv_transfer_agreement = stack_rule(
    name="pd-kv-transfer-agreement",
    description="Prefill and decode of one model use the same KV connector, block size, KV dtype "
    "and speculative decoding, with prefill producing and decode consuming KV.",
    remediation="Give both roles the same `--kv-transfer-config` connector and backends "
    "(`kv_producer` on prefill, `kv_consumer` on decode), the same `--block-size`, "
    "`--kv-cache-dtype` and `--speculative-config`, and point the decode routing sidecar's "
    "`--kv-connector` at the same transport (nixlv2 for NixlConnector).",
    level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    check=_check_pd,
    tags=["parallelism", "serving", "kv-transfer"],
)

POLICIES = [parallelism_matches_gpus, pd_kv_transfer_agreement]
