"""The ``wikifil`` cleaning (cellgraph.data.wikifil): each rule on small pages, and the check
against the paper's authors' text (their ``train20.txt`` of ``matthewkennedy5/RRNN``, branch
``planB``, commit ``e9fe074``: 5,000 lines of 20 characters, joined without separators), of
which only sha256 sums are kept here: of its first 6,000 characters, which the cut of enwik8 in
``tests/fixtures/data`` cleans to (every run checks it), and of its first 100,000, which the
whole enwik8 cleans to (with the data only)."""

import hashlib

import pytest

from cellgraph.data.datadir import resolve_data_dir
from cellgraph.data.text import find_enwik8, load_lm, read_enwik8
from cellgraph.data.wikifil import clean_wikifil
from cellgraph.errors import CellGraphError
from needs_data import FIXTURES, needs_data

#: sha256 of ``"".join(open("train20.txt").read().splitlines())`` (100,000 characters).
AUTHORS_FIRST_100K_SHA256 = "cf4215bfd474fdffa9944796ac527f0e8f0fd3302da25d5e5c211877c1d2ed4a"
#: How many of those characters the fixture's cut of enwik8 cleans to, and their sha256.
FIXTURE_CHARS = 6_000
AUTHORS_FIRST_6000_SHA256 = "55263eaa4b3998d67e5876e1a684adb5dc60086c9c538084a518f4769a60cc2a"
#: The fixture's cut of enwik8 (tests/fixtures/cut_data.py).
ENWIK8_CUT = FIXTURES / "enwik8" / "enwik8"


def page(body: str, title: str = "T") -> str:
    """One MediaWiki page as enwik8 holds it (the body XML-escaped by the caller)."""
    return (f"<page>\n<title>{title}</title>\n<revision>\n<id>1</id>\n"
            f'<text xml:space="preserve">{body}</text>\n</revision>\n</page>\n')


def wikifil(*bodies: str) -> str:
    return clean_wikifil(("<mediawiki>\n" + "".join(map(page, bodies))).encode())


@pytest.mark.parametrize("body, expected", [
    ("Hello, World!", " hello world"),
    ("In 1920s", " in one nine two zero s"),                                  # digits spelled out
    ("caf\u00e9 na\u00efve", " caf na ve"),                                     # a non-ASCII letter: a space
    ("[[political philosophy|Philosophy]] and [[Anarchism]]", " philosophy and anarchism"),
    ("see [http://example.com/a_b Visible text] now", " see visible text now"),
    ("[[Image:Pic 1.jpg|thumb|left|200px|A caption]] after", " a caption after"),
    ("[[x|right]] and [[y|LEFT]] [[z|Thumb]] [[w|20px]]", " x and y z w"),  # image options, anywhere
    ("[[Category:Political ideologies|Anarchism]]", " political ideologies"),
    ("text [[de:Anarchismus]] [[fr:Anarchisme]] end", " text end"),
    ("a {{Infobox x|y=1}} b {| table |} c", " a b c"),
    ("in{{lang|x}}line", " inline"),                                          # a template leaves nothing
    ("word&lt;ref&gt;Cited 1&lt;/ref&gt; next", " word next"),                 # <ref> contents dropped
    ("x &lt;br /&gt; y &lt;!-- note --&gt; z", " x y z"),                     # tags and comments
    ("a&amp;nbsp;b", " a b"),                                                 # an entity: a space
    ("R&amp;D goes; on", " r on"),                       # '&...;' reaches the next ';', as the filter's
    ("no tag here", " no tag here"),
])
def test_rules_on_one_page(body, expected):
    assert wikifil(body) == expected


def test_pages_concatenate_and_redirects_print_nothing():
    assert wikifil("First page.", "#REDIRECT [[First]]", "Second") == " first page second"
    assert wikifil("#redirect [[x]]") == ""


def test_only_text_bodies_and_an_unclosed_last_page():
    xml = ("<mediawiki><siteinfo><sitename>Wikipedia</sitename></siteinfo>\n" + page("Body", "Title")
           + '<page><title>Cut</title><text xml:space="preserve">unclosed last pa')
    assert clean_wikifil(xml.encode()) == " body unclosed last pa"
    assert clean_wikifil(b"<mediawiki><page><title>x</title></page>") == ""


def test_read_enwik8_selects_the_cleaning(tmp_path):
    path = tmp_path / "enwik8"
    path.write_text("<mediawiki>\n" + page("Year 1984; [[a|b]]") + page("#REDIRECT [[x]]"))
    assert read_enwik8(path) == " year one nine eight four b"
    assert read_enwik8(path, "paper") == "year a b redirect x"
    with pytest.raises(CellGraphError, match="unknown wiki cleaning 'text8' \\(known: wikifil, paper\\)"):
        read_enwik8(path, "text8")


@needs_data
def test_first_100k_characters_equal_the_authors_text():
    text = read_enwik8(find_enwik8(resolve_data_dir(None, "wiki")), "wikifil")
    assert len(text) > 3_000_000
    assert hashlib.sha256(text[:100_000].encode("ascii")).hexdigest() == AUTHORS_FIRST_100K_SHA256


def test_the_fixture_cut_cleans_to_the_authors_first_characters():
    """The cleaning of the fixture's cut of enwik8 begins with the authors' first 6,000
    characters: the check of the whole text below, on a checkout without the data."""
    text = read_enwik8(ENWIK8_CUT, "wikifil")
    assert len(text) > FIXTURE_CHARS
    assert hashlib.sha256(text[:FIXTURE_CHARS].encode("ascii")).hexdigest() == AUTHORS_FIRST_6000_SHA256


def test_load_lm_records_the_cleaning():
    data = {c: load_lm(FIXTURES, 50, 10, 10, corpus="wiki", wiki_cleaning=c) for c in ("wikifil", "paper")}
    assert {c: d.info["wiki_cleaning"] for c, d in data.items()} == {"wikifil": "wikifil", "paper": "paper"}
    assert data["wikifil"].info["clean_chars"] != data["paper"].info["clean_chars"]


def test_a_run_loads_its_configured_cleaning(small_data):
    pytest.importorskip("torch")
    from cellgraph.backends.torch.runs.train import load_data
    from cellgraph.experiment.config import TrainConfig

    for cleaning in ("paper", "wikifil"):
        data = load_data(TrainConfig(task="wiki5k", model="gru", wiki_cleaning=cleaning))
        assert data.info["wiki_cleaning"] == cleaning
    assert TrainConfig().wiki_cleaning == "wikifil"


def test_a_recorded_config_without_the_key_reads_as_the_paper_text(tmp_path):
    import json

    from cellgraph.errors import FormatError
    from cellgraph.experiment.config import TrainConfig, load_run_config

    path = tmp_path / "config.json"
    recorded = {k: v for k, v in TrainConfig(task="wiki", model="gru").to_dict().items() if k != "wiki_cleaning"}
    path.write_text(json.dumps(recorded))
    assert load_run_config(path).wiki_cleaning == "paper"
    path.write_text(json.dumps({**recorded, "wiki_cleaning": "wikifil"}))
    assert load_run_config(path).wiki_cleaning == "wikifil"
    path.write_text(json.dumps({**recorded, "wiki_cleaning": "text8"}))
    with pytest.raises(FormatError, match="wiki_cleaning.*must be one of wikifil, paper"):
        load_run_config(path)


def test_records_end_at_every_closing_bracket_and_keep_an_unclosed_tail():
    from cellgraph.data.wikifil import _records
    assert _records(b"a>>b") == [b"a>", b">", b"b"]
    assert _records(b"a>b>") == [b"a>", b"b>"]
    assert _records(b"") == []
