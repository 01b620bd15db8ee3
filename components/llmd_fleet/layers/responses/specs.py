"""The Responses layer's ports, selectors and the agentic API's start-up and body-size figures
(pure): the agentic API and, on-prem, CloudNativePG.

Facts about the agentic API below were read from the pinned binary (`agentic-server` 0.9.0 of the
`agentic-api` wheel, the image tag's version; `make check-responses` runs it, docs/responses.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from llmd_fleet.conventions import POSTGRES_PORT as POSTGRES_PORT
from llmd_fleet.layers.gateway.config import MANAGED_IMPLEMENTATIONS
from llmd_fleet.layers.responses.config import ResponsesConfig

if TYPE_CHECKING:
    from llmd_fleet.stack.model import StackConfig

AGENTIC_API_PORT = 9000
"""The agentic API's HTTP port (llm-d guides/agentic-api manifests: containerPort and Service)."""
AGENTIC_API_HOME = "/var/lib/agentic-api"
"""`AGENTIC_API_HOME`: where the agentic API writes `config.toml` at every start (and would keep
its SQLite file without a DATABASE_URL). Unset, it is `$HOME/.agentic-api`, which the read-only
root refuses: the binary exits 1 ("failed to create Agentic API home directory"). An emptyDir is
mounted here."""
UPSTREAM_READY_INTERVAL_SECONDS = 2
"""`--llm-ready-interval-s` default (agentic-server --help): how often it asks the upstream's
/health while it waits."""
STARTUP_MARGIN_SECONDS = 60
"""What the agentic API may take after the upstream answers before it listens: connecting to
PostgreSQL and creating or checking the schema. Two of the connection pool's acquire timeouts,
which end a start against an unreachable database (about 30 s each, measured with 0.9.0:
`PoolTimedOut`)."""
STARTUP_PROBE_PERIOD_SECONDS = 10
DEFAULT_MAX_REQUEST_BODY_BYTES = 10 * 1024 * 1024
"""agentic-server 0.9.0's request-body limit when neither the flag, the variable nor the config
file sets one: 10 MiB. Measured against the binary (the flag's default is not printed by --help):
bodies of up to 10,485,887 bytes are taken, 10,485,888 bytes get 413 `body_too_large`."""
REPLAY_BYTES_PER_TOKEN = 8
"""Assumed bytes of request body per token of a replayed agent history: twice the ~4 characters
of English text per token of OpenAI's tokenizer guidance, for JSON escaping (quotes, newlines,
code) and the item wrappers around each turn. No published figure for GLM's tokenizer."""
CNPG_STATUS_PORT = 8000
"""CloudNativePG's instance manager status endpoint; the operator polls it (CNPG security docs,
"Exposed Ports")."""
CNPG_METRICS_PORT = 9187
CNPG_NAMESPACE = "cnpg-system"
CNPG_CLUSTER_LABEL = "cnpg.io/cluster"
"""Label CloudNativePG puts on every pod of a Cluster."""


def is_managed_gateway(config: StackConfig) -> bool:
    return config.gateway.implementation in MANAGED_IMPLEMENTATIONS


def agentic_api_selector(responses: ResponsesConfig) -> dict[str, str]:
    return {"app.kubernetes.io/component": "agentic-api", "app.kubernetes.io/instance": responses.name}


def database_selector(responses: ResponsesConfig) -> dict[str, str]:
    """Every PostgreSQL pod of the on-prem Cluster (the label CloudNativePG sets)."""
    return {CNPG_CLUSTER_LABEL: f"{responses.name}-postgres"}


def upstream_ready_timeout_seconds(config: StackConfig) -> int:
    """`--llm-ready-timeout-s`: the agentic API does not listen until its upstream's /health
    answers 200, and exits when this passes first (default 600 s). Its upstream is the pool, which
    answers only once an engine loaded the model: a fresh fleet takes `serving.modelLoadMinutes`."""
    return config.serving.model_load_seconds


def startup_probe_failures(config: StackConfig) -> int:
    """The startup probe's failureThreshold (period `STARTUP_PROBE_PERIOD_SECONDS`): longer than
    the upstream wait plus the database start, so the kubelet never kills a replica that is still
    waiting for the engines; the binary's own timeout ends a wait that is not going to succeed."""
    seconds = upstream_ready_timeout_seconds(config) + STARTUP_MARGIN_SECONDS
    return math.ceil(seconds / STARTUP_PROBE_PERIOD_SECONDS)


def replayed_history_bytes(config: StackConfig) -> int:
    """The largest request body the declared workload sends the agentic API: a client that
    resends its whole history (no `previous_response_id`) fills the served window, the smaller of
    the two roles' maxModelLen and the workload's p99 input, at `REPLAY_BYTES_PER_TOKEN`."""
    roles = config.serving.roles
    window = min(roles.prefill.max_model_len, roles.decode.max_model_len)
    tokens = min(window, config.workload.input_tokens_p99 + config.workload.output_tokens)
    return tokens * REPLAY_BYTES_PER_TOKEN


def max_request_body_bytes(config: StackConfig) -> int:
    """`--max-request-body-size-bytes`: the binary's default (10 MiB) unless the declared workload
    needs more, then that need rounded up to whole MiB."""
    mib = 1024 * 1024
    return max(DEFAULT_MAX_REQUEST_BODY_BYTES, math.ceil(replayed_history_bytes(config) / mib) * mib)
