"""The data plane's Responses phase, its pure parts (devtools/dataplane/responses.py and the
output-id stand-in mend.py); the phase itself runs in `make dataplane-reference`."""

import json
from pathlib import Path
from typing import Any

import pytest

from devtools.dataplane import mend, phases, responses, run
from tests.support import REPO

GOLDEN = REPO / "tests" / "golden"


def _turn(
    chain: int,
    t: int,
    replica: int,
    history: list[tuple[str, str]],
    ok: bool = True,
    previous_replica: int | None = None,
) -> responses.Turn:
    return responses.Turn(
        chain=chain,
        turn=t,
        phase="main",
        replica=replica,
        stream=False,
        user=f"u{chain}.{t}",
        status=200 if ok else 500,
        response_id=f"resp_{chain}_{t}" if ok else None,
        assistant=f"a{chain}.{t}" if ok else "",
        started=float(t),
        seconds=0.1,
        previous=f"resp_{chain}_{t - 1}" if t else None,
        history=history,
        previous_replica=previous_replica if previous_replica is not None else (1 - replica if t else None),
    )


def _items(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": role, "text": text} for role, text in pairs]


def test_history_is_intact_only_with_every_earlier_user_and_assistant_item():
    turn = _turn(0, 2, 0, [("u0.0", "a0.0"), ("u0.1", "a0.1")])
    full = _items(
        ("system", "s"),
        ("user", "u0.0"),
        ("assistant", "a0.0"),
        ("user", "u0.1"),
        ("assistant", "a0.1"),
        ("user", "u0.2"),
    )
    assert responses.history_intact(turn, full)
    # The simulator's defect: assistant items dropped, user turns only.
    assert not responses.history_intact(turn, _items(("user", "u0.0"), ("user", "u0.1"), ("user", "u0.2")))
    # An assistant answer the client never saw (empty) is not history.
    assert not responses.history_intact(
        _turn(0, 1, 0, [("u0.0", "")]), _items(("user", "u0.0"), ("user", "u0.1"))
    )


def test_figures_count_failures_intact_history_continuations_and_stickiness():
    turns = [
        _turn(0, 0, 0, []),
        _turn(0, 1, 1, [("u0.0", "a0.0")]),
        _turn(0, 2, 0, [("u0.0", "a0.0"), ("u0.1", "a0.1")], ok=False),
    ]
    records = [
        {"pod": "d0", "port": 8000, "input": _items(("user", "u0.0"))},
        {
            "pod": "d0",
            "port": 8000,
            "input": _items(("user", "u0.0"), ("assistant", "a0.0"), ("user", "u0.1")),
        },
        # A prefill pod's copy of the same request is not the decode side.
        {"pod": "p0", "port": 8000, "input": _items(("user", "u0.1"))},
    ]
    figs = responses.figures(turns, records, {"d0"})
    assert figs == {
        "chains": 1,
        "turns": 3,
        "failed": 1,
        "intact": 2,
        "continued_elsewhere": 1,
        "stickiness": 1.0,
    }


def test_the_negative_control_counts_turns_continuing_another_replicas_response():
    turns = [
        _turn(0, 0, 0, []),
        _turn(0, 1, 1, [("u0.0", "a0.0")], ok=False, previous_replica=0),
        # After the failure the chain continues turn 0's response on the replica that stored it.
        _turn(0, 2, 0, [("u0.0", "a0.0")], previous_replica=0),
        _turn(0, 3, 1, [("u0.0", "a0.0"), ("u0.2", "a0.2")], ok=False, previous_replica=0),
    ]
    assert responses.negative_control(turns) == {"cross": 2, "failed": 2}


def _report(**over: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "stack": "onprem-h100-scaled",
        "version": "0.9.0",
        "postgres": 15,
        "main": {
            "chains": 6,
            "turns": 36,
            "failed": 0,
            "intact": 36,
            "continued_elsewhere": 30,
            "stickiness": 0.8,
        },
        "loss": {"requests": 24, "failed": 1, "in_flight": 1, "chains": 6, "continued": 6},
        "database": {"requests": 40, "failed": 6, "seconds": 37.4, "recovered": True},
        "negative": {"cross": 12, "failed": 12},
        "statuses": dict(responses.EXPECTED_STATUS),
        "upstream": {"requests": 90, "hosts": ["h"], "rendered_host": "h", "health": 2, "responses": 80},
        "secret_in": [],
    }
    report.update(over)
    return report


def test_the_five_lines_are_the_issues_lines():
    assert responses.lines(_report()) == [
        "responses: onprem-h100-scaled: agentic-api 0.9.0 on PostgreSQL 15: 6 chains, 36 turns, 0 failed, "
        "history intact in 36 of 36 turns, 30 turns continued on another replica",
        "responses (stickiness): 80% of chain turns on their chain's first decode endpoint",
        "responses (replica loss): 1 failed of 24 requests, 6 of 6 chains continued",
        "responses (database restart): 6 failed of 40 requests in 37 s, recovered without a restart: yes",
        "responses (negative control): one store per replica: 12 of 12 cross-replica turns failed",
    ]
    assert responses.checks(_report()) == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        (
            {
                "main": {
                    "chains": 6,
                    "turns": 36,
                    "failed": 0,
                    "intact": 30,
                    "continued_elsewhere": 30,
                    "stickiness": 1,
                }
            },
            "history intact in 30 of 36",
        ),
        (
            {"loss": {"requests": 24, "failed": 2, "in_flight": 1, "chains": 6, "continued": 6}},
            "more than the 1",
        ),
        (
            {"loss": {"requests": 24, "failed": 0, "in_flight": 0, "chains": 6, "continued": 5}},
            "5 of 6 chains",
        ),
        ({"database": {"requests": 4, "failed": 4, "seconds": 99, "recovered": False}}, "did not recover"),
        ({"negative": {"cross": 12, "failed": 11}}, "11 of 12 cross-replica"),
        ({"negative": {"cross": 0, "failed": 0}}, "0 of 0 cross-replica"),
        ({"statuses": {**responses.EXPECTED_STATUS, "unknown previous_response_id": 400}}, "HTTP 400"),
        (
            {"upstream": {"requests": 1, "hosts": ["x"], "rendered_host": "h", "health": 1, "responses": 1}},
            "hosts",
        ),
        ({"secret_in": ["logs/agentic-0.log"]}, "password appears in logs/agentic-0.log"),
    ],
)
def test_every_goal_can_fail(over: dict[str, Any], expected: str):
    found = responses.checks(_report(**over))
    assert len(found) == 1 and expected in found[0]


def test_the_stream_answer_is_its_completed_event():
    created = {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}}
    done = {"type": "response.completed", "response": {"id": "r1", "status": "completed"}}
    events = (
        f"event: response.created\ndata: {json.dumps(created)}\n\n"
        f"event: response.completed\ndata: {json.dumps(done)}\n\n"
    )
    assert responses.completed(events) == {"id": "r1", "status": "completed"}
    assert responses.completed("data: [DONE]\n") is None


def test_the_phase_reads_the_rendered_agentic_api_of_the_reference_stack():
    found = responses.rendered(GOLDEN / "onprem-h100")
    assert found is not None
    assert found.replicas >= 2 and found.port == 9000
    assert found.upstream_host == "agentic-api-upstream.llm-d.svc" and found.upstream_port == 80
    assert found.body_limit == 10 * 1024 * 1024
    assert (found.user, found.database) == ("agentic_api", "agentic_api")
    assert responses.rendered(GOLDEN / "local-sim") is None
    spaces = responses.spaces(found)
    assert len({ip for _, ip in spaces}) == len(spaces) == found.replicas + 1


def test_mend_gives_output_items_the_id_their_streamed_event_carries():
    answer: dict[str, Any] = {
        "id": "resp_abc",
        "output": [{"type": "message", "role": "assistant", "content": []}],
    }
    assert mend.mend(answer) == 1
    assert answer["output"][0]["id"] == "msg_resp_abc"
    # Items that have one keep it; nothing else changes.
    kept = {"id": "resp_x", "output": [{"type": "message", "id": "msg_1"}], "usage": {"input_tokens": 3}}
    before = json.dumps(kept)
    assert mend.mend(kept) == 0 and json.dumps(kept) == before


def test_mend_reads_input_items_as_role_and_text():
    request = {
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
            {"type": "function_call_output", "output": "x"},
        ]
    }
    assert mend.input_items(request) == [
        {"role": "user", "text": "hi"},
        {"role": "assistant", "text": "hello"},
    ]
    assert mend.input_items({"input": "just text"}) == [{"role": "user", "text": "just text"}]
    assert mend.parse(["8000=28000"]) == [(8000, 28000)]
    with pytest.raises(ValueError, match="LISTEN=TARGET"):
        mend.parse(["8000"])


def test_the_simulator_moves_behind_the_stand_in_by_the_offset():
    assert run.shifted(["--model=m", "--port=8000", "--data-parallel-size=2"], 20000) == [
        "--model=m",
        "--port=28000",
        "--data-parallel-size=2",
    ]


def test_upstream_requests_reads_the_gateway_stand_ins_lines(tmp_path: Path):
    log = tmp_path / "gateway-upstream.log"
    log.write_text('{"id":"serve-1","host":"h","path":"/health","status":200}\nlistening\n')
    assert phases.upstream_requests(log) == [{"id": "serve-1", "host": "h", "path": "/health", "status": 200}]
    assert phases.upstream_requests(tmp_path / "absent.log") == []


def test_docs_state_the_statuses_the_twin_checks():
    # docs/responses.md's table of what an agent sees must say what the run asserts.
    text = (REPO / "docs" / "responses.md").read_text()
    table = text[text.index("## What an agent sees when something is wrong") :]
    table = table[: table.index("\n## ")]
    rows = {
        "unknown previous_response_id": "`previous_response_id` names no stored response",
        "body over the rendered limit": "a request body over the rendered limit",
        "database down": "a stored request while PostgreSQL is unreachable",
        "database down, /ready": "`/ready` while PostgreSQL is unreachable",
        "conversation on PostgreSQL": "`conversation` set, on PostgreSQL",
    }
    assert set(rows) == set(responses.EXPECTED_STATUS)
    for what, row_start in rows.items():
        (row,) = [line for line in table.splitlines() if line.startswith(f"| {row_start}")]
        assert f"| {responses.EXPECTED_STATUS[what]}" in row, row
    assert "PR #166" in text


def test_a_crd_group_not_yet_served_is_waited_for_not_an_error():
    from devtools.twin.kube import ApiError, Kube, Resource

    class Discovery(Kube):
        """The real client with discovery answering as the API server would: `error` raised, or
        the kind served."""

        def __init__(self, error: Exception | None):
            super().__init__("https://127.0.0.1:1", "", "", "")
            self.error = error

        def resource(self, api_version: str, kind: str, refresh: bool = False) -> Resource:
            if self.error:
                raise self.error
            return Resource(api_version, kind.lower() + "s", True)

    assert Discovery(None).served("x/v1", "K") is not None
    assert Discovery(ApiError(404, "404 page not found", "GET /apis/x/v1")).served("x/v1", "K") is None
    assert Discovery(KeyError("K")).served("x/v1", "K") is None
    with pytest.raises(ApiError):
        Discovery(ApiError(403, "forbidden", "GET /apis/x/v1")).served("x/v1", "K")
