"""``cellgraph data fetch`` / ``data list`` against a local HTTP server (never the internet).

The download logic runs on small generated files through a test-only source table; the
pinned table and the CLI use the paper's data sets where the loaders find them and skip
without them (``tests/needs_data.py``).
"""

from __future__ import annotations

import hashlib
import http.server
import io
import re
import threading
import urllib.parse
from pathlib import Path

import pytest

from cellgraph.cli import main
from cellgraph.data.datadir import locate, sha256_file
from cellgraph.data.fetch import PART, SOURCES, DataFile, fetch_files, file_url
from cellgraph.errors import CellGraphError

from needs_data import DATA, full_data, needs_data as real

PAYLOAD = bytes(range(256)) * 800  # 204,800 bytes


class Mirror(http.server.BaseHTTPRequestHandler):
    """Serves files under ``server.root``; ``server.ranges``: honour ``Range``; ``server.corrupt``:
    flip one byte; ``server.cut``: promise the whole body but close after this many bytes."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        server = self.server
        path = server.root / urllib.parse.unquote(self.path.lstrip("/"))
        asked = self.headers.get("Range")
        server.requests.append((self.path, asked))
        if not path.is_file():
            self.send_error(404)
            return
        data = bytearray(path.read_bytes())
        if server.corrupt:
            data[len(data) // 2] ^= 0xFF
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", asked or "")
        if match and server.ranges:
            start = int(match.group(1))
            end = min(int(match.group(2) or len(data) - 1), len(data) - 1)
            body = bytes(data[start:end + 1])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            body = bytes(data)
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:server.cut] if server.cut is not None else body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def serve():
    """``serve(root, ranges=True, corrupt=False, cut=None)`` starts a mirror of ``root`` on
    127.0.0.1 (an ephemeral port) and returns ``(base_url, server)``."""
    servers = []

    def start(root: Path, ranges: bool = True, corrupt: bool = False, cut: int | None = None):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
        server.root, server.ranges, server.corrupt, server.cut, server.requests = root, ranges, corrupt, cut, []
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def toy(tmp_path) -> tuple[Path, DataFile]:
    """A mirror folder holding ``toy/payload.bin`` and its pinned entry."""
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "payload.bin").write_bytes(PAYLOAD)
    return mirror, DataFile("toy/payload.bin", "https://unused.invalid/payload.bin",
                            hashlib.sha256(PAYLOAD).hexdigest(), len(PAYLOAD))


def test_fetch_downloads_verifies_and_skips_what_is_there(serve, toy, tmp_path):
    mirror, file = toy
    base, server = serve(mirror)
    dest = tmp_path / "cache" / "toy" / "payload.bin"
    progress = io.StringIO()
    assert fetch_files([file], tmp_path / "cache", base, progress) == [(dest, True)]
    assert dest.read_bytes() == PAYLOAD
    assert not dest.with_name(dest.name + PART).exists()
    assert server.requests == [("/toy/payload.bin", f"bytes=0-{len(PAYLOAD) - 1}")]
    lines = progress.getvalue().splitlines()  # not a terminal: plain lines, no bar
    assert lines[0] == "toy/payload.bin: downloading 204,800 bytes"
    assert lines[-1] == "toy/payload.bin: 100% (204,800 of 204,800 bytes)"
    assert fetch_files([file], tmp_path / "cache", base, progress) == [(dest, False)]
    assert len(server.requests) == 1


def test_base_url_from_the_environment(serve, toy, tmp_path, monkeypatch):
    mirror, file = toy
    base, server = serve(mirror)
    monkeypatch.setenv("CELLGRAPH_DATA_URL", base + "/")
    monkeypatch.setenv("CELLGRAPH_DATA", str(tmp_path / "env-cache"))
    fetch_files([file], stream=io.StringIO())
    assert (tmp_path / "env-cache" / "toy" / "payload.bin").read_bytes() == PAYLOAD
    assert file_url(SOURCES["ptb"][0]) == SOURCES["ptb"][0].url
    assert file_url(SOURCES["sst"][0], "http://h/d/") == "http://h/d/sst/train.txt"


@pytest.mark.parametrize("ranges", [True, False])
def test_only_the_pinned_prefix_is_kept(serve, toy, tmp_path, ranges):
    """enwik8 is pinned as the first bytes of a longer public file."""
    mirror, _ = toy
    base, server = serve(mirror, ranges=ranges)
    prefix = PAYLOAD[:100_000]
    file = DataFile("toy/payload.bin", "unused", hashlib.sha256(prefix).hexdigest(), len(prefix))
    fetch_files([file], tmp_path / "cache", base, io.StringIO())
    assert (tmp_path / "cache" / "toy" / "payload.bin").read_bytes() == prefix
    assert server.requests == [("/toy/payload.bin", "bytes=0-99999")]


def test_an_interrupted_download_resumes_with_range(serve, toy, tmp_path):
    mirror, file = toy
    cut_base, _ = serve(mirror, cut=50_000)
    dest = tmp_path / "cache" / "toy" / "payload.bin"
    part = dest.with_name(dest.name + PART)
    with pytest.raises(CellGraphError, match="stopped at 50,000 of 204,800 bytes; run the same command again"):
        fetch_files([file], tmp_path / "cache", cut_base, io.StringIO())
    assert part.read_bytes() == PAYLOAD[:50_000] and not dest.exists()
    base, server = serve(mirror)
    progress = io.StringIO()
    fetch_files([file], tmp_path / "cache", base, progress)
    assert server.requests == [("/toy/payload.bin", "bytes=50000-204799")]
    assert progress.getvalue().startswith("toy/payload.bin: resuming at 50,000 of 204,800 bytes")
    assert dest.read_bytes() == PAYLOAD and not part.exists()


def test_a_server_without_range_replaces_the_partial_file(serve, toy, tmp_path):
    mirror, file = toy
    base, server = serve(mirror, ranges=False)
    dest = tmp_path / "cache" / "toy" / "payload.bin"
    dest.parent.mkdir(parents=True)
    dest.with_name(dest.name + PART).write_bytes(b"x" * 1000)  # would fail the checksum if kept
    fetch_files([file], tmp_path / "cache", base, io.StringIO())
    assert server.requests == [("/toy/payload.bin", "bytes=1000-204799")]
    assert dest.read_bytes() == PAYLOAD


def test_a_corrupted_download_is_refused_and_deleted(serve, toy, tmp_path):
    mirror, file = toy
    base, _ = serve(mirror, corrupt=True)
    with pytest.raises(CellGraphError, match=f"sha256 [0-9a-f]{{64}} is not the pinned {file.sha256}; "
                                             "the download was deleted"):
        fetch_files([file], tmp_path / "cache", base, io.StringIO())
    assert not (tmp_path / "cache").exists()  # nor the folders the download made


def test_bad_sources_are_one_line_errors(serve, toy, tmp_path):
    mirror, file = toy
    base, _ = serve(mirror)
    missing = DataFile("toy/absent.bin", "unused", file.sha256, file.size)
    with pytest.raises(CellGraphError, match=r"cannot download http://127.0.0.1:\d+/toy/absent.bin: HTTP 404"):
        fetch_files([missing], tmp_path / "cache", base, io.StringIO())
    assert not (tmp_path / "cache").exists()  # no empty .part left behind, nor the folders made for it
    dest = tmp_path / "cache" / "toy" / "payload.bin"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"mine")
    with pytest.raises(CellGraphError, match="payload.bin exists with sha256 .* delete it and fetch again"):
        fetch_files([file], tmp_path / "cache", base, io.StringIO())


def test_a_failed_fetch_leaves_no_folder_that_counts_as_data(tmp_path, capsys, monkeypatch):
    """Offline, ``cellgraph data fetch`` fails in one line and leaves nothing in the cache: no
    empty ``~/.cache/cellgraph/enwik8/`` that a search for data would take for a data folder.
    A cache folder that was there before stays."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CELLGRAPH_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    offline = "http://127.0.0.1:9"  # the discard port: nothing listens there
    assert main(["data", "fetch", "wiki", "ptb", "--url", offline]) == 2
    assert "cannot download http://127.0.0.1:9/enwik8/" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "home" / ".cache" / "cellgraph"
    kept.mkdir(parents=True)
    assert main(["data", "fetch", "sst", "--url", offline]) == 2
    assert list(kept.iterdir()) == []
    with pytest.raises(CellGraphError, match="no wiki data"):
        locate("wiki")
    (kept / "enwik8").mkdir()  # what an older version left: not data to the tests either
    assert full_data() is None


def test_progress_bar_on_a_terminal(serve, toy, tmp_path):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    mirror, file = toy
    base, _ = serve(mirror)
    screen = Terminal()
    fetch_files([file], tmp_path / "cache", base, screen)
    assert "toy/payload.bin: 100%" in screen.getvalue() and "\r" in screen.getvalue()
    assert "downloading" not in screen.getvalue()


# --- the pinned table and the command line, on the real files -----------------------------


@real
def test_pinned_sources_are_the_files_the_loaders_read():
    pinned = [file for files in SOURCES.values() for file in files]
    for file in pinned:
        assert sha256_file(DATA / file.path) == file.sha256
        assert (DATA / file.path).stat().st_size == file.size
        assert re.fullmatch(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/.+", file.url)


@real
def test_data_fetch_and_list_commands(serve, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ../shared/data from here
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CELLGRAPH_DATA", raising=False)
    base, _ = serve(DATA)
    cache = tmp_path / "home" / ".cache" / "cellgraph"
    assert main(["data", "fetch", "sst", "glove", "--url", base]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"sst: {cache}/sst/{name} downloaded, sha256 ok" for name in ("train.txt", "dev.txt", "test.txt")] \
        + [f"glove: {cache}/glove/glove.6B.100d.first2604.txt downloaded, sha256 ok"]

    (cache / "glove" / "glove.6B.100d.first2604.txt").write_text("the 1.0\n")
    assert main(["data", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split(None, 2) == ["wiki", "missing", f"no wiki data in {cache}: "
                                      "run `cellgraph data fetch wiki`, or pass --data DIR or set $CELLGRAPH_DATA"]
    assert rows[1].split(None, 2)[:2] == ["ptb", "missing"]
    assert rows[2] == f"sst    ok         {cache} (cache)"
    assert rows[3].split() == ["sst/train.txt", "2,160,058", "bytes", "sha256", "ok"]
    assert rows[6] == f"glove  differs    {cache} (cache)"
    assert rows[7].split() == ["glove/glove.6B.100d.first2604.txt", "8", "bytes", "sha256", "differs"]

    assert main(["data", "list", "--data", str(DATA)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [row.split()[:2] for row in rows if not row.startswith(" ")] == [
        ["wiki", "ok"], ["ptb", "ok"], ["sst", "ok"], ["glove", "ok"]]
    assert f"wiki   ok         {DATA} (given)" in rows


@real
def test_data_fetch_refuses_a_corrupted_data_set(serve, tmp_path, capsys):
    base, _ = serve(DATA, corrupt=True)
    assert main(["data", "fetch", "wiki", "--data", str(tmp_path), "--url", base]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cellgraph data: error: ") and "enwik8-prefix-4154064: sha256" in err
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_data_commands_reject_unknown_names(capsys):
    with pytest.raises(SystemExit):
        main(["data", "fetch", "imdb"])
    assert "invalid choice: 'imdb'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["data"])


def test_pinned_paths_follow_the_loaders_layout():
    """Every pinned path is ``<data set folder>/<file name>``, where the loaders look."""
    for name, files in SOURCES.items():
        for file in files:
            folder, _, leaf = file.path.partition("/")
            assert folder == {"wiki": "enwik8"}.get(name, name) and "/" not in leaf
