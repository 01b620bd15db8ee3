"""What the data plane runs, read from a stack's rendered manifests (`llmd-fleet render`), never
from the library's internals: the endpoint picker's Deployment and config, the InferencePool, the
InferenceObjectives and the serving pods the DisaggregatedSet's roles make. Pure functions."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

# The pods' network inside the run's namespaces (docs/twin.md): kind's pod range, which the
# local-sim stack names; it exists only inside the namespaces the run creates.
POD_SUBNET = "10.244.0"
FIRST_POD_HOST = 10


@dataclass(frozen=True)
class Container:
    name: str
    args: tuple[str, ...]
    ports: tuple[int, ...]


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

    def role(self, name: str) -> list[Pod]:
        return [p for p in self.pods if p.role == name]


def load_manifests(render_dir: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((render_dir / "manifests").rglob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        raise ValueError(f"the rendering has {len(found)} {kind} objects, the data plane needs one")
    return found[0]


def _containers(spec: dict[str, Any]) -> tuple[Container, ...]:
    # Native sidecars (init containers that keep running) are part of the data path too.
    listed = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    listed += spec["containers"]
    return tuple(
        Container(c["name"], tuple(c.get("args", [])), tuple(p["containerPort"] for p in c.get("ports", [])))
        for c in listed
    )


def picker(docs: list[dict[str, Any]]) -> Picker:
    pool = _one(docs, "InferencePool")
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


def serving_pods(docs: list[dict[str, Any]]) -> list[Pod]:
    """One Pod per role instance and pod of its group (LeaderWorkerSet size), with its address in
    the run's pod network. Leader and worker templates are taken as the LWS controller does."""
    ds = _one(docs, "DisaggregatedSet")
    pods: list[Pod] = []
    host = FIRST_POD_HOST
    for role in ds["spec"]["roles"]:
        template = role["spec"]["leaderWorkerTemplate"]
        for instance in range(int(role["spec"].get("replicas", 1))):
            for index in range(int(template.get("size", 1))):
                tpl = template.get("leaderTemplate") if index == 0 and "leaderTemplate" in template else None
                tpl = tpl or template["workerTemplate"]
                name = f"{ds['metadata']['name']}-{role['name']}-{instance}-{index}"
                labels = dict(tpl["metadata"].get("labels", {}))
                pods.append(Pod(name, role["name"], f"{POD_SUBNET}.{host}", labels, _containers(tpl["spec"])))
                host += 1
    return pods


def render_url(config_text: str) -> str | None:
    """The URL of the render service the config's token producer calls, if it has one."""
    config = yaml.safe_load(config_text)
    for p in config.get("plugins", []):
        if p.get("type") in ("token-producer", "tokenizer"):
            url = (p.get("parameters") or {}).get("vllm", {}).get("url")
            return str(url) if url else None
    return None


def pd_threshold(config_text: str) -> int | None:
    """The prefix-based P/D decider's `nonCachedTokens` (None without that decider)."""
    config = yaml.safe_load(config_text)
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
    args = [str(a) for a in container.get("args", [])]
    model = next(a for a in args if not a.startswith("-"))
    served = next((a.split("=", 1)[1] for a in args if a.startswith("--served-model-name=")), model)
    return Renderer(host, port, model, served)


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
        serving_pods(docs),
        renderer(docs, pick.config),
    )


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
    config = yaml.safe_load(topo.picker.config)
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
