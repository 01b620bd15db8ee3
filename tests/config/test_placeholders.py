"""`check --for-deploy` refuses placeholder values by class (llmd_fleet/config/placeholders.py):
any address in a documentation range, any documentation or all-zero account, any resource ID with
its digits in sequence, example domains, stand-in projects; each naming its key, exit 2, read
through the stack reader render uses. Real-looking values of each class pass."""

import ipaddress
import json
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llmd_fleet.cli.main import run
from llmd_fleet.config.placeholders import (
    DOCUMENTATION_NETWORKS,
    is_documentation_account,
    placeholder_value_problems,
    value_placeholders,
)
from llmd_fleet.core.problems import PROJECT
from tests.support import STACKS_DIR

_MANY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_V4 = [n for n, _ in DOCUMENTATION_NETWORKS if isinstance(n, ipaddress.IPv4Network)]
_V6 = [n for n, _ in DOCUMENTATION_NETWORKS if isinstance(n, ipaddress.IPv6Network)]


def _in(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> st.SearchStrategy[str]:
    """Any address in `network`, and any network inside it."""
    base = int(network.network_address)
    address = st.integers(0, network.num_addresses - 1).map(
        lambda offset: ipaddress.ip_address(base + offset)
    )
    return st.one_of(
        address.map(str),
        st.tuples(address, st.integers(network.prefixlen, network.max_prefixlen)).map(
            lambda a: str(ipaddress.ip_network(f"{a[0]}/{a[1]}", strict=False))
        ),
    )


_CONTEXTS = st.sampled_from(["{}", "https://{}:9000", "{}/32", "- {}", "allow {}, deny"])


@_MANY
@given(st.sampled_from(_V4).flatmap(_in), _CONTEXTS)
def test_any_ipv4_in_a_documentation_range_is_refused(text: str, context: str) -> None:
    if context == "{}/32" and "/" in text:
        context = "{}"
    assert value_placeholders(context.format(text))


@_MANY
@given(st.sampled_from(_V6).flatmap(_in), st.sampled_from(["{}", "https://[{}]:443", "[{}]"]))
def test_any_ipv6_in_a_documentation_range_is_refused(text: str, context: str) -> None:
    if "/" in text and context != "{}":
        context = "{}"
    assert value_placeholders(context.format(text))


@_MANY
@given(st.integers(0, 255))
def test_an_ipv4_mapped_documentation_address_is_refused(last: int) -> None:
    assert value_placeholders(f"::ffff:192.0.2.{last}")


@_MANY
@given(st.integers(0, 2**32 - 1), st.integers(8, 32))
def test_ipv4_outside_the_documentation_ranges_passes(value: int, prefix: int) -> None:
    network = ipaddress.IPv4Network(f"{ipaddress.IPv4Address(value)}/{prefix}", strict=False)
    assume(not any(network.subnet_of(n) for n in _V4))
    assert value_placeholders(str(network)) == []
    assume(not any(ipaddress.ip_address(value) in n for n in _V4))
    assert value_placeholders(f"https://{ipaddress.ip_address(value)}:9000") == []


@_MANY
@given(st.integers(0, 2**128 - 1))
def test_ipv6_outside_the_documentation_ranges_passes(value: int) -> None:
    address = ipaddress.IPv6Address(value)
    mapped = address.ipv4_mapped
    assume(not any(address in n for n in _V6) and not (mapped and any(mapped in n for n in _V4)))
    assert value_placeholders(str(address)) == []


def test_a_network_that_holds_a_documentation_range_is_real() -> None:
    """0.0.0.0/0 or 203.0.0.0/16 name real addresses besides the reserved ones."""
    assert value_placeholders("0.0.0.0/0") == []
    assert value_placeholders("203.0.0.0/16") == []
    assert value_placeholders("2001::/16") == []


def _runs(size: int, first: int) -> str:
    return "".join(str((first + i) % 10) * size for i in range(12 // size))


@given(
    st.sampled_from([1, 2, 3, 4, 6, 12]), st.integers(0, 9), st.sampled_from(["{}", "arn:aws:iam::{}:role/x"])
)
def test_documentation_accounts_by_pattern(size: int, first: int, context: str) -> None:
    account = _runs(size, first)
    assert is_documentation_account(account)
    assert value_placeholders(context.format(account))


@pytest.mark.parametrize("account", ["111122223333", "123456789012", "444455556666", "000000000000"])
def test_the_accounts_aws_documentation_uses(account: str) -> None:
    assert is_documentation_account(account)


@_MANY
@given(st.integers(0, 10**12 - 1))
def test_other_accounts_pass(number: int) -> None:
    account = f"{number:012d}"
    assume(not is_documentation_account(account))
    assert value_placeholders(f"arn:aws:iam::{account}:role/admins") == []
    assert value_placeholders(f"{account}.dkr.ecr.us-east-2.amazonaws.com/llmd") == []


@given(st.integers(6, 20), st.sampled_from(["{}", "{}.dkr.ecr.us-east-1.amazonaws.com", "user-{}"]))
def test_any_all_zero_account_is_refused(length: int, context: str) -> None:
    assert value_placeholders(context.format("0" * length))


def test_the_all_zero_uuid_is_refused() -> None:
    assert value_placeholders("00000000-0000-0000-0000-000000000000")


_HEX = "0123456789abcdef"


@_MANY
@given(
    st.sampled_from(["cr", "i", "vpc", "subnet", "sg"]),
    st.sampled_from([_HEX, "1234567890abcdef"]),
    st.integers(0, 15),
    st.integers(8, 17),
    st.booleans(),
)
def test_resource_ids_with_digits_in_sequence_are_refused(
    prefix: str, order: str, start: int, length: int, descending: bool
) -> None:
    digits = (order * 3)[start : start + length]
    if descending:
        digits = digits[::-1]
    assert value_placeholders(f"{prefix}-{digits}")


def test_the_reservation_ids_the_examples_use() -> None:
    for rid in ("cr-0123456789abcdef0", "cr-0fedcba9876543210", "i-1234567890abcdef0", "sg-00000000"):
        assert value_placeholders(rid), rid


@_MANY
@given(st.randoms(use_true_random=False))
def test_random_reservation_ids_pass(rng: random.Random) -> None:
    digits = "".join(rng.choice(_HEX) for _ in range(17))
    # A real ID holding 8 digits in sequence is about 1 in 10^7: generated ones that do are skipped.
    assume(all(digits[i : i + 8] not in _HEX * 3 for i in range(10)))
    assume(all(digits[i : i + 8][::-1] not in _HEX * 3 for i in range(10)))
    assume(all(digits[i : i + 8] not in "1234567890abcdef" * 3 for i in range(10)))
    assume(all(digits[i : i + 8][::-1] not in "1234567890abcdef" * 3 for i in range(10)))
    assume(all(len(set(digits[i : i + 8])) > 1 for i in range(10)))
    assert value_placeholders(f"cr-{digits}") == []


@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,8}[a-z0-9]", fullmatch=True),
    st.sampled_from(["example.com", "example.net", "example.org", "example.internal", "example", "invalid"]),
    st.sampled_from(["https://{}:9000", "{}", "{}:5000/llmd", "admin@{}"]),
)
def test_hosts_under_example_domains_are_refused(label: str, domain: str, context: str) -> None:
    assert value_placeholders(context.format(f"{label}.{domain}"))


@pytest.mark.parametrize(
    "value",
    [
        "https://s3.storage.corp:9000",
        "registry.internal:5000/llmd",
        "nvidia.com/gpu.present",
        "zai-org/GLM-5.2-FP8",
        "examples.com",
        "10.64.0.0/16",
        "arn:aws:iam::381492047713:role/llmd-fleet-admins",
        "cr-05f3a9c1d27e4b860",
        "acme-llm-prod",
        "us-central1-a",
        "docker.io/library/busybox:stable",
    ],
)
def test_real_values_pass(value: str) -> None:
    assert value_placeholders(value) == []


@pytest.mark.parametrize(
    "value", ["my-gcp-project", "my-project", "your-project-id", "PROJECT_ID", "projects/my-gcp-project/x"]
)
def test_stand_in_projects_are_refused(value: str) -> None:
    assert value_placeholders(value)


def test_each_problem_names_its_key_in_stack_order() -> None:
    values = {
        f"{PROJECT}:target": json.dumps(
            {"kind": "eks", "eks": {"publicAccessCidrs": ["10.0.0.0/8", "198.51.100.7/32"]}}
        ),
        f"{PROJECT}:images": json.dumps({"registry": "000000000000.dkr.ecr.us-east-1.amazonaws.com"}),
        "gcp:project": "my-gcp-project",
        f"{PROJECT}:hfToken": "offline-render-placeholder",
    }
    problems = placeholder_value_problems(values, frozenset({f"{PROJECT}:hfToken"}))
    assert [p.key for p in problems] == [
        "llmd-fleet:target.eks.publicAccessCidrs[1]",
        "llmd-fleet:images.registry",
        "gcp:project",
    ]
    assert problems[0].message == (
        "is a placeholder: 198.51.100.7/32 (in 198.51.100.0/24, reserved for documentation by RFC 5737); "
        "replace it with your own before a deploy"
    )
    assert "000000000000 (an all-zero AWS account ID)" in problems[1].message


def test_check_for_deploy_names_every_placeholder_of_the_eks_stack(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run(["check", "eks-h100", "--for-deploy", "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" is a placeholder")[0] for line in err] == [
        "error: llmd-fleet:target.eks.publicAccessCidrs[0]",
        "error: llmd-fleet:target.eks.adminPrincipalArns[0]",
        "error: llmd-fleet:target.eks.gpuNodes.h100.capacityBlocks[0].reservationId",
        "error: llmd-fleet:target.eks.gpuNodes.h100.capacityBlocks[1].reservationId",
        "error: llmd-fleet:responsesDbPassword",
    ]
    assert not out.exists()


def test_check_for_deploy_reads_the_stack_like_render(tmp_path, capsys) -> None:
    """A provider's key (not the project's) is read as render reads it, and named as written."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = (STACKS_DIR / "Pulumi.quickstart-h100.yaml").read_text()
    text = text.replace("config:\n", 'config:\n  "gcp:project": my-gcp-project\n', 1)
    (stacks / "Pulumi.quickstart-h100.yaml").write_text(text)
    code = run(
        [
            "--stacks-dir",
            str(stacks),
            "check",
            "quickstart-h100",
            "--for-deploy",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: gcp:project is a placeholder: my-gcp-project (a documentation Google Cloud project ID); "
        "replace it with your own before a deploy"
    ]
