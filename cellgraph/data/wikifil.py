"""The ``wikifil`` cleaning of enwik8: the rules of Matt Mahoney's ``wikifil.pl``, the filter
that made ``text8`` (http://mattmahoney.net/dc/textdata.html), written here from its published
rules. The paper's authors cleaned enwik8 with it, so the paper's Wiki numbers (Sec. 5.1,
Table 1) were made on this text.

The filter reads the raw XML as bytes, in records that each end at a ``>``. A record holding
``<text `` switches the output on; one holding ``#redirect`` (any case) switches it off, so
redirect pages print nothing; a record holding ``</text>`` is the last one printed. Each printed
record goes through these rules, in order:

1. the first ``<...>`` on one line is dropped (the XML tag that ends the record);
2. ``&amp; &lt; &gt;`` are unescaped, in that order;
3. ``<ref...>...</ref>`` (with no ``<`` inside) and then every ``<...>`` tag are dropped;
4. ``[http:URL`` becomes ``[`` (a link's visible words stay); image options ``|thumb``,
   ``|left``, ``|right``, ``|NNNpx`` and the ``[[image:NAME|`` prefix are dropped (the caption
   stays); ``[[category:NAME...]]`` becomes ``[[NAME]]``; language links
   ``[[xx:...]]`` are dropped; a link target ``[[TARGET|`` is dropped (the link text stays);
5. templates ``{{...}}`` and then tables ``{...}`` (no ``}`` inside) are dropped, then every
   ``[`` and ``]``; entities ``&...;`` become a space;
6. the record, padded with a space on each side, is lower-cased (ASCII), each digit is spelled
   out as a word between spaces (``0`` -> `` zero ``, ..., ``9`` -> `` nine ``), every run of
   bytes other than ``a-z`` becomes one space, and the last character (a space) is dropped.

The printed records are concatenated as they are: the text starts with a space and has no
double spaces. Nothing is dropped at the end of a truncated file (an unclosed last page prints
as far as it goes), as the filter does. Matching is on bytes, so case folding and ``\\d`` are
ASCII only and a multi-byte UTF-8 character becomes one space.
"""

from __future__ import annotations

import re

__all__ = ["clean_wikifil"]

_TEXT_START = b"<text "
_TEXT_END = b"</text>"
_REDIRECT = re.compile(rb"#redirect", re.I)
_FIRST_TAG = re.compile(rb"<.*>")  # no DOTALL: within one line, as the filter's '.'

#: Rules 2-5 of the module docstring: (pattern, replacement), applied in order to every match.
_RULES: tuple[tuple[re.Pattern[bytes], bytes], ...] = tuple(
    (re.compile(pattern, flags), replacement)
    for pattern, replacement, flags in (
        (rb"&amp;", b"&", 0),
        (rb"&lt;", b"<", 0),
        (rb"&gt;", b">", 0),
        (rb"<ref[^<]*</ref>", b"", 0),
        (rb"<[^>]*>", b"", 0),
        (rb"\[http:[^\] ]*", b"[", 0),
        (rb"\|thumb", b"", re.I),
        (rb"\|left", b"", re.I),
        (rb"\|right", b"", re.I),
        (rb"\|\d+px", b"", re.I),
        (rb"\[\[image:[^\[\]]*\|", b"", re.I),
        (rb"\[\[category:([^|\]]*)[^\]]*\]\]", rb"[[\1]]", re.I),
        (rb"\[\[[a-z\-]*:[^\]]*\]\]", b"", 0),
        (rb"\[\[[^|\]]*\|", b"[[", 0),
        (rb"\{\{[^}]*\}\}", b"", 0),
        (rb"\{[^}]*\}", b"", 0),
        (rb"\[", b"", 0),
        (rb"\]", b"", 0),
        (rb"&[^;]*;", b" ", 0),
    )
)
_DIGITS = re.compile(rb"[0-9]")
_DIGIT_WORDS = tuple(f" {w} ".encode() for w in
                     ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"))
_NOT_LETTERS = re.compile(rb"[^a-z]+")


def _records(raw: bytes) -> list[bytes]:
    """``raw`` cut after every ``>`` (the filter's input records; a last one without ``>`` too)."""
    parts = raw.split(b">")
    records = [part + b">" for part in parts[:-1]]
    return records + [parts[-1]] if parts[-1] else records


def clean_record(record: bytes) -> bytes:
    """One printed record through rules 1-6 of the module docstring (``a-z`` and single spaces,
    starting with a space unless empty)."""
    record = _FIRST_TAG.sub(b"", record, count=1)
    for pattern, replacement in _RULES:
        record = pattern.sub(replacement, record)
    record = _DIGITS.sub(lambda m: _DIGIT_WORDS[m.group()[0] - 48], b" " + record.lower() + b" ")
    return _NOT_LETTERS.sub(b" ", record)[:-1]


def clean_wikifil(raw: bytes) -> str:
    """The ``wikifil`` text of raw MediaWiki XML bytes (module docstring): ``a-z`` and space."""
    out: list[bytes] = []
    printing = False
    for record in _records(raw):
        if _TEXT_START in record:
            printing = True
        if _REDIRECT.search(record):
            printing = False
        if printing:
            printing = _TEXT_END not in record
            out.append(clean_record(record))
    return b"".join(out).decode("ascii")
