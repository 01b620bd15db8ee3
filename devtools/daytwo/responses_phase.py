"""The Responses phase of the day-two replay (docs/day-two.md, "Responses on the replay's
deployment"): the data-plane twin's Responses phase (devtools/dataplane/responses.py) run against
the replay's own serving pods, those the real LWS controller made and the process kubelet runs,
through the replay's endpoint pickers and gateway stand-in, after the day-two scenarios.

What it takes from where:
- the agentic API (Deployment, arguments, variables, security context, replicas) and its
  database's owner and name from the reference stack's rendering (REFERENCE_STACK): the day-two
  stack is of kind local, whose rules refuse `llmd-fleet:responses` (it needs a PostgreSQL
  operator and its backups), so the Responses layer is the one onprem-h100 declares, as the
  data-plane twin runs it (the same replicas started the same way, on the machine's PostgreSQL);
- the upstream: the rendered `--llm-api-base` host resolves to the replay's gateway stand-in in
  the replicas' namespaces, which serves that port with the replay's two pickers;
- the records of what each `/v1/responses` request carried at the simulator: the output-id
  stand-in (devtools/dataplane/mend.py) the process kubelet puts in front of every simulator it
  starts (`ProcessKubelet.mend`), one record file per pod.

The five `responses` lines are the data-plane twin's (`responses.lines`), with the replay's stack
name; the goals are its `responses.checks`.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.agentic_check import env as agentic_env
from devtools.dataplane import netns, phases, responses
from devtools.dataplane import run as dataplane

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# The stack whose Responses layer the phase runs (kind onprem: a CloudNativePG Cluster).
REFERENCE_STACK = "onprem-h100"
# veth indexes of the phase's namespaces: above the canary's (910 on) and below the process
# kubelet's (1000 on); the client at the data-plane twin's client address.
FIRST_VETH = 930
UPSTREAM_PROC = "gateway-upstream"


def phase_spaces(agentic: responses.Rendered) -> list[tuple[str, str]]:
    """The namespaces the phase adds to the replay's pod network: the client's, the database's
    and one per agentic API replica (pure)."""
    return [(dataplane.CLIENT_NS, dataplane.CLIENT_IP), *responses.spaces(agentic)]


def record_files(folder: Path, pods: list[str]) -> list[Path]:
    """The output-id stand-in's record file of each pod (pure; a file is written on a pod's first
    `/v1/responses` request, `responses.load_records` skips the others)."""
    return [folder / f"{pod}.jsonl" for pod in sorted(pods)]


def upstream_figures(upstream: list[dict[str, Any]], host: str, port: int) -> dict[str, Any]:
    """What the gateway stand-in saw of the agentic API's upstream requests: how many, the Host
    headers they carried, the /health and /v1/responses requests among them, and the host the
    rendering names (with its port unless 80), as `responses.checks` reads them (pure)."""
    return {
        "requests": len(upstream),
        "hosts": sorted({str(u.get("host")) for u in upstream}),
        "health": sum(1 for u in upstream if u.get("path") == "/health" and u.get("status") == 200),
        "responses": sum(1 for u in upstream if str(u.get("path", "")).startswith("/v1/responses")),
        "rendered_host": host + ("" if port == 80 else f":{port}"),
    }


def rendered_reference(root: Path, out: Path) -> responses.Rendered:
    """The reference stack rendered into `out`, and its agentic API."""
    subprocess.run(
        [
            str(Path(sys.executable).with_name("llmd-fleet")),
            "--stacks-dir",
            str(root / "stacks"),
            "render",
            REFERENCE_STACK,
            "--out",
            str(out),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    agentic = responses.rendered(out)
    if agentic is None:
        raise ValueError(f"{REFERENCE_STACK} renders no agentic API (llmd-fleet:responses)")
    return agentic


def run_phase(run: "Replay") -> tuple[list[str], list[str]]:
    """The phase on the replay's deployment; its lines and failures."""
    kubelet = run.kubelet
    if kubelet is None or kubelet.mend is None:
        return ["responses: not run: the process kubelet runs no output-id stand-in"], []
    folder = run.run_dir / "responses"
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    agentic = rendered_reference(run.root, run.run_dir / "render-responses")
    binary = agentic_env.ensure()
    # The output-id stand-in in front of every simulator again (the routing phase restarts them
    # without it): the phase reads a turn's history from its records.
    kubelet.restart_engines()
    pickers = run.pickers(run.topo.picker.config, "responses")
    spaces = phase_spaces(agentic)
    attached: list[str] = []
    try:
        for i, (name, ip) in enumerate(spaces):
            netns.attach(name, ip, FIRST_VETH + i)
            attached.append(name)
        # The upstream host names the gateway stand-in in the replicas' namespaces, as the
        # upstream Service over the gateway's proxies does in a cluster.
        netns.write_hosts(
            [responses.replica_ns(i) for i in range(agentic.replicas)],
            {agentic.upstream_host: dataplane.GATEWAY_IP},
        )
        port = agentic.upstream_port
        run.procs.start(
            UPSTREAM_PROC,
            dataplane.gateway_argv(
                run.bins, pickers, run.topo.picker, f"--listen={dataplane.GATEWAY_IP}:{port}"
            ),
            logs,
        )
        pods = list(kubelet.pods.values())
        phase = responses.Phase(
            start=lambda name, argv, env: run.procs.start(name, argv, logs, env, inherit=False),
            stop=run.procs.stop,
            binary=binary,
            version=agentic_env.agentic_version(),
            rendered=agentic,
            model=run.model(),
            client_ns=dataplane.CLIENT_NS,
            run_dir=folder,
            records=record_files(kubelet.mend, [p.name for p in pods]),
            decode_pods={p.name for p in pods if p.pod.role == "decode"},
        )
        try:
            result = responses.run_phase(phase, run.stack)
        finally:
            run.procs.stop(UPSTREAM_PROC)
        result["upstream"] = upstream_figures(
            phases.upstream_requests(logs / f"{UPSTREAM_PROC}.log"), agentic.upstream_host, port
        )
    finally:
        run.procs.stop("agentic-")
        for name in attached:
            netns.detach(name)
    (folder / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    detail = (
        f"day-two: responses: the agentic API as {REFERENCE_STACK} renders it ({agentic.replicas} "
        f"replicas; kind local renders no Responses layer) on the replay's {len(phase.decode_pods)} "
        f"decode pods through its pickers and gateway stand-in"
    )
    return [*responses.lines(result), detail], responses.checks(result)
