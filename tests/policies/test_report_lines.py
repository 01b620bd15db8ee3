"""`llmd-fleet check` prints each mandatory violation, and the advisories of one policy on one
line with a count (each with --verbose)."""

from llmd_fleet.cli.policy_check import Violation, report_lines


def _v(policy: str, level: str, name: str) -> Violation:
    return Violation(
        policy, level, f"urn::{name}", "kubernetes:apps/v1:Deployment", name, f"{name}: msg", "", ""
    )


VIOLATIONS = (
    _v("image-digest", "advisory", "a"),
    _v("pd-agreement", "mandatory", "m1"),
    _v("image-digest", "advisory", "b"),
    _v("other", "advisory", "c"),
    _v("pd-agreement", "mandatory", "m2"),
    _v("image-digest", "advisory", "d"),
)


def test_advisories_of_one_policy_are_one_line_with_a_count() -> None:
    assert report_lines(VIOLATIONS) == [
        "[advisory]  image-digest  x3  (kubernetes:apps/v1:Deployment: a, and 2 more)  a: msg  "
        "(check --verbose lists each)",
        "[mandatory]  pd-agreement  (kubernetes:apps/v1:Deployment: m1)  m1: msg",
        "[advisory]  other  (kubernetes:apps/v1:Deployment: c)  c: msg",
        "[mandatory]  pd-agreement  (kubernetes:apps/v1:Deployment: m2)  m2: msg",
    ]


def test_verbose_lists_each() -> None:
    assert report_lines(VIOLATIONS, verbose=True) == [v.line() for v in VIOLATIONS]
