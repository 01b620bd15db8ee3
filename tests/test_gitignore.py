"""Every file the README and docs/ have a reader write inside the checkout with a shell redirection
(`pulumi stack output kubeconfig ... > kubeconfig.yaml`) is ignored by git: a kubeconfig holds the
cluster's credentials and must not be committed by `git add -A`."""

import re
import subprocess

from tests.support import REPO

_BLOCK = re.compile(r"```(?:bash|sh|console)\n(.*?)```", re.S)
# A redirection: `>` or `>>` after whitespace (not `->`, `2>&1`, or the end of a `<placeholder>`).
_REDIRECT = re.compile(r"(?<=\s)>>? *([^\s;&|)]+)")


def written_files() -> list[tuple[str, str]]:
    """(page, file) for each relative file a shell block of the docs writes."""
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in _BLOCK.findall(page.read_text(encoding="utf-8")):
            for line in block.splitlines():
                command = line.split(" #", 1)[0]
                for target in _REDIRECT.findall(command):
                    if not target.startswith(("~", "/", "$", '"', "'")):
                        found.append((page.name, target))
    return found


def test_the_docs_write_the_kubeconfig_in_the_checkout() -> None:
    assert ("deploy.md", "kubeconfig.yaml") in written_files()


def test_every_file_the_docs_write_in_the_checkout_is_ignored() -> None:
    files = sorted({name for _, name in written_files()})
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(files),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    ).stdout.split()
    assert sorted(set(files) - set(ignored)) == []
