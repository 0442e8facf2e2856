"""The Explore-Execute Chain format: the one place that knows about tags.

An E2C response is a short exploration (a plan) followed by a long execution::

    <EXPLORATION> plan ... </EXPLORATION><EXECUTION> steps ... \\boxed{42} </EXECUTION>

:class:`ChainFormat` describes one format (:data:`E2C` matches the released checkpoint; other formats are other
instances, never other code). Every other module asks this one to build prompts, parse responses and map phases
to tokens; parsing never raises on model output (a malformed response is a :class:`ParsedChain` whose flags say
what is wrong). It also holds the one rule of two-phase generation: how an exploration ended
(:func:`exploration_stop`) and what is written after it (:func:`written_after_exploration`).
More: docs/chain-format-and-grader.md, "The chain format".
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from e2c.chain import parse as chain_parse
from e2c.chain import tokens as chain_tokens
from e2c.chain.parse import ParsedChain
from e2c.chain.tags import ChainTags
from e2c.chain.tokens import char_span_token_mask, exploration_token_mask

__all__ = [
    "E2C",
    "E2C_MEDICAL",
    "FORMATS",
    "MEDICAL_PROMPT_SUFFIX",
    "MEDICAL_SYSTEM_PROMPT",
    "PLAIN",
    "RELEASE_PROMPT_SUFFIX",
    "THINK",
    "ChainFormat",
    "ParsedChain",
    "carried_suffix",
    "char_span_token_mask",
    "exploration_stop",
    "exploration_token_mask",
    "get_format",
    "parse_chain",
    "phase_char_spans",
    "strip_prompt_suffix",
    "tag_token_ids",
    "written_after_exploration",
]

Mode = Literal["full", "explore", "execute"]
# How an exploration ended: the model wrote the boundary ("tag"), its budget ran out ("budget"), the model
# ended its turn ("eos"); "none": a single-call chain that never closed its exploration.
ExploreStop = Literal["tag", "budget", "eos", "none"]
CLOSED_FOR_MODEL: tuple[ExploreStop, ...] = ("budget", "eos")  # the boundary was written for the model
T = TypeVar("T")


def exploration_stop(boundary_sampled: bool, budget_spent: bool) -> ExploreStop:
    """How an exploration generated on its own (two-phase) ended.

    >>> exploration_stop(True, False), exploration_stop(False, True), exploration_stop(False, False)
    ('tag', 'budget', 'eos')
    """
    if boundary_sampled:
        return "tag"
    return "budget" if budget_spent else "eos"


def written_after_exploration(boundary_sampled: bool, boundary: T, execute_opener: Sequence[T]) -> list[T]:
    """What is written for the model between an exploration and its execution, in any unit (tags as text,
    token ids): the exploration boundary when the model did not write it (a budget or an EOS ended the
    exploration), then the execution's opener. Written tokens are never counted as generated, and RL masks
    them out of the loss.

    >>> written_after_exploration(False, "</EXPLORATION>", ["<EXECUTION>"])
    ['</EXPLORATION>', '<EXECUTION>']
    >>> written_after_exploration(True, 7, [8])
    [8]
    """
    return ([] if boundary_sampled else [boundary]) + list(execute_opener)


# The release's evaluation config and TTS prompts append this to every question, with no separator.
RELEASE_PROMPT_SUFFIX = "Provide the final answer in the boxed{}. Please reasoning step-by-step."
# The same suffix without the space after "boxed{}.": data in the wild carries either spelling.
RELEASE_PROMPT_SUFFIX_NO_SPACE = "Provide the final answer in the boxed{}.Please reasoning step-by-step."
# The release's optional prompts for the medical sets (off by default there, as here): a system message
# and a suffix that starts with a real newline and has no space after "step-by-step.".
MEDICAL_SYSTEM_PROMPT = (
    "You are a medical expert. You will be given a medical question and several candidate answers. "
    "Please choose the best answer based on your medical knowledge. You must give your answer in the "
    "format: 'The correct answer is boxed{A,B,C or D}'."
)
MEDICAL_PROMPT_SUFFIX = "\nPlease reasoning step-by-step.Provide the final answer in the boxed{}."
# Every suffix the release has used: they ask for the same thing, so a text carrying any of them is
# never given another one by a format whose own suffix is one of them.
RELEASE_SUFFIXES = (RELEASE_PROMPT_SUFFIX, RELEASE_PROMPT_SUFFIX_NO_SPACE, MEDICAL_PROMPT_SUFFIX)


@functools.lru_cache(maxsize=64)
def _suffix_pattern(suffix: str) -> re.Pattern[str]:
    """A pattern for ``suffix`` at the end of a text, whitespace-insensitive: any run of whitespace (or
    none) may stand between its characters, and trailing whitespace may follow it."""
    chars = [re.escape(c) for c in suffix if not c.isspace()]
    return re.compile(r"\s*" + r"\s*".join(chars) + r"\s*\Z")


def suffix_family(suffix: str) -> tuple[str, ...]:
    """The suffixes a text may already carry in place of ``suffix``: all the release's when ``suffix`` is
    one of them (in any spelling), else ``suffix`` alone."""
    if not suffix.strip():
        return ()
    if any(_suffix_pattern(s).fullmatch(suffix) for s in RELEASE_SUFFIXES):
        return RELEASE_SUFFIXES
    return (suffix,)


def carried_suffix(text: str, suffix: str) -> re.Match[str] | None:
    """Where ``text`` ends with ``suffix`` (or a suffix of its family), ignoring whitespace; else None."""
    for s in suffix_family(suffix):
        m = _suffix_pattern(s).search(text)
        if m is not None:
            return m
    return None


def strip_prompt_suffix(text: str, suffix: str = RELEASE_PROMPT_SUFFIX) -> str:
    """``text`` without a trailing prompt suffix (any spelling of ``suffix``'s family) and whitespace.

    Raw data (the paper's SFT and RL files, evaluation prompts) may carry the suffix already; stripping it
    lets the chain format add its own exactly once.
    """
    m = carried_suffix(text, suffix)
    return (text[: m.start()] if m else text).strip()


@dataclass(frozen=True)
class ChainFormat(ChainTags):
    """One explore-then-execute response format: the delimiters (:class:`e2c.chain.tags.ChainTags`) and
    how a problem is put to the model.

    Attributes:
        name: short identifier, used in configs and on the command line.
        explore_open / explore_close / execute_open / execute_close: the four delimiters. A closing tag
            may be empty when the next opening tag implies it (e.g. labels), and ``execute_open`` may be
            empty when ``explore_close`` implies it (``<think>`` style); at least one of
            ``explore_close`` and ``execute_open`` must be non-empty so the phases can be told apart.
        special_tokens: the delimiters are added special tokens (single token ids) of the tokenizer.
        prompt_suffix / suffix_separator: appended to the user's question.
        prefill_assistant: the assistant turn starts with ``explore_open`` already written, so generated
            text begins inside the exploration.
        explore_label / execute_label: display labels only; never parsed from model output.
        system_prompt: optional system message.
    """

    name: str = "e2c"
    special_tokens: bool = True
    prompt_suffix: str = RELEASE_PROMPT_SUFFIX
    suffix_separator: str = ""
    explore_label: str = "EXPLORATION PHASE:"
    execute_label: str = "EXECUTION PHASE:"
    system_prompt: str | None = None

    def __post_init__(self) -> None:
        if not self.explore_open:
            raise ValueError(f"chain format {self.name!r}: explore_open must be non-empty")
        if not (self.explore_close or self.execute_open):
            raise ValueError(
                f"chain format {self.name!r}: explore_close and execute_open cannot both be empty"
            )

    @property
    def explore_boundary(self) -> str:
        """The delimiter that ends the exploration (the token the advantage weighting looks for)."""
        return self.explore_close or self.execute_open

    @property
    def execute_bridge(self) -> str:
        """The execution's opener as written after the boundary: ``execute_open``, or nothing when the
        boundary is ``execute_open`` itself (a format with no ``explore_close``)."""
        return self.execute_open if self.explore_close else ""

    def close_exploration(self, boundary_sampled: bool = False) -> str:
        """The text written for the model after an exploration (:func:`written_after_exploration`).

        >>> E2C.close_exploration(), E2C.close_exploration(boundary_sampled=True), THINK.close_exploration()
        ('</EXPLORATION><EXECUTION>', '<EXECUTION>', '</think>')
        """
        bridge = [self.execute_bridge] if self.execute_bridge else []
        return "".join(written_after_exploration(boundary_sampled, self.explore_boundary, bridge))

    def replace(self, **changes: Any) -> ChainFormat:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    # ----------------------------------------------------------------------------------------- prompts
    def user_content(self, problem: str) -> str:
        """The user message: the problem followed by the format's suffix.

        A problem that already ends with the suffix, in any whitespace spelling (``boxed{}. Please`` or
        ``boxed{}.Please``, trailing whitespace allowed), or with another of the release's suffixes when
        this format uses one of them, is returned unchanged: the suffix is never appended twice.
        """
        if not self.prompt_suffix or carried_suffix(problem, self.prompt_suffix):
            return problem
        return f"{problem}{self.suffix_separator}{self.prompt_suffix}"

    def messages(self, problem: str, system: str | None = None) -> list[dict[str, str]]:
        """Chat messages (system if any, then user) for a problem."""
        sys_msg = system if system is not None else self.system_prompt
        msgs = [{"role": "system", "content": sys_msg}] if sys_msg else []
        msgs.append({"role": "user", "content": self.user_content(problem)})
        return msgs

    def assistant_prefix(self, mode: Mode = "full", plan: str | None = None) -> str:
        """Text the assistant turn starts with, before generation.

        ``full`` and ``explore``: the prefilled opening tag (if the format prefills).
        ``execute``: the whole exploration (``plan``) closed, and the execution opened, so the model
        continues with the execution of the given plan.
        """
        if mode in ("full", "explore"):
            return self.explore_open if self.prefill_assistant else ""
        if mode == "execute":
            if plan is None:
                raise ValueError("mode='execute' needs the plan to execute")
            return f"{self.explore_open}{plan}{self.close_exploration()}"
        raise ValueError(f"unknown mode {mode!r}; valid: full, explore, execute")

    def stop_strings(self, mode: Mode = "full") -> list[str]:
        """Strings that end generation in a mode (EOS is the backend's business)."""
        if mode == "explore":
            return [self.explore_boundary]
        if mode in ("full", "execute"):
            return [self.execute_close] if self.execute_close else []
        raise ValueError(f"unknown mode {mode!r}; valid: full, explore, execute")

    def render_prompt(
        self, tokenizer: Any, problem: str, mode: Mode = "full", plan: str | None = None
    ) -> str:
        """The full prompt text: chat template with a generation prompt, then the assistant prefix."""
        return self.render_chat(tokenizer, self.messages(problem), mode, plan)

    def render_chat(
        self,
        tokenizer: Any,
        messages: Sequence[Mapping[str, Any]],
        mode: Mode = "full",
        plan: str | None = None,
        **template_kwargs: Any,
    ) -> str:
        """:meth:`render_prompt` for chat messages already built (e.g. an SFT row's turns before its answer).

        The one place that turns messages into the text a model continues, so SFT can train on exactly
        the prompt inference sends. ``template_kwargs`` go to ``apply_chat_template`` (e.g.
        ``enable_thinking``); inference passes none.
        """
        text = tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=True, **template_kwargs
        )
        return text + self.assistant_prefix(mode, plan)

    def format_response(self, exploration: str, execution: str, closed: bool = True) -> str:
        """The tagged assistant response for an (exploration, execution) pair, as used for SFT."""
        end = self.execute_close if closed else ""
        return f"{self.explore_open}{exploration}{self.close_exploration()}{execution}{end}"

    # ----------------------------------------------------------------------------------------- parsing
    def parse(self, response: str, prefilled: bool | None = None) -> ParsedChain:
        """Parse a response; never raises. See :func:`parse_chain`.

        >>> p = E2C.parse("Add them.</EXPLORATION><EXECUTION>2 + 3 = 5</EXECUTION>")
        >>> p.status, p.exploration, p.execution
        ('ok', 'Add them.', '2 + 3 = 5')
        >>> E2C.parse("Add them, then").status
        'truncated_exploration'
        """
        return chain_parse.parse_chain(response, self, prefilled)

    def render(self, response: str | ParsedChain) -> str:
        """Human-readable display with the phase labels."""
        p = response if isinstance(response, ParsedChain) else self.parse(response)
        if not p.has_exploration and not p.has_execution:
            return p.text.strip()
        parts = [self.explore_label, p.exploration.strip(), "", self.execute_label, p.execution.strip()]
        return "\n".join(parts).rstrip()


# --------------------------------------------------------------------------------------------- registry
E2C = ChainFormat()
"""The released checkpoint's format."""

PLAIN = ChainFormat(
    name="plain",
    explore_open="EXPLORATION PHASE:",
    explore_close="",
    execute_open="EXECUTION PHASE:",
    execute_close="",
    special_tokens=False,
    prefill_assistant=True,
)
"""Plain-text labels, for base models without added tokens."""

THINK = ChainFormat(
    name="think",
    explore_open="<think>",
    explore_close="</think>",
    execute_open="",
    execute_close="",
    special_tokens=False,
    prefill_assistant=True,
)
"""``<think>`` style: the plan inside think tags, the execution after them."""

E2C_MEDICAL = E2C.replace(
    name="e2c-medical", system_prompt=MEDICAL_SYSTEM_PROMPT, prompt_suffix=MEDICAL_PROMPT_SUFFIX
)
"""The release's optional prompts for the medical sets: its medical system message and question suffix,
with the E2C tags and prefill."""

FORMATS: dict[str, ChainFormat] = {f.name: f for f in (E2C, PLAIN, THINK, E2C_MEDICAL)}


def parse_chain(response: str, fmt: ChainFormat | None = None, prefilled: bool | None = None) -> ParsedChain:
    """Split a response into exploration and execution; never raises. ``fmt`` defaults to :data:`E2C`.

    The rules are :func:`e2c.chain.parse.parse_chain`'s.
    """
    return chain_parse.parse_chain(response, fmt or E2C, prefilled)


def phase_char_spans(
    response: str, fmt: ChainFormat | None = None, prefilled: bool | None = None
) -> dict[str, tuple[int, int] | None]:
    """Character spans of each phase in ``response`` (see :func:`e2c.chain.parse.phase_char_spans`);
    ``fmt`` defaults to :data:`E2C`."""
    return chain_parse.phase_char_spans(response, fmt or E2C, prefilled)


def tag_token_ids(tokenizer: Any, fmt: ChainFormat | None = None) -> dict[str, int]:
    """The token id of every tag of a special-token format (``fmt`` defaults to :data:`E2C`); a tag that
    is not a single token raises ``ValueError`` (see :func:`e2c.chain.tokens.tag_token_ids`)."""
    return chain_tokens.tag_token_ids(tokenizer, fmt or E2C)


def get_format(name: str | ChainFormat) -> ChainFormat:
    """Look up a format by name; an unknown name raises ``ValueError`` listing the valid ones."""
    if isinstance(name, ChainFormat):
        return name
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown chain format {name!r}; valid: {', '.join(FORMATS)}") from None
