"""Resumable, verified downloads against a local stand-in for the hub's tree API and resolve URLs."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from e2c.data import download as dl

REPO = "org/data"
FILES = {
    "e2c-sft.parquet": b"S" * 300_000 + b"end",
    "ef-rl.parquet": b"R" * 5000,
    "evaluation/gsm8k.parquet": b"G" * 1000,
    "README.md": b"# readme\n",
}
LFS = {"e2c-sft.parquet", "ef-rl.parquet", "evaluation/gsm8k.parquet"}


class Hub(http.server.BaseHTTPRequestHandler):
    cut_first: ClassVar[set[str]] = set()  # paths whose first GET is cut half-way
    corrupt: ClassVar[set[str]] = set()
    gets: ClassVar[list[tuple[str, str | None]]] = []

    def log_message(self, *a) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith(f"/api/datasets/{REPO}/tree/main"):
            items = []
            for p, data in FILES.items():
                it = {"type": "file", "path": p, "size": len(data)}
                if p in LFS:
                    it["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}
                else:
                    it["oid"] = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
                items.append(it)
            items.append({"type": "directory", "path": "evaluation"})
            body = json.dumps(items).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        prefix = f"/datasets/{REPO}/resolve/main/"
        path = self.path[len(prefix) :]
        if not self.path.startswith(prefix) or path not in FILES:
            self.send_error(404)
            return
        data = FILES[path]
        if path in self.corrupt:
            data = data[:-1] + b"X"
        rng = self.headers.get("Range")
        Hub.gets.append((path, rng))
        start = int(rng.split("=")[1].rstrip("-")) if rng else 0
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if path in self.cut_first:
            self.cut_first.discard(path)
            self.wfile.write(data[start : start + len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)  # the client sees a short read: an interrupted transfer
            return
        self.wfile.write(data[start:])


@pytest.fixture
def hub() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    Hub.gets, Hub.cut_first, Hub.corrupt = [], set(), set()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_selection_and_verified_download(hub: str, tmp_path: Path) -> None:
    files = dl.list_files(REPO, hub)
    assert [f.path for f in dl.select(files, "eval")] == ["evaluation/gsm8k.parquet"]
    assert [f.path for f in dl.select(files, "rl")] == ["ef-rl.parquet"]
    got = dl.download("all", tmp_path, REPO, hub, log=lambda s: None)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in got) == sorted(
        p for p in FILES if p.endswith(".parquet")
    )
    for p in got:
        assert p.read_bytes() == FILES[p.relative_to(tmp_path).as_posix()]
    # A second run verifies from the manifest and fetches nothing.
    n = len(Hub.gets)
    dl.download("all", tmp_path, REPO, hub, log=lambda s: None)
    assert len(Hub.gets) == n
    with pytest.raises(dl.UserError, match="unknown --dataset 'evals'; valid: sft, rl, eval, all"):
        dl.select(files, "evals")


def test_interrupted_transfer_resumes(hub: str, tmp_path: Path) -> None:
    Hub.cut_first = {"e2c-sft.parquet"}
    logs: list[str] = []
    dl.download("sft", tmp_path, REPO, hub, log=logs.append)
    assert (tmp_path / "e2c-sft.parquet").read_bytes() == FILES["e2c-sft.parquet"]
    ranges = [r for p, r in Hub.gets if p == "e2c-sft.parquet"]
    assert ranges[0] is None and ranges[1] == f"bytes={len(FILES['e2c-sft.parquet']) // 2}-"
    assert any("resuming" in line for line in logs)
    assert not list(tmp_path.glob("*.part"))


def test_corrupt_file_is_never_kept(hub: str, tmp_path: Path) -> None:
    (tmp_path / "ef-rl.parquet").write_bytes(b"an older good copy")
    Hub.corrupt = {"ef-rl.parquet"}
    with pytest.raises(dl.DownloadError, match="does not match the hub's size/hash"):
        dl.fetch(
            next(f for f in dl.list_files(REPO, hub) if f.path == "ef-rl.parquet"),
            tmp_path / "ef-rl.parquet",
            REPO,
            hub,
            log=lambda s: None,
            retries=1,
        )
    assert (tmp_path / "ef-rl.parquet").read_bytes() == b"an older good copy"


def test_unreachable_hub_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(dl.DownloadError) as e:
        dl.download("eval", tmp_path, REPO, "http://127.0.0.1:9", log=lambda s: None)
    msg = str(e.value)
    assert msg.startswith("cannot reach http://127.0.0.1:9") and "--mirror" in msg and "\n" not in msg


def test_endpoint_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert dl.endpoint() == dl.OFFICIAL and dl.endpoint(mirror=True) == dl.MIRROR
    monkeypatch.setenv("HF_ENDPOINT", "https://example.org/")
    assert dl.endpoint() == "https://example.org" and dl.endpoint(explicit="http://x/") == "http://x"
