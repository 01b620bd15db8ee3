"""The configuration reference is generated from the config models and committed; it must match."""

from devtools import config_reference


def test_the_committed_configuration_reference_matches_the_models():
    assert config_reference.OUTPUT.read_text() == config_reference.render(), (
        "docs/configuration.md is stale: run `make docs`"
    )


def test_every_field_of_every_section_is_documented():
    text = config_reference.render()
    for key in ("target.kind", "fleet.nodeGroups.<name>.hostMemoryGiB", "serving.roles.decode.maxNumSeqs"):
        assert f"| `{key}` |" in text, key
    # Each documented field states its default and its bounds where it has them.
    line = next(row for row in text.splitlines() if row.startswith("| `router.expectedRequestsPerSecond` |"))
    assert "`127`" in line and "<= 400" in line
