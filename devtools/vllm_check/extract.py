"""The exact argv every vLLM container of a rendered stack would exec, worker by worker.

For each LeaderWorkerSet-shaped pod template in the manifests (the DisaggregatedSet's roles, or a
LeaderWorkerSet), and for every worker index of the group, this builds the environment the pod
would get and runs the container's launch script the way the container would:

1. LWS prepends `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE` and `LWS_WORKER_INDEX` to every container's
   env (as its pod webhook does); `valueFrom` fields get realistic values (pod IP, names) and
   secrets a placeholder.
2. The kubelet expands `$(VAR)` references in env values (against the variables defined before
   them) and in command and args (against the whole env); `$$` is a literal `$`.
3. bash runs the command with `vllm`, `find` and `hf` replaced by stubs on PATH: the `vllm` stub
   records its argv, `find` does nothing (the script's /dev/shm cleanup must never touch this
   machine), `hf` records each LoRA adapter download; every `--lora-modules` path must have been
   downloaded at a `--revision` before vLLM starts (vLLM 0.33 itself fetches no revision).

The pure parts (expansion, env, template walking) are tested without vLLM; running the scripts
needs only bash.
"""

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.vllm_check.lines import CommandLine, Finding, Origin, Problem
from devtools.vllm_check.sysfs import fake_sysfs
from llmd_fleet.core.yaml_documents import yaml_documents

# The variables the LWS webhook injects, in its order (it puts them first in every container).
LWS_ADDRESS, LWS_SIZE, LWS_INDEX = "LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"
SECRET_PLACEHOLDER = "[secret]"
SCRIPT_TIMEOUT_S = 30
_VLLM_SERVE = re.compile(r"(^|[\s/;&|(])vllm\s+serve(\s|$)")
_STUBS = {
    # Record the argv and the environment vLLM would start with, NUL-separated, next to the stub.
    "vllm": ('#!/bin/bash\nprintf \'%s\\0\' vllm "$@" > "${0%/*}/vllm.argv"\nenv -0 > "${0%/*}/vllm.env"\n'),
    "find": "#!/bin/bash\nexit 0\n",
    # The LoRA adapters' download (llmd_fleet/layers/serving/vllm.py lora_download_lines): one
    # NUL-separated argv per call, each ended by a newline; nothing is fetched.
    "hf": '#!/bin/bash\nprintf \'%s\\0\' hf "$@" >> "${0%/*}/hf.argv"\nprintf \'\\n\' >> "${0%/*}/hf.argv"\n',
}
# What would act on this machine despite the stubs: find, rm or vllm by absolute path, rm on /dev/shm.
_UNSTUBBED = re.compile(r"(?<![\w./-])(?:/usr)?/bin/(?:find|rm|vllm)\b|\brm\b[^\n;&|]*/dev/shm")
# Where the launch script reads sysfs (llmd_fleet/layers/serving/vllm.py SYSFS_VAR): a fake HGX
# node's tree (devtools/vllm_check/sysfs.py) beside the stubs, never this machine's /sys.
SYSFS_VAR = "SYSFS_ROOT"
FAKE_SYSFS = "sys"
# Set by bash itself or by this harness, not by the container.
_HARNESS_VARS = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "PATH", SYSFS_VAR})


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion, as the kubelet does it for env values, command and args.

    `$(NAME)` becomes the value when NAME is defined and stays as written otherwise; `$$` is a
    literal `$`; any other `$` is kept. Shell syntax such as `$(( a * b ))` or `${X}` therefore
    passes through unless a variable is literally named like the text between the parentheses.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "$" or i + 1 == n:
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close == -1:
                out.append("$(")
                i += 2
            else:
                name = text[i + 2 : close]
                out.append(variables.get(name, f"$({name})"))
                i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


@dataclass(frozen=True)
class Pod:
    """The facts about one pod that its containers' environment can reference."""

    name: str
    namespace: str
    ip: str
    host_ip: str
    node: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    lws_env: tuple[tuple[str, str], ...]


def _field_value(path: str, pod: Pod) -> str:
    simple = {
        "metadata.name": pod.name,
        "metadata.namespace": pod.namespace,
        "metadata.uid": f"uid-of-{pod.name}",
        "spec.nodeName": pod.node,
        "spec.serviceAccountName": "default",
        "status.podIP": pod.ip,
        "status.podIPs": pod.ip,
        "status.hostIP": pod.host_ip,
        "status.hostIPs": pod.host_ip,
    }
    if path in simple:
        return simple[path]
    if match := re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path):
        source = pod.labels if match.group(1) == "labels" else pod.annotations
        return source.get(match.group(2), "")
    return f"<{path}>"


def _resource_value(ref: Mapping[str, Any], container: Mapping[str, Any]) -> str:
    kind, _, name = str(ref.get("resource", "")).partition(".")
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(name)
    return str(value) if value is not None else f"<{ref.get('resource')}>"


def _source_value(source: Mapping[str, Any], pod: Pod, container: Mapping[str, Any]) -> str:
    if "fieldRef" in source:
        return _field_value(str(source["fieldRef"].get("fieldPath", "")), pod)
    if "secretKeyRef" in source:
        return SECRET_PLACEHOLDER
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        return f"<configmap {ref.get('name')}/{ref.get('key')}>"
    if "resourceFieldRef" in source:
        return _resource_value(source["resourceFieldRef"], container)
    return "<unknown valueFrom>"


def container_env(container: Mapping[str, Any], pod: Pod) -> list[tuple[str, str]]:
    """The container's environment as the kubelet starts it (LWS variables first, then the
    container's own, each expanded against the variables before it)."""
    declared: list[Mapping[str, Any]] = [{"name": k, "value": v} for k, v in pod.lws_env]
    lws_names = {k for k, _ in pod.lws_env}
    declared += [e for e in container.get("env") or [] if e.get("name") not in lws_names]
    env: dict[str, str] = {}
    for entry in declared:
        name = str(entry["name"])
        if "valueFrom" in entry:
            env[name] = _source_value(entry["valueFrom"], pod, container)
        else:
            env[name] = expand(str(entry.get("value", "")), env)
    return list(env.items())


def is_vllm_container(container: Mapping[str, Any]) -> bool:
    words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
    return container.get("name") == "vllm" or any(_VLLM_SERVE.search(w) for w in words)


class LaunchError(Exception):
    """The container's command did not get as far as exec'ing vLLM."""


@contextmanager
def stub_bin(missing_nic: int | None = None) -> Iterator[Path]:
    """A directory holding the `vllm` and `find` stubs, next to a fake sysfs of an 8-GPU node
    (`missing_nic` left out), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="vllm-check-") as tmp:
        fake_sysfs(Path(tmp) / FAKE_SYSFS, missing_nic=missing_nic)
        bin_dir = Path(tmp) / "bin"
        bin_dir.mkdir()
        for name, body in _STUBS.items():
            stub = bin_dir / name
            stub.write_text(body)
            stub.chmod(0o755)
        yield bin_dir


def launch(
    command: list[str], env: Mapping[str, str], bin_dir: Path
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Run the (already expanded) container command with the stubs first on PATH; return the argv
    it execs vLLM with and the environment vLLM gets (the container's, plus what the script
    exports). A `sh|bash -c SCRIPT` command runs under bash; `vllm ...` is its own argv."""
    if not command:
        raise LaunchError("the container sets no command (the image's entrypoint is not known here)")
    if Path(command[0]).name == "vllm":
        return ("vllm", *command[1:]), tuple(env.items())
    if Path(command[0]).name not in ("bash", "sh") or len(command) < 3 or command[1] != "-c":
        raise LaunchError(f"cannot run command {command[:2]}: expected `bash -c SCRIPT` or `vllm serve ...`")
    if unsafe := _UNSTUBBED.search(" ".join(command[2:])):
        raise LaunchError(f"the launch script runs {unsafe.group(0)!r}, which the stubs cannot intercept")
    record, record_env, downloads = bin_dir / "vllm.argv", bin_dir / "vllm.env", bin_dir / "hf.argv"
    record.unlink(missing_ok=True)
    record_env.unlink(missing_ok=True)
    downloads.unlink(missing_ok=True)
    bash = shutil.which("bash") or "/bin/bash"
    run_env = {
        **env,
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        SYSFS_VAR: str(bin_dir.parent / FAKE_SYSFS),
    }
    result = subprocess.run(
        [bash, "-c", *command[2:]],
        env=run_env,
        cwd=bin_dir.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise LaunchError(f"the launch script failed (exit {result.returncode}): {result.stderr.strip()}")
    if not record.exists():
        raise LaunchError("the launch script finished without exec'ing vllm")
    argv = tuple(record.read_bytes().decode().split("\0")[:-1])
    calls = downloads.read_text().split("\n")[:-1] if downloads.exists() else []
    lora_download_problems(argv, [tuple(call.split("\0")[:-1]) for call in calls])
    kept: list[tuple[str, str]] = []
    for item in record_env.read_bytes().decode().split("\0")[:-1]:
        name, _, value = item.partition("=")
        if name not in _HARNESS_VARS:
            kept.append((name, value))
    if "PATH" in env:
        kept.append(("PATH", env["PATH"]))
    return argv, tuple(sorted(kept))


def _flag_value(argv: tuple[str, ...], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def lora_download_problems(argv: tuple[str, ...], calls: list[tuple[str, ...]]) -> None:
    """Raise LaunchError unless every `--lora-modules` entry's path was fetched by an
    `hf download SOURCE --revision REV --local-dir PATH` before vLLM started."""
    if "--lora-modules" not in argv:
        return
    import json

    start = argv.index("--lora-modules") + 1
    entries = []
    for word in argv[start:]:
        if word.startswith("--"):
            break
        entries.append(word)
    fetched = {
        _flag_value(call, "--local-dir"): _flag_value(call, "--revision")
        for call in calls
        if call[:2] == ("hf", "download")
    }
    for entry in entries:
        try:
            module = json.loads(entry)
        except ValueError:
            raise LaunchError(
                f"--lora-modules entry {entry!r} is not the JSON form (name, path, base_model_name)"
            ) from None
        path = module.get("path")
        if not fetched.get(path):
            raise LaunchError(
                f"LoRA adapter {module.get('name')!r}: {path!r} is not downloaded at a --revision before "
                "vLLM starts (vLLM 0.33 fetches a repository id at its default branch)"
            )


@dataclass(frozen=True)
class GroupTemplate:
    """One LeaderWorkerSet-shaped group: its role, LWS name, size and pod templates."""

    role: str
    lws_name: str
    namespace: str
    size: int
    worker_template: Mapping[str, Any]
    leader_template: Mapping[str, Any] | None

    def template(self, worker: int) -> Mapping[str, Any]:
        """LWS uses the leader template (when given) for worker 0, the worker template otherwise."""
        return self.leader_template if worker == 0 and self.leader_template else self.worker_template


def group_templates(document: Mapping[str, Any]) -> list[GroupTemplate]:
    """The LWS groups a manifest declares: each role of a DisaggregatedSet, or a LeaderWorkerSet."""
    kind = document.get("kind")
    meta = document.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace") or "default")
    spec = document.get("spec") or {}
    if kind == "DisaggregatedSet":
        groups = [
            (str(r["name"]), f"{name}-{r['name']}", (r.get("spec") or {})) for r in spec.get("roles", [])
        ]
    elif kind == "LeaderWorkerSet":
        groups = [(name, name, spec)]
    else:
        return []
    out = []
    for role, lws_name, role_spec in groups:
        lwt = role_spec.get("leaderWorkerTemplate") or {}
        out.append(
            GroupTemplate(
                role=role,
                lws_name=lws_name,
                namespace=namespace,
                size=int(lwt.get("size", 1)),
                worker_template=lwt.get("workerTemplate") or {},
                leader_template=lwt.get("leaderTemplate"),
            )
        )
    return out


def group_pod(group: GroupTemplate, group_index: int, worker: int) -> Pod:
    """Realistic identity of worker `worker` of the group's first replica (LWS naming: leader
    `<lws>-0`, workers `<lws>-0-<i>`, headless service `<lws>`)."""
    template = group.template(worker)
    leader = f"{group.lws_name}-0"
    name = leader if worker == 0 else f"{leader}-{worker}"
    meta = template.get("metadata") or {}
    labels = {
        **(meta.get("labels") or {}),
        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
        "leaderworkerset.sigs.k8s.io/group-index": "0",
    }
    return Pod(
        name=name,
        namespace=group.namespace,
        ip=f"10.244.{group_index}.{worker + 2}",
        host_ip=f"10.0.{group_index}.{worker + 2}",
        node=f"node-{group_index}-{worker}",
        labels=labels,
        annotations=meta.get("annotations") or {},
        lws_env=(
            (LWS_ADDRESS, f"{leader}.{group.lws_name}.{group.namespace}"),
            (LWS_SIZE, str(group.size)),
            (LWS_INDEX, str(worker)),
        ),
    )


def _other_ports(pod_spec: Mapping[str, Any], skip: str) -> tuple[tuple[int, str], ...]:
    """Ports declared by the pod's other long-running containers (regular and sidecar init)."""
    running = list(pod_spec.get("containers") or []) + [
        c for c in pod_spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"
    ]
    out = []
    for container in running:
        if container.get("name") == skip:
            continue
        for port in container.get("ports") or []:
            if str(port.get("protocol", "TCP")) == "TCP":
                label = f" ({port['name']})" if port.get("name") else ""
                out.append(
                    (
                        int(port["containerPort"]),
                        f"port {port['containerPort']}{label} of container {container.get('name')}",
                    )
                )
    return tuple(out)


def _vllm_containers(pod_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        c
        for c in (pod_spec.get("initContainers") or []) + (pod_spec.get("containers") or [])
        if is_vllm_container(c)
    ]


def group_command_lines(
    stack: str, group: GroupTemplate, group_index: int, bin_dir: Path
) -> tuple[list[CommandLine], list[Finding]]:
    """The command line of every vLLM container of every worker of the group."""
    lines: list[CommandLine] = []
    findings: list[Finding] = []
    for worker in range(group.size):
        pod_spec = group.template(worker).get("spec") or {}
        pod = group_pod(group, group_index, worker)
        for container in _vllm_containers(pod_spec):
            origin = Origin(stack, group.role, str(container.get("name")), worker)
            env = container_env(container, pod)
            variables = dict(env)
            command = [expand(str(w), variables) for w in (container.get("command") or [])]
            command += [expand(str(w), variables) for w in (container.get("args") or [])]
            try:
                argv, exec_env = launch(command, variables, bin_dir)
            except (LaunchError, subprocess.TimeoutExpired) as exc:
                findings.append(Finding(origin, Problem(None, str(exc))))
                continue
            pod_ports = _other_ports(pod_spec, skip=str(container.get("name")))
            lines.append(CommandLine(origin, argv, exec_env, pod_ports))
    return lines, findings


def manifest_documents(manifests_dir: Path) -> Iterator[Mapping[str, Any]]:
    for path in sorted(manifests_dir.rglob("*.yaml")):
        for document in yaml_documents(path.read_text()):
            if isinstance(document, dict):
                yield document


def stack_command_lines(
    stack: str, manifests_dir: Path, missing_nic: int | None = None
) -> tuple[list[CommandLine], list[Finding]]:
    """Every vLLM command line of a rendered stack, plus what stopped some from being extracted.
    A stack whose manifests hold no vLLM command line is itself a finding: the check must never
    pass by finding nothing to check. `missing_nic` leaves that NIC out of the fake sysfs."""
    if not manifests_dir.is_dir():
        problem = Problem(None, f"no rendered manifests at {manifests_dir} (run: llmd-fleet render {stack})")
        return [], [Finding(Origin(stack), problem)]
    groups = [g for doc in manifest_documents(manifests_dir) for g in group_templates(doc)]
    lines: list[CommandLine] = []
    findings: list[Finding] = []
    with stub_bin(missing_nic) as bin_dir:
        for index, group in enumerate(groups):
            group_lines, group_findings = group_command_lines(stack, group, index, bin_dir)
            lines += group_lines
            findings += group_findings
    if not lines and not findings:
        findings.append(Finding(Origin(stack), Problem(None, f"no vLLM container found in {manifests_dir}")))
    return lines, findings
