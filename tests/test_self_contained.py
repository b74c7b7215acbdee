"""The repository stands on its own: no file cites a document its users do not have.

Every tracked text file (``git ls-files``; the frozen run records under ``results/runs/`` and
this file excepted) must not cite the private spec (``SPEC §N``, ``SPEC.md``, "SPEC section")
or private issue numbers. Notes on the paper are cited in one format,
``docs/paper-notes.md, *Section title*`` (several titles may follow: ``*A*, *B* and *C*``), and
every title so cited must be a heading of ``docs/paper-notes.md``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTES = "docs/paper-notes.md"
SUFFIXES = (".py", ".md", ".toml", ".sh", ".cfg", ".txt")
EXCLUDED = ("results/runs/",)
SELF = "tests/test_self_contained.py"

#: What a user cannot follow: the private spec and private issue numbers. ``\bSPEC\b`` matches
#: the word alone, not names such as ``SPEC_ATTR``.
FORBIDDEN = {
    "the private spec": re.compile(r"\bSPEC\b|SPEC\.md|\.\./shared/SPEC"),
    "a private issue number": re.compile(r"\bissues?\s+#?\d+|\bissues\s+show\b", re.IGNORECASE),
}

#: ``docs/paper-notes.md,`` then one or more ``*Title*``; a line break between them may carry
#: a comment marker (``#``, ``#:``).
_GAP = r"(?:\s|#:?)*"
POINTER = re.compile(re.escape(NOTES) + r"," + _GAP + r"\*([^*\n]+)\*")
MORE = re.compile(r"(?:,|,?" + _GAP + r"and)" + _GAP + r"\*([^*\n]+)\*")
#: Other ways of naming a section, which the test could not check.
OTHER_FORMAT = re.compile(re.escape(NOTES) + r"(?:#|`?`?\s*\(\s*\"|,\s*\")")


def tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    names = [n for n in out.decode().split("\0") if n]
    return [ROOT / n for n in names
            if n.endswith(SUFFIXES) and not n.startswith(EXCLUDED) and n != SELF and (ROOT / n).is_file()]


def headings() -> set[str]:
    text = (ROOT / NOTES).read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


def cited_titles(text: str) -> list[tuple[int, str]]:
    """``(offset, title)`` of every section title cited as ``docs/paper-notes.md, *Title*``."""
    found = []
    for m in POINTER.finditer(text):
        found.append((m.start(1), m.group(1)))
        end = m.end()
        while (more := MORE.match(text, end)) is not None:
            found.append((more.start(1), more.group(1)))
            end = more.end()
    return found


def _where(path: Path, text: str, offset: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}"


def test_no_reference_to_private_documents():
    bad = []
    for path in tracked_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for what, pattern in FORBIDDEN.items():
            bad += [f"{_where(path, text, m.start())}: {what}: {m.group(0)!r}" for m in pattern.finditer(text)]
    assert not bad, "cite docs/paper-notes.md or the paper instead:\n" + "\n".join(bad)


def test_paper_notes_pointers_name_existing_sections():
    titles = headings()
    cited, bad = 0, []
    for path in tracked_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for offset, title in cited_titles(text):
            cited += 1
            if title.strip() not in titles:
                bad.append(f"{_where(path, text, offset)}: no heading {title!r} in {NOTES}")
        bad += [f"{_where(path, text, m.start())}: cite a section as '{NOTES}, *Title*'"
                for m in OTHER_FORMAT.finditer(text)]
    assert cited, f"no pointer into {NOTES} found: the pattern is broken"
    assert not bad, "\n".join(bad)


def test_pointer_pattern():
    text = ("see docs/paper-notes.md, *A b*, *C: d* and *E's f* here; docs/paper-notes.md,\n"
            "#: *G*, and docs/paper-notes.md, *H*, item 2")
    assert [t for _, t in cited_titles(text)] == ["A b", "C: d", "E's f", "G", "H"]
    assert OTHER_FORMAT.search('``docs/paper-notes.md`` ("Loss weights")')
    assert OTHER_FORMAT.search("docs/paper-notes.md#loss-weights")
    assert not OTHER_FORMAT.search("[docs/paper-notes.md](docs/paper-notes.md) says")
    assert FORBIDDEN["the private spec"].search("(SPEC §4)")
    assert not FORBIDDEN["the private spec"].search("SPEC_ATTR = 1")
    assert FORBIDDEN["a private issue number"].search("(Issue 7)")
