"""The policy pack: disruption budgets of the serving roles."""

from tests.policies.helpers import edited, one, violations, without


def _budget(reference, role):
    return one(reference, ":PodDisruptionBudget", f"pdb-{role}")


def test_every_role_has_a_budget_of_one_pod(reference):
    assert violations("serving-role-pdb", reference) == []
    found = violations("serving-role-pdb", without(reference, ":PodDisruptionBudget"))
    assert len(found) == 2
    assert found[0].startswith(
        "DisaggregatedSet llm-d/glm52 role prefill: no PodDisruptionBudget selects its pods"
    )
    assert "groups of 4" in found[0]
    assert found[1].startswith("DisaggregatedSet llm-d/glm52 role decode: no PodDisruptionBudget")
    assert "groups of 8" in found[1]


def test_a_budget_that_lets_two_groups_go_or_none_is_refused(reference):
    decode = _budget(reference, "decode")
    two = edited(reference, decode, lambda i: i["spec"].update(maxUnavailable=2))
    assert violations("serving-role-pdb", two) == [
        "DisaggregatedSet llm-d/glm52 role decode: PodDisruptionBudget llm-d/glm52-decode lets evictions "
        "take down 2 pods at once, each in another group of 8 (one evicted pod restarts its whole "
        "group); set maxUnavailable: 1"
    ]
    # A percentage is counted as the disruption controller counts it: rounded up (10% of 40 is 4).
    percent = edited(reference, decode, lambda i: i["spec"].update(maxUnavailable="10%"))
    assert "take down 4 pods at once" in violations("serving-role-pdb", percent)[0]

    # minAvailable of all but one pod is the same budget as maxUnavailable 1.
    def all_but_one(inputs):
        del inputs["spec"]["maxUnavailable"]
        inputs["spec"]["minAvailable"] = 39

    assert violations("serving-role-pdb", edited(reference, decode, all_but_one)) == []
    zero = edited(reference, decode, lambda i: i["spec"].update(maxUnavailable=0))
    (message,) = violations("serving-role-pdb", zero)
    assert "allows no eviction at all" in message


def test_a_budget_selecting_one_revision_only_or_another_role_does_not_count(reference):
    prefill = _budget(reference, "prefill")

    def revision_only(inputs):
        inputs["spec"]["selector"]["matchLabels"]["disaggregatedset.x-k8s.io/revision"] = "abc12345"

    (message,) = violations("serving-role-pdb", edited(reference, prefill, revision_only))
    assert message.startswith("DisaggregatedSet llm-d/glm52 role prefill: no PodDisruptionBudget")

    def other_role(inputs):
        inputs["spec"]["selector"]["matchLabels"]["disaggregatedset.x-k8s.io/role"] = "decode"

    found = violations("serving-role-pdb", edited(reference, prefill, other_role))
    assert [m.split(":")[0] for m in found] == ["DisaggregatedSet llm-d/glm52 role prefill"]
