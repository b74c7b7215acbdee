"""The docs state a preset's settings as the preset holds them: a changed value cannot leave a
doc behind.

A doc marks where it states settings of presets (README.md, RESULTS.md, ``docs/*.md``)::

    <!-- preset settings: recipe-rrnn, recipe-rrnn-gru; ... -->
    ...
    <!-- /preset settings -->

Inside, a table ``| setting | `PRESET` | ... |`` lists every setting each of its presets sets
(``—`` where the preset does not set it), and every code span ``key=value`` or
``key = value`` (``a = b = value``; ``key`` a :class:`TrainConfig` field) names a value of
each preset of the place that sets ``key``. A value is read as ``--set key=value`` reads it:
given over the preset, it must leave :func:`resolve_config`'s config unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cellgraph.experiment.config import TrainConfig, resolve_config
from cellgraph.experiment.presets import PRESETS, RECIPES

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "RESULTS.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
PLACE = re.compile(r"<!-- preset settings: ([^;>]+?)\s*(?:;[^>]*)?-->(.*?)<!-- /preset settings -->", re.S)
#: a code span ``key = value`` or ``a = b = value``: names, then a value without spaces or a quoted one
SPAN = re.compile(r'`((?:\w+\s*=\s*)+)("[^"`]*"|[^\s`"=]+)`')
UNSET = "—"


def places() -> list[tuple[str, list[str], str]]:
    """``(page, presets, text)`` of every marked place."""
    found = []
    for page in PAGES:
        for m in PLACE.finditer((ROOT / page).read_text(encoding="utf-8")):
            found.append((page, [name.strip() for name in m.group(1).split(",")], m.group(2)))
    return found


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """``(presets, rows)`` of every ``| setting | `PRESET` | ... |`` table, code marks stripped."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        cells = _cells(line)
        if cells and cells[0] == "setting":
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row))
            found.append((cells[1:], rows))
    return found


def spans(text: str) -> list[tuple[list[str], str]]:
    """``(keys, value)`` of every code span that sets :class:`TrainConfig` fields."""
    found = []
    for m in SPAN.finditer(text):
        keys = [key.strip() for key in m.group(1).split("=") if key.strip()]
        if all(key in TrainConfig.__dataclass_fields__ for key in keys):
            found.append((keys, m.group(2).strip('"')))
    return found


def _cells(line: str) -> list[str]:
    return [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []


def _differs(preset: str, key: str, value: str) -> bool:
    """Whether ``--set key=value`` over ``preset`` changes its config."""
    return resolve_config(preset, overrides={key: value}) != resolve_config(preset)


PLACES = places()


def test_every_recipe_has_a_place_with_its_table():
    tabled = {preset for _, _, text in PLACES for presets, _ in tables(text) for preset in presets}
    assert {f"recipe-{model}" for model in RECIPES} <= tabled


@pytest.mark.parametrize("page, presets, text", PLACES, ids=[f"{page}:{','.join(p)}" for page, p, _ in PLACES])
def test_docs_state_preset_settings_as_the_presets_hold_them(page, presets, text):
    unknown = [name for name in presets if name not in PRESETS]
    assert not unknown, f"{page} names presets that do not exist: {unknown}"
    bad = []
    for columns, rows in tables(text):
        assert set(columns) <= set(presets), f"{page}: a table's presets {columns} are not the place's {presets}"
        for preset in columns:
            listed = {row[0] for row in rows}
            if missing := sorted(set(PRESETS[preset]) - listed):
                bad.append(f"{preset} sets {missing}, which the table does not list")
        for key, *values in rows:
            for preset, value in zip(columns, values):
                if value == UNSET:
                    if key in PRESETS[preset]:
                        bad.append(f"{key}: {preset} sets {PRESETS[preset][key]!r}, the table says {UNSET}")
                elif key not in PRESETS[preset] or _differs(preset, key, value):
                    bad.append(f"{key}: the table says {value}, {preset} holds {PRESETS[preset].get(key, UNSET)!r}")
    for keys, value in spans(text):
        for key in keys:
            setting = [preset for preset in presets if key in PRESETS[preset]]
            if not setting:
                bad.append(f"{key}={value}: none of {presets} sets {key}")
            bad += [f"{key}={value}: {preset} holds {PRESETS[preset][key]!r}"
                    for preset in setting if _differs(preset, key, value)]
    assert not bad, f"{page}, the settings of {', '.join(presets)}:\n" + "\n".join(bad)


def test_parsing():
    text = ('| setting | `a` | `b` |\n|---|---|---|\n| `mode` | `soft` | — |\n\n'
            '`lambda_td = lambda_margin = 0`, `mode = "soft"`, `--set score_lr=1`, `h_0 = 0`, `x=y z`')
    assert tables(text) == [(["a", "b"], [["mode", "soft", UNSET]])]
    assert spans(text) == [(["lambda_td", "lambda_margin"], "0"), (["mode"], "soft")]
    weight = PRESETS["recipe-rrnn"]["warm_weight"]
    assert not _differs("recipe-rrnn", "warm_weight", str(weight))
    assert _differs("recipe-rrnn", "warm_weight", str(weight / 2))
