"""The Responses phase of the data plane (docs/responses.md): vLLM's agentic API from the pinned
wheel, as many replicas as the stack renders, each in a network namespace of its own and started
as its container is (devtools/agentic_check/sandbox.py: read-only root, the rendered user, the
rendered arguments and variables), on a real PostgreSQL from the machine's Debian package in a
namespace of its own. Each replica calls its upstream by the rendered host (a hosts entry naming
the gateway stand-in, as the upstream Service does in a cluster), so its requests go through the
gateway stand-in, the real endpoint picker and the routing sidecars to the simulators; the
output-id stand-in (mend.py) sits in front of each simulator and records what every
`/v1/responses` request carried.

Agent sessions are Responses chains (`store: true`, each turn `previous_response_id` of the one
before, some streamed), sent from the client namespace to the replicas' addresses, turn t of chain
c to replica (c + t) mod R: every later turn lands on another replica than the turn before. Then,
under the same traffic, one replica is stopped (and replaced, as its Deployment would), and
PostgreSQL is stopped long enough for the agentic API's own database timeout to show and started
again. Last, the negative control: every replica on its own SQLite file (the binary's default
without DATABASE_URL), where a turn on another replica cannot find the previous response.

The figures are pure functions of the records (`figures`, `lines`, `checks`).
"""

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from devtools.agentic_check import postgres, sandbox
from devtools.agentic_check.check import agentic_deployment, container_env, container_mounts
from devtools.dataplane import netns

DB_NS = "db"
DB_IP = "10.244.0.7"
POD_CIDR = "10.244.0.0/24"
# Replicas' addresses: above the serving pods' (topology.FIRST_POD_HOST onwards).
FIRST_REPLICA_HOST = 200
CHAINS = 6
TURNS = 6
LOSS_TURNS = 4
MAX_OUTPUT_TOKENS = 16
# Words of task context in a chain's first turn (`task_context`): many of the rendered KV blocks,
# so prefix-aware routing has something to match, as an agent's real context gives it.
CONTEXT_WORDS = 1500
THINK_SECONDS = 0.2
# PostgreSQL stays down longer than the agentic API's pool acquire timeout (about 30 s, measured:
# `PoolTimedOut`), so the status an agent gets while the database is down shows.
DATABASE_DOWN_SECONDS = 36
# What an agent gets from agentic-server 0.9.0 (read in this phase; docs/responses.md states the
# same): the run fails when the binary answers otherwise.
EXPECTED_STATUS = {
    "unknown previous_response_id": 404,
    "body over the rendered limit": 413,
    "database down": 500,
    "database down, /ready": 503,
    "conversation on PostgreSQL": 500,
}


def task_context(chain: int, words: int = CONTEXT_WORDS) -> str:
    """A chain's own task context: `words` words, the same for every run, different per chain
    (pure), so chains share no prefix and each chain's turns share its whole context."""
    vocabulary = (
        "module",
        "function",
        "test",
        "config",
        "render",
        "route",
        "cache",
        "replica",
        "database",
        "endpoint",
        "token",
        "session",
        "prefix",
        "stream",
        "schema",
        "deploy",
    )
    return " ".join(
        vocabulary[(chain * 7919 + i * i * 31 + i) % len(vocabulary)] + str(i % 97) for i in range(words)
    )


def replica_ns(i: int) -> str:
    return f"agentic-{i}"


def replica_ip(i: int) -> str:
    return f"10.244.0.{FIRST_REPLICA_HOST + i}"


@dataclass(frozen=True)
class Rendered:
    """What the phase takes from the rendered agentic API."""

    pod: dict[str, Any]
    container: dict[str, Any]
    replicas: int
    port: int
    upstream_host: str
    upstream_port: int
    body_limit: int
    user: str
    database: str


def rendered(render_dir: Path) -> Rendered | None:
    """The rendered agentic API Deployment and its database names (None without `responses`)."""
    manifests = render_dir / "manifests"
    deployment = agentic_deployment(manifests)
    if deployment is None:
        return None
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = list(container.get("args") or [])
    upstream = urlsplit(args[args.index("--llm-api-base") + 1])
    limit = int(args[args.index("--max-request-body-size-bytes") + 1])
    owner, database = None, None
    for path in manifests.rglob("cluster-*.yaml"):
        doc = yaml.safe_load(path.read_text()) or {}
        initdb = doc.get("spec", {}).get("bootstrap", {}).get("initdb") or {}
        if initdb.get("owner"):
            owner, database = initdb["owner"], initdb["database"]
    if owner is None or database is None:
        raise ValueError(
            "the Responses phase reads the database's owner and name from the on-prem CloudNativePG "
            "Cluster, and this rendering has none (a managed database)"
        )
    return Rendered(
        pod=pod,
        container=container,
        replicas=int(deployment["spec"]["replicas"]),
        port=int(container["ports"][0]["containerPort"]),
        upstream_host=str(upstream.hostname),
        upstream_port=upstream.port or 80,
        body_limit=limit,
        user=str(owner),
        database=str(database),
    )


# -- the client --------------------------------------------------------------------------------------


def _text(response: dict[str, Any]) -> str:
    return "".join(
        str(part.get("text", ""))
        for item in response.get("output") or []
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict)
    )


def completed(events: str) -> dict[str, Any] | None:
    """The response of a stream's `response.completed` event (pure)."""
    for line in events.splitlines():
        if line.startswith("data:"):
            try:
                event = json.loads(line[5:].strip())
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "response.completed":
                return event.get("response")
    return None


@dataclass
class Answer:
    status: int
    body: dict[str, Any] | None
    seconds: float
    error: str = ""


def request(ns: str, method: str, url: str, payload: bytes | None, timeout: float = 120) -> Answer:
    """One HTTP request from inside namespace `ns` (the run's prefix added); the JSON answer, or
    the stream's completed response."""

    def send() -> Answer:
        started = time.monotonic()
        req = urllib.request.Request(url, data=payload, method=method)
        if payload is not None:
            req.add_header("content-type", "application/json")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=timeout) as resp:
                raw = resp.read().decode()
                status = int(resp.status)
        except urllib.error.HTTPError as exc:
            raw, status = exc.read().decode(errors="replace"), int(exc.code)
        except OSError as exc:
            return Answer(0, None, time.monotonic() - started, str(exc))
        body: dict[str, Any] | None
        body = json.loads(raw) if raw.lstrip().startswith("{") else completed(raw)
        error = "" if status == 200 else raw[:300]
        return Answer(status, body, time.monotonic() - started, error)

    try:
        return netns._in_namespace(netns.ns_name(ns), send)
    except OSError as exc:
        return Answer(0, None, 0.0, str(exc))


@dataclass
class Turn:
    chain: int
    turn: int
    phase: str
    replica: int
    stream: bool
    user: str
    status: int
    response_id: str | None
    assistant: str
    started: float
    seconds: float
    previous: str | None
    history: list[tuple[str, str]]
    """The (user, assistant) pairs of the chain's earlier answered turns, as the client saw them."""
    previous_replica: int | None = None
    """The replica that answered (and stored) `previous`."""
    error: str = ""


@dataclass
class Client:
    """Agent sessions as Responses chains, from the client namespace to the replicas."""

    ns: str
    model: str
    port: int
    live: list[int]
    turns: list[Turn] = field(default_factory=list)
    in_flight: dict[int, set[tuple[int, int]]] = field(default_factory=dict)
    previous: dict[int, str | None] = field(default_factory=dict)
    previous_replica: dict[int, int] = field(default_factory=dict)
    history: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def turn(self, chain: int, t: int, phase: str, replica: int | None = None) -> Turn:
        with self.lock:
            live = list(self.live)
            target = replica if replica is not None else live[(chain + t) % len(live)]
            previous = self.previous.get(chain)
            previous_replica = self.previous_replica.get(chain)
            history = list(self.history.get(chain, []))
            self.in_flight.setdefault(target, set()).add((chain, t))
        stream = (chain + t) % 2 == 1
        user = f"chain {chain} turn {t} ({phase}): continue the task and report"
        if t == 0:
            # An agent's first turn carries its task's context (instructions, files): a prefix of
            # many KV blocks that every later turn of the chain repeats.
            user = f"{task_context(chain)}\n{user}"
        body: dict[str, Any] = {
            "model": self.model,
            "input": user,
            "store": True,
            "stream": stream,
            "max_output_tokens": MAX_OUTPUT_TOKENS,
        }
        if previous:
            body["previous_response_id"] = previous
        started = time.time()
        answer = request(
            self.ns,
            "POST",
            f"http://{replica_ip(target)}:{self.port}/v1/responses",
            json.dumps(body).encode(),
        )
        response = answer.body or {}
        ok = answer.status == 200 and bool(response.get("id")) and response.get("status") != "failed"
        record = Turn(
            chain,
            t,
            phase,
            target,
            stream,
            user,
            answer.status,
            response.get("id") if ok else None,
            _text(response) if ok else "",
            started,
            answer.seconds,
            previous,
            history,
            previous_replica,
            answer.error,
        )
        with self.lock:
            self.in_flight[target].discard((chain, t))
            if ok:
                self.previous[chain] = record.response_id
                self.previous_replica[chain] = target
                self.history.setdefault(chain, []).append((user, record.assistant))
            self.turns.append(record)
        return record

    def drive(self, chains: int, phase: str, first_turn: int, until: Callable[[int], bool]) -> None:
        """Every chain sends turns one after the other (a think time between) until `until(n)`
        says so, n the number of turns it sent in this phase; chains run side by side."""

        def run(chain: int) -> None:
            n = 0
            while not until(n):
                self.turn(chain, first_turn + n, phase)
                n += 1
                time.sleep(THINK_SECONDS)

        threads = [threading.Thread(target=run, args=(c,)) for c in range(chains)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


# -- the figures (pure) ------------------------------------------------------------------------------


def load_records(files: list[Path]) -> list[dict[str, Any]]:
    out = []
    for path in files:
        if path.exists():
            out += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return out


def upstream_of(turn: Turn, records: list[dict[str, Any]], decode_pods: set[str]) -> list[dict[str, Any]]:
    """The requests a decode simulator received for this turn (its user text last)."""
    return [
        r
        for r in records
        if r["pod"] in decode_pods and r["input"] and r["input"][-1] == {"role": "user", "text": turn.user}
    ]


def history_intact(turn: Turn, received: list[dict[str, str]]) -> bool:
    """The upstream request carried every earlier turn's user and assistant items, in order, and
    this turn's user item last (pure)."""
    expected = [
        item
        for user, answer in turn.history
        for item in ({"role": "user", "text": user}, {"role": "assistant", "text": answer})
    ]
    expected.append({"role": "user", "text": turn.user})
    position = 0
    for item in received:
        if position < len(expected) and item == expected[position]:
            position += 1
    return position == len(expected) and all(answer for _, answer in turn.history)


def cross_replica(turn: Turn) -> bool:
    """The turn continues a response another replica answered and stored (pure)."""
    return (
        turn.previous is not None
        and turn.previous_replica is not None
        and turn.replica != turn.previous_replica
    )


def negative_control(turns: list[Turn]) -> dict[str, int]:
    """Cross-replica turns and how many of them failed (pure)."""
    cross = [t for t in turns if cross_replica(t)]
    return {"cross": len(cross), "failed": sum(1 for t in cross if not t.response_id)}


def figures(turns: list[Turn], records: list[dict[str, Any]], decode_pods: set[str]) -> dict[str, Any]:
    """The first line's figures and the stickiness of the chains in `turns` (one phase)."""
    answered = [t for t in turns if t.response_id]
    intact = 0
    endpoint: dict[tuple[int, int], str] = {}
    for t in answered:
        received = upstream_of(t, records, decode_pods)
        if any(history_intact(t, r["input"]) for r in received):
            intact += 1
        if received:
            endpoint[(t.chain, t.turn)] = f"{received[-1]['pod']}:{received[-1]['port']}"
    by_chain: dict[int, list[Turn]] = {}
    for t in sorted(turns, key=lambda t: (t.chain, t.turn)):
        by_chain.setdefault(t.chain, []).append(t)
    continued = sum(1 for t in answered if cross_replica(t))
    on_first = later = 0
    for chain_turns in by_chain.values():
        first = endpoint.get((chain_turns[0].chain, chain_turns[0].turn))
        for t in chain_turns[1:]:
            if (t.chain, t.turn) in endpoint and first is not None:
                later += 1
                on_first += endpoint[(t.chain, t.turn)] == first
    return {
        "chains": len(by_chain),
        "turns": len(turns),
        "failed": len(turns) - len(answered),
        "intact": intact,
        "continued_elsewhere": continued,
        "stickiness": on_first / later if later else None,
    }


def lines(r: dict[str, Any]) -> list[str]:
    """The five lines (pure)."""
    m, loss, db, neg = r["main"], r["loss"], r["database"], r["negative"]
    stick = "n/a" if m["stickiness"] is None else f"{100 * m['stickiness']:.0f}"
    return [
        f"responses: {r['stack']}: agentic-api {r['version']} on PostgreSQL {r['postgres']}: "
        f"{m['chains']} chains, {m['turns']} turns, {m['failed']} failed, history intact in {m['intact']} of "
        f"{m['turns']} turns, {m['continued_elsewhere']} turns continued on another replica",
        f"responses (stickiness): {stick}% of chain turns on their chain's first decode endpoint",
        f"responses (replica loss): {loss['failed']} failed of {loss['requests']} requests, "
        f"{loss['continued']} of {loss['chains']} chains continued",
        f"responses (database restart): {db['failed']} failed of {db['requests']} requests in "
        f"{db['seconds']:.0f} s, recovered without a restart: {'yes' if db['recovered'] else 'no'}",
        f"responses (negative control): one store per replica: {neg['failed']} of {neg['cross']} "
        "cross-replica turns failed",
    ]


def checks(r: dict[str, Any]) -> list[str]:
    """The goals (empty: pass)."""
    m, loss, db, neg = r["main"], r["loss"], r["database"], r["negative"]
    out = []
    if m["failed"]:
        out.append(f"responses: {m['failed']} chain turns failed")
    if m["intact"] != m["turns"]:
        out.append(f"responses: history intact in {m['intact']} of {m['turns']} turns only")
    if m["continued_elsewhere"] == 0:
        out.append("responses: no turn continued on another replica")
    if loss["failed"] > loss["in_flight"]:
        out.append(
            f"responses (replica loss): {loss['failed']} failed, more than the {loss['in_flight']} "
            "in flight on the stopped replica"
        )
    if loss["continued"] != loss["chains"]:
        out.append(f"responses (replica loss): {loss['continued']} of {loss['chains']} chains continued")
    if not db["recovered"]:
        out.append("responses (database restart): the agentic API did not recover by itself")
    if neg["cross"] == 0 or neg["failed"] != neg["cross"]:
        out.append(
            f"responses (negative control): {neg['failed']} of {neg['cross']} cross-replica turns failed; "
            "every one must"
        )
    for what, status in r["statuses"].items():
        if status != EXPECTED_STATUS[what]:
            out.append(f"responses: {what}: HTTP {status}, docs/responses.md states {EXPECTED_STATUS[what]}")
    up = r.get("upstream")
    if up is not None:
        if up["hosts"] != [up["rendered_host"]]:
            out.append(
                f"responses: upstream requests carried hosts {up['hosts']}, rendered {up['rendered_host']}"
            )
        if not up["health"] or not up["responses"]:
            out.append("responses: no /health or /v1/responses request reached the pool through the gateway")
    if r.get("secret_in"):
        out.append(f"responses: the database password appears in {', '.join(r['secret_in'])}")
    return out


# -- the phase ---------------------------------------------------------------------------------------


@dataclass
class Phase:
    """What the phase needs from the run (devtools/dataplane/phases.py `responses_phase`)."""

    start: Callable[[str, list[str], dict[str, str]], Any]
    """Start a named process (argv, environment exactly as given); returns its Popen."""
    stop: Callable[[str], None]
    """Stop the processes whose names start with this."""
    binary: Path
    version: str
    rendered: Rendered
    model: str
    client_ns: str
    run_dir: Path
    records: list[Path]
    decode_pods: set[str]


def spaces(r: Rendered) -> list[tuple[str, str]]:
    """The namespaces the phase adds to the run's pod network."""
    return [(DB_NS, DB_IP)] + [(replica_ns(i), replica_ip(i)) for i in range(r.replicas)]


def start_replica(p: Phase, i: int, env: dict[str, str]) -> Any:
    container = p.rendered.container
    context = {**(p.rendered.pod.get("securityContext") or {}), **(container.get("securityContext") or {})}
    uid = int(context["runAsUser"])
    gid = int(context.get("runAsGroup", uid))
    text = sandbox.script(
        p.binary, list(container.get("args") or []), container_mounts(p.rendered.pod, container), uid, gid
    )
    return p.start(f"agentic-{i}", sandbox.argv(netns.ns_name(replica_ns(i)), text), sandbox.environment(env))


def healthy(p: Phase, i: int, path: str = "/health") -> int:
    return request(
        p.client_ns, "GET", f"http://{replica_ip(i)}:{p.rendered.port}{path}", None, timeout=5
    ).status


def wait_healthy(p: Phase, replicas: list[int], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    pending = set(replicas)
    while pending and time.monotonic() < deadline:
        pending = {i for i in pending if healthy(p, i) != 200}
        time.sleep(0.5)
    if pending:
        raise TimeoutError(
            f"agentic API replica(s) {sorted(pending)} not answering /health after {seconds:.0f} s"
        )


def statuses(p: Phase, client: Client) -> dict[str, int]:
    """The agentic API's own status for what an agent may do wrong, while the database is up."""
    url = f"http://{replica_ip(0)}:{p.rendered.port}/v1/responses"
    unknown = {"model": p.model, "input": "hello", "store": True, "previous_response_id": "resp_unknown0000"}
    pad = "x" * (p.rendered.body_limit + 1)
    big = {"model": p.model, "input": pad, "store": True}
    out = {
        "unknown previous_response_id": request(
            p.client_ns, "POST", url, json.dumps(unknown).encode()
        ).status,
        "body over the rendered limit": request(p.client_ns, "POST", url, json.dumps(big).encode()).status,
    }
    created = request(
        p.client_ns, "POST", f"http://{replica_ip(0)}:{p.rendered.port}/v1/conversations", b"{}"
    )
    conversation = (created.body or {}).get("id")
    if conversation:
        body = {"model": p.model, "input": "hello", "store": True, "conversation": conversation}
        out["conversation on PostgreSQL"] = request(
            p.client_ns, "POST", url, json.dumps(body).encode()
        ).status
    else:
        out["conversation on PostgreSQL"] = created.status
    return out


def secret_files(folder: Path, secret: str) -> list[str]:
    """Files under `folder` that hold `secret` (the database password)."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            try:
                if secret.encode() in path.read_bytes():
                    found.append(str(path.relative_to(folder)))
            except OSError:
                continue
    return found


def run_phase(p: Phase, stack: str) -> dict[str, Any]:
    r = p.rendered
    bindir = postgres.ensure_installed()
    folder = Path(f"/tmp/llmd-dataplane-postgres-{os.getpid()}")
    pg = postgres.Postgres(
        folder,
        DB_IP,
        5432,
        r.user,
        r.database,
        prefix=netns.exec_prefix(DB_NS),
        client_cidr=POD_CIDR,
        bindir=bindir,
    )
    result: dict[str, Any] = {"stack": stack, "version": p.version, "postgres": pg.major}
    try:
        pg.init()
        base_env = container_env(r.container, pg.url())
        replicas = list(range(r.replicas))
        handles = {i: start_replica(p, i, base_env) for i in replicas}
        # It listens only once its upstream's /health answered through the gateway stand-in and the
        # picker, and its schema is ready.
        wait_healthy(p, replicas, 120)
        client = Client(p.client_ns, p.model, r.port, list(replicas))
        result["statuses"] = statuses(p, client)

        # Chains, turns alternating between the replicas.
        client.drive(CHAINS, "main", 0, lambda n: n >= TURNS)
        records = load_records(p.records)
        main_turns = [t for t in client.turns if t.phase == "main"]
        result["main"] = figures(main_turns, records, p.decode_pods)

        # One replica stopped under the same traffic (its requests in flight fail); the client sends
        # to the others from then on, as the Service does once the endpoint is gone.
        lost = replicas[-1]
        loss: dict[str, Any] = {}

        def stop_one() -> None:
            time.sleep(THINK_SECONDS * 3)
            with client.lock:
                loss["in_flight"] = len(client.in_flight.get(lost, set()))
                client.live.remove(lost)
                loss["at"] = time.time()
            p.stop(f"agentic-{lost}")

        stopper = threading.Thread(target=stop_one)
        stopper.start()
        client.drive(CHAINS, "loss", TURNS, lambda n: n >= LOSS_TURNS)
        stopper.join()
        loss_turns = [t for t in client.turns if t.phase == "loss"]
        after = [t for t in loss_turns if t.started >= loss["at"] and t.response_id]
        result["loss"] = {
            "requests": len(loss_turns),
            "failed": sum(1 for t in loss_turns if not t.response_id),
            "in_flight": loss["in_flight"],
            "chains": CHAINS,
            "continued": len({t.chain for t in after}),
        }
        # Its Deployment replaces it.
        handles[lost] = start_replica(p, lost, base_env)
        wait_healthy(p, [lost], 120)
        with client.lock:
            client.live.append(lost)

        # PostgreSQL stopped under the same traffic, then started again.
        db: dict[str, Any] = {}
        done = threading.Event()

        def restart_database() -> None:
            time.sleep(1.0)
            db["stopped"] = time.time()
            pg.stop()
            time.sleep(DATABASE_DOWN_SECONDS / 2)
            db["ready_down"] = healthy(p, 0, "/ready")
            time.sleep(DATABASE_DOWN_SECONDS / 2)
            pg.start()
            db["started"] = time.time()
            # Recovered: a stored turn answered on every replica after the start.
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                with client.lock:
                    answered = {
                        t.replica
                        for t in client.turns
                        if t.phase == "database" and t.response_id and t.started >= db["started"]
                    }
                if answered >= set(replicas):
                    break
                time.sleep(0.5)
            db["every_replica"] = answered >= set(replicas)
            done.set()

        restarter = threading.Thread(target=restart_database)
        restarter.start()
        client.drive(CHAINS, "database", TURNS + LOSS_TURNS, lambda n: done.is_set())
        restarter.join()
        db_turns = [t for t in client.turns if t.phase == "database"]
        failed = [t for t in db_turns if not t.response_id]
        # Recovered when a stored turn sent after the stop is answered again.
        firsts = [t.started + t.seconds for t in db_turns if t.response_id and t.started >= db["stopped"]]
        recovered_at = min(firsts) if firsts else None
        ready_after = [healthy(p, i, "/ready") for i in replicas]
        # Recovered without a restart: the same processes answer (none exited meanwhile).
        alive = {i: handles[i].poll() is None for i in replicas}
        result["database"] = {
            "requests": len(db_turns),
            "failed": len(failed),
            "seconds": (recovered_at or time.time()) - db["stopped"],
            "recovered": recovered_at is not None
            and db["every_replica"]
            and all(s == 200 for s in ready_after)
            and all(alive.values()),
            "failed_statuses": sorted({t.status for t in failed}),
        }
        # A streamed turn may have had its 200 before the database failed it (the stream then ends
        # without `response.completed`): the status an agent gets is read from the others.
        codes = [t.status for t in failed if t.status and not t.stream]
        result["statuses"]["database down"] = max(set(codes), key=codes.count) if codes else 0
        result["statuses"]["database down, /ready"] = db["ready_down"]

        # Negative control: each replica on its own SQLite file (no DATABASE_URL: the binary's
        # default, agentic_api.db in its home).
        p.stop("agentic-")
        sqlite_env = {k: v for k, v in base_env.items() if k != "DATABASE_URL"}
        for i in replicas:
            start_replica(p, i, sqlite_env)
        wait_healthy(p, replicas, 120)
        negative = Client(p.client_ns, p.model, r.port, list(replicas))
        negative.drive(CHAINS, "negative", 0, lambda n: n >= 3)
        result["negative"] = negative_control(negative.turns)
        p.stop("agentic-")
        (p.run_dir / "responses-turns.jsonl").write_text(
            "".join(json.dumps(vars(t)) + "\n" for t in client.turns + negative.turns)
        )
    finally:
        p.stop("agentic-")
        pg.stop()
    result["secret_in"] = secret_files(p.run_dir, pg.password) + [
        f"postgres/{f}" for f in secret_files(folder, pg.password) if f.endswith(".log")
    ]
    # The server's folder (data, certificate, log) goes with the run; its log is copied first.
    server_log = folder / "server.log"
    if server_log.exists():
        shutil.copyfile(server_log, p.run_dir / "logs" / "postgres.log")
    shutil.rmtree(folder, ignore_errors=True)
    return result
