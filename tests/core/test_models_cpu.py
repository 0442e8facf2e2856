"""Model specs: tiny (deterministic), embedded (packaged GGUF), local folders, hub ids, chain tokens."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from e2c.chain import E2C, THINK, tag_token_ids
from e2c.core.errors import UserError
from e2c.core.files import atomic_replace_dir
from e2c.core.models import (
    ModelSpecError,
    build_tiny_model,
    build_tiny_tokenizer,
    ensure_chain_tokens,
    load_model_and_tokenizer,
    resolve_model,
)


def _digest(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())}


def test_tiny_is_deterministic(tmp_path: Path) -> None:
    a = build_tiny_model(root=tmp_path / "a")
    b = build_tiny_model(root=tmp_path / "b")
    assert _digest(a) == _digest(b)
    assert (a / "model.safetensors").is_file() and (a / "tokenizer.json").is_file()


def test_tiny_loads_with_tags(tiny_path: str) -> None:
    model, tok, res = load_model_and_tokenizer(tiny_path)
    assert res.source == "local" and model.config.model_type == "qwen3"
    assert len(tag_token_ids(tok, E2C)) == 4
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert sum(p.numel() for p in model.parameters()) < 500_000
    assert resolve_model("tiny").source == "tiny"


def test_embedded_resolves(embedded_path: str, embedded_tok) -> None:
    assert (Path(embedded_path) / "config.json").is_file()
    assert len(tag_token_ids(embedded_tok, E2C)) == 4
    assert embedded_tok.eos_token == "<|im_end|>"
    assert "<|im_start|>assistant" in E2C.render_prompt(embedded_tok, "Q?")


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("no-such-model", "unknown model 'no-such-model'"),
        ("", "empty model spec"),
        ("./not/a/folder", "unknown model"),
    ],
)
def test_bad_specs_are_one_clear_line(spec: str, match: str) -> None:
    with pytest.raises(ModelSpecError, match=match) as e:
        resolve_model(spec)
    msg = str(e.value)
    assert "\n" not in msg and "'tiny', 'embedded'" in msg


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelSpecError, match=r"no config\.json"):
        resolve_model(str(tmp_path))


def test_hub_offline_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelSpecError, match="--model embedded or --model tiny"):
        resolve_model("TingheOliver/Explore-Execute-Chain-Qwen", "8B")


def test_ensure_chain_tokens_adds_and_resizes(tiny_path: str) -> None:
    from transformers import AutoModelForCausalLM

    tok = build_tiny_tokenizer(THINK)  # no E2C tags
    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    model.resize_token_embeddings(len(tok))
    before = model.get_input_embeddings().weight.detach().clone()
    spelled = {t: tok.encode(t, add_special_tokens=False) for t in E2C.tags}
    assert ensure_chain_tokens(model, tok, E2C) == 4
    emb = model.get_input_embeddings().weight.detach()
    assert emb.shape[0] == len(tok) == before.shape[0] + 4
    # Reference loop: each tag's row is the mean of the rows of its spelling's pieces.
    for tag, pieces in spelled.items():
        assert len(pieces) > 1
        want = sum(before[i] for i in pieces) / len(pieces)
        assert torch.allclose(emb[tok.convert_tokens_to_ids(tag)], want, atol=1e-5)
    assert len({tuple(emb[i].tolist()) for i in tag_token_ids(tok, E2C).values()}) == 4  # four distinct rows
    assert len(tag_token_ids(tok, E2C)) == 4
    assert ensure_chain_tokens(model, tok, E2C) == 0


def test_rebuild_replaces_the_folder_whole(tmp_path: Path) -> None:
    """A forced rebuild swaps in a complete new folder; a build that fails leaves the old one as it was."""
    out = build_tiny_model(root=tmp_path)
    (out / "stale.txt").write_text("from an older build")
    assert build_tiny_model(root=tmp_path, force=True) == out
    assert (out / "config.json").is_file() and not (out / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temporary folders left

    def broken(folder: Path) -> None:
        (folder / "config.json").write_text("{}")
        raise OSError(28, "No space left on device")

    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(UserError, match="No space left"):
        atomic_replace_dir(out, broken)
    assert sorted(p.name for p in out.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_hub_probe_answers_at_once_without_a_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no hub the probe says why within its limit (not the hub libraries' five growing retries), once
    per endpoint; an HTTP answer of any status counts as a hub; offline mode needs no probe."""
    import socket
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from e2c.core import models

    monkeypatch.setattr(models, "_HUB_PROBES", {})
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    silent = socket.socket()  # listens, never accepts: a connection that hangs until the limit
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    start = time.monotonic()
    why = models.hub_unreachable(timeout=0.5)
    assert why and "did not answer within 0.5 s" in why, why
    assert time.monotonic() - start < 2.0
    start = time.monotonic()
    assert models.hub_unreachable(timeout=0.5) == why and time.monotonic() - start < 0.1  # probed once
    silent.close()

    class NotFound(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        assert models.hub_unreachable(timeout=2.0) is None
    finally:
        server.shutdown()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert models.hub_unreachable() == "HF offline mode is on"
