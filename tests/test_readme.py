"""The README a new user reads first: small, the status at the top, the two commands and the
quickstart deploy, links that resolve, and no talk of the machines the checks run on."""

import re

from tests.support import REPO

README = REPO / "README.md"
USER_PAGES = ("README.md", "docs/quickstart.md", "docs/deploy.md", "docs/install.md", "docs/verification.md")
# Words about a build machine or its network, which belong in docs/contributing.md.
MACHINE_TALK = re.compile(
    r"module proxy|shared/src|this machine|2-core|beside the checkout|\(no Docker", re.I
)


def test_the_readme_stays_under_12_kb():
    assert len(README.read_bytes()) < 12 * 1024


def test_the_status_box_comes_first_and_says_nothing_ran_on_a_real_cluster():
    lines = README.read_text().splitlines()
    assert lines[0].startswith("# ")
    first_block = next(i for i, line in enumerate(lines) if line.startswith(">"))
    assert first_block <= 3, "the status box is the first thing under the title"
    box = " ".join(line for line in lines[first_block:] if line.startswith(">"))
    for where in ("Offline", "twin", "real cluster"):
        assert where in box, where
    assert "nothing has run yet" in box


def test_the_readme_keeps_the_two_commands_and_the_quickstart_deploy():
    text = README.read_text()
    assert "make setup && make check" in text and "make test" in text
    assert "## First deploy" in text and "pulumi up --stack quickstart-h100" in text


def test_user_pages_do_not_talk_about_the_build_machine():
    for page in USER_PAGES:
        found = MACHINE_TALK.findall((REPO / page).read_text())
        assert not found, (page, found)


def test_readme_and_docs_links_resolve():
    for page in [README, *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or not re.fullmatch(r"[\w./-]+", target):
                continue  # a web address, or a pattern in a table cell
            assert (page.parent / target).exists(), (page.name, target)
