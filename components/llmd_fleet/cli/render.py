"""Write a synthesis as deterministic files under build/<stack>/.

    manifests/<namespace|cluster>/<kind>-<name>.yaml   every Kubernetes object, custom resources too
    helm/<namespace>.<release>.yaml                     each Helm release: chart, repo, version, values
    cloud/<type>.<name>.yaml                            cloud resources with their inputs
    summary.md                                          resources by type, the plan, a topology diagram

Writing the directory (atomically, and only one this command owns) is llmd_fleet/cli/outdir.py's job.
"""

import re
from collections import Counter
from typing import Any

import yaml

from llmd_fleet.cli.paths import CHECKOUT
from llmd_fleet.cli.stack_file import SECRET_PLACEHOLDER
from llmd_fleet.cli.synth import REDACTED, Recorded, Synthesis, clean
from llmd_fleet.core.problems import PROJECT, ConfigError
from llmd_fleet.plan.admission import OVERLOAD
from llmd_fleet.plan.fleet import FleetPlan, RolePlan

_TOP_KEYS = ("apiVersion", "kind", "metadata")
HELM_TYPE = "kubernetes:helm.sh/v3:Release"
_HELM_TYPE = HELM_TYPE
# Upstream YAML applied by URL (CRD bundles): recorded, not expanded offline.
_CONFIG_FILE_TYPE = "kubernetes:yaml/v2:ConfigFile"
# Providers whose resources are written under cloud/ (docker-build: the serving image build).
_CLOUD_PACKAGES = frozenset({"gcp", "aws", "docker-build"})
_CHECKOUT = CHECKOUT


class _Dumper(yaml.CSafeDumper):
    """Block-style YAML; multi-line strings (launch scripts) as literal blocks. libyaml's emitter
    (built into the PyYAML wheels) writes the same bytes as the pure-Python one, several times
    faster; the render tests compare output byte for byte."""


def _str_presenter(dumper: yaml.CSafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_presenter)


def to_yaml(document: Any) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def kubernetes_object(resource: Recorded) -> dict[str, Any]:
    """A recorded Kubernetes resource as the object the API server receives (fixed key order)."""
    inputs = clean(resource.inputs)
    body = {k: _sorted(inputs[k]) for k in _TOP_KEYS if k in inputs}
    body.update({k: _sorted(inputs[k]) for k in sorted(inputs) if k not in _TOP_KEYS})
    return body


def is_kubernetes_object(resource: Recorded) -> bool:
    return (
        resource.custom
        and resource.type.startswith("kubernetes:")
        and resource.type not in {_HELM_TYPE, _CONFIG_FILE_TYPE}
    )


def helm_release(resource: Recorded) -> dict[str, Any]:
    inputs = clean(resource.inputs)
    return {
        "name": inputs.get("name", resource.name),
        "namespace": inputs.get("namespace"),
        "chart": inputs.get("chart"),
        "version": inputs.get("version"),
        "repository": (inputs.get("repositoryOpts") or {}).get("repo"),
        "values": _sorted(inputs.get("values") or {}),
    }


def _portable(value: Any) -> Any:
    """Paths inside the checkout (the image build context) relative to it, so that every clone
    renders the same bytes."""
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_portable(v) for v in value]
    if isinstance(value, str) and value.startswith(f"{_CHECKOUT}/"):
        return value[len(f"{_CHECKOUT}/") :]
    return value


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


# An object's identity: two objects with the same one are the same object to the API server (the
# second apply would overwrite the first), so a render refuses the config that declares both.
Identity = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" when cluster-scoped), name


def _identity(resource: Recorded) -> Identity | None:
    if is_kubernetes_object(resource):
        obj = kubernetes_object(resource)
        meta = obj.get("metadata") or {}
        return (
            str(obj.get("apiVersion")),
            str(obj.get("kind")),
            str(meta.get("namespace") or ""),
            str(meta.get("name", resource.name)),
        )
    if resource.type == _HELM_TYPE:
        release = helm_release(resource)
        return ("helm.sh/v3", "Release", str(release["namespace"] or "default"), str(release["name"]))
    return None


def _naming_keys(config: Any) -> list[tuple[str, str]]:
    """(key path, value) of every config setting that names an object or a namespace (a key
    `name`, `namespace` or `...Namespace`), defaults included."""
    found: list[tuple[str, str]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, f"{path}.{name}" if path else f"{PROJECT}:{name}")
        leaf = path.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
        if isinstance(node, str) and (leaf in {"name", "namespace"} or leaf.endswith("Namespace")):
            found.append((path, node))

    walk(config.model_dump(by_alias=True, mode="json"), "")
    return found


def _keys_naming(identity: Identity, naming: list[tuple[str, str]]) -> list[str]:
    """The settings an object's name comes from: a namespace setting for a Namespace, else a
    name setting equal to the name or the prefix of a name derived from it (`<serving.name>-epp`)."""
    kind, name = identity[1], identity[3]
    keys = set()
    for path, value in naming:
        if path.endswith("amespace"):
            if kind == "Namespace" and value == name:
                keys.add(path)
        elif value == name or name.startswith(f"{value}-"):
            keys.add(path)
    return sorted(keys)


def object_identity_problems(synthesis: Synthesis) -> list[tuple[str, str]]:
    """One problem per set of settings that makes two rendered objects the same object: the
    setting keys that collide, and the objects they both declare."""
    seen: Counter[Identity] = Counter(
        identity for identity in map(_identity, synthesis.resources) if identity is not None
    )
    naming = _naming_keys(synthesis.config)
    collisions: dict[str, list[str]] = {}
    for identity, count in sorted(seen.items()):
        if count < 2:
            continue
        api_version, kind, namespace, name = identity
        keys = _keys_naming(identity, naming) or ["stack"]
        shown = f"{kind} {namespace + '/' if namespace else ''}{name} ({api_version})"
        collisions.setdefault(", ".join(keys), []).append(shown)
    return [
        (
            keys,
            f"these settings declare the same object twice ({'; '.join(objects)}): every rendered "
            "object's apiVersion, kind, namespace and name must be unique; give each section a "
            "name and namespace of its own",
        )
        for keys, objects in sorted(collisions.items())
    ]


def render_files(synthesis: Synthesis) -> dict[str, str]:
    """Relative path -> file text for everything the stack declares. Raises ConfigError, before
    anything is written, when two declared objects are the same object."""
    if problems := object_identity_problems(synthesis):
        raise ConfigError(problems)
    files: dict[str, str] = {}
    for resource in synthesis.resources:
        if is_kubernetes_object(resource):
            obj = kubernetes_object(resource)
            meta = obj.get("metadata") or {}
            folder = _slug(meta.get("namespace") or "cluster")
            file_name = f"{obj['kind'].lower()}-{_slug(meta.get('name', resource.name))}.yaml"
            files[f"manifests/{folder}/{file_name}"] = to_yaml(obj)
        elif resource.type == _HELM_TYPE:
            release = helm_release(resource)
            file_name = f"{_slug(release['namespace'] or 'default')}.{_slug(release['name'])}.yaml"
            files[f"helm/{file_name}"] = to_yaml(release)
        elif resource.type == _CONFIG_FILE_TYPE:
            inputs = clean(resource.inputs)
            files[f"remote/{_slug(resource.name)}.yaml"] = to_yaml(
                {"type": resource.type, "file": inputs.get("file")}
            )
        elif resource.custom and resource.type.split(":")[0] in _CLOUD_PACKAGES:
            inputs = _portable(_sorted(clean(resource.inputs)))
            files[f"cloud/{_slug(resource.type)}.{_slug(resource.name)}.yaml"] = to_yaml(
                {"type": resource.type, "name": resource.name, "inputs": inputs}
            )
    files["summary.md"] = summary(synthesis)
    if synthesis.registrations:
        files["urns.txt"] = urn_listing(synthesis)
    for path, text in files.items():
        # Secure config values are never decrypted offline, but make sure none leaks either way.
        if SECRET_PLACEHOLDER in text:
            raise RuntimeError(f"{path}: a secret value reached the rendered output")
    return files


def urn_listing(synthesis: Synthesis) -> str:
    """Every resource's URN, sorted, one per line; a resource kept through an alias is followed
    by `  alias <old URN>` lines. URNs are state identity: a change here is a replacement unless
    the old URN is kept as an alias (tests/golden/<stack>/urns.txt shows it in review)."""
    lines: list[str] = []
    for registration in sorted(synthesis.registrations, key=lambda r: r.urn):
        lines.append(registration.urn)
        lines += [f"  alias {alias}" for alias in registration.aliases]
    return "\n".join(lines) + "\n"


def _gib(value: float) -> str:
    return f"{value:.1f}"


def _weights(role: RolePlan) -> str:
    weights = role.weights
    if weights is None or weights.mode == "hub":
        return f"hub / {role.startup_seconds}"
    return (
        f"modelexpress (peer ~{weights.peer_transfer_seconds:.1f} s per GPU, "
        f"{weights.transfer_timeout_seconds} s per source) / {role.startup_seconds}"
    )


def plan_table(plan: FleetPlan) -> str:
    """The plan as a Markdown table, one column per role."""
    ctx = f"{plan.roles[0].memory.context_tokens:,}"
    rows: list[tuple[str, ...]] = [
        ("", *(r.name for r in plan.roles)),
        ("node group", *(r.node_group for r in plan.roles)),
        ("instances", *(str(r.instances) for r in plan.roles)),
        *(
            [
                (
                    "autoscaled (min..max instances)",
                    *(f"{r.min_instances}..{r.max_instances}" if r.autoscaled else "no" for r in plan.roles),
                )
            ]
            if any(r.autoscaled for r in plan.roles)
            else []
        ),
        ("nodes per instance (LWS size)", *(str(r.lws_size) for r in plan.roles)),
        *(  # no row of zeros: the simulator's pods hold no GPU
            [("GPUs per instance", *(str(r.gpus_per_instance) for r in plan.roles))]
            if any(r.gpus_per_instance for r in plan.roles)
            else []
        ),
        (
            "TP / DP / EP",
            *(f"{r.tensor_parallel} / {r.data_parallel} / {r.expert_parallel}" for r in plan.roles),
        ),
        ("local DP ranks per pod", *(str(r.dp_size_local) for r in plan.roles)),
        ("start rank per worker", *(", ".join(map(str, r.start_ranks)) for r in plan.roles)),
        ("client ports", *(_port_range(r.client_ports) for r in plan.roles)),
        (
            "engine ports / supervisor",
            *(f"{_port_range(r.engine_ports)} / {r.supervisor_port or 'none'}" for r in plan.roles),
        ),
        ("KV-event ports", *(_port_range(r.kv_events_ports) for r in plan.roles)),
        ("NIXL side-channel ports", *(_port_range(r.nixl_side_channel_ports) for r in plan.roles)),
        ("nodes / GPUs", *(f"{r.nodes} / {r.gpus}" for r in plan.roles)),
    ]
    if any(r.engine == "simulator" for r in plan.roles):
        # Nothing is sized from HBM: the emulated prefix cache and the simulator pods' requests.
        rows += [
            ("emulated KV tokens per rank", *(f"{r.memory.kv_tokens:,}" for r in plan.roles)),
            (f"{ctx}-token contexts per rank", *(f"{r.memory.agent_contexts:.2f}" for r in plan.roles)),
            (
                "simulator pod memory / CPU",
                *(f"{r.pod_memory_mib}Mi / {r.pod_cpu_millis}m" for r in plan.roles),
            ),
        ]
        return _tables(rows, plan)
    rows += [
        (
            "HBM per GPU, usable (GiB)",
            *(f"{_gib(r.memory.hbm_gib)}, {_gib(r.memory.usable_gib)}" for r in plan.roles),
        ),
        ("replicated weights (GiB)", *(_gib(r.memory.replicated_weights_gib) for r in plan.roles)),
        ("expert weights / EP (GiB)", *(_gib(r.memory.expert_weights_gib) for r in plan.roles)),
        ("runtime + NVSHMEM reserve (GiB)", *(_gib(r.memory.reserve_gib) for r in plan.roles)),
        *(
            [("LoRA adapter slots (GiB)", *(_gib(r.memory.lora_gib) for r in plan.roles))]
            if any(r.memory.lora_gib for r in plan.roles)
            else []
        ),
        ("KV cache per rank (GiB)", *(_gib(r.memory.kv_cache_gib) for r in plan.roles)),
        ("KV tokens per rank", *(f"{r.memory.kv_tokens:,}" for r in plan.roles)),
        (f"{ctx}-token contexts per rank", *(f"{r.memory.agent_contexts:.2f}" for r in plan.roles)),
        ("CPU KV tier per rank (GiB)", *(str(r.memory.cpu_tier_gib) for r in plan.roles)),
        ("CPU-tier tokens per rank", *(f"{r.memory.cpu_tier_tokens:,}" for r in plan.roles)),
        (
            f"{ctx}-token contexts per rank, CPU tier",
            *(f"{r.memory.cpu_tier_contexts:.1f}" for r in plan.roles),
        ),
        (
            "pod memory / CPUs / shm",
            *(f"{r.pod_memory_gib}Gi / {r.pod_cpus} / {r.shm_gib}Gi" for r in plan.roles),
        ),
        ("weight loading / startup budget (s)", *(_weights(r) for r in plan.roles)),
    ]
    return _tables(rows, plan)


def _tables(rows: list[tuple[str, ...]], plan: FleetPlan) -> str:
    """The role table and the router's derived sizes, as Markdown."""
    header, *body = rows
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    router = plan.router
    lines += [
        "",
        "| router (endpoint picker) | derived |",
        "|---|---|",
        f"| precise index holders per block key | podCacheSize {router.index_holders} "
        f"({router.endpoints} rank endpoints x {router.tiers} tier(s), with headroom) |",
        f"| flow-control queue bound | maxBytes {router.queue_max_bytes / 2**30:.1f} GiB "
        f"({router.prompt_bytes / 1e6:.2f} MB per typical request body) |",
        f"| working set at the expected rate | {router.working_set_gib} GiB |",
        f"| EPP memory per replica | memory {router.memory_gib} GiB |",
    ]
    admission = router.admission
    if admission is not None:
        lines.append(
            f"| probabilistic admission (sheddable only) | power {admission.power:g}, k {admission.k:g}: "
            f"shed {admission.shed_nominal:.2%} at nominal load (saturation "
            f"{admission.nominal_saturation:.2f}: one typical prompt per rank), "
            f"{admission.shed_overload:.2%} at {OVERLOAD:g}x "
            f"({OVERLOAD * admission.nominal_saturation:.2f}), "
            f"100% from {admission.full_shed_saturation:.2f} (flow control's gate) |"
        )
    fairness = router.fairness
    if fairness is not None:
        lines.append(
            f"| program-aware fairness (a program per agent session) | half-life "
            f"{fairness.half_life_seconds} s, evicted {fairness.eviction_ttl_seconds} s after its "
            f"last completion (swept every {fairness.eviction_sweep_seconds} s): at most "
            f"{fairness.max_programs:,} programs, {fairness.max_series:,} per-program series in "
            "the EPP's /metrics, dropped at scrape |"
        )
    return "\n".join(lines)


def _port_range(ports: tuple[int, ...]) -> str:
    if not ports:
        return "none"
    return f"{ports[0]}-{ports[-1]}" if len(ports) > 1 else str(ports[0])


def _diagram(synthesis: Synthesis) -> str:
    """The request path: client -> Gateway -> EPP decision -> decode sidecar -> prefill/decode."""
    config, plan = synthesis.config, synthesis.plan
    decode, prefill = plan.role("decode"), plan.role("prefill")
    router = config.router
    engine = "vLLM" if config.serving.engine == "vllm" else "simulator"
    kv_moves = "KV blocks over NIXL" if engine == "vLLM" else "emulated KV transfer (timed)"
    lines = [
        "```mermaid",
        "flowchart LR",
        '  client(["agents"])',
        f'  gw["Gateway ({config.gateway.implementation})"]',
        f'  epp{{{{"EPP x{router.replicas} ({router.mode}, {router.prefix_routing} prefix)"}}}}',
        f'  pool[("InferencePool {config.serving.name}: ports {_port_range(decode.client_ports)}")]',
        f'  dec["decode: {decode.instances} x DEP{decode.data_parallel}<br/>'
        f'sidecar {_port_range(decode.client_ports)} -> {engine} {_port_range(decode.engine_ports)}"]',
        f'  pre["prefill: {prefill.instances} x DEP{prefill.data_parallel}<br/>'
        f'{engine} {_port_range(prefill.engine_ports)}"]',
        "  client -->|HTTP| gw",
        "  gw -->|ext_proc: pick endpoints| epp",
        "  gw --> pool",
        "  pool -->|decode rank + prefill header| dec",
        "  dec -->|remote prefill when uncached > threshold| pre",
        f"  pre -.->|{kv_moves}| dec",
        *(
            f"  {short} -.->|KV events ZMQ :{_port_range(role.kv_events_ports)}| epp"
            for short, role in (("dec", decode), ("pre", prefill))
            if role.kv_events_ports
        ),
        "```",
    ]
    return "\n".join(lines)


def _models_summary(synthesis: Synthesis, counts: Counter[str]) -> str:
    """The summary of a stack with `llmd-fleet:models`: the totals, then each model's plan."""
    from llmd_fleet.stack.model import model_views
    from llmd_fleet.stack.plans import plan_model_shares

    config = synthesis.config
    shares = plan_model_shares(config)
    used: Counter[str] = Counter()
    for share in shares:
        for use in share.plan.node_groups:
            used[use.name] += use.used
    lines = [
        f"# Stack `{synthesis.stack}`",
        "",
        f"- target: {config.target.kind}, Kubernetes {config.target.kubernetes_version}",
        f"- GPUs: {sum(s.plan.gpus for s in shares)} on {sum(s.plan.nodes for s in shares)} nodes, "
        f"{len(shares)} models",
    ]
    for name, group in sorted(config.fleet.node_groups.items()):
        lines.append(f"- node group `{name}`: {used[name]} of {group.count} nodes used")
    for share, view in zip(shares, model_views(config), strict=True):
        adapters = f", LoRA adapters {', '.join(share.adapters)}" if share.adapters else ""
        lines.append(
            f"- model `{share.name}`: `{view.model.id}` @ `{view.model.revision}` served as "
            f"`{share.client_name}`{adapters}: {share.plan.gpus} GPUs on {share.plan.nodes} nodes"
        )
    for share in shares:
        lines += ["", f"## Plan of model `{share.name}`", "", plan_table(share.plan)]
    lines += ["", "## Topology", "", _diagram(synthesis)]
    lines += ["", "## Resources by type", "", "| type | count |", "|---|---|"]
    lines += [f"| `{t}` | {n} |" for t, n in sorted(counts.items())]
    lines += ["", f"Secret values are never rendered; they appear as `{REDACTED}`.", ""]
    return "\n".join(lines)


def summary(synthesis: Synthesis) -> str:
    config, plan = synthesis.config, synthesis.plan
    counts = Counter(r.type for r in synthesis.resources)
    lines = [
        f"# Stack `{synthesis.stack}`",
        "",
        f"- target: {config.target.kind}, Kubernetes {config.target.kubernetes_version}",
        f"- model: `{config.model.id}` @ `{config.model.revision}`",
        f"- GPUs: {plan.gpus} on {plan.nodes} nodes",
    ]
    if config.models:
        return _models_summary(synthesis, counts)
    for use in plan.node_groups:
        lines.append(f"- node group `{use.name}`: {use.used} of {use.nodes} nodes used")
    lines += ["", "## Plan", "", plan_table(plan), "", "## Topology", "", _diagram(synthesis)]
    lines += ["", "## Resources by type", "", "| type | count |", "|---|---|"]
    lines += [f"| `{t}` | {n} |" for t, n in sorted(counts.items())]
    lines += ["", f"Secret values are never rendered; they appear as `{REDACTED}`.", ""]
    return "\n".join(lines)
