"""Every help text of the command line points only at what a user has: the commands it names
exist, no help names the development folder ``../shared``, and the data folder's help names
the cache where ``cellgraph data fetch`` puts the data sets."""

from __future__ import annotations

import argparse
import re

import pytest

from cellgraph.cli.main import build_parser


def _helps(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """``cellgraph ... --help`` of every command and subcommand, by command path."""
    found = {path: parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_helps(sub, (*path, name)))
    return found


HELPS = _helps(build_parser())
COMMANDS = {path[0] for path in HELPS if path}


def test_every_command_a_help_names_exists():
    named = {(path, word) for path, text in HELPS.items()
             for word in re.findall(r"\bcellgraph\s+([a-z][a-z-]*)", text)}
    dead = sorted(f"cellgraph {' '.join(path)} --help names `cellgraph {word}`"
                  for path, word in named if word not in COMMANDS)
    assert len(COMMANDS) > 10 and not dead, "\n".join(dead)


@pytest.mark.parametrize("path", sorted(HELPS), ids=lambda p: " ".join(p) or "cellgraph")
def test_no_help_names_the_development_data_folder(path):
    assert "shared/data" not in re.sub(r"\s+", "", HELPS[path])


@pytest.mark.parametrize("path", [("train",), ("baseline",), ("data", "list")])
def test_the_data_folder_help_names_the_cache(path):
    assert "~/.cache/cellgraph" in re.sub(r"\s+", "", HELPS[path])


def test_the_data_dir_setting_names_the_cache():
    """``train --help``'s entry of the ``data_dir`` setting, not only the --data flag's help."""
    entry = re.split(r"\n  (?=\S)", HELPS[("train",)].split("\n  data_dir:", 1)[1])[0]
    assert "~/.cache/cellgraph" in entry and "cellgraph data fetch" in re.sub(r"\s+", " ", entry)
