"""Fixtures shared by the test modules: a throw-away PostgreSQL server, the small data folder,
Ctrl-C as an interactive shell delivers it.

``small_data`` makes ``tests/fixtures/data`` the data folder (``$CELLGRAPH_DATA``) and has the
loaders draw a few dozen sequences from it (``tests/needs_data.py``).

``postgres`` starts Debian's PostgreSQL (``/usr/lib/postgresql/*/bin``) once per session on a
Unix socket in a temporary folder, with no TCP port and trust authentication; each
``postgres.database()`` is a new empty database, given as an SQLAlchemy URL for the psycopg
driver. The server runs as the current user, or as ``postgres`` (through ``runuser``) when
the tests run as root, since PostgreSQL refuses to run as root. Tests that use it are
skipped, with the reason, when the server or the Python driver is not installed.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from cellgraph.data import datasets
from needs_data import FIXTURES, SMALL_SIZES

SUPERUSER = "cellgraph"


@pytest.fixture
def small_data(monkeypatch) -> Path:
    """``tests/fixtures/data`` as the data folder, its loaders cut to :data:`SMALL_SIZES`."""
    monkeypatch.setenv("CELLGRAPH_DATA", str(FIXTURES))
    for name, sizes in SMALL_SIZES.items():
        module, function, fixed = datasets._LOADERS[name]
        monkeypatch.setitem(datasets._LOADERS, name, (module, function, {**fixed, **sizes}))
    return FIXTURES


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here, as in a shell's foreground, whatever handler the
    suite inherited: ``pytest ... &`` from a script starts with SIGINT ignored. Restored after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _bindir() -> Path | None:
    """The ``bin`` folder of the newest PostgreSQL installed the Debian way."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: [int(n) for n in re.findall(r"\d+", p.parts[-3])])
    return found[-1].parent if found else None


class Postgres:
    """A running server: ``database()`` creates a database and returns its URL."""

    def __init__(self, bindir: Path, base: Path, as_user: list[str]) -> None:
        self.bindir, self.base, self.as_user = bindir, base, as_user
        self.socket = base / "socket"
        self._names = (f"db{i}" for i in itertools.count())

    def run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self.as_user, str(self.bindir / tool), *args], capture_output=True, text=True,
                              timeout=120)
        if done.returncode:
            log = self.base / "server" / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            pytest.fail(f"PostgreSQL {tool} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start(self) -> None:
        data = self.base / "server" / "data"
        self.run("initdb", "-D", str(data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-sync")
        self.run("pg_ctl", "-D", str(data), "-l", str(self.base / "server" / "server.log"), "-w", "-t", "60",
                 "-o", f"-k {self.socket} -c listen_addresses='' -F", "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.base / "server" / "data"), "-m", "immediate", "-w", "stop")

    def database(self) -> str:
        name = next(self._names)
        self.run("createdb", "-h", str(self.socket), "-U", SUPERUSER, name)
        return f"postgresql+psycopg://{SUPERUSER}@/{name}?host={self.socket}"


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL server for the session (module docstring)."""
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("the PostgreSQL driver psycopg is not installed: pip install 'cellgraph[postgres]'")
    bindir = _bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): apt-get install postgresql")
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("the tests run as root and there is no user 'postgres' to run PostgreSQL as")
        if shutil.which("runuser") is None:
            pytest.skip("the tests run as root and runuser is missing to run PostgreSQL as 'postgres'")
        as_user = ["runuser", "-u", "postgres", "--"]
    # A short path under /tmp: a Unix socket's path is limited to about 100 bytes, and pytest's
    # own temporary folders are private to the user running the tests.
    base = Path(tempfile.mkdtemp(prefix="cellgraph-pg-", dir="/tmp"))
    base.chmod(0o755)
    for sub in ("server", "socket"):
        (base / sub).mkdir()
        if owner is not None:
            os.chown(base / sub, owner.pw_uid, owner.pw_gid)
    server = Postgres(bindir, base, as_user)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
