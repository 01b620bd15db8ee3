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
  stand-in (devtools/dataplane/mend.py) the process kubelet puts in front of every simulator
  for this phase (`ProcessKubelet.mending`), one record file per pod.

Where it runs (run.py): beside the alerts' fault when the faults phase runs (`run_beside`), else
after the routing phase (`run_phase`). Beside the fault the deployment's two pickers are stopped, so
the phase starts two more replicas of the rendered picker Deployment (same arguments, same config)
in namespaces and at addresses of their own (PICKER_HOSTS), as a Deployment's pods come back
elsewhere: they take the leader Lease the stopped ones gave up (alerts.py `LeaseHandoff`) and give
it back when the phase ends, before the fault's pickers start again. The replay's Prometheus
scrapes the rendered pickers' addresses only, so the fault's alerts see no picker meanwhile, and
prefill's autoscaler, which reads the scraped leader's in-flight tokens, sees no load. The
replay puts the output-id stand-in in front of every simulator after the faults phase, before the
scaling (run.py `mend_engines`; every pod started later has it too: `ProcessKubelet.mending`), so
beside the fault no engine is restarted.

The five `responses` lines are the data-plane twin's (`responses.lines`), with the replay's stack
name; the goals are its `responses.checks`.
"""

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.agentic_check import env as agentic_env
from devtools.dataplane import netns, phases, responses, topology
from devtools.dataplane import run as dataplane
from devtools.daytwo import serving
from devtools.daytwo.alerts import LeaseHandoff
from devtools.twin import cluster

if TYPE_CHECKING:
    from devtools.daytwo.run import Replay

# The stack whose Responses layer the phase runs (kind onprem: a CloudNativePG Cluster).
REFERENCE_STACK = "onprem-h100"
# veth indexes of the phase's namespaces: above the canary's (910 on) and below the process
# kubelet's (1000 on); the client at the data-plane twin's client address.
FIRST_VETH = 930
UPSTREAM_PROC = "gateway-upstream"
# Beside the alerts' fault: the phase's own pickers' addresses (below the canary's, 240 on, above
# every other phase's) and veth indexes (after the phase's other namespaces), and their processes'
# name prefix (the fault stops and restarts every `picker-` process).
PICKER_HOSTS = (236, 237)
PICKER_FIRST_VETH = FIRST_VETH + 6
PICKER_PROC = "responses-picker-"
# Longest wait for the fault's pickers to have stopped (alerts.py `LeaseHandoff.released`).
RELEASE_TIMEOUT_S = 60.0


def phase_spaces(agentic: responses.Rendered) -> list[tuple[str, str]]:
    """The namespaces the phase adds to the replay's pod network: the client's, the database's
    and one per agentic API replica (pure)."""
    return [(dataplane.CLIENT_NS, dataplane.CLIENT_IP), *responses.spaces(agentic)]


def picker_spaces(replicas: int) -> list[tuple[str, str]]:
    """The namespaces and addresses of the phase's own pickers beside the fault (pure)."""
    if replicas > len(PICKER_HOSTS):
        raise ValueError(f"{replicas} pickers, {len(PICKER_HOSTS)} addresses for them")
    return [
        (f"picker-responses-{i}", f"{topology.POD_SUBNET}.{host}")
        for i, host in enumerate(PICKER_HOSTS[:replicas])
    ]


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


def rendered_reference(run: "Replay") -> responses.Rendered:
    """The reference stack rendered into the replay's folder (once: `Replay.prepare` renders it
    first), and its agentic API."""
    out = run.run_dir / "render-responses"
    serving.rendered_into(run.root / "stacks", REFERENCE_STACK, out)
    agentic = responses.rendered(out)
    if agentic is None:
        raise ValueError(f"{REFERENCE_STACK} renders no agentic API (llmd-fleet:responses)")
    return agentic


def run_phase(run: "Replay") -> tuple[list[str], list[str]]:
    """The phase on the replay's deployment through its pickers; its lines and failures."""

    @contextlib.contextmanager
    def deployment_pickers() -> Iterator[list[str]]:
        yield run.pickers(run.topo.picker.config, "responses")

    return _run(run, deployment_pickers, "through its pickers and gateway stand-in")


def run_beside(run: "Replay", handoff: LeaseHandoff) -> tuple[list[str], list[str]]:
    """The phase beside the alerts' fault, through pickers of its own holding the lease the
    fault's gave up (the module's docstring); its lines and failures. `handoff.returned` is set
    once they have stopped, whatever happened."""
    try:
        return _run(
            run,
            lambda: own_pickers(run, handoff),
            f"beside the alerts' fault, through {run.topo.picker.replicas} more replicas of its "
            "picker Deployment at addresses of their own and its gateway stand-in",
        )
    finally:
        handoff.returned.set()


@contextlib.contextmanager
def own_pickers(run: "Replay", handoff: LeaseHandoff) -> Iterator[list[str]]:
    """The rendered picker Deployment's replicas in namespaces of their own (`picker_spaces`),
    started once the fault's have stopped, warmed up; stopped again on exit (SIGTERM: the
    lease goes back). Their addresses."""
    if not handoff.released.wait(RELEASE_TIMEOUT_S):
        raise cluster.TwinError(
            f"responses: the fault's pickers had not stopped after {RELEASE_TIMEOUT_S:.0f} s"
        )
    spaces = picker_spaces(run.topo.picker.replicas)
    attached: list[str] = []
    forwarder: netns.Forwarder | None = None
    try:
        for i, (name, ip) in enumerate(spaces):
            netns.attach(name, ip, PICKER_FIRST_VETH + i)
            attached.append(name)
        if run.topo.renderer:
            netns.write_hosts(attached, {run.topo.renderer.host: dataplane.RENDER_IP})
        # The API server, reached as in the deployment's picker namespaces (run.py `Replay.start`).
        forwarder = netns.Forwarder(attached, "127.0.0.1", cluster.load_state(run.root).ports["apiserver"])
        addresses = run.start_pickers(
            run.topo.picker.config, "responses", spaces=spaces, name_prefix=PICKER_PROC
        )
        run.warm(addresses, "responses")
        yield addresses
    finally:
        run.procs.stop(PICKER_PROC, grace=dataplane.PICKER_SWAP_GRACE_S)
        if forwarder is not None:
            forwarder.close()
        for name in attached:
            netns.detach(name)


def _run(
    run: "Replay",
    pickers_for: Callable[[], contextlib.AbstractContextManager[list[str]]],
    through: str,
) -> tuple[list[str], list[str]]:
    """The phase with the pickers `pickers_for` gives; its lines (the last says `through` what)
    and failures."""
    kubelet = run.kubelet
    if kubelet is None or kubelet.mend is None:
        return ["responses: not run: the process kubelet runs no output-id stand-in"], []
    folder = run.run_dir / "responses"
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    agentic = rendered_reference(run)
    binary = agentic_env.ensure()
    # The output-id stand-in in front of every simulator where it is not yet (the replay puts it
    # there before the scaling when this phase runs beside the fault): the phase reads a turn's
    # history from its records.
    if not kubelet.all_mended():
        kubelet.restart_engines()
    spaces = phase_spaces(agentic)
    attached: list[str] = []
    with pickers_for() as pickers:
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
        f"decode pods {through}"
    )
    return [*responses.lines(result), detail], responses.checks(result)
