"""README is the front door: short, its test command the one `.ci/run` runs, and every file
it or a page of ``docs/`` links to is in the repository."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: ``[text](target)`` links of Markdown, not web addresses or anchors
LINK = re.compile(r"\]\((?!https?:|#)([^)#\s]+)")
#: code blocks and code spans, whose brackets are not links
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def test_readme_is_short():
    assert README.stat().st_size < 10_000


def test_readme_commands_are_what_ci_runs():
    """The test command of README is the line `.ci/run` runs (with -q pip), the demo's the
    same install with the plot extra only."""
    blocks = re.findall(r"```bash\n(.*?)\n```", README.read_text(encoding="utf-8"), re.S)
    demo, tests = blocks[:2]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.replace("pip install ", "pip install -q ") in ci.splitlines()
    assert demo == "pip install torch==2.13.0 && pip install -e '.[plot]' && cellgraph demo"


def _tracked() -> set[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return {name for name in out.decode().split("\0") if name}


@pytest.mark.parametrize("page", ["README.md", *sorted(p.relative_to(ROOT).as_posix()
                                                         for p in (ROOT / "docs").glob("*.md"))])
def test_every_linked_file_is_in_the_repository(page):
    tracked = _tracked()
    folders = {str(Path(name).parent) for name in tracked}
    source = ROOT / page
    missing = []
    for target in LINK.findall(CODE.sub("", source.read_text(encoding="utf-8"))):
        path = (source.parent / target).resolve().relative_to(ROOT).as_posix()
        if path not in tracked and path not in folders:
            missing.append(target)
    assert not missing, f"{page} links to files that are not in git ls-files: {missing}"
