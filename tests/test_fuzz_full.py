"""The full fuzz run: 10,000 examples for every loader and for the CLI (the
fuzzers of ``tests/test_fuzz.py``, same rules: only clean ``CellGraphError``s naming the
file, CLI exit codes 0/1/2 without a traceback, no example over the deadline or hung).

Run with ``python -m pytest -m slow tests/test_fuzz_full.py`` (tens of minutes on 2 cores).
"""

from __future__ import annotations

import time

import pytest

from test_fuzz import LOADERS, run_fuzzer

FULL_EXAMPLES = 10_000


@pytest.mark.slow
@pytest.mark.parametrize("name", [*LOADERS, "cli"])
def test_fuzz_full(name, tmp_path, monkeypatch, capsys):
    start = time.perf_counter()
    count = run_fuzzer(name, tmp_path, FULL_EXAMPLES, monkeypatch)
    with capsys.disabled():
        print(f"\nfuzz {name}: {count} examples in {time.perf_counter() - start:.0f} s")
    assert count >= FULL_EXAMPLES
