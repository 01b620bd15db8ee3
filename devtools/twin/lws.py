"""The LWS controller manager in the twin: kubernetes-sigs/lws (LeaderWorkerSet and DisaggregatedSet
controllers, their webhooks), built from a source snapshot and run out of cluster on loopback.

    python -m devtools.twin lws-build      build (or reuse) it and print where it is

The Go module proxy refuses `sigs.k8s.io/lws` at every version, so the controller manager
(`cmd/main.go`) is built from a snapshot of its source (devtools/source_snapshot.py):
`$LLMD_LWS_SOURCE` (a git repository of kubernetes-sigs/lws, read at the pinned commit, or a `git
archive` tarball), else `../shared/src/lws-v<chart version>.tar.gz` beside the checkout: the
release `[charts.lws]` of images/versions.toml installs, whose tag's commit is `[twin].lws` (a
snapshot holding another commit is refused). schemas/crds vendors the DisaggregatedSet CRDs from
that tag's chart (`charts/lws/crds/`). Its Go dependencies come from the module proxy at the
versions of its own go.sum (`-mod=readonly`). The binary, the snapshot's `config/` (the
LeaderWorkerSet CRD, the webhook manifests) and the chart's CRDs go to
`<cache>/lws-controller-<commit[:12]>-<key>/`; the key hashes the recipe, the commit, the snapshot's
sha256 and the Go version. Nothing of its source is kept in this repository.

In the twin (`start`), the manager runs with the twin's admin kubeconfig and a `-config` file:
leader election off, no internal certificate management, metrics and health probes off, and its
webhook server on 127.0.0.1 with a serving certificate from the twin's CA. The webhook
configurations are upstream's `config/webhook` manifests with each service reference replaced by
a URL on that port and the twin's CA as caBundle, so the API server calls the real webhooks.
"""

import base64
import copy
import json
import shutil
import socket
import ssl
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devtools import source_snapshot, tool_cache
from devtools.twin import cluster
from devtools.twin.kube import ApiError, Kube, wait_for
from devtools.twin.pki import Pki
from llmd_fleet.core.yaml_documents import yaml_document

MODULE = "sigs.k8s.io/lws"
SOURCE_ENV = "LLMD_LWS_SOURCE"
COMPONENT = "lws-controller"
BINARY = "manager"
# The build steps, as hashed into the key: change this text when the steps change.
RECIPE = (
    "snapshot of <commit> unpacked into src; (cd src && go build -mod=readonly -trimpath "
    "-ldflags '-s -w -X <version vars>' -o ../manager ./cmd); keep src/config and src/charts/lws/crds"
)
# What the build and the twin need from the snapshot (paths inside the repository).
LWS_CRD = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
# The chart's copies: what `platform: install` installs, and what schemas/crds vendors.
CHART_CRDS = "charts/lws/crds"
DS_CRDS = (
    f"{CHART_CRDS}/disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
    f"{CHART_CRDS}/disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml",
)
WEBHOOK_DIR = "config/webhook"
REQUIRED = ("go.mod", "go.sum", "cmd/main.go", LWS_CRD, *DS_CRDS, f"{WEBHOOK_DIR}/manifests.yaml")
# Upstream's kustomization (config/default) prefixes every object name with this.
NAME_PREFIX = "lws-"
LOOPBACK = cluster.LOOPBACK
CONFIG_API = "config.lws.x-k8s.io/v1alpha1"


class BuildError(Exception):
    """The controller could not be built or started (an unusable snapshot, a failed build)."""


class SourceMissing(BuildError):
    """No snapshot of the LWS source: the controller checks are not run, which is no failure."""


def pinned_commit() -> str:
    from llmd_fleet.versions import versions

    return versions().twin.lws


def pinned_tag() -> str:
    """The release tag of the pinned chart: `v<[charts.lws].version>` (the chart of release vX.Y.Z
    is published as X.Y.Z, images/versions.toml)."""
    from llmd_fleet.versions import versions

    return f"v{versions().chart('lws').version.removeprefix('v')}"


def tarball_name(tag: str) -> str:
    """`lws-<tag>.tar.gz`, as the shared build inputs name the snapshot of a release."""
    return f"lws-{tag}.tar.gz"


def lws_source(
    commit: str, shared: Path = source_snapshot.SHARED_SOURCES, tag: str | None = None
) -> source_snapshot.Snapshot:
    """The snapshot of kubernetes-sigs/lws at `commit`, the commit of release `tag` (default: the
    pinned chart's) (SourceMissing: none; BuildError: unusable, or another commit)."""
    tag = tag or pinned_tag()
    try:
        snapshot = source_snapshot.find(SOURCE_ENV, tarball_name(tag), commit, shared)
    except source_snapshot.SnapshotMissing as exc:
        raise SourceMissing(
            f"{exc} (the Go module proxy does not serve {MODULE}; set ${SOURCE_ENV} to a git "
            "repository or `git archive` tarball of kubernetes-sigs/lws)"
        ) from None
    except source_snapshot.SnapshotError as exc:
        raise BuildError(str(exc)) from None
    if snapshot.commit != commit:
        raise BuildError(
            f"{snapshot.path} holds {snapshot.commit}, the twin pins {MODULE} {tag} at {commit} ([twin].lws)"
        )
    return snapshot


def unpack(snapshot: source_snapshot.Snapshot, into: Path) -> tuple[Path, str]:
    """Unpack the snapshot into `into`; the source root (the folder holding go.mod, which a
    `git archive --prefix` tarball nests) and a note when the tarball ends early. A tarball cut
    short still builds when everything the build reads (REQUIRED) arrived before the cut."""
    note = ""
    if snapshot.is_tarball:
        into.mkdir(parents=True, exist_ok=True)
        count, last = 0, ""
        with tarfile.open(snapshot.path) as tar:
            try:
                for member in tar:
                    last = member.name
                    tar.extract(member, into, filter="data")
                    count += 1
            except (tarfile.ReadError, EOFError) as exc:
                note = f"{snapshot.path.name} ends early ({exc}) after {count} entries, in {last}"
    else:
        snapshot.export(into)
    roots = [into, *sorted(p for p in into.iterdir() if p.is_dir())]
    root = next((r for r in roots if (r / "go.mod").is_file()), None)
    if root is None:
        raise BuildError(
            f"{snapshot.path} has no go.mod at its top or one folder down" + (f"; {note}" if note else "")
        )
    missing = [rel for rel in REQUIRED if not (root / rel).is_file()]
    if missing:
        raise BuildError(f"{snapshot.path} lacks {', '.join(missing)}" + (f"; {note}" if note else ""))
    return root, note


@dataclass(frozen=True)
class Built:
    directory: Path
    commit: str
    seconds: float | None
    """How long the build took, None when the cache had it."""
    note: str

    @property
    def binary(self) -> Path:
        return self.directory / BINARY

    def config_file(self, relative: str) -> Path:
        return self.directory / relative


def ldflags(commit: str) -> str:
    return " ".join(
        (
            "-s",
            "-w",
            f"-X {MODULE}/pkg/version.GitVersion={commit[:12]}",
            f"-X {MODULE}/pkg/version.GitCommit={commit}",
        )
    )


def ensure(shared: Path = source_snapshot.SHARED_SOURCES) -> Built:
    """The controller manager at the pinned commit, built first if the cache has none."""
    commit = pinned_commit()
    snapshot = lws_source(commit, shared)
    try:
        go = tool_cache.go_version()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"the LWS controller is built with Go, which is not usable here: {exc}") from None
    key = tool_cache.cache_key(RECIPE.encode(), commit.encode(), snapshot.digest.encode(), go.encode())
    target = tool_cache.cache_root() / f"lws-controller-{commit[:12]}-{key}"

    def build(target: Path) -> None:
        target.mkdir(parents=True)
        log = target.with_name(target.name + ".log")
        log.write_text("")
        root, note = unpack(snapshot, target / "src")
        if note:
            print(f"LWS controller: {note}; everything the build reads is there", file=sys.stderr)
            (target / "snapshot-note.txt").write_text(note + "\n")
        print(
            f"building the LWS controller manager ({MODULE} {commit[:12]}) in {target}",
            file=sys.stderr,
            flush=True,
        )
        status = tool_cache.go_build("./cmd", target / BINARY, root, ldflags(commit), log)
        if status != 0:
            tail = "\n".join(log.read_text().splitlines()[-30:])
            raise BuildError(f"building the LWS controller manager failed (exit {status}); {log}:\n{tail}")
        # Keep config/ (CRDs and webhook manifests, read at run time) and the chart's CRDs (held
        # against schemas/crds); the rest of the source is a build input, not a cache of it.
        shutil.copytree(root / "config", target / "config")
        shutil.copytree(root / CHART_CRDS, target / CHART_CRDS)
        shutil.rmtree(target / "src")

    seconds = tool_cache.build_once(target, build, f"{MODULE}@{commit}\n")
    note_file = target / "snapshot-note.txt"
    note = note_file.read_text().strip() if note_file.is_file() else ""
    return Built(target, commit, seconds, note)


def controller_config(webhook_port: int, cert_dir: Path) -> dict[str, Any]:
    """The manager's `-config` file (config.lws.x-k8s.io/v1alpha1 Configuration): one process out
    of cluster, so no leader election; the twin's CA signs the webhook certificate, so no internal
    certificate management (which would write a Secret and patch webhook configurations); metrics
    and health probes off ("0"), whose defaults listen on every interface; the webhook server on
    loopback."""
    return {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": LOOPBACK, "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": "0"},
    }


def _replace_webhook(config: dict[str, Any], patch: dict[str, Any]) -> None:
    """One kustomize JSON6902 operation of upstream's webhook patches: `replace /webhooks/<i>`."""
    path = str(patch.get("path", ""))
    if patch.get("op") != "replace" or not path.startswith("/webhooks/") or not path[10:].isdigit():
        raise BuildError(
            f"unexpected webhook patch {patch.get('op')} {path} (only `replace /webhooks/<i>` is known)"
        )
    config["webhooks"][int(path[10:])] = copy.deepcopy(patch["value"])


def webhook_configurations(webhook_dir: Path, base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Upstream's webhook configurations (`config/webhook`: manifests.yaml with the patches its
    kustomization.yaml names), as the twin registers them: names prefixed as upstream's default
    kustomization does, and every service reference replaced by `base_url + path` with the twin's
    CA as caBundle."""
    configs = [
        d for d in yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()) if isinstance(d, dict)
    ]
    kustomization = webhook_dir / "kustomization.yaml"
    patches = yaml.safe_load(kustomization.read_text()).get("patches", []) if kustomization.is_file() else []
    by_name = {(c["kind"], c["metadata"]["name"]): c for c in configs}
    for entry in patches:
        target = entry.get("target", {})
        config = by_name.get((target.get("kind"), target.get("name")))
        if config is None:
            raise BuildError(
                f"webhook patch {entry.get('path')} targets {target}, which manifests.yaml lacks"
            )
        for operation in yaml.safe_load((webhook_dir / entry["path"]).read_text()) or []:
            _replace_webhook(config, operation)
    ca_bundle = base64.b64encode(ca_pem).decode()
    out = []
    for config in configs:
        config = copy.deepcopy(config)
        config["metadata"] = {"name": NAME_PREFIX + config["metadata"]["name"]}
        for webhook in config["webhooks"]:
            service = webhook["clientConfig"].get("service") or {}
            path = service.get("path", "")
            webhook["clientConfig"] = {"url": f"{base_url.rstrip('/')}{path}", "caBundle": ca_bundle}
        out.append(config)
    return out


def serving_certificate(pki: Pki, directory: Path) -> Path:
    """`tls.crt`/`tls.key` in `directory` (controller-runtime's file names), for 127.0.0.1, signed
    by the twin's CA so the API server trusts the webhooks."""
    directory.mkdir(parents=True, exist_ok=True)
    key, cert, csr, ext = (directory / n for n in ("tls.key", "tls.crt", "tls.csr", "tls.ext"))
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    for args in (
        ["genrsa", "-out", str(key), "2048"],
        ["req", "-new", "-key", str(key), "-subj", "/CN=lws-webhook-twin", "-out", str(csr)],
        ["x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key),
         "-CAcreateserial", "-days", "2", "-sha256", "-extfile", str(ext), "-out", str(cert)],
    ):  # fmt: skip
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    csr.unlink()
    ext.unlink()
    return directory


@dataclass
class Controller:
    """The running manager: what was built, where its webhooks listen, its log."""

    built: Built
    webhook_port: int
    log: Path
    started_s: float


def _webhook_serves(port: int, ca: Path) -> bool:
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with (
            socket.create_connection((LOOPBACK, port), timeout=2) as raw,
            context.wrap_socket(raw, server_hostname=LOOPBACK),
        ):
            return True
    except OSError:
        return False


def _established(kube: Kube, crd: dict[str, Any]) -> bool:
    status = kube.read(crd).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return conditions.get("Established") == "True"


def same_crds(built: Built, vendored_dir: Path) -> tuple[int, list[str]]:
    """How many of the snapshot's DisaggregatedSet CRDs equal the ones schemas/crds vendors, and
    the names of those that differ."""
    differ = []
    for rel in DS_CRDS:
        ours = vendored_dir / "disaggregatedset.x-k8s.io" / Path(rel).name
        theirs = built.config_file(rel)
        if not ours.is_file() or yaml_document(ours.read_bytes()) != yaml_document(theirs.read_bytes()):
            differ.append(Path(rel).name)
    return len(DS_CRDS) - len(differ), differ


def start(state: cluster.State, kube: Kube, built: Built, root: Path = cluster.PROJECT_ROOT) -> Controller:
    """Apply the LeaderWorkerSet CRD, start the manager (recorded in the twin's state, so `twin
    down` stops it) and register its webhooks; returns once the webhook server answers TLS."""
    directory = cluster.twin_dir(root)
    pki = Pki(directory / "pki")
    crd = yaml_document(built.config_file(LWS_CRD).read_bytes())
    kube.apply(crd)
    wait_for("LeaderWorkerSet CRD Established", lambda: _established(kube, crd), timeout=60, interval=0.5)
    lws_dir = directory / "lws"
    lws_dir.mkdir(parents=True, exist_ok=True)
    cert_dir = serving_certificate(pki, lws_dir / "certs")
    port = cluster.free_port()
    config_path = lws_dir / "config.json"
    config_path.write_text(json.dumps(controller_config(port, cert_dir), indent=2) + "\n")
    argv = [str(built.binary), f"-kubeconfig={directory / 'kubeconfig'}", f"-config={config_path}"]
    logs = directory / "logs"
    began = time.monotonic()
    state.pids[COMPONENT] = cluster._start(COMPONENT, argv, logs)
    state.binaries[COMPONENT] = str(built.binary)
    state.components.append(COMPONENT)
    cluster._save(state, root)
    log = logs / f"{COMPONENT}.log"
    wait_for(
        f"the LWS webhook server on {LOOPBACK}:{port} (log: {log})",
        lambda: _webhook_serves(port, pki.ca_cert),
        timeout=120,
        interval=0.5,
    )
    for config in webhook_configurations(
        built.config_file(WEBHOOK_DIR), f"https://{LOOPBACK}:{port}", pki.ca_cert.read_bytes()
    ):
        kube.apply(config)
    return Controller(built, port, log, time.monotonic() - began)


def webhook_refusal(kube: Kube, ds: dict[str, Any], timeout: float = 60) -> str:
    """Send a DisaggregatedSet the DisaggregatedSet webhook refuses (a rollout partition, which its
    CRD schema allows) as a dry run, until the webhook itself answers (its handlers register just
    after its server starts); the refusal's message."""
    bad = copy.deepcopy(ds)
    rollout = bad["spec"]["roles"][0]["spec"].setdefault("rolloutStrategy", {})
    rollout.setdefault("type", "RollingUpdate")
    rollout.setdefault("rollingUpdateConfiguration", {})["partition"] = 1
    last = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kube.apply(bad, dry_run=True)
            return ""
        except ApiError as error:
            last = str(error)
            if "denied the request" in last:
                return last
        time.sleep(0.5)
    raise TimeoutError(f"the DisaggregatedSet webhook did not answer in {timeout:.0f} s (last: {last})")


def main() -> int:
    try:
        built = ensure()
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if built.seconds is not None:
        print(f"LWS controller manager built in {built.seconds:.0f} s", file=sys.stderr)
    print(built.binary)
    return 0
