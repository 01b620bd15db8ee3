"""Placeholder values: what `llmd-fleet check --for-deploy` refuses besides placeholder secrets.

The example stacks carry stand-ins for what only the deployer knows (an AWS account in an ARN, a
Capacity Block reservation, the operators' network, a Google Cloud project, an object store's
endpoint). They render offline; sent to a cloud or cluster they fail late or, worse, name
something that exists. Each class below is a kind of value that no deployment means, recognised
wherever it appears in a value (a whole value, inside a URL, an ARN, a CIDR list):

- addresses in the ranges reserved for documentation: RFC 5737 (192.0.2.0/24, 198.51.100.0/24,
  203.0.113.0/24), RFC 3849 (2001:db8::/32) and RFC 9637 (3fff::/20), an IPv4-mapped IPv6 address
  of the first three included; a network counts when it lies inside one of them;
- host names under a domain reserved for examples: RFC 2606's `example` top-level domain and
  `example.com`/`.net`/`.org`, `.invalid`, and `example` under any other top-level domain
  (`s3.example.internal`, the examples' own);
- AWS documentation account IDs: 12 digits in equal runs of one digit, each run's digit one above
  the last (111122223333, 123456789012, 444455556666), which includes every all-same-digit
  account (000000000000, the all-zero account of a stand-in registry); any all-zero account or
  subscription (a run of 6 or more zeros alone, the all-zero UUID);
- resource IDs with a documentation hex part (`cr-0123456789abcdef0`, `i-1234567890abcdef0`,
  `cr-0fedcba9876543210`): 8 or more hex digits in ascending or descending order, or 8 alike;
- Google Cloud project placeholders: `my-gcp-project`, `my-project(-id)`, `your-project(-id)`,
  `project-id`, `example-project` (and the same with `_`);
- the word placeholder, change-me, replace-me, or a `<...>` to fill in.

Pure: the standard library only.
"""

import ipaddress
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from llmd_fleet.core.problems import Problem

DOCUMENTATION_NETWORKS: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (ipaddress.ip_network("192.0.2.0/24"), "RFC 5737"),
    (ipaddress.ip_network("198.51.100.0/24"), "RFC 5737"),
    (ipaddress.ip_network("203.0.113.0/24"), "RFC 5737"),
    (ipaddress.ip_network("2001:db8::/32"), "RFC 3849"),
    (ipaddress.ip_network("3fff::/20"), "RFC 9637"),
)

# Candidates only: each is parsed by `ipaddress`, which decides what is an address.
_IPV4 = re.compile(r"(?<![0-9.])\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?(?![0-9])")
_IPV6 = re.compile(r"(?<![0-9A-Za-z:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f.]{0,15}){2,8}(?:/\d{1,3})?")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"(?<![A-Za-z0-9.-]){_LABEL}(?:\.{_LABEL})+\.?(?![A-Za-z0-9-])")
_ACCOUNT = re.compile(r"(?<![0-9A-Za-z])\d{12}(?![0-9A-Za-z])")
_ZEROS = re.compile(r"(?<![0-9A-Za-z])(?:0{6,}|0{8}-0{4}-0{4}-0{4}-0{12})(?![0-9A-Za-z])")
_RESOURCE_ID = re.compile(r"(?<![0-9A-Za-z-])[a-z]+(?:-[a-z]+)*-([0-9a-f]{8,17})(?![0-9A-Za-z])")
_GCP_PROJECT = re.compile(
    r"(?<![a-z0-9_-])(?:(?:my|your|example|sample)[-_](?:gcp[-_]|google[-_]|cloud[-_])?project(?:[-_]id)?"
    r"|project[-_]id|gcp[-_]project)(?![a-z0-9_-])",
    re.IGNORECASE,
)
_MARKER = re.compile(r"placeholder|change[-_]?me|replace[-_]?me|<[^<>]*>", re.IGNORECASE)

# Hex digits in the two orders documentation counts them in (0-f, and 1-9 then 0 then a-f).
_HEX_ORDERS = ("0123456789abcdef", "1234567890abcdef")
_RUN = 8


def _in_order(text: str) -> bool:
    """`text` (hex) holds _RUN or more digits in ascending or descending order (wrapping
    around), or _RUN alike."""
    for order in _HEX_ORDERS:
        cycle = order * 3
        for i in range(len(text) - _RUN + 1):
            run = text[i : i + _RUN]
            if run in cycle or run[::-1] in cycle or len(set(run)) == 1:
                return True
    return False


def is_documentation_account(digits: str) -> bool:
    """A 12-digit AWS account in the documentation's pattern: equal runs of one digit, each run's
    digit one above the last (mod 10): 000000000000, 111122223333, 123456789012."""
    if len(digits) != 12 or not digits.isdigit():
        return False
    for size in (12, 6, 4, 3, 2, 1):
        runs = [digits[i : i + size] for i in range(0, 12, size)]
        if all(len(set(run)) == 1 for run in runs) and all(
            int(b[0]) == (int(a[0]) + 1) % 10 for a, b in itertools.pairwise(runs)
        ):
            return True
    return False


def _documentation_range(text: str) -> str | None:
    """The reserved range `text` (an address or network) lies in, with its RFC, or None."""
    try:
        network = ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return None
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen == 128:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            network = ipaddress.ip_network(mapped)
    for reserved, rfc in DOCUMENTATION_NETWORKS:
        if network.version == reserved.version and network.subnet_of(reserved):  # type: ignore[arg-type]
            return f"{reserved}, reserved for documentation by {rfc}"
    return None


def _example_domain(host: str) -> bool:
    labels = host.lower().rstrip(".").split(".")
    if labels[-1] in ("example", "invalid"):
        return True
    return len(labels) >= 2 and labels[-2] == "example"


def value_placeholders(text: str) -> list[str]:
    """What in one value is a placeholder, each as `<what> (<why>)`; empty when nothing is."""
    found: list[str] = []
    for match in (*_IPV4.finditer(text), *_IPV6.finditer(text)):
        if reserved := _documentation_range(match.group()):
            found.append(f"{match.group()} (in {reserved})")
    for match in _HOST.finditer(text):
        if not _IPV4.fullmatch(match.group()) and _example_domain(match.group()):
            found.append(f"{match.group()} (an example domain, not a real endpoint)")
    for match in _ACCOUNT.finditer(text):
        if is_documentation_account(match.group()):
            kind = "an all-zero" if set(match.group()) == {"0"} else "a documentation"
            found.append(f"{match.group()} ({kind} AWS account ID)")
    for match in _ZEROS.finditer(text):
        if len(match.group()) != 12:  # 12 zeros are the account above
            found.append(f"{match.group()} (an all-zero account ID)")
    for match in _RESOURCE_ID.finditer(text):
        if _in_order(match.group(1)):
            found.append(f"{match.group()} (a documentation resource ID: its digits in sequence)")
    for match in _GCP_PROJECT.finditer(text):
        found.append(f"{match.group()} (a documentation Google Cloud project ID)")
    for match in _MARKER.finditer(text):
        found.append(f"{match.group()} (a stand-in to fill in)")
    return found


def _leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(key path, string) for every string and key in `value`, in document order; lists as
    `[i]`, mappings as `.key`."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield path, str(key)
            yield from _leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    elif isinstance(value, str):
        yield path, value


def _structured(text: str) -> Any:
    """An object or list value as the program reads it (the stack reader hands them over as
    JSON text); any other value as is."""
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def placeholder_value_problems(values: Mapping[str, str], secret_keys: frozenset[str]) -> list[Problem]:
    """One problem per config key (stack file order) whose value holds a placeholder: `values` is
    the stack reader's (full key -> value, objects as JSON text); secret keys are left to the
    placeholder-secret check (their values are ciphertext)."""
    problems: list[Problem] = []
    for key, raw in values.items():
        if key in secret_keys:
            continue
        for path, text in _leaves(_structured(raw), key):
            if found := value_placeholders(text):
                problems.append(
                    Problem(
                        path,
                        f"is a placeholder: {'; '.join(dict.fromkeys(found))}; "
                        "replace it with your own before a deploy",
                    )
                )
    return problems
