"""Whether the paper's data sets are where :func:`cellgraph.data.datadir.resolve_data_dir`
looks (``../shared/data`` beside a checkout, or ``$CELLGRAPH_DATA``); tests that read them
skip cleanly without.

Import from a test module as ``from needs_data import has_data, needs_data`` (pytest puts
``tests/`` on the path)."""

from __future__ import annotations

import pytest

from cellgraph.data.datadir import resolve_data_dir
from cellgraph.errors import CellGraphError


def has_data() -> bool:
    try:
        resolve_data_dir()
    except CellGraphError:
        return False
    return True


#: Skip a test where the data sets are not found.
needs_data = pytest.mark.skipif(not has_data(), reason="no ../shared/data")
