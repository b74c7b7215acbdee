"""The repository stands on its own: no file cites a document its users do not have.

Every tracked text file (``git ls-files``; the frozen run records under ``results/runs/`` and
this file excepted) must not cite the private spec (``SPEC §N``, ``SPEC.md``, "SPEC section")
or private issue numbers. A section of the notes on the paper or of the benchmarks (``CITED``)
is cited in one format, ``docs/paper-notes.md, *Section title*`` (the file's name may be a
Markdown link, ``[paper-notes.md](paper-notes.md), *Title*``; several titles may follow:
``*A*, *B* and *C*``), or by a Markdown link's anchor (``](BENCHMARKS.md#on-a-gpu)``), and every
title or anchor so cited must be a heading of that file: a section that moves (BENCHMARKS.md's
runs went to docs/benchmarks-history.md) cannot leave its citations behind.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTES = "docs/paper-notes.md"
#: The documents whose sections are cited by title.
CITED = (NOTES, "BENCHMARKS.md", "docs/benchmarks-history.md")
SUFFIXES = (".py", ".md", ".toml", ".sh", ".cfg", ".txt")
EXCLUDED = ("results/runs/",)
SELF = "tests/test_self_contained.py"

#: What a user cannot follow: the private spec and private issue numbers. ``\bSPEC\b`` matches
#: the word alone, not names such as ``SPEC_ATTR``.
FORBIDDEN = {
    "the private spec": re.compile(r"\bSPEC\b|SPEC\.md|\.\./shared/SPEC"),
    "a private issue number": re.compile(r"\bissues?\s+#?\d+|\bissues\s+show\b", re.IGNORECASE),
}

#: A line break between a file's name and its titles may carry a comment marker (``#``, ``#:``).
_GAP = r"(?:\s|#:?)*"
MORE = re.compile(r"(?:,|,?" + _GAP + r"and)" + _GAP + r"\*([^*\n]+)\*")


def _name(doc: str) -> str:
    """``doc`` as a pattern: from the repository's root, a page of ``docs/`` or one level down
    (``../``), not the end of a longer name."""
    folder = "(?:docs/)?" if doc.startswith("docs/") else ""
    return r"(?:\.\./)?" + folder + re.escape(doc.rsplit("/", 1)[-1])


def _patterns(doc: str) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """``doc``'s ``(pointer, other format, link anchor)`` patterns: ``doc, *Title*`` (the name
    bare or a Markdown link); the ways of naming a section that the test could not check (a
    quoted title, a bare ``doc#anchor``); the anchor of a Markdown link to ``doc``."""
    name, link = _name(doc), r"(?:\]\([^)\s]*\))?"
    pointer = re.compile(r"(?<![\w./-])" + name + link + r"," + _GAP + r"\*([^*\n]+)\*")
    other = re.compile(r"(?<![\w./-])" + name + link + r"(?:`?`?\s*\(\s*\"|,\s*\")"
                       r"|(?<![\w./(-])" + name + "#")
    anchor = re.compile(r"\]\((?:[^)\s#]*/)?" + re.escape(doc.rsplit("/", 1)[-1]) + r"#([^)\s]+)\)")
    return pointer, other, anchor


PATTERNS = {doc: _patterns(doc) for doc in CITED}
POINTER, OTHER_FORMAT, ANCHOR = PATTERNS[NOTES]


def tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    names = [n for n in out.decode().split("\0") if n]
    return [ROOT / n for n in names
            if n.endswith(SUFFIXES) and not n.startswith(EXCLUDED) and n != SELF and (ROOT / n).is_file()]


def headings(doc: str = NOTES) -> set[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


def slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def cited_titles(text: str, pointer: re.Pattern = POINTER) -> list[tuple[int, str]]:
    """``(offset, title)`` of every section title cited as ``docs/paper-notes.md, *Title*`` (or
    as ``pointer`` matches)."""
    found = []
    for m in pointer.finditer(text):
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


@pytest.mark.parametrize("doc", CITED)
def test_section_pointers_name_existing_sections(doc):
    pointer, other, anchor = PATTERNS[doc]
    titles = headings(doc)
    slugs = {slug(title) for title in titles}
    cited, bad = 0, []
    for path in tracked_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for offset, title in cited_titles(text, pointer):
            cited += 1
            if title.strip() not in titles:
                bad.append(f"{_where(path, text, offset)}: no heading {title!r} in {doc}")
        for m in anchor.finditer(text):
            cited += 1
            if m.group(1) not in slugs:
                bad.append(f"{_where(path, text, m.start(1))}: no heading with anchor #{m.group(1)} in {doc}")
        bad += [f"{_where(path, text, m.start())}: cite a section as '{doc}, *Title*'"
                for m in other.finditer(text)]
    assert cited, f"no pointer into {doc} found: the pattern is broken"
    assert not bad, "\n".join(bad)


def test_pointer_pattern():
    text = ("see docs/paper-notes.md, *A b*, *C: d* and *E's f* here; docs/paper-notes.md,\n"
            "#: *G*, and docs/paper-notes.md, *H*, item 2")
    assert [t for _, t in cited_titles(text)] == ["A b", "C: d", "E's f", "G", "H"]
    assert OTHER_FORMAT.search('``docs/paper-notes.md`` ("Loss weights")')
    assert OTHER_FORMAT.search("docs/paper-notes.md#loss-weights")
    assert not OTHER_FORMAT.search("[docs/paper-notes.md](docs/paper-notes.md) says")
    pointer, other, anchor = PATTERNS["docs/benchmarks-history.md"]
    text = ("(docs/benchmarks-history.md, *Run U*), [benchmarks-history.md](benchmarks-history.md), *Run A*;\n"
            "[history](docs/benchmarks-history.md#targets-run-by-run), docs/results-history.md, *R*")
    assert [t for _, t in cited_titles(text, pointer)] == ["Run U", "Run A"]
    assert [m.group(1) for m in anchor.finditer(text)] == ["targets-run-by-run"]
    assert not other.search(text)
    assert PATTERNS["BENCHMARKS.md"][1].search('([BENCHMARKS.md](../BENCHMARKS.md), "On a GPU")')
    assert slug("The sync-free search (commit `23079e0`)") == "the-sync-free-search-commit-23079e0"
    assert slug("2026-11-26, later: a search") == "2026-11-26-later-a-search"
    assert FORBIDDEN["the private spec"].search("(SPEC §4)")
    assert not FORBIDDEN["the private spec"].search("SPEC_ATTR = 1")
    assert FORBIDDEN["a private issue number"].search("(Issue 7)")
