"""The agentic API binary check's pure parts (devtools/agentic_check): the help parser, the name
check, the replaced values, the sandbox script and the mount-table reader. `make check-responses`
runs the binary itself."""

import pytest

from devtools.agentic_check import check, postgres, sandbox
from devtools.agentic_check.env import agentic_version
from llmd_fleet.versions import versions

HELP = """Stateful API gateway for vLLM Responses API

Usage: agentic-server [OPTIONS] [COMMAND]

Options:
      --llm-api-base <LLM_API_BASE>
          Base URL for the standalone OpenAI-compatible inference server [env: LLM_API_BASE=]
      --gateway-port <GATEWAY_PORT>
          [env: GATEWAY_PORT=] [default: 9000]
      --llm-ready-timeout-s <LLM_READY_TIMEOUT_S>
          [default: 600]
      --db-url <DB_URL>
          `SQLite` or `PostgreSQL` URL [env: DATABASE_URL] [alias: --database-url]
  -h, --help
          Print help
"""


def test_help_names_reads_options_aliases_and_variables():
    names = check.help_names(HELP)
    assert names.flags == {
        "--llm-api-base",
        "--gateway-port",
        "--llm-ready-timeout-s",
        "--db-url",
        "--database-url",
        "--help",
    }
    assert names.env == {"LLM_API_BASE", "GATEWAY_PORT", "DATABASE_URL"}


def test_name_problems_refuses_unknown_flags_and_variables():
    names = check.help_names(HELP)
    container = {
        "args": ["--llm-api-base", "http://x", "--llm-ready-timeout-s=60", "--ready-timeout", "5"],
        "env": [
            {"name": "DATABASE_URL"},
            {"name": "AGENTIC_API_HOME"},
            {"name": "RUST_LOG"},
            {"name": "LOG_FORMAT"},
        ],
    }
    found = check.name_problems(container, names, b"...AGENTIC_API_HOME...")
    assert found == [
        "argument --ready-timeout is not an option of agentic-server --help",
        "environment variable RUST_LOG does not occur in the binary",
        "environment variable LOG_FORMAT is not one agentic-server --help lists",
    ]


def test_only_the_upstream_and_the_connection_string_are_replaced():
    args = ["--llm-api-base", "http://agentic-api-upstream.llm-d.svc", "--llm-ready-timeout-s", "2700"]
    assert check.upstream_args(args, "http://127.0.0.1:8000") == [
        "--llm-api-base",
        "http://127.0.0.1:8000",
        "--llm-ready-timeout-s",
        "2700",
    ]
    assert check.upstream_args(["--llm-api-base=http://a"], "http://b") == ["--llm-api-base=http://b"]
    container = {
        "env": [
            {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "s", "key": "database-url"}}},
            {"name": "RUST_LOG", "value": "info"},
        ]
    }
    assert check.container_env(container, "postgresql://u:p@h/d") == {
        "DATABASE_URL": "postgresql://u:p@h/d",
        "RUST_LOG": "info",
    }
    with pytest.raises(ValueError, match="POD_IP"):
        check.container_env({"env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {}}}]}, "")


def test_only_emptydir_volumes_are_mounted_writable_at_their_size():
    pod = {"volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "home", "emptyDir": {}}]}
    container = {
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "home", "mountPath": "/var/lib/a"}]
    }
    assert check.container_mounts(pod, container) == [
        sandbox.Mount("/tmp", "1g"),
        sandbox.Mount("/var/lib/a", "64m"),
    ]
    with pytest.raises(ValueError, match="only emptyDir"):
        check.container_mounts(
            {"volumes": [{"name": "c", "configMap": {}}]},
            {"volumeMounts": [{"name": "c", "mountPath": "/c"}]},
        )


def test_the_sandbox_root_is_read_only_and_the_user_is_dropped():
    from pathlib import Path

    text = sandbox.script(
        Path("/cache/bin/agentic-server"), ["--x", "a b"], [sandbox.Mount("/tmp", "1g")], 65532, 65532
    )
    lines = text.splitlines()
    # The emptyDir is mounted before the root is made read-only, and the binary starts last.
    tmpfs = next(i for i, line in enumerate(lines) if "emptydir" in line)
    read_only = lines.index('mount -o remount,ro "$R"')
    assert tmpfs < read_only == len(lines) - 2
    assert "--reuid=65532 --regid=65532 --clear-groups --no-new-privs" in lines[-1]
    assert lines[-1].endswith("/app/agentic-server --x 'a b'")
    # Values reach the process through its environment, never its command line.
    env = sandbox.environment({"DATABASE_URL": "postgresql://u:secret@h/d"})
    assert env["HOME"] == sandbox.ABSENT_HOME and "secret" not in text


def test_writable_mounts_reads_the_mount_table():
    table = (
        "1 0 0:40 / / ro,relatime - tmpfs rootfs ro\n"
        "2 1 0:41 / /usr ro,relatime - ext4 /dev/x rw\n"
        "3 1 0:42 / /tmp rw,relatime - tmpfs emptydir rw\n"
    )
    assert check.writable_mounts(table) == ["/tmp"]


def test_the_wheel_version_is_the_image_tag():
    assert "v" + agentic_version() == versions().image("agentic-api").tag


def test_postgres_admits_tls_password_logins_only():
    lines = postgres.hba_lines("10.244.0.0/24").splitlines()
    assert lines[0] == "local all postgres peer"
    assert lines[1] == "hostssl all all 10.244.0.0/24 scram-sha-256"
    assert lines[-1].endswith("reject")
