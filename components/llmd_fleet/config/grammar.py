"""One grammar per config string that reaches a command line, a label, a path or a name.

A stack file is input from people and from automation alike; a string it holds may end up in a
container's launch script, in a Kubernetes label, in a hostPath or in a cloud resource name. Each
such field is typed with one of the annotated types below, so a value either matches the grammar
of the place it reaches or is refused with the key path and what is allowed. None of these
grammars admits `$`, quotes, backslashes, whitespace or control characters: nothing a config
accepts can be read by bash or by the kubelet's `$(VAR)` expansion as anything but itself.

Pure: pydantic and the standard library only (the config layer imports it).
"""

import ipaddress
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, GetCoreSchemaHandler
from pydantic_core import core_schema

# Kubernetes (k8s.io/apimachinery pkg/util/validation): a DNS-1123 label names most objects, a
# DNS-1123 subdomain names StorageClasses and prefixes label keys.
DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN = rf"{DNS_LABEL}(\.{DNS_LABEL})*"
DNS_SUBDOMAIN_MAX = 253
# A label's name part and value: alphanumerics at both ends, `-_.` inside, at most 63 characters.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
LABEL_NAME_MAX = 63


def _validator(check: Callable[[str], str | None]) -> AfterValidator:
    """An AfterValidator from a function that returns what is wrong, or None."""

    def validate(value: str) -> str:
        if (problem := check(value)) is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(validate)


def _matches(pattern: str, text: str) -> bool:
    """The whole of `text` matches `pattern` read as ASCII: `\\d` is [0-9], not any Unicode digit,
    and nothing may follow the match (no trailing newline, unlike `$`)."""
    return re.fullmatch(pattern, text, flags=re.ASCII) is not None


@dataclass(frozen=True)
class Pattern:
    """`Annotated[str, Pattern(r"...")]`: the whole string matches the regular expression read as
    ASCII. The one way a config field takes a pattern: pydantic's own `Field(pattern=...)` reads
    `\\d` as any Unicode digit (`1.\u0663\u0664` passes `1\\.\\d+`), and a Python `re.match` with `$`
    lets a trailing newline through. A test refuses any other pattern on a config field."""

    pattern: str

    def __post_init__(self) -> None:
        if self.pattern.startswith("^") or self.pattern.endswith("$"):
            raise ValueError(f"Pattern {self.pattern!r}: no anchors, the whole string must match")
        re.compile(self.pattern, re.ASCII)

    def problem(self, value: str) -> str | None:
        if not _matches(self.pattern, value):
            return f"must match the pattern {self.pattern} (ASCII only, the whole value)"
        return None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        def validate(value: str) -> str:
            if (problem := self.problem(value)) is not None:
                raise ValueError(problem)
            return value

        return core_schema.no_info_after_validator_function(validate, handler(source))


def dns_label_problem(value: str) -> str | None:
    """What is wrong with `value` as a DNS-1123 label (a namespace's or a Service's name), or None."""
    if len(value) > DNS_LABEL_MAX or not _matches(DNS_LABEL, value):
        return (
            "must be a DNS-1123 label: [a-z0-9-], alphanumeric at both ends, at most "
            f"{DNS_LABEL_MAX} characters"
        )
    return None


# Namespaces Kubernetes itself owns: the stack labels a namespace it manages (Pod Security
# `restricted`) and default-denies it, which would break the control plane's add-ons there.
RESERVED_NAMESPACES = frozenset({"default", "kube-node-lease", "kube-public", "kube-system"})


def managed_namespace_problem(value: str) -> str | None:
    """A namespace the stack creates, labels and default-denies: a DNS label, not one Kubernetes
    owns (RESERVED_NAMESPACES, or any kube-* name)."""
    if problem := dns_label_problem(value):
        return problem
    if value in RESERVED_NAMESPACES or value.startswith("kube-"):
        return (
            f"{value!r} is a namespace Kubernetes owns (default, kube-*): the stack would label it "
            "restricted and default-deny it; name a namespace of the fleet's own, e.g. llm-d"
        )
    return None


def dns_subdomain_problem(value: str) -> str | None:
    """What is wrong with `value` as a DNS-1123 subdomain (most object names), or None."""
    if len(value) > DNS_SUBDOMAIN_MAX or not _matches(DNS_SUBDOMAIN, value):
        return (
            "must be a DNS-1123 subdomain: dot-separated [a-z0-9-] labels, alphanumeric at both ends, "
            f"at most {DNS_SUBDOMAIN_MAX} characters"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """Kubernetes label (and annotation) key: `[prefix/]name`."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or dns_subdomain_problem(prefix)):
        return f"label key {key!r}: the prefix before '/' must be a DNS-1123 subdomain"
    if len(name) > LABEL_NAME_MAX or not _matches(_LABEL_NAME, name):
        return (
            f"label key {key!r}: the name must be [A-Za-z0-9-_.], alphanumeric at both ends, at most "
            f"{LABEL_NAME_MAX} characters"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """What is wrong with `value` as a Kubernetes label value (empty allowed), or None."""
    if value and (len(value) > LABEL_NAME_MAX or not _matches(_LABEL_NAME, value)):
        return (
            f"label value {value!r}: must be empty or [A-Za-z0-9-_.], alphanumeric at both ends, at "
            f"most {LABEL_NAME_MAX} characters"
        )
    return None


def _labels_problem(labels: dict[str, str]) -> str | None:
    for key, value in labels.items():
        if problem := label_key_problem(key) or label_value_problem(value):
            return problem
    return None


def git_revision_problem(value: str) -> str | None:
    """A git ref name (branch or tag, `git check-ref-format` rules, narrowed to a safe alphabet)
    or a commit id. Hugging Face's hub takes the same as `revision`."""
    if _matches(r"[0-9a-f]{40}", value):
        return None
    allowed = (
        "must be a branch or tag name ([A-Za-z0-9._/-], no '..', no component starting with '.' "
        "or ending in '.lock', not starting with '-' or '/', at most 255 characters) or a "
        "40-hex commit id"
    )
    if not 1 <= len(value) <= 255 or not _matches(r"[A-Za-z0-9._/-]+", value):
        return allowed
    components = value.split("/")
    if value.startswith("-") or ".." in value or value.endswith(".") or "" in components:
        return allowed
    if any(part.startswith(".") or part.endswith(".lock") for part in components):
        return allowed
    return None


# Hugging Face repository ids (huggingface_hub validate_repo_id): `namespace/name`, each at most
# 96 characters of [A-Za-z0-9_.-], no '--' or '..', not ending in '.git'.
_HF_PART = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}"


def hf_repo_id_problem(value: str) -> str | None:
    """What is wrong with `value` as a Hugging Face repository id (`namespace/name`), or None."""
    if (
        not _matches(rf"{_HF_PART}/{_HF_PART}", value)
        or "--" in value
        or ".." in value
        or value.endswith(".git")
        or value.endswith((".", "-"))
    ):
        return (
            "must be a Hugging Face repository id `namespace/name` (each part [A-Za-z0-9_.-], at most "
            "96 characters, no '--' or '..', not ending in '.git')"
        )
    return None


def served_name_problem(value: str) -> str | None:
    """The model name clients send (OpenAI `model`): one printable word."""
    if not _matches(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}", value):
        return "must be 1-128 characters of [A-Za-z0-9_.:/-], starting with a letter or digit"
    return None


# Header names a stack must not claim for its own meaning: message framing (a proxy that reads
# them differently from the next hop smuggles requests), the hop-by-hop set (RFC 9110 7.6.1, RFC
# 9113 8.2.2: a proxy drops or rewrites them), the authority, credentials and cookies (the
# gateway and the client own them), and what the proxy itself sets.
RESERVED_HEADERS = frozenset(
    {
        "authorization",
        "connection",
        "content-encoding",
        "content-length",
        "cookie",
        "expect",
        "forwarded",
        "host",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "set-cookie",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "via",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-request-id",
    }
)
RESERVED_HEADER_PREFIXES = ("x-envoy-", "x-gateway-")


def http_header_problem(value: str) -> str | None:
    """A request header name as the gateway forwards it: HTTP/2 and Envoy use lowercase names.
    Never one of RESERVED_HEADERS."""
    if len(value) > 64 or not _matches(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", value):
        return (
            "must be a lowercase HTTP header name ([a-z0-9-], alphanumeric at both ends, at most "
            "64 characters)"
        )
    if value in RESERVED_HEADERS or value.startswith(RESERVED_HEADER_PREFIXES):
        reserved = [*sorted(RESERVED_HEADERS), *(p + "*" for p in RESERVED_HEADER_PREFIXES)]
        return (
            f"{value!r} is reserved (framing, hop-by-hop, credentials, cookies or set by the proxy): "
            f"use a header of your own such as x-session-id; reserved: {', '.join(reserved)}"
        )
    return None


def cookie_name_problem(value: str) -> str | None:
    """A cookie name (an RFC 6265 token, narrowed to what a header value can carry unquoted)."""
    if len(value) > 64 or not _matches(r"[A-Za-z0-9][A-Za-z0-9_-]*", value):
        return "must be a cookie name of [A-Za-z0-9_-], starting with a letter or digit, at most 64 long"
    return None


# A pod mounts a host directory only below a data root: an allow-list, since no deny list keeps
# up with what a node keeps outside /etc and /usr (the kubelet's and the runtimes' state under
# /var/lib, /var/lib/rancher and /var/snap/microk8s, CNI binaries under /opt/cni/bin, home
# directories). A data root is a directory below one of HOST_DATA_PARENTS, where data disks are
# mounted (`serving.kvTier.secondary.hostRoot`, default DEFAULT_HOST_DATA_ROOT); a host path is a
# dedicated directory strictly below the configured root.
HOST_DATA_PARENTS = ("/mnt", "/srv", "/data", "/scratch")
DEFAULT_HOST_DATA_ROOT = "/mnt/local"
_HOST_PATH_SHAPE = (
    "must be an absolute, normalised path of [A-Za-z0-9._/-] (no '..', no trailing '/'), at most "
    "255 characters"
)


def _host_path_shape_problem(value: str) -> str | None:
    if len(value) > 255 or not _matches(r"(/[A-Za-z0-9._-]+)+", value):
        return _HOST_PATH_SHAPE
    if posixpath.normpath(value) != value or any(part in (".", "..") for part in value.split("/")):
        return _HOST_PATH_SHAPE
    return None


def _data_parent(value: str) -> str | None:
    return next((p for p in HOST_DATA_PARENTS if value.startswith(p + "/")), None)


def host_data_root_problem(value: str) -> str | None:
    """A data root: a directory below one of HOST_DATA_PARENTS (/mnt/local, /srv/nvme0)."""
    if problem := _host_path_shape_problem(value):
        return problem
    if _data_parent(value) is None:
        return (
            f"must be a directory below {', '.join(HOST_DATA_PARENTS)} (where data disks are mounted; "
            f"default {DEFAULT_HOST_DATA_ROOT}): a pod never mounts the node's system, runtime or home "
            "directories"
        )
    return None


def host_path_problem(value: str) -> str | None:
    """A host directory a pod may mount: a dedicated directory at least one level below a data
    root (so at least three levels below /); that it is below the configured root is a rule of
    the section that takes it."""
    if problem := _host_path_shape_problem(value):
        return problem
    parent = _data_parent(value)
    if parent is None or value.count("/") < 3:
        return (
            f"must be a dedicated directory below a data root under {', '.join(HOST_DATA_PARENTS)} "
            f"(e.g. {DEFAULT_HOST_DATA_ROOT}/kv-cache): a pod never mounts the node's system, runtime "
            "or home directories"
        )
    return None


def ipv4_cidr_problem(value: str) -> str | None:
    """An IPv4 network in CIDR notation with no host bits set (10.244.0.0/16, not 10.244.1.0/16)."""
    shape = "must be an IPv4 network address in CIDR notation, e.g. 10.244.0.0/16 (no host bits set)"
    if not _matches(r"[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}", value):
        return shape
    try:
        ipaddress.IPv4Network(value)
    except ValueError:
        return shape
    return None


def ipv4_address_problem(value: str) -> str | None:
    """A single IPv4 address in dotted-quad notation (no range, no leading zeros)."""
    shape = "must be an IPv4 address in dotted-quad notation, e.g. 10.0.15.250"
    if not _matches(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", value):
        return shape
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return shape
    return None


# PostgreSQL identifiers the stack creates (database and role names): unquoted, so lowercase;
# NAMEDATALEN - 1 = 63 bytes (PostgreSQL "Identifiers and Key Words"). RDS and Cloud SQL take the
# same as master user and database names; `pg_` is reserved for system roles.
POSTGRES_IDENTIFIER_MAX = 63
# PostgreSQL's pg_ roles and built-in databases, CloudNativePG's own roles (pkg/postgres/roles.go),
# the RDS and Cloud SQL administrators' roles.
_POSTGRES_RESERVED_PREFIXES = ("pg_", "cnpg_", "rds", "cloudsql")
_POSTGRES_RESERVED_NAMES = frozenset({"postgres", "template0", "template1", "public", "streaming_replica"})


def postgres_identifier_problem(value: str) -> str | None:
    """What is wrong with `value` as a PostgreSQL identifier the stack may create (none of the
    reserved names or prefixes, `pg_` among them), or None."""
    if len(value) > POSTGRES_IDENTIFIER_MAX or not _matches(r"[a-z][a-z0-9_]*", value):
        return (
            "must be a PostgreSQL identifier: [a-z0-9_], starting with a letter, at most "
            f"{POSTGRES_IDENTIFIER_MAX} characters"
        )
    if value.startswith(_POSTGRES_RESERVED_PREFIXES) or value in _POSTGRES_RESERVED_NAMES:
        return (
            f"{value!r} is reserved by PostgreSQL, CloudNativePG, RDS or Cloud SQL "
            f"({', '.join(p + '*' for p in _POSTGRES_RESERVED_PREFIXES)}, "
            f"{', '.join(sorted(_POSTGRES_RESERVED_NAMES))})"
        )
    return None


PORT_MIN, PORT_MAX = 1, 65535
"""A TCP port a URL or a Service may name: 0 is no port (a NetworkPolicy reads a missing or zero
port as 'any' or the scheme's default), and none is above 65535."""
_URL_HOST = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"


def port_problem(port: int) -> str | None:
    """What is wrong with `port` as a TCP port, or None."""
    if not PORT_MIN <= port <= PORT_MAX:
        return f"the port must be {PORT_MIN}-{PORT_MAX} (got {port})"
    return None


def service_url_problem(value: str) -> str | None:
    """The one grammar of every URL a stack or a command line names (Prometheus, OTLP, object
    store): http(s), a DNS name or IPv4 address, an optional port 1-65535, no path, user or query."""
    if len(value) > 255 or not _matches(rf"https?://{_URL_HOST}(:[0-9]{{1,5}})?", value):
        return (
            "must be an http(s) URL of a host and an optional port 1-65535, no path, user or query, "
            "e.g. http://prometheus-operated.monitoring.svc:9090"
        )
    authority = value.partition("://")[2]
    if ":" in authority:
        return port_problem(int(authority.rpartition(":")[2]))
    return None


def url_port(value: str) -> int:
    """The port of a URL service_url_problem accepts (the scheme's default when none is given)."""
    authority = value.partition("://")[2]
    if ":" in authority:
        return int(authority.rpartition(":")[2])
    return 443 if value.startswith("https:") else 80


def object_store_endpoint_problem(value: str) -> str | None:
    """An S3-compatible endpoint (barman-cloud's endpoint URL): a service URL."""
    return service_url_problem(value)


def registry_problem(value: str) -> str | None:
    """A container registry `host[:port][/path]` (the distribution reference grammar, lowercase):
    dot-separated DNS labels, a port 1-65535, path components of [a-z0-9] joined by `.`, `_`, `__`
    or dashes. No component is `.` or `..` and nothing starts with `-`, so the value can be
    neither a path outside the registry nor a flag."""
    shape = (
        "must be a registry host[:port][/path]: dot-separated [a-z0-9-] labels, alphanumeric at both "
        "ends, an optional port 1-65535, path components of [a-z0-9] joined by '.', '_' or '-' "
        "(e.g. registry.example.internal:5000/llmd), at most 255 characters"
    )
    component = r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*"
    if len(value) > 255 or not _matches(rf"{DNS_SUBDOMAIN}(:[0-9]{{1,5}})?(/{component})*", value):
        return shape
    host = value.partition("/")[0]
    if ":" in host and not 1 <= int(host.rpartition(":")[2]) <= 65535:
        return shape
    return None


def s3_bucket_problem(value: str) -> str | None:
    """An S3 bucket name (general-purpose bucket naming rules): 3-63 characters of [a-z0-9.-],
    alphanumeric at both ends, no '..', not an IP address."""
    if not 3 <= len(value) <= 63 or not _matches(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", value) or ".." in value:
        return "must be an S3 bucket name: 3-63 characters of [a-z0-9.-], alphanumeric at both ends, no '..'"
    if _matches(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", value):
        return "must be an S3 bucket name, not an IP address"
    return None


def cloud_sql_tier_problem(value: str) -> str | None:
    """A Cloud SQL machine tier (`db-perf-optimized-N-4`, `db-custom-4-16384`)."""
    if len(value) > 64 or not _matches(r"db-[a-z0-9]+(-[A-Za-z0-9]+)*", value):
        return "must be a Cloud SQL tier such as db-perf-optimized-N-4 or db-custom-4-16384"
    return None


def rds_instance_class_problem(value: str) -> str | None:
    """An RDS DB instance class (`db.m7g.large`, `db.r7i.2xlarge`)."""
    if len(value) > 64 or not _matches(r"db\.[a-z0-9-]+\.[a-z0-9]+", value):
        return "must be an RDS DB instance class such as db.m7g.large"
    return None


DnsLabel = Annotated[str, _validator(dns_label_problem)]
"""A DNS-1123 label (namespaces, most object names)."""
ManagedNamespace = Annotated[str, _validator(managed_namespace_problem)]
"""A namespace the stack manages (never default or kube-*)."""
DnsSubdomain = Annotated[str, _validator(dns_subdomain_problem)]
"""A DNS-1123 subdomain (StorageClass names)."""
Labels = Annotated[dict[str, str], _validator(_labels_problem)]
"""Kubernetes labels: valid keys and values."""
GitRevision = Annotated[str, _validator(git_revision_problem)]
"""A branch, tag or commit id."""
HfRepoId = Annotated[str, _validator(hf_repo_id_problem)]
"""A Hugging Face repository id."""
ServedModelName = Annotated[str, _validator(served_name_problem)]
"""The model name clients send."""
HttpHeaderName = Annotated[str, _validator(http_header_problem)]
"""A lowercase HTTP header name."""
CookieName = Annotated[str, _validator(cookie_name_problem)]
"""A cookie name."""
HostPath = Annotated[str, _validator(host_path_problem)]
"""A host directory a pod may mount (below a data root)."""
HostDataRoot = Annotated[str, _validator(host_data_root_problem)]
"""The data root host directories are mounted from."""
Ipv4Cidr = Annotated[str, _validator(ipv4_cidr_problem)]
"""An IPv4 network (CIDR)."""
Ipv4Address = Annotated[str, _validator(ipv4_address_problem)]
"""One IPv4 address."""
PostgresIdentifier = Annotated[str, _validator(postgres_identifier_problem)]
"""A PostgreSQL database or role name."""
ServiceUrl = Annotated[str, _validator(service_url_problem)]
"""An http(s) URL of a host and an optional port 1-65535."""
ObjectStoreEndpoint = Annotated[str, _validator(object_store_endpoint_problem)]
"""An S3-compatible object store's endpoint URL."""
S3BucketName = Annotated[str, _validator(s3_bucket_problem)]
"""An S3 bucket name."""
Registry = Annotated[str, _validator(registry_problem)]
"""A container registry host[:port][/path]."""
CloudSqlTier = Annotated[str, _validator(cloud_sql_tier_problem)]
"""A Cloud SQL machine tier."""
RdsInstanceClass = Annotated[str, _validator(rds_instance_class_problem)]
"""An RDS DB instance class."""


def one_of(names: frozenset[str], what: str) -> AfterValidator:
    """A name from a committed list (e.g. vLLM's registered parsers)."""

    def check(value: str) -> str | None:
        if value not in names:
            return f"must be a {what} the pinned vLLM registers: {', '.join(sorted(names))}"
        return None

    return _validator(check)
