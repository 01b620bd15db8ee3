"""What the data plane runs, read from a stack's rendered manifests (`llmd-fleet render`), never
from the library's internals: the endpoint picker's Deployment and config, the InferencePool, the
InferenceObjectives and the serving pods the DisaggregatedSet's roles make. Pure functions."""

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llmd_fleet.core.yaml_documents import yaml_document, yaml_documents

# The pods' network inside the run's namespaces (docs/twin.md): kind's pod range, which the
# local-sim stack names; it exists only inside the namespaces the run creates.
POD_SUBNET = "10.244.0"
FIRST_POD_HOST = 10
# The labels the LeaderWorkerSet controller puts on a group's pods (what `llmd-fleet status` counts
# groups by).
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
# The labels the DisaggregatedSet controller merges over each role's pod templates (LWS v0.10.0,
# pkg/utils/disaggregatedset/utils.go GenerateLabels; its own win over the template's), which the
# router's rollout screener reads: the set, the role, the slice and the revision of all roles'
# templates.
DS_NAME = "disaggregatedset.x-k8s.io/name"
DS_ROLE = "disaggregatedset.x-k8s.io/role"
DS_SLICE = "disaggregatedset.x-k8s.io/slice"
DS_REVISION = "disaggregatedset.x-k8s.io/revision"


@dataclass(frozen=True)
class Container:
    name: str
    args: tuple[str, ...]
    ports: tuple[int, ...]
    vllm: "VllmServe | None" = None
    """The rendered vLLM engine this simulator stands in for (None: the rendered container)."""


@dataclass(frozen=True)
class Pod:
    name: str
    role: str
    ip: str
    labels: dict[str, str]
    containers: tuple[Container, ...]


@dataclass(frozen=True)
class Picker:
    name: str
    replicas: int
    args: tuple[str, ...]
    config: str
    """The EndpointPickerConfig text of the rendered ConfigMap, unmodified."""
    env: dict[str, str] = field(default_factory=dict)
    probe_period_s: int = 10
    """The readiness probe's period and failure threshold (Kubernetes' defaults if unset)."""
    probe_failures: int = 3


@dataclass(frozen=True)
class Renderer:
    """The render (tokenizer) service the picker's token producer calls: the host name in the
    producer's URL, the port it dials, and the model of the Deployment behind the Service
    (`vllm launch render <model> --served-model-name=...`)."""

    host: str
    port: int
    model: str
    served_model: str


@dataclass(frozen=True)
class Topology:
    namespace: str
    picker: Picker
    pool: dict[str, Any]
    objectives: list[dict[str, Any]]
    pods: list[Pod]
    renderer: Renderer | None = None
    serving_set: dict[str, Any] = field(default_factory=dict)
    """The rendered DisaggregatedSet (what `llmd-fleet status` counts groups against)."""
    gateway: dict[str, Any] = field(default_factory=dict)
    """The rendered Gateway (`llmd-fleet status --request` reads its address)."""

    def role(self, name: str) -> list[Pod]:
        return [p for p in self.pods if p.role == name]


def load_manifests(render_dir: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((render_dir / "manifests").rglob("*.yaml")):
        docs.extend(d for d in yaml_documents(path.read_text()) if d)
    return docs


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        raise ValueError(f"the rendering has {len(found)} {kind} objects, the data plane needs one")
    return found[0]


# The simulator's emulated timing when it stands in for a rendered vLLM engine: the twin's choice,
# the defaults `serving.simulator` renders on local-sim (docs/local-sim.md), so both stacks' engines
# answer at the same pace. Not vLLM's timing.
SIMULATED_TIMING = (
    "--mode=random",
    "--prefill-overhead=20ms",
    "--prefill-time-per-token=20us",
    "--inter-token-latency=20ms",
    "--kv-cache-transfer-time-per-token=2us",
    "--time-factor-under-load=1",
)
SIMULATOR = "simulator"


class MappingError(ValueError):
    """A rendered vLLM container the data plane cannot map to simulator arguments."""


@dataclass(frozen=True)
class VllmServe:
    """What the data plane reads from a rendered `vllm serve` command line (vLLM's own flag names;
    shell variables are left unexpanded, none of the fields read here uses one)."""

    model: str
    served_model: str
    port: int
    ranks: int
    """Data-parallel ranks this pod runs (`--data-parallel-size-local`, else
    `--data-parallel-size`, else 1), on `port` + local rank."""
    max_model_len: int | None
    max_num_seqs: int | None
    block_size: int | None
    kv_events: bool
    """`--kv-events-config` enables KV-cache events (the engine publishes them)."""
    kv_role: str | None
    """The NIXL connector's `kv_role` in `--kv-transfer-config` (kv_producer on prefill,
    kv_consumer on decode), None without one."""
    lora_modules: tuple[str, ...] = ()
    """`--lora-modules` as rendered: one JSON object a word (vLLM 0.33's form, which the
    simulator reads the same way, llm-d-inference-sim v0.10.2 pkg/common/parser.go)."""
    max_loras: int | None = None


def _serve_words(container: dict[str, Any]) -> list[str] | None:
    """The words of the container's `vllm serve` command: its command and args as given, or the
    `vllm serve ...` command inside a `sh -c`/`bash -c` script (continuation lines joined)."""
    words = [str(w) for w in [*container.get("command", []), *container.get("args", [])]]
    for i in range(len(words) - 1):
        if words[i].endswith("vllm") and words[i + 1] == "serve":
            return words[i + 2 :]
    script = next((w for w in words if "vllm serve" in w), None)
    if script is None:
        return None
    joined = script.replace("\\\n", " ")
    line = next(x for x in joined.splitlines() if "vllm serve" in x)
    try:
        tokens = shlex.split(line.split("vllm serve", 1)[1], comments=True)
    except ValueError as exc:
        name = container.get("name")
        raise MappingError(f"container {name}: cannot read its vllm serve line: {exc}") from None
    return tokens


# vLLM flags that take one or more words (argparse nargs="+"): their values are joined with ",",
# the simulator's list form; `--lora-modules` words are JSON objects, joined with "\n" instead.
LIST_FLAGS = frozenset({"served-model-name", "lora-modules"})
_JOINERS = {"lora-modules": "\n"}


def _options(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """Positional words and `--flag value` / `--flag=value` options (a flag followed by another
    flag, or last, is a switch: "true"; a `LIST_FLAGS` flag takes every word up to the next flag)."""
    positional: list[str] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            if not eq:
                values = []
                while i + 1 < len(words) and not words[i + 1].startswith("--"):
                    values.append(words[i + 1])
                    i += 1
                    if name not in LIST_FLAGS:
                        break
                value = _JOINERS.get(name, ",").join(values) if values else "true"
            options[name] = value
        else:
            positional.append(word)
        i += 1
    return positional, options


def _int(options: dict[str, str], name: str, container: str) -> int | None:
    if name not in options:
        return None
    try:
        return int(options[name])
    except ValueError:
        raise MappingError(f"container {container}: --{name} {options[name]!r} is not a number") from None


def vllm_serve(container: dict[str, Any]) -> VllmServe | None:
    """The rendered container's `vllm serve` settings; None when it does not run `vllm serve`."""
    words = _serve_words(container)
    if words is None:
        return None
    name = str(container.get("name"))
    positional, options = _options(words)
    model = positional[0] if positional else options.get("model")
    if not model:
        raise MappingError(f"container {name}: vllm serve names no model")
    port = _int(options, "port", name) or 8000
    ranks = _int(options, "data-parallel-size-local", name) or _int(options, "data-parallel-size", name) or 1
    kv_role = None
    if "kv-transfer-config" in options:
        text = options["kv-transfer-config"]
        roles = re.findall(r'"kv_connector"\s*:\s*"NixlConnector"\s*,\s*"kv_role"\s*:\s*"(\w+)"', text)
        kv_role = roles[0] if roles else None
    return VllmServe(
        model=model,
        served_model=options.get("served-model-name", model),
        port=port,
        ranks=ranks,
        max_model_len=_int(options, "max-model-len", name),
        max_num_seqs=_int(options, "max-num-seqs", name),
        block_size=_int(options, "block-size", name),
        kv_events='"enable_kv_cache_events":true' in options.get("kv-events-config", "").replace(" ", ""),
        kv_role=kv_role,
        lora_modules=tuple(options["lora-modules"].split("\n")) if "lora-modules" in options else (),
        max_loras=_int(options, "max-loras", name),
    )


def lora_names(serve: VllmServe) -> list[str]:
    """The adapter names the engine loads (each `--lora-modules` object's `name`)."""
    names = []
    for word in serve.lora_modules:
        try:
            names.append(str(json.loads(word)["name"]))
        except (ValueError, KeyError, TypeError):
            raise MappingError(f"--lora-modules {word!r} is not a JSON object with a name") from None
    return names


def served_name_args(served: str) -> list[str]:
    """`--served-model-name` and each name as its own word: the simulator, like vLLM, reads every
    word up to the next flag (a `--flag=a,b` form would serve one name `a,b`)."""
    return ["--served-model-name", *served.split(",")]


def served_names(args: tuple[str, ...] | list[str]) -> list[str]:
    """The served names in a simulator's args (either form)."""
    _, options = _options(list(args))
    value = options.get("served-model-name")
    return value.split(",") if value else []


def simulator_args(serve: VllmServe, kv_blocks: int | None, zmq_endpoint: str = "") -> list[str]:
    """The simulator's arguments for a rendered vLLM engine (llm-d-inference-sim v0.10.2
    `pkg/common/parser.go` flag names): the same model and served name, port and ranks per pod
    (`--data-parallel-size` runs them in one process on port + rank, as vLLM's rank ports),
    max-model-len, max-num-seqs (the simulator's own default when vLLM's is not rendered), block
    size, `kv_blocks` blocks of KV cache per rank, the dummy tokenizer, the twin's timing
    (SIMULATED_TIMING), and KV events to `zmq_endpoint` (none when empty). The P/D role needs no
    flag: the routing sidecar and the request's kv_transfer_params make the role."""
    args = [
        f"--model={serve.model}",
        *served_name_args(serve.served_model),
        f"--port={serve.port}",
        f"--data-parallel-size={serve.ranks}",
    ]
    if serve.max_model_len:
        args.append(f"--max-model-len={serve.max_model_len}")
    args += SIMULATED_TIMING
    args.append("--enable-kvcache=true")
    if kv_blocks:
        args.append(f"--kv-cache-size={kv_blocks}")
    if serve.block_size:
        args.append(f"--block-size={serve.block_size}")
    args += [f"--zmq-endpoint={zmq_endpoint}", "--force-dummy-tokenizer=true"]
    if serve.max_num_seqs:
        args.append(f"--max-num-seqs={serve.max_num_seqs}")
    if serve.lora_modules:
        # Last: the simulator reads every word after the flag up to the next flag.
        if serve.max_loras:
            args.append(f"--max-loras={serve.max_loras}")
        args += ["--lora-modules", *simulator_lora_modules(serve)]
    return args


def simulator_lora_modules(serve: VllmServe) -> list[str]:
    """The rendered `--lora-modules` objects for the simulator: the same names and paths, with
    `base_model_name` set to the engine's `--model`. vLLM shows that name as the adapter's
    `parent` in /v1/models (vllm/entrypoints/openai/serving_models.py, show_available_models;
    the rendering names the served name there), while llm-d-inference-sim v0.10.2 refuses any
    name other than its `--model` (pkg/common/config.go, validate: "unknown base model")."""
    out = []
    for word in serve.lora_modules:
        module = json.loads(word)
        if module.get("base_model_name"):
            module["base_model_name"] = serve.model
        out.append(json.dumps(module, separators=(",", ":")))
    return out


def _containers(spec: dict[str, Any], kv_blocks: int | None = None) -> tuple[Container, ...]:
    """The pod's data-path containers; a rendered `vllm serve` container becomes the simulator
    with its mapped arguments (`simulator_args`) on the engine's rank ports."""
    # Native sidecars (init containers that keep running) are part of the data path too.
    listed = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    listed += spec["containers"]
    out = []
    for c in listed:
        serve = vllm_serve(c)
        if serve is not None:
            ports = tuple(range(serve.port, serve.port + serve.ranks))
            out.append(Container(SIMULATOR, tuple(simulator_args(serve, kv_blocks)), ports, serve))
            continue
        ports = tuple(p["containerPort"] for p in c.get("ports", []))
        out.append(Container(c["name"], tuple(c.get("args", [])), ports))
    return tuple(out)


def pod_containers(spec: dict[str, Any], kv_blocks: int | None = None) -> tuple[Container, ...]:
    """A pod spec's data-path containers as the data plane runs them (`_containers`), for a pod
    read from the API server rather than from the rendering (devtools/daytwo/kubelet.py)."""
    return _containers(spec, kv_blocks)


def picker(docs: list[dict[str, Any]], pool: dict[str, Any] | None = None) -> Picker:
    pool = pool or _one(docs, "InferencePool")
    name = pool["spec"]["endpointPickerRef"]["name"]
    deployment = next(d for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"] == name)
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    args = tuple(container.get("args", []))
    config_path = next(a.split("=", 1)[1] for a in args if a.startswith("--config-file="))
    mount = next(m for m in container.get("volumeMounts", []) if config_path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    configmap = next(
        d
        for d in docs
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    )
    key = config_path.removeprefix(mount["mountPath"] + "/")
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    probe = container.get("readinessProbe", {})
    return Picker(
        name,
        int(deployment["spec"].get("replicas", 1)),
        args,
        configmap["data"][key],
        env,
        int(probe.get("periodSeconds", 10)),
        int(probe.get("failureThreshold", 3)),
    )


def kv_blocks_per_rank(config_text: str) -> int | None:
    """KV-cache blocks per rank as the rendering sizes them: the approximate prefix producer's
    `lruCapacityPerServer` (the plan sets it to the rank's KV room over the block size,
    llmd_fleet/layers/router/epp_config.py)."""
    config = yaml_document(config_text)
    for p in config.get("plugins", []):
        if p.get("type") == "approx-prefix-cache-producer":
            value = (p.get("parameters") or {}).get("lruCapacityPerServer")
            return int(value) if value else None
    return None


def serving_pods(
    docs: list[dict[str, Any]],
    kv_blocks: int | None = None,
    ds: dict[str, Any] | None = None,
    first_host: int = FIRST_POD_HOST,
) -> list[Pod]:
    """One Pod per role instance and pod of its group (LeaderWorkerSet size), with its address in
    the run's pod network. Leader and worker templates are taken as the LWS controller does, and
    labelled as it labels them (LWS name and group index). Rendered vLLM engines become simulators
    (`_containers`)."""
    ds = ds or _one(docs, "DisaggregatedSet")
    set_name = ds["metadata"]["name"]
    revision = ds_revision(ds)
    pods: list[Pod] = []
    host = first_host
    for role in ds["spec"]["roles"]:
        template = role["spec"]["leaderWorkerTemplate"]
        for instance in range(int(role["spec"].get("replicas", 1))):
            for index in range(int(template.get("size", 1))):
                tpl = template.get("leaderTemplate") if index == 0 and "leaderTemplate" in template else None
                tpl = tpl or template["workerTemplate"]
                name = f"{set_name}-{role['name']}-{instance}-{index}"
                labels = dict(tpl["metadata"].get("labels", {}))
                labels |= {
                    "app": f"{set_name}-0-{role['name']}",
                    DS_NAME: set_name,
                    DS_ROLE: role["name"],
                    DS_SLICE: "0",
                    DS_REVISION: revision,
                }
                # The controller names each role's LeaderWorkerSet <set>-<slice>-<revision>-<role>.
                labels.setdefault(LWS_NAME, f"{set_name}-0-{revision}-{role['name']}")
                labels.setdefault(LWS_GROUP_INDEX, str(instance))
                containers = _containers(tpl["spec"], kv_blocks)
                pods.append(Pod(name, role["name"], f"{POD_SUBNET}.{host}", labels, containers))
                host += 1
    return pods


def ds_revision(ds: dict[str, Any]) -> str:
    """A revision of the form the DisaggregatedSet controller computes (ComputeRevision: the first
    8 hex digits of SHA-256 over every role's name and leaderWorkerTemplate). The value differs
    from the controller's, whose Go encoding of the typed template orders fields otherwise; the
    run needs only that every pod of one rendering carries the same one."""
    templates = [
        {"name": r["name"], "template": r["spec"]["leaderWorkerTemplate"]} for r in ds["spec"]["roles"]
    ]
    text = json.dumps(templates, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def render_url(config_text: str) -> str | None:
    """The URL of the render service the config's token producer calls, if it has one."""
    config = yaml_document(config_text)
    for p in config.get("plugins", []):
        if p.get("type") in ("token-producer", "tokenizer"):
            url = (p.get("parameters") or {}).get("vllm", {}).get("url")
            return str(url) if url else None
    return None


def kv_events_socket_port(config_text: str) -> int | None:
    """The port the precise prefix producer's per-endpoint subscribers dial (plus the endpoint's
    rank index): `kvEventsConfig.podDiscoveryConfig.socketPort` with `discoverPods`; None without
    a precise producer that discovers pods."""
    config = yaml_document(config_text)
    for p in config.get("plugins", []):
        if p.get("type") == "precise-prefix-cache-producer":
            events = (p.get("parameters") or {}).get("kvEventsConfig") or {}
            discovery = events.get("podDiscoveryConfig") or {}
            if events.get("discoverPods") and discovery.get("socketPort"):
                return int(discovery["socketPort"])
    return None


def pd_threshold(config_text: str) -> int | None:
    """The prefix-based P/D decider's `nonCachedTokens` (None without that decider)."""
    config = yaml_document(config_text)
    for p in config.get("plugins", []):
        if p.get("type") == "prefix-based-pd-decider":
            return int((p.get("parameters") or {}).get("nonCachedTokens", 0)) or None
    return None


def renderer(docs: list[dict[str, Any]], config_text: str) -> Renderer | None:
    """The Service the token producer's URL names (`<service>.<namespace>.svc[...]`) and the
    Deployment its selector picks; None when the config has no render URL."""
    url = render_url(config_text)
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or 80
    name, _, rest = host.partition(".")
    namespace = rest.split(".")[0]
    service = next(
        d
        for d in docs
        if d.get("kind") == "Service"
        and d["metadata"]["name"] == name
        and d["metadata"].get("namespace") == namespace
    )
    selector = service["spec"]["selector"]
    deployment = next(
        d
        for d in docs
        if d.get("kind") == "Deployment"
        and d["metadata"].get("namespace") == namespace
        and all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items())
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    if not any(p["port"] == port for p in service["spec"]["ports"]):
        raise ValueError(f"the token producer dials port {port}, which Service {name} does not serve")
    positional, options = _options([str(a) for a in container.get("args", [])])
    model = positional[0]
    return Renderer(host, port, model, options.get("served-model-name", model))


def topology(render_dir: Path) -> Topology:
    docs = load_manifests(render_dir)
    pool = _one(docs, "InferencePool")
    objectives = [d for d in docs if d.get("kind") == "InferenceObjective"]
    pick = picker(docs)
    return Topology(
        pool["metadata"]["namespace"],
        pick,
        pool,
        objectives,
        serving_pods(docs, kv_blocks_per_rank(pick.config)),
        renderer(docs, pick.config),
        _one(docs, "DisaggregatedSet"),
        _one(docs, "Gateway"),
    )


def pool_topologies(render_dir: Path) -> list[Topology]:
    """One Topology per rendered InferencePool (`llmd-fleet:models`: one pool, picker,
    DisaggregatedSet and objectives per model), in the rendering's order of pools: the set is
    the one whose pods the pool selects, the objectives those whose poolRef names it. Pod
    addresses run on across pools, so no two pods of the run share one."""
    docs = load_manifests(render_dir)
    pools = [d for d in docs if d.get("kind") == "InferencePool"]
    sets = [d for d in docs if d.get("kind") == "DisaggregatedSet"]
    out: list[Topology] = []
    host = FIRST_POD_HOST
    for pool in pools:
        name = pool["metadata"]["name"]
        pick = picker(docs, pool)
        blocks = kv_blocks_per_rank(pick.config)
        owned = [ds for ds in sets if selected(pool, serving_pods(docs, blocks, ds, host))]
        if len(owned) != 1:
            raise ValueError(
                f"InferencePool {name} selects the pods of {len(owned)} DisaggregatedSets, not one"
            )
        pods = serving_pods(docs, blocks, owned[0], host)
        host += len(pods)
        objectives = [
            d
            for d in docs
            if d.get("kind") == "InferenceObjective" and d["spec"].get("poolRef", {}).get("name") == name
        ]
        out.append(
            Topology(
                pool["metadata"]["namespace"],
                pick,
                pool,
                objectives,
                pods,
                renderer(docs, pick.config),
                owned[0],
                _one(docs, "Gateway"),
            )
        )
    return out


def with_ranks_per_pod(topo: Topology, ranks: int) -> Topology:
    """The topology with `ranks` data-parallel ranks per pod instead of the rendered number, kept
    consistent where ranks show: the pool's first `ranks` target ports, the engines'
    `--data-parallel-size` and rank ports, the routing sidecars' `--data-parallel-size`. For a run
    the machine cannot carry at the rendered ranks (docs/twin.md says where it is used)."""
    targets = topo.pool["spec"].get("targetPorts") or []
    if not 1 <= ranks <= len(targets):
        raise ValueError(f"--ranks-per-pod {ranks}: the pool has {len(targets)} target ports per pod")
    pool = {**topo.pool, "spec": {**topo.pool["spec"], "targetPorts": targets[:ranks]}}

    def container(c: Container) -> Container:
        if not any(a.startswith("--data-parallel-size=") for a in c.args):
            return c
        args = tuple(
            f"--data-parallel-size={ranks}" if a.startswith("--data-parallel-size=") else a for a in c.args
        )
        vllm = replace(c.vllm, ranks=ranks) if c.vllm else None
        return Container(c.name, args, c.ports[:ranks], vllm)

    pods = [replace(p, containers=tuple(container(c) for c in p.containers)) for p in topo.pods]
    return replace(topo, pool=pool, pods=pods)


def selected(pool: dict[str, Any], pods: list[Pod]) -> list[Pod]:
    """The pods the InferencePool's selector picks (what the picker will discover)."""
    match = pool["spec"]["selector"]["matchLabels"]
    return [p for p in pods if all(p.labels.get(k) == v for k, v in match.items())]


def _flag(args: tuple[str, ...], name: str, default: str) -> str:
    return next((a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")), default)


def _duration_ms(text: str) -> float:
    for suffix, factor in (("ms", 1.0), ("us", 0.001), ("s", 1000.0)):
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) * factor
    return float(text)


@dataclass(frozen=True)
class Capacity:
    """What the rendered config and engines say saturation is (docs/twin.md, data plane):
    - `decode_seqs`: requests the decode ranks run at once (each simulator's `--max-num-seqs`,
      once per data-parallel rank); more wait in the engines' queues;
    - `endpoints`: the endpoints the pool holds (pods x targetPorts), over which the saturation
      detector averages max(waiting / queueDepthThreshold, KV use / kvCacheUtilThreshold);
    - `queue_depth`, `kv_threshold`: those two thresholds; `shed_at`: the saturation from which the
      probabilistic admitter rejects every sheddable request (min(sat^power * k, 1) = 1), None
      without that admitter;
    - `itl_ms`: the decode simulators' inter-token latency."""

    decode_seqs: int
    endpoints: int
    queue_depth: int
    kv_threshold: float
    shed_at: float | None
    itl_ms: float

    @property
    def saturating_waiting(self) -> int:
        """Requests waiting in the engines at which the detector reads saturation 1.0 (the
        dispatch gate of every band)."""
        return self.queue_depth * self.endpoints


def capacity(topo: Topology) -> Capacity:
    config = yaml_document(topo.picker.config)
    params = {p.get("type"): p.get("parameters") or {} for p in config.get("plugins", [])}
    detector_ref = (config.get("flowControl") or {}).get("saturationDetector", {}).get("pluginRef")
    detector = next(
        (p.get("parameters") or {} for p in config.get("plugins", []) if p.get("name") == detector_ref),
        params.get("utilization-detector", {}),
    )
    queue_depth = int(detector.get("queueDepthThreshold", 5))
    kv_threshold = float(detector.get("kvCacheUtilThreshold", 0.8))
    admitter = params.get("probabilistic-admitter")
    shed_at = None
    if admitter is not None:
        shed_at = (1.0 / float(admitter.get("k", 300.0))) ** (1.0 / float(admitter.get("power", 5.0)))
    seqs = 0
    itl = 0.0
    for pod in selected(topo.pool, topo.pods):
        if pod.role != "decode":
            continue
        for c in pod.containers:
            if c.name == "simulator":
                ranks = int(_flag(c.args, "data-parallel-size", "1"))
                seqs += ranks * int(_flag(c.args, "max-num-seqs", "5"))
                itl = max(itl, _duration_ms(_flag(c.args, "inter-token-latency", "0ms")))
    ports = len(topo.pool["spec"].get("targetPorts", [])) or 1
    return Capacity(
        seqs, ports * len(selected(topo.pool, topo.pods)), queue_depth, kv_threshold, shed_at, itl
    )
