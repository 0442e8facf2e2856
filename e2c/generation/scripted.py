"""A scripted backend for tests: the "model" writes given texts, through the same stop, budget and
token-accounting rules as the real backends.

Its tokenizer is a deterministic word-level one (tags and ``<|...|>`` markers are single tokens, words,
runs of whitespace and single punctuation marks are tokens), so a test can count tokens by hand. A script
is either a function ``(prompt, sample_index) -> continuation`` or, via :meth:`ScriptedGenerator.from_responses`,
a table of whole assistant responses per problem from which the continuation of any prompt (the full chain,
the exploration, or the execution of a given plan) is derived.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from e2c.chain import E2C, ChainFormat
from e2c.generation.base import DEFAULT_SAMPLING, Completion, Sampling, Usage, finish, split_stops

_TOKEN = re.compile(r"<\|?/?[A-Za-z_]+\|?>|\s+|\w+|.", re.DOTALL)
ASSISTANT = "<|assistant|>\n"


class ScriptTokenizer:
    """A word-level tokenizer with a growing vocabulary and a minimal chat template."""

    eos_token = "<|eos|>"
    pad_token = "<|pad|>"

    def __init__(self, specials: Sequence[str] = E2C.tags) -> None:
        self._ids: dict[str, int] = {}
        self._toks: list[str] = []
        self.all_special_tokens = [self.eos_token, self.pad_token, *specials]
        for t in self.all_special_tokens:
            self._id(t)
        self.added_tokens_encoder = {t: self._ids[t] for t in specials}
        self.eos_token_id = self._ids[self.eos_token]
        self.pad_token_id = self._ids[self.pad_token]

    def _id(self, piece: str) -> int:
        if piece not in self._ids:
            self._ids[piece] = len(self._toks)
            self._toks.append(piece)
        return self._ids[piece]

    def tokenize(self, text: str) -> list[str]:
        return _TOKEN.findall(text)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self._id(p) for p in self.tokenize(text)]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        skip = set(self.all_special_tokens) if skip_special_tokens else set()
        return "".join(self._toks[i] for i in ids if self._toks[i] not in skip)

    def __len__(self) -> int:
        return len(self._toks)

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, str]],
        tokenize: bool = False,
        add_generation_prompt: bool = True,
    ) -> str:
        text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
        return text + (ASSISTANT if add_generation_prompt else "")


Script = Callable[[str, int], str]


class ScriptedGenerator:
    """:class:`e2c.generation.base.Generator` whose outputs are scripted; records every call in ``calls``."""

    name = "scripted"

    def __init__(self, script: Script, tokenizer: ScriptTokenizer | None = None) -> None:
        self.script = script
        self.tokenizer = tokenizer or ScriptTokenizer()
        self.usage = Usage()
        self.calls: list[dict[str, Any]] = []

    @classmethod
    def from_responses(
        cls, responses: Mapping[str, Sequence[str]], fmt: ChainFormat = E2C, default: str = ""
    ) -> ScriptedGenerator:
        """Script from whole responses: ``{problem substring: [response of sample 0, 1, ...]}``.

        A response is what the model writes after the prompt in full-chain mode (after the prefilled
        opening tag). For a prompt whose assistant turn already holds text, the continuation is the rest
        of the response if the written text is its prefix; if the written text diverged (an exploration
        closed for the model, or another plan to execute), the response's execution is written. Prompts
        matching no key get ``default``.
        """

        def script(prompt: str, j: int) -> str:
            key = next((k for k in responses if k in prompt), None)
            if key is None or not responses[key]:
                return default
            full = responses[key][j % len(responses[key])]
            written = prompt.rsplit(ASSISTANT, 1)[-1]
            head = fmt.assistant_prefix("full")
            if head and written.startswith(head):
                written = written[len(head) :]
            if full.startswith(written):
                return full[len(written) :]
            marker = fmt.close_exploration()
            return full.split(marker, 1)[1] if marker in full else ""

        return cls(script)

    def generate(
        self, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING
    ) -> list[list[Completion]]:
        tok = self.tokenizer
        n, max_tokens = sampling.n, sampling.max_tokens
        self.calls.append({"prompts": list(prompts), **asdict(sampling), "stop": list(sampling.stop)})
        stops = split_stops(tok, sampling.stop, [tok.eos_token_id])
        # The script's text ends the turn: an EOS follows it, as a model's would.
        out = [
            [
                finish([*tok.encode(self.script(p, j)), tok.eos_token_id], tok.decode, stops, max_tokens)
                for j in range(n)
            ]
            for p in prompts
        ]
        self.usage.add([len(tok.encode(p)) for p in prompts], out)
        return out
