"""The devices a test runs on: the CPU always, CUDA where a GPU is present (the CUDA cases
skip cleanly without one).

Import from a test module as ``from devices import DEVICES, needs_cuda`` (pytest puts
``tests/`` on the path) and parametrise: ``@pytest.mark.parametrize("device", DEVICES)``.
"""

from __future__ import annotations

import pytest
import torch

#: Skip a test on a machine without a CUDA GPU.
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

#: ``cpu``, and ``cuda`` (skipped without a GPU).
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=needs_cuda)]
