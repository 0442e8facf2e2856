"""Resumable, verified downloads of the paper's dataset repository from the HF hub (or a mirror).

The file list comes from the hub's tree API, which gives each file's size and hash (sha256 for LFS
files, the git blob sha1 otherwise). A download writes ``<dest>.part``, resumes it with an HTTP range
request after an interruption, checks size and hash, and only then renames it into place, so a
completed file is never replaced by a broken one. Re-running skips files that are already present and
verified (recorded in ``manifest.json`` next to them).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from e2c.commandline.argtypes import OUTPUT_DIR, TEXT
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core import progress
from e2c.core.errors import UserError
from e2c.core.files import atomic_write_text, check_output_dir

DATA_REPO = "TingheOliver/Explore-Execute-Chain-Datasets"
OFFICIAL = "https://huggingface.co"
MIRROR = "https://hf-mirror.com"
CHUNK = 1 << 20
_REPO_ID = re.compile(r"[\w.\-]+/[\w.\-]+")
# What each --dataset choice fetches from the repository (glob patterns on repo paths).
SELECTIONS: dict[str, tuple[str, ...]] = {
    "sft": ("*sft*.parquet",),
    "rl": ("*rl*.parquet",),
    "eval": ("evaluation/*.parquet", "evaluation/*/*.parquet"),
}
SELECTIONS["all"] = tuple(p for k in ("sft", "rl", "eval") for p in SELECTIONS[k])


class DownloadError(UserError):
    """The hub could not be reached or a file failed verification."""


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    sha256: str | None  # LFS files
    git_sha1: str | None  # plain git blobs


def endpoint(mirror: bool = False, explicit: str | None = None) -> str:
    """The hub base URL: an explicit one, else the mirror, else ``$HF_ENDPOINT``, else huggingface.co."""
    if explicit:
        return _check_url(explicit, "--endpoint")
    if mirror:
        return MIRROR
    return _check_url(os.environ.get("HF_ENDPOINT") or OFFICIAL, "HF_ENDPOINT")


def _check_url(url: str, source: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in url):
        raise UserError(f"{source} {url!r} is not an http(s) URL; e.g. {OFFICIAL} or {MIRROR}")
    return url.rstrip("/")


def hf_token() -> str | None:
    """``$HF_TOKEN`` when set, checked: a token is one word of printable characters.

    A token with a space or a line break in it (a copy-paste slip) would otherwise reach the HTTP layer,
    whose error quotes the header, token included, into the "cannot reach" line and any log of it; it is
    refused here in one line that never shows the value.
    """
    token = os.environ.get("HF_TOKEN")
    if not token:
        return None
    if any(c.isspace() or not c.isprintable() for c in token):
        raise DownloadError(
            f"HF_TOKEN holds whitespace or a line break ({len(token)} characters; the value is not shown); "
            "set it to the token alone, e.g. HF_TOKEN=hf_..."
        )
    return token


def redact(text: str) -> str:
    """``text`` with the value of ``$HF_TOKEN`` (and each word of it) replaced by ``***``: no message of
    ours quotes a secret, whatever a library put into its exception."""
    token = os.environ.get("HF_TOKEN") or ""
    for part in sorted({token.strip(), *token.split()}, key=len, reverse=True):
        if len(part) >= 4:
            text = text.replace(part, "***").replace(repr(part)[1:-1], "***")
    return text


def _open(url: str, headers: dict[str, str] | None = None, timeout: float = 30.0) -> Any:
    req = urllib.request.Request(url, headers={"User-Agent": "e2c-toolkit", **(headers or {})})
    token = hf_token()
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    return urllib.request.urlopen(req, timeout=timeout)


def _unreachable(base: str, e: Exception) -> DownloadError:
    reason = redact(" ".join(str(getattr(e, "reason", e)).split()))
    return DownloadError(
        f"cannot reach {base} ({type(e).__name__}: {reason}); check the network, use --mirror "
        f"(hf-mirror.com) or HF_ENDPOINT=URL, or work offline with `prepare_all_data.sh --skip-download`"
    )


def list_files(repo: str = DATA_REPO, base: str = OFFICIAL, revision: str = "main") -> list[RemoteFile]:
    """Every file of a dataset repository, with size and hash, from the hub's tree API."""
    url = f"{base}/api/datasets/{repo}/tree/{_quote(revision)}?recursive=true"
    out: list[RemoteFile] = []
    while url:
        try:
            with _open(url) as resp:
                body = resp.read()
                link = resp.headers.get("Link", "")
        except urllib.error.HTTPError as e:
            raise DownloadError(f"{base}: listing {repo} failed with HTTP {e.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:  # ValueError: a URL urllib rejects
            raise _unreachable(base, e) from None
        out.extend(_remote_files(body, base, repo))
        url = ""
        if 'rel="next"' in link:
            url = link.split(";")[0].strip().strip("<>")
    return out


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _remote_files(body: bytes, base: str, repo: str) -> list[RemoteFile]:
    """The files in one page of the tree API's answer; anything else (a proxy's HTML page, an error
    object, records without a path or size) is a DownloadError naming the endpoint."""
    try:
        out = []
        for it in json.loads(body.decode("utf-8")):
            if it.get("type") != "file":
                continue
            lfs = it.get("lfs") or {}
            size = int(lfs.get("size", it.get("size", 0)))
            out.append(RemoteFile(str(it["path"]), size, lfs.get("oid"), None if lfs else it.get("oid")))
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError):
        raise DownloadError(
            f"{base}: listing {repo} did not return the hub's file list (is {base} a Hugging Face endpoint?)"
        ) from None
    for f in out:
        # Files land at <out>/<path>: a path that climbs out of the folder is never written.
        parts = PurePosixPath(f.path).parts
        if not parts or f.path.startswith("/") or ".." in parts or "\\" in f.path:
            raise DownloadError(f"{base}: listing {repo} names a file outside the repository: {f.path!r}")
    return out


def select(files: Sequence[RemoteFile], which: str) -> list[RemoteFile]:
    """The files of a ``--dataset`` choice."""
    if which not in SELECTIONS:
        raise UserError(f"unknown --dataset {which!r}; valid: {', '.join(SELECTIONS)}")
    pats = SELECTIONS[which]
    return [f for f in files if any(fnmatch.fnmatch(f.path, p) for p in pats)]


def file_digest(path: Path, f: RemoteFile) -> str:
    """The hash of a local file in the form the hub reports for ``f``."""
    if f.sha256:
        h = hashlib.sha256()
    else:
        h = hashlib.sha1()
        h.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def verified(path: Path, f: RemoteFile) -> bool:
    """Size and hash match the hub's record."""
    if not path.is_file() or path.stat().st_size != f.size:
        return False
    want = f.sha256 or f.git_sha1
    return want is None or file_digest(path, f) == want


def fetch(
    f: RemoteFile,
    dest: Path,
    repo: str = DATA_REPO,
    base: str = OFFICIAL,
    revision: str = "main",
    log: Callable[[str], None] = print,
    retries: int = 3,
) -> Path:
    """Download one file to ``dest``: resume ``dest.part``, verify, rename. Raises DownloadError."""
    part = dest.with_name(dest.name + ".part")
    try:  # a local write failure now, named as one, not retried later as a network interruption
        dest.parent.mkdir(parents=True, exist_ok=True)
        part.open("ab").close()
    except OSError as e:
        raise DownloadError(f"cannot write {part}: {e.strerror or e}") from None
    url = f"{base}/datasets/{repo}/resolve/{_quote(revision)}/{urllib.parse.quote(f.path)}"
    with progress.bar(f.size, f"  {f.path}", unit="B") as pbar:
        return _fetch_attempts(f, dest, part, url, retries, log, pbar)


def _fetch_attempts(
    f: RemoteFile,
    dest: Path,
    part: Path,
    url: str,
    retries: int,
    log: Callable[[str], None],
    pbar: Any,
) -> Path:
    """:func:`fetch`'s tries, each resuming ``part``, with the bytes on ``pbar`` (or a log line every 5 s)."""
    last = time.monotonic()
    for attempt in range(retries + 1):
        have = part.stat().st_size if part.exists() else 0
        if have > f.size:
            part.unlink()
            have = 0
        pbar.reset(total=f.size)
        pbar.update(have)
        if have < f.size:
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                with _open(url, headers) as resp:
                    mode = "ab" if have and resp.status == 206 else "wb"
                    if mode == "wb":  # the server ignored the range: start over
                        have = 0
                        pbar.reset(total=f.size)
                    with part.open(mode) as out:
                        for chunk in iter(lambda: resp.read(CHUNK), b""):
                            out.write(chunk)
                            have += len(chunk)
                            pbar.update(len(chunk))
                            if pbar.disable and time.monotonic() - last > 5:
                                log(f"  {f.path}: {have / 1e6:.1f} / {f.size / 1e6:.1f} MB")
                                last = time.monotonic()
            except urllib.error.HTTPError as e:
                if e.code == 416:  # range past the end: the part is complete or corrupt; verify below
                    pass
                else:
                    raise DownloadError(f"{url}: HTTP {e.code}") from None
            except (urllib.error.URLError, OSError) as e:
                if attempt == retries:
                    raise DownloadError(
                        f"{f.path}: interrupted at {have} of {f.size} bytes ({type(e).__name__}); "
                        f"re-run the same command to resume"
                    ) from None
                log(f"  {f.path}: interrupted at {have} bytes, resuming")
                continue
        have = part.stat().st_size if part.exists() else 0
        if have < f.size:  # the server closed early without an error: resume from what arrived
            if attempt == retries:
                raise DownloadError(
                    f"{f.path}: stopped at {have} of {f.size} bytes; re-run the same command to resume"
                )
            log(f"  {f.path}: interrupted at {have} bytes, resuming")
            continue
        if verified(part, f):
            os.replace(part, dest)
            return dest
        part.unlink(missing_ok=True)
        if attempt == retries:
            break
        log(f"  {f.path}: hash mismatch, downloading again")
    raise DownloadError(
        f"{f.path}: downloaded file does not match the hub's size/hash after {retries + 1} tries"
    )


def _manifest(root: Path) -> dict[str, str]:
    p = root / "manifest.json"
    try:
        return json.loads(p.read_text()) if p.is_file() else {}
    except json.JSONDecodeError:
        return {}


def download(
    which: str = "all",
    out_dir: str | Path = "data/raw",
    repo: str = DATA_REPO,
    base: str = OFFICIAL,
    revision: str = "main",
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Fetch a selection into ``out_dir`` (keeping the repo's paths); returns the local paths."""
    root = Path(out_dir)
    files = select(list_files(repo, base, revision), which)
    if not files:
        raise DownloadError(f"{repo}: no files match --dataset {which} ({', '.join(SELECTIONS[which])})")
    manifest = _manifest(root)
    got = []
    for f in files:
        dest = root / f.path
        want = f.sha256 or f.git_sha1 or ""
        if dest.is_file() and manifest.get(f.path) == want and dest.stat().st_size == f.size:
            log(f"  {f.path}: already verified, skipped")
        else:
            log(f"  {f.path}: downloading {f.size / 1e6:.1f} MB from {base}")
            fetch(f, dest, repo, base, revision, log)
            manifest[f.path] = want
            atomic_write_text(root / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        got.append(dest)
    return got


@dataclass(frozen=True)
class DownloadSettings:
    """The command line: each field is one flag (``python -m e2c.data.download --help``)."""

    dataset: str = field(
        default="all",
        metadata=setting("what to fetch (default: all)", flag="--dataset", choices=list(SELECTIONS)),
    )
    mirror: bool = field(default=False, metadata=setting(f"use the mirror {MIRROR}", flag="--mirror"))
    endpoint: str | None = field(
        default=None,
        metadata=setting(
            "hub base URL (default: $HF_ENDPOINT or huggingface.co)", flag="--endpoint", value=TEXT
        ),
    )
    repo: str = field(
        default=DATA_REPO,
        metadata=setting(f"dataset repository (default: {DATA_REPO})", flag="--repo", value=TEXT),
    )
    revision: str = field(
        default="main",
        metadata=setting("branch, tag or commit (default: main)", flag="--revision", value=TEXT),
    )
    out: str = field(
        default="data/raw",
        metadata=setting("where raw files land (default: data/raw)", flag="--out", value=OUTPUT_DIR),
    )


def build_parser() -> ArgumentParser:
    """The command line of ``python -m e2c.data.download`` (``bash scripts/download_datasets.sh``)."""
    p = ArgumentParser(prog="download_datasets", description=f"Download {DATA_REPO} (resumable, verified).")
    add_setting_flags(p, DownloadSettings)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args = from_flags(ap.parse_args(argv), DownloadSettings)
    if not _REPO_ID.fullmatch(args.repo):
        ap.error(f"--repo {args.repo!r} is not a repository id (owner/name), e.g. {DATA_REPO}")
    base = endpoint(args.mirror, args.endpoint)
    hf_token()
    check_output_dir(args.out, "--out")  # before the network: a bad folder costs no download
    checks_done()
    paths = download(args.dataset, args.out, args.repo, base, args.revision)
    for p in paths:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    run_main(main)
