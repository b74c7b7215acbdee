"""The data the tests read: the paper's full data sets where the loaders find them, else the
small cut of them in ``tests/fixtures/data``.

- :func:`full_data` is the folder where :mod:`cellgraph.data.datadir` finds every data set
  of the paper with its pinned files (``cellgraph data fetch wiki ptb sst glove`` puts them
  in ``~/.cache/cellgraph``), or ``None``; :data:`needs_data` skips a test without it, with a
  reason that names the command. A folder that exists but does not hold the data sets (an
  empty one left by a failed download) does not count.
- :data:`FIXTURES` is a data folder in the real formats, a few KB per data set
  (``tests/fixtures/data/SOURCE.md``); the ``small_data`` fixture of ``tests/conftest.py``
  makes it the data folder and :data:`SMALL_SIZES` the number of sequences drawn, so that the
  loaders, training and the commands run on it with nothing beside the checkout.

Import from a test module as ``from needs_data import DATA, needs_data`` (pytest puts
``tests/`` on the path).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cellgraph.data.fetch import SOURCES, inventory

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "data"
FETCH = f"cellgraph data fetch {' '.join(SOURCES)}"
#: Why a test that needs the full data sets is skipped.
NO_DATA = f"needs the paper's data sets: run `{FETCH}` (or set $CELLGRAPH_DATA to a folder that holds them)"

#: Data set -> the loader's sizes on :data:`FIXTURES` (its ``n_train``, ``n_val``, ``n_test``).
SMALL_SIZES: dict[str, dict[str, int]] = {
    "wiki": {"n_train": 32, "n_val": 16, "n_test": 16},
    "wiki5k": {"n_train": 32, "n_val": 16, "n_test": 16},
    "ptb": {"n_train": 32, "n_val": 16, "n_test": 16},
    "sst": {"n_val": 12, "n_test": 12},
}


def full_data() -> Path | None:
    """The one folder that holds every data set of ``cellgraph data fetch`` with its pinned
    sha256 (module docstring), or ``None``."""
    found = inventory()
    folders = {entry.folder for entry in found}
    if len(folders) == 1 and all(entry.state == "ok" for entry in found):
        return folders.pop()
    return None


#: The full data folder, or ``None``.
DATA = full_data()

#: Skip a test where the full data sets are not found.
needs_data = pytest.mark.skipif(DATA is None, reason=NO_DATA)
