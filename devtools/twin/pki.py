"""Certificates and the kubeconfig of the twin, made with the system's openssl.

Everything is local to `build/twin/pki/`: a CA, the API server's serving certificate (loopback
names and the first service IP only), one client certificate in `system:masters` that the
scheduler, controller manager, kwok and the tests share, the service-account signing key, and the
aggregation layer's front proxy: its own CA and the client certificate the API server presents to
an aggregated API server (kube-apiserver `--requestheader-client-ca-file`,
`--proxy-client-cert-file`; Kubernetes "Configure the Aggregation Layer"). Certificates live 30
days; `twin up` makes new ones when they are missing or expire within a day.
"""

import subprocess
from dataclasses import dataclass
from pathlib import Path

# The first address of the service range (the `kubernetes` Service) must be in the serving cert.
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
DAYS = 30
SERVER_SANS = (
    "IP:127.0.0.1",
    f"IP:{KUBERNETES_SERVICE_IP}",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)
ADMIN_SUBJECT = "/O=system:masters/CN=llmd-fleet-twin-admin"
# The front proxy's client certificate; its CN is the only name aggregated API servers accept
# (`--requestheader-allowed-names`).
FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class Pki:
    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def server_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.directory / "front-proxy-ca.crt"

    @property
    def front_proxy_ca_key(self) -> Path:
        return self.directory / "front-proxy-ca.key"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.directory / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.directory / "front-proxy-client.key"

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"

    def files(self) -> list[Path]:
        return [
            self.ca_cert, self.ca_key, self.server_cert, self.server_key,
            self.admin_cert, self.admin_key, self.sa_key, self.sa_pub,
            self.front_proxy_ca_cert, self.front_proxy_ca_key,
            self.front_proxy_client_cert, self.front_proxy_client_key,
        ]  # fmt: skip


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _valid_for_a_day(cert: Path) -> bool:
    done = subprocess.run(
        ["openssl", "x509", "-checkend", "86400", "-noout", "-in", str(cert)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def _signed(
    pki: Pki, key: Path, cert: Path, subject: str, extensions: str, ca: tuple[Path, Path] | None = None
) -> None:
    ca_cert, ca_key = ca or (pki.ca_cert, pki.ca_key)
    csr = cert.with_suffix(".csr")
    ext = cert.with_suffix(".ext")
    ext.write_text(extensions)
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", str(DAYS), "-sha256", "-extfile", str(ext), "-out", str(cert),
    )  # fmt: skip
    csr.unlink()
    ext.unlink()


def _ca(cert: Path, key: Path, subject: str) -> None:
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl(
        "req", "-x509", "-new", "-key", str(key), "-subj", subject,
        "-days", str(DAYS), "-sha256", "-out", str(cert),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip


def serving_cert(pki: Pki, name: str, dns_names: tuple[str, ...]) -> tuple[Path, Path]:
    """A serving certificate signed by the twin's CA for `dns_names` (an aggregated API server's
    Service name, which the API server's proxy verifies), as (cert, key) in the PKI directory;
    made again every call (it lives with one run)."""
    cert, key = pki.directory / f"{name}.crt", pki.directory / f"{name}.key"
    _signed(
        pki, key, cert, f"/CN={name}",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName={','.join(f'DNS:{d}' for d in dns_names)}\n",
    )  # fmt: skip
    return cert, key


def ensure_pki(directory: Path) -> Pki:
    """The twin's certificates, made when missing or about to expire."""
    pki = Pki(directory)
    if all(p.is_file() for p in pki.files()) and all(
        _valid_for_a_day(c)
        for c in (
            pki.ca_cert,
            pki.server_cert,
            pki.admin_cert,
            pki.front_proxy_ca_cert,
            pki.front_proxy_client_cert,
        )
    ):
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    _openssl("genrsa", "-out", str(pki.ca_key), "2048")
    _openssl(
        "req", "-x509", "-new", "-key", str(pki.ca_key), "-subj", "/CN=llmd-fleet-twin-ca",
        "-days", str(DAYS), "-sha256", "-out", str(pki.ca_cert),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _signed(
        pki, pki.server_key, pki.server_cert, "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName={','.join(SERVER_SANS)}\n",
    )  # fmt: skip
    _signed(
        pki, pki.admin_key, pki.admin_cert, ADMIN_SUBJECT,
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n",
    )  # fmt: skip
    _ca(pki.front_proxy_ca_cert, pki.front_proxy_ca_key, "/CN=llmd-fleet-twin-front-proxy-ca")
    _signed(
        pki, pki.front_proxy_client_key, pki.front_proxy_client_cert, f"/CN={FRONT_PROXY_CLIENT}",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n",
        ca=(pki.front_proxy_ca_cert, pki.front_proxy_ca_key),
    )  # fmt: skip
    _openssl("genrsa", "-out", str(pki.sa_key), "2048")
    _openssl("rsa", "-in", str(pki.sa_key), "-pubout", "-out", str(pki.sa_pub))
    return pki


def kubeconfig_text(server: str, pki: Pki, name: str = "llmd-fleet-twin") -> str:
    """A kubeconfig (JSON, which is YAML) for `server` with the admin client certificate."""
    import json

    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}
            ],
            "users": [
                {
                    "name": f"{name}-admin",
                    "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
                }
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
            "current-context": name,
        },
        indent=2,
    )
