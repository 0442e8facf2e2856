"""The Explore-Execute Chain format: the one place that knows about tags.

An E2C response is a short *exploration* (a plan) followed by a long *execution*::

    <EXPLORATION> plan ... </EXPLORATION><EXECUTION> steps ... \\boxed{42} </EXECUTION>

:class:`ChainFormat` describes one such format. Its default instance, :data:`E2C`, matches the released
checkpoint (``TingheOliver/Explore-Execute-Chain-Qwen``): four added special tokens, a user-prompt suffix
asking for a boxed answer, and an assistant turn prefilled with ``<EXPLORATION>``. Other formats (plain
text labels, ``<think>``-style) are other instances, never other code.

Everything else in the toolkit asks this module to build prompts, parse responses and map phases to
tokens. Parsing never raises on model output: a malformed response becomes a :class:`ParsedChain` whose
flags say what is wrong.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["full", "explore", "execute"]

# The release's evaluation config and TTS prompts append this to every question, with no separator.
RELEASE_PROMPT_SUFFIX = "Provide the final answer in the boxed{}. Please reasoning step-by-step."
# An earlier version of the release's code had no space after "boxed{}."; data in the wild carries either.
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
class ChainFormat:
    """One explore-then-execute response format.

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
    explore_open: str = "<EXPLORATION>"
    explore_close: str = "</EXPLORATION>"
    execute_open: str = "<EXECUTION>"
    execute_close: str = "</EXECUTION>"
    special_tokens: bool = True
    prompt_suffix: str = RELEASE_PROMPT_SUFFIX
    suffix_separator: str = ""
    prefill_assistant: bool = True
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
    def tags(self) -> tuple[str, ...]:
        """The non-empty delimiters, in chain order."""
        return tuple(
            t for t in (self.explore_open, self.explore_close, self.execute_open, self.execute_close) if t
        )

    @property
    def explore_boundary(self) -> str:
        """The delimiter that ends the exploration (the token the advantage weighting looks for)."""
        return self.explore_close or self.execute_open

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
            return f"{self.explore_open}{plan}{self.explore_close}{self.execute_open}"
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
        return f"{self.explore_open}{exploration}{self.explore_close}{self.execute_open}{execution}{end}"

    # ----------------------------------------------------------------------------------------- parsing
    def parse(self, response: str, prefilled: bool | None = None) -> ParsedChain:
        """Parse a response; never raises. See :func:`parse_chain`."""
        return parse_chain(response, self, prefilled)

    def render(self, response: str | ParsedChain) -> str:
        """Human-readable display with the phase labels."""
        p = response if isinstance(response, ParsedChain) else self.parse(response)
        if not p.has_exploration and not p.has_execution:
            return p.text.strip()
        parts = [self.explore_label, p.exploration.strip(), "", self.execute_label, p.execution.strip()]
        return "\n".join(parts).rstrip()


@dataclass(frozen=True)
class ParsedChain:
    """A response split into phases. Character spans index :attr:`text`.

    ``text`` is the response with the prefilled opening tag restored, so spans are comparable across
    prefilled and non-prefilled inputs; ``offset`` is how many characters were prepended (0 or
    ``len(explore_open)``), so ``span - offset`` indexes the original string.
    """

    text: str
    offset: int
    exploration: str
    execution: str
    explore_span: tuple[int, int] | None  # content of the exploration, tags excluded
    execute_span: tuple[int, int] | None
    explore_end: int | None  # end of the exploration boundary tag (inclusive span end), if closed
    has_exploration: bool
    has_execution: bool
    explore_closed: bool
    execute_closed: bool
    repeated_tags: tuple[str, ...] = field(default_factory=tuple)
    trailing_text: str = ""

    @property
    def well_formed(self) -> bool:
        """Both phases present and closed, in order, each tag once, nothing after the chain."""
        return (
            self.has_exploration
            and self.has_execution
            and self.explore_closed
            and self.execute_closed
            and not self.repeated_tags
            and not self.trailing_text.strip()
            and bool(self.exploration.strip())
            and bool(self.execution.strip())
        )

    @property
    def status(self) -> str:
        """One word for the first problem found: ok, no_tags, truncated_exploration, missing_explore_close,
        missing_execution, truncated_execution, empty_phase, repeated_tags, trailing_text."""
        if not self.has_exploration and not self.has_execution:
            return "no_tags"
        if not self.explore_closed:
            return "missing_explore_close" if self.has_execution else "truncated_exploration"
        if not self.has_execution:
            return "missing_execution"
        if not self.execute_closed:
            return "truncated_execution"
        if not self.exploration.strip() or not self.execution.strip():
            return "empty_phase"
        if self.repeated_tags:
            return "repeated_tags"
        if self.trailing_text.strip():
            return "trailing_text"
        return "ok"

    @property
    def answer_region(self) -> str:
        """Where the final answer is read: the one rule every grader call follows.

        - the execution, whenever the chain has one (truncated or not): an answer written only in the
          plan is never credited, so RL cannot learn to guess in the exploration;
        - else, when the exploration was closed, the text after its boundary (an execution whose opening
          tag is missing);
        - else (no execution at all: untagged text, or a plan cut before it closed) the whole text, so
          models that ignore the format are still graded on what they wrote.
        """
        if self.has_execution:
            return self.execution
        if self.explore_end is not None:
            return self.text[self.explore_end :]
        return self.text


def _find(text: str, tag: str, start: int = 0) -> int:
    return text.find(tag, start) if tag else -1


def parse_chain(response: str, fmt: ChainFormat | None = None, prefilled: bool | None = None) -> ParsedChain:
    """Split a response into exploration and execution.

    Args:
        response: the model output. Either the continuation after a prefilled opening tag, or a text that
            itself starts with the opening tag.
        fmt: the chain format (default :data:`E2C`).
        prefilled: whether the opening tag was prefilled. ``None`` (default) infers it: the tag is assumed
            prefilled when the format prefills and the text does not start with it.

    Rules: the exploration runs from the opening tag to the first exploration boundary (its closing tag,
    or the execution's opening tag when the closing tag is empty or missing). The execution starts at the
    first ``execute_open`` after that and runs to the first ``execute_close`` after it, or to the end
    (truncated). A tag seen more than once is reported in ``repeated_tags``.
    """
    fmt = fmt or E2C
    stripped = response.lstrip()
    if prefilled is None:
        prefilled = fmt.prefill_assistant and not stripped.startswith(fmt.explore_open)
    offset = len(fmt.explore_open) if prefilled else 0
    text = (fmt.explore_open + response) if prefilled else response

    repeated = tuple(t for t in dict.fromkeys(fmt.tags) if text.count(t) > 1)

    o = _find(text, fmt.explore_open)
    has_expl = o >= 0
    explore_span = None
    explore_end = None
    explore_closed = False
    exploration = ""
    search_from = 0
    if has_expl:
        start = o + len(fmt.explore_open)
        c = _find(text, fmt.explore_close, start)
        if c < 0 and fmt.execute_open:
            # A missing (or empty) closing tag: the execution's opening tag still ends the plan.
            eo = _find(text, fmt.execute_open, start)
            if eo >= 0:
                explore_closed = not fmt.explore_close
                explore_span = (start, eo)
                explore_end = eo + len(fmt.execute_open) if not fmt.explore_close else None
                search_from = eo
            else:
                explore_span = (start, len(text))
                search_from = len(text)
        elif c >= 0:
            explore_closed = True
            explore_span = (start, c)
            explore_end = c + len(fmt.explore_close)
            search_from = explore_end
        else:
            explore_span = (start, len(text))
            search_from = len(text)
        exploration = text[explore_span[0] : explore_span[1]]

    has_exec = False
    execute_closed = False
    execute_span = None
    execution = ""
    trailing = ""
    if fmt.execute_open:
        eo = _find(text, fmt.execute_open, search_from)
        if eo >= 0:
            has_exec = True
            estart = eo + len(fmt.execute_open)
    elif explore_closed:
        has_exec = True
        estart = search_from
    if has_exec:
        ec = _find(text, fmt.execute_close, estart)
        if ec >= 0:
            execute_closed = True
            execute_span = (estart, ec)
            trailing = text[ec + len(fmt.execute_close) :]
        else:
            # With no closing tag in the format, an execution ends with the text (EOS closes it).
            execute_closed = not fmt.execute_close
            execute_span = (estart, len(text))
        execution = text[execute_span[0] : execute_span[1]]

    return ParsedChain(
        text=text,
        offset=offset,
        exploration=exploration,
        execution=execution,
        explore_span=explore_span,
        execute_span=execute_span,
        explore_end=explore_end,
        has_exploration=has_expl,
        has_execution=has_exec,
        explore_closed=explore_closed,
        execute_closed=execute_closed,
        repeated_tags=repeated,
        trailing_text=trailing,
    )


# --------------------------------------------------------------------------------------------- tokens
def tag_token_ids(tokenizer: Any, fmt: ChainFormat | None = None) -> dict[str, int]:
    """Look up the token id of every tag of a special-token format.

    Raises ``ValueError`` naming the tag when a tag is not a single token of this tokenizer (use
    :func:`e2c.models.ensure_chain_tokens` to add them).
    """
    fmt = fmt or E2C
    ids: dict[str, int] = {}
    for tag in fmt.tags:
        enc = tokenizer.encode(tag, add_special_tokens=False)
        if len(enc) != 1:
            raise ValueError(
                f"tag {tag!r} is not a single token of this tokenizer (encodes to {len(enc)} ids); "
                "add the chain tokens with e2c.models.ensure_chain_tokens"
            )
        ids[tag] = int(enc[0])
    return ids


def exploration_token_mask(token_ids: Any, boundary_id: int, valid_mask: Any = None) -> Any:
    """Mask of exploration tokens: every token up to and including the first ``boundary_id``.

    Works on a 1-D or 2-D (batch, time) torch tensor or numpy array, without importing either. Rows with
    no boundary token get an all-zero mask: an untagged response is *not* treated as exploration (the
    paper's code scales the whole response in that case, which rewards dropping the tags).

    Args:
        token_ids: response token ids, shape (T,) or (B, T).
        boundary_id: id of the token that ends the exploration (``</EXPLORATION>`` by default).
        valid_mask: optional response mask of the same shape (padding is never exploration).

    Returns:
        A boolean array/tensor of the same shape.
    """
    is_b = token_ids == boundary_id
    counts = is_b.cumsum(-1)
    has_b = counts[..., -1:] > 0
    # No boundary seen yet, or this token is the first boundary.
    mask = ((counts == 0) | (is_b & (counts == 1))) & has_b
    if valid_mask is not None:
        mask = mask & (valid_mask != 0)
    return mask


def char_span_token_mask(offsets: Sequence[tuple[int, int]], span: tuple[int, int] | None) -> list[bool]:
    """Tokens whose character range overlaps ``span`` (half-open). For formats whose tags are not single
    tokens: take the offsets from a fast tokenizer's ``return_offsets_mapping``."""
    if span is None:
        return [False] * len(offsets)
    s, e = span
    return [a < e and b > s and b > a for a, b in offsets]


def phase_char_spans(
    response: str, fmt: ChainFormat | None = None, prefilled: bool | None = None
) -> dict[str, tuple[int, int] | None]:
    """Character spans in ``response`` itself (not the prefilled text) of each phase, tags included.

    ``exploration`` runs from the start of the response to the end of the exploration boundary tag (the
    span the advantage weighting scales); ``execution`` runs from there to the end of the execution's
    closing tag (or the end of the text). A response with no closed exploration has no exploration span.
    """
    p = parse_chain(response, fmt, prefilled)
    if p.explore_end is None:
        return {"exploration": None, "execution": None}
    end = p.explore_end - p.offset
    exec_end = len(response)
    if p.execute_closed and p.execute_span is not None:
        fmt = fmt or E2C
        exec_end = p.execute_span[1] + len(fmt.execute_close) - p.offset
    return {"exploration": (0, max(end, 0)), "execution": (max(end, 0), exec_end)}


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


def get_format(name: str | ChainFormat) -> ChainFormat:
    """Look up a format by name; an unknown name raises ``ValueError`` listing the valid ones."""
    if isinstance(name, ChainFormat):
        return name
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown chain format {name!r}; valid: {', '.join(FORMATS)}") from None
