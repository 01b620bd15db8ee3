"""A throwaway PostgreSQL from the machine's Debian package, the way the checks and the data-plane
twin run one: its own data directory, TLS on (the rendered connection string requires it), a
password login for the owner role the stack renders, and nothing else.

Debian installs the server under /usr/lib/postgresql/<major>/bin (package `postgresql`, which
also creates the `postgres` system user the server runs as: it refuses to run as root). A machine
without it gets it from the run's setup (`ensure_installed`, apt-get). The password is random per
run and never printed; the connection string is built by the stack's own `database_url`.
"""

import os
import pwd
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmd_fleet.layers.responses.component import database_url

DEBIAN_ROOT = Path("/usr/lib/postgresql")
PACKAGE = "postgresql"
SYSTEM_USER = "postgres"


class PostgresError(Exception):
    """PostgreSQL is not installed or could not start."""


def server_bindir(root: Path = DEBIAN_ROOT) -> Path:
    """The newest installed major's bin directory (it holds initdb, postgres and pg_ctl)."""
    majors = sorted(
        (int(p.name), p / "bin")
        for p in root.glob("*")
        if p.name.isdigit() and (p / "bin" / "postgres").exists()
    )
    if not majors:
        raise PostgresError(f"no PostgreSQL server under {root} (Debian package `{PACKAGE}`)")
    return majors[-1][1]


def ensure_installed() -> Path:
    """The server's bin directory, installing Debian's package first when there is none."""
    try:
        return server_bindir()
    except PostgresError:
        pass
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", PACKAGE]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
            raise PostgresError(f"{' '.join(command)} failed (exit {done.returncode}):\n{tail}")
    return server_bindir()


def major_version(bindir: Path) -> int:
    """`postgres --version` (`postgres (PostgreSQL) 15.18 (Debian ...)`): its major."""
    out = subprocess.run(
        [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"\(PostgreSQL\) (\d+)", out)
    if not found:
        raise PostgresError(f"cannot read a version from {out.strip()!r}")
    return int(found.group(1))


def _as_postgres() -> list[str]:
    return ["setpriv", f"--reuid={SYSTEM_USER}", f"--regid={SYSTEM_USER}", "--init-groups", "--"]


def hba_lines(client_cidr: str) -> str:
    """Sockets for the superuser (the setup), TLS with a SCRAM password for everyone else."""
    return (
        "local all postgres peer\n"
        f"hostssl all all {client_cidr} scram-sha-256\n"
        "host all all 0.0.0.0/0 reject\n"
    )


@dataclass
class Postgres:
    """One server: `folder` holds its data, socket and certificate; it listens on host:port (inside
    the network namespace `prefix` enters, if any)."""

    folder: Path
    host: str
    port: int
    user: str
    database: str
    prefix: Sequence[str] = ()
    client_cidr: str = "0.0.0.0/0"
    bindir: Path = field(default_factory=server_bindir)
    password: str = field(default_factory=lambda: secrets.token_hex(24), repr=False)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def socket_dir(self) -> Path:
        return self.folder / "run"

    @property
    def major(self) -> int:
        return major_version(self.bindir)

    def url(self) -> str:
        """The connection string as the stack renders it (libpq URI, `sslmode=require`)."""
        return database_url(self.user, self.password, self.host, self.port, self.database)

    def _run(self, argv: list[str], input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, *_as_postgres(), *argv], input=input, capture_output=True, text=True, check=False
        )

    def init(self) -> None:
        """initdb, a self-signed certificate, the server settings, then the owner role and its
        database (empty: the agentic API creates its own schema, as in the cluster)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self.socket_dir.mkdir(parents=True)
        account = pwd.getpwnam(SYSTEM_USER)
        for path in (self.folder, self.socket_dir):
            os.chown(path, account.pw_uid, account.pw_gid)
        self.folder.chmod(0o700)
        done = self._run(
            [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth-local=peer"]
        )
        if done.returncode != 0:
            raise PostgresError(f"initdb failed: {done.stderr.strip()}")
        key, cert = self.data / "server.key", self.data / "server.crt"
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=postgres",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            capture_output=True,
            check=True,
        )
        for path in (key, cert):
            os.chown(path, account.pw_uid, account.pw_gid)
        key.chmod(0o600)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '{self.host}'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.socket_dir}'\nssl = on\n"
                "password_encryption = 'scram-sha-256'\nfsync = off\n"
            )
        (self.data / "pg_hba.conf").write_text(hba_lines(self.client_cidr))
        self.start()
        # The password goes in on standard input, never on a command line.
        sql = (
            f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}';\n"
            f"CREATE DATABASE {self.database} OWNER {self.user};\n"
        )
        done = self._run(
            [
                str(self.bindir.parent / "bin" / "psql"),
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                "postgres",
            ],
            input=sql,
        )
        if done.returncode != 0:
            raise PostgresError(f"creating the owner role and database failed (exit {done.returncode})")

    def start(self) -> None:
        log = self.folder / "server.log"
        done = self._run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w", "-t", "60", "start"]
        )
        if done.returncode != 0:
            tail = "\n".join(log.read_text().splitlines()[-5:]) if log.exists() else done.stderr
            raise PostgresError(f"PostgreSQL did not start: {tail}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop, stay down `down_seconds`, start again."""
        self.stop()
        time.sleep(down_seconds)
        self.start()
