"""The quickstart walk's pure parts (devtools/twin/quickstart.py): the commands read from
docs/quickstart.md (sections, shell blocks, continuations, comments), the step names, the README's
block against the document, the status and `pulumi up` output it reads, the environment of the
commands and the checkout copy (devtools/twin/python_host.py). `make quickstart-twin` runs the walk
itself."""

import subprocess
from pathlib import Path

import pytest

from devtools.twin import python_host, quickstart
from devtools.twin.quickstart import QuickstartError

ROOT = Path(__file__).resolve().parents[2]

DOC = """# Title

## Deploy

Text.

```bash
llmd-fleet plan s1
# a comment line, not a heading
pulumi login "file://$HOME/.state"   # or any backend
pulumi up --stack s1 \\
  --policy-pack policies
```

```python
print("not a command")
```

```bash
llmd-fleet status s1 --kubeconfig k.yaml --watch
```

## One request

```bash
curl -s http://example/
```

## Tear down

```bash
pulumi destroy --stack s1
pulumi stack rm s1                     # once it is empty
```
"""


# --- the document ---------------------------------------------------------------------------------


def test_a_comment_line_in_a_code_block_does_not_end_the_section():
    text = quickstart.section(DOC, "Deploy")
    assert "llmd-fleet status s1" in text
    assert "curl" not in text


def test_a_missing_section_is_refused():
    with pytest.raises(QuickstartError, match="Nowhere"):
        quickstart.section(DOC, "Nowhere")


def test_only_shell_blocks_are_read():
    blocks = quickstart.shell_blocks(quickstart.section(DOC, "Deploy"))
    assert len(blocks) == 2
    assert all("print(" not in block for block in blocks)


def test_continuations_are_joined_and_comment_lines_skipped():
    block = quickstart.shell_blocks(DOC)[0]
    assert quickstart.commands(block) == [
        "llmd-fleet plan s1",
        'pulumi login "file://$HOME/.state"   # or any backend',
        "pulumi up --stack s1 --policy-pack policies",
    ]


def test_a_dangling_continuation_is_refused():
    with pytest.raises(QuickstartError, match="continuation"):
        quickstart.commands("pulumi up \\")


@pytest.mark.parametrize(
    ("command", "bare"),
    [
        ("pulumi stack rm s1     # once it is empty", "pulumi stack rm s1"),
        ('echo "a # b" # c', 'echo "a # b"'),
        ("echo a#b", "echo a#b"),
    ],
)
def test_trailing_comments_outside_quotes_are_dropped(command, bare):
    assert quickstart.without_comment(command) == bare


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ('pulumi config set --secret hfToken "$HF_TOKEN" --stack s1', "pulumi config set --secret hfToken"),
        ('pulumi config set --secret kubeconfig "$(cat k.yaml)"', "pulumi config set --secret kubeconfig"),
        ('pulumi login "file://$HOME/.state"   # or any backend', "pulumi login"),
        (
            "pulumi up --stack s1 --policy-pack policies --policy-pack-config p.json",
            "pulumi up --stack s1 --policy-pack policies",
        ),
        ("pulumi stack rm s1     # once it is empty", "pulumi stack rm s1"),
    ],
)
def test_step_names_stop_at_the_first_value(command, name):
    assert quickstart.step_name(command) == name


def test_walk_commands_split_deploy_status_and_teardown():
    walk = quickstart.walk_commands(DOC)
    assert walk.deploy == [
        "llmd-fleet plan s1",
        'pulumi login "file://$HOME/.state"   # or any backend',
        "pulumi up --stack s1 --policy-pack policies",
    ]
    assert walk.status == "llmd-fleet status s1 --kubeconfig k.yaml --watch"
    assert walk.teardown == [
        "pulumi destroy --stack s1",
        "pulumi stack rm s1                     # once it is empty",
    ]


def test_commands_after_the_status_command_check_the_deploy():
    doc = DOC.replace(
        "llmd-fleet status s1 --kubeconfig k.yaml --watch\n",
        "llmd-fleet status s1 --kubeconfig k.yaml --watch\nllmd-fleet doctor s1 --deployed\n",
    )
    walk = quickstart.walk_commands(doc)
    assert walk.status == "llmd-fleet status s1 --kubeconfig k.yaml --watch"
    assert walk.after == ["llmd-fleet doctor s1 --deployed"]
    assert walk.deploy[-1] == "pulumi up --stack s1 --policy-pack policies"
    assert quickstart.walk_commands(DOC).after == []


def test_the_quickstart_checks_the_cluster_before_and_after_pulumi_up():
    walk = quickstart.walk_commands((ROOT / quickstart.DOC).read_text())
    bare = [quickstart.without_comment(c) for c in walk.deploy]
    doctor = [i for i, c in enumerate(bare) if c.startswith(quickstart.DOCTOR_COMMAND)]
    up = next(i for i, c in enumerate(bare) if c.startswith("pulumi up"))
    assert doctor and doctor[0] < up and "--deployed" not in bare[doctor[0]]
    assert [c for c in walk.after if c.startswith(quickstart.DOCTOR_COMMAND) and "--deployed" in c]


def test_doctor_detail_is_its_summary_and_prints_its_lines(capsys):
    out = "doctor: serving-objects: ok: found x; needs y; fix: z\ndoctor: s1: 19 checks, 0 failed\n"
    assert quickstart.doctor_detail(out) == "doctor: s1: 19 checks, 0 failed"
    assert capsys.readouterr().out.splitlines() == out.strip().splitlines()
    assert quickstart.doctor_summary(out) == "doctor: s1: 19 checks, 0 failed"
    assert capsys.readouterr().out == ""


def test_a_document_without_the_status_command_is_refused():
    with pytest.raises(QuickstartError, match="0 `llmd-fleet status`"):
        quickstart.walk_commands(DOC.replace("llmd-fleet status s1", "echo"))


def test_a_status_command_before_the_deploy_is_refused():
    doc = DOC.replace(
        "```bash\nllmd-fleet plan s1", "```bash\nllmd-fleet status s1 --watch\nllmd-fleet plan s1", 1
    )
    with pytest.raises(QuickstartError):
        quickstart.walk_commands(doc)


# --- the project's own documents ------------------------------------------------------------------


def _readme_block() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    blocks = quickstart.shell_blocks(
        quickstart.section(readme, "First deploy: two H100 nodes you already run")
    )
    assert len(blocks) == 1
    return [quickstart.without_comment(c) for c in quickstart.commands(blocks[0])]


def test_the_quickstart_document_gives_the_walk_its_commands():
    walk = quickstart.walk_commands((ROOT / quickstart.DOC).read_text())
    bare = [quickstart.without_comment(c) for c in walk.deploy]
    assert bare[0].startswith("llmd-fleet plan quickstart-h100")
    assert any(c.startswith("pulumi login") for c in bare)
    assert any(c.startswith("pulumi up ") and "--policy-pack policies" in c for c in bare)
    assert any(c.startswith("pulumi config set --secret hfToken") for c in bare)
    assert "--watch" in walk.status and quickstart.KUBECONFIG_FILE in walk.status
    assert quickstart.without_comment(walk.teardown[0]) == f"pulumi destroy --stack {quickstart.STACK}"


def test_the_readme_block_is_the_documents_commands_in_the_same_order():
    """The README's copy of the commands cannot drift from docs/quickstart.md, which the walk
    runs: each README command is one of the document's, in the document's order."""
    doc = [
        quickstart.without_comment(c)
        for c in quickstart.walk_commands((ROOT / quickstart.DOC).read_text()).deploy
    ]
    positions = []
    for command in _readme_block():
        assert command in doc, f"README command not in docs/quickstart.md's Deploy section: {command}"
        positions.append(doc.index(command))
    assert positions == sorted(positions)


def test_the_readme_stays_under_12_kb():
    assert len((ROOT / "README.md").read_bytes()) < 12 * 1024


# --- what the walk reads back -----------------------------------------------------------------------

STATUS_READY = """[ 0s] prefill 1/1 groups ready, decode 1/1, leader none, pool endpoints 2/2, preflight off
fleet      quickstart in namespace llm-d
groups     prefill 1/1 groups ready (1/1 pods), decode 1/1 groups ready (1/1 pods)
leader     none
status quickstart-h100: serving
"""


def test_every_group_ready_is_read_from_the_groups_line():
    assert quickstart.groups_ready(STATUS_READY) == (
        True,
        "prefill 1/1 groups ready (1/1 pods), decode 1/1 groups ready (1/1 pods)",
    )


@pytest.mark.parametrize(
    "groups",
    [
        "groups     prefill 1/1 groups ready (1/1 pods), decode 0/1 groups ready (0/1 pods)",
        "groups     prefill 0/0 groups ready (0/0 pods)",
        "groups     DisaggregatedSet quickstart absent",
    ],
)
def test_a_group_not_ready_or_absent_is_not_ready(groups):
    assert quickstart.groups_ready(f"fleet      x\n{groups}\n")[0] is False


def test_no_groups_line_is_not_ready():
    assert quickstart.groups_ready("status quickstart-h100: not ready\n") == (False, "")


UP_OUTPUT = """Updating (quickstart-h100):
 +  pulumi:pulumi:Stack llmd-fleet-quickstart-h100 created
Policies:
    ✅ llmd-fleet@v0.1.0 (local: policies)

Resources:
    + 31 created

Duration: 31s
"""


def test_policy_packs_and_resource_changes_are_read_from_the_up_output():
    assert quickstart.policy_packs(UP_OUTPUT) == ["llmd-fleet@v0.1.0 (local: policies)"]
    assert quickstart.resource_changes(UP_OUTPUT) == {"created": 31}
    assert quickstart.up_detail("pulumi up --policy-pack policies", UP_OUTPUT) == (
        "31 created; policy packs: llmd-fleet@v0.1.0 (local: policies) (findings: none)"
    )
    assert quickstart.resource_changes("Resources:\n    - 31 deleted\n") == {"deleted": 31}


UP_WITH_FINDINGS = """Previewing update (quickstart-h100):

Policies:
    ⚠️ llmd-fleet@v0.1.0 (local: policies)
        - [advisory] [severity: high]  router-pdb  (pulumi:pulumi:Stack: llmd-fleet-quickstart-h100)
          can't run policy 'router-pdb' from policy pack 'llmd-fleet@v0.0.1' during preview: string value
        - [advisory] [severity: low]  image-digest  (kubernetes:apps/v1:Deployment: router-deployment)
          Container images are pinned by digest as well as by tag.

Updating (quickstart-h100):

Policies:
    ⚠️ llmd-fleet@v0.1.0 (local: policies)
        - [advisory] [severity: low]  image-digest  (kubernetes:apps/v1:Deployment: router-deployment)
          Deployment llm-d/quickstart-epp: container epp image ghcr.io/x:v1 is pinned by tag only
        - [mandatory] [severity: high]  gpu-budget  (pulumi:pulumi:Stack: llmd-fleet-quickstart-h100)
          too many GPUs (v1.2 (local: x))

Resources:
    + 39 created
"""


def test_findings_are_not_packs_and_are_counted_from_the_update():
    assert quickstart.policy_packs(UP_WITH_FINDINGS) == ["llmd-fleet@v0.1.0 (local: policies)"]
    assert quickstart.policy_findings(UP_WITH_FINDINGS) == {"advisory": 1, "mandatory": 1}
    ran_all = UP_WITH_FINDINGS.replace("can't run policy 'router-pdb'", "router-pdb")
    assert quickstart.up_detail("pulumi up --policy-pack policies", ran_all) == (
        "39 created; policy packs: llmd-fleet@v0.1.0 (local: policies) (findings: 1 advisory, 1 mandatory)"
    )


def test_a_policy_that_could_not_run_in_the_preview_fails_the_up():
    with pytest.raises(quickstart.StepFailed, match="policies did not run: router-pdb"):
        quickstart.up_detail("pulumi up --policy-pack policies", UP_WITH_FINDINGS)


def test_an_up_that_names_a_pack_but_ran_none_fails():
    output = UP_OUTPUT.replace("Policies:\n    ✅ llmd-fleet@v0.1.0 (local: policies)\n", "")
    with pytest.raises(quickstart.StepFailed, match="no policy pack"):
        quickstart.up_detail("pulumi up --stack s --policy-pack policies", output)
    assert (
        quickstart.up_detail("pulumi up --stack s", output)
        == "31 created; policy packs: none (findings: none)"
    )


# --- the environment ---------------------------------------------------------------------------------


def test_the_walk_environment_is_fresh_and_points_nowhere_else(tmp_path):
    base = {
        "PATH": "/usr/bin",
        "KUBECONFIG": "/root/.kube/other",
        "PULUMI_HOME": "/root/.pulumi",
        "PULUMI_BACKEND_URL": "s3://elsewhere",
        "LANG": "C.UTF-8",
    }
    env = quickstart.walk_env(
        base, tmp_path / "home", [tmp_path / "venv" / "bin", tmp_path / "cli"], tmp_path / "venv"
    )
    assert "KUBECONFIG" not in env and "PULUMI_BACKEND_URL" not in env
    assert env["HOME"] == str(tmp_path / "home")
    assert env["PULUMI_HOME"] == str(tmp_path / "home" / ".pulumi")
    assert env["PATH"].split(":") == [str(tmp_path / "venv" / "bin"), str(tmp_path / "cli"), "/usr/bin"]
    assert env["HF_TOKEN"].startswith("hf_") and env["PULUMI_CONFIG_PASSPHRASE"]
    assert env["PULUMI_SKIP_CONFIRMATIONS"] == "true"
    assert env["LANG"] == "C.UTF-8"


def test_the_copy_has_tracked_and_untracked_files_but_not_ignored_ones(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=source, check=True)
    (source / ".gitignore").write_text("build/\n.venv/\n")
    (source / "tracked.txt").write_text("t")
    subprocess.run(["git", "add", "."], cwd=source, check=True)
    (source / "new.txt").write_text("n")
    (source / "build").mkdir()
    (source / "build" / "out.txt").write_text("o")
    (source / ".venv").mkdir()
    target = tmp_path / "copy"
    assert python_host.copy_checkout(source, target) == 3
    assert (target / "tracked.txt").read_text() == "t" and (target / "new.txt").read_text() == "n"
    assert not (target / "build").exists()
    assert not (target / ".venv").exists()  # the copy gets its own, from uv.lock
