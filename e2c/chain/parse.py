"""Parsing E2C responses into phases (the parser behind :meth:`e2c.chain.ChainFormat.parse`).

Import these names from :mod:`e2c.chain`, the chain format's public face. Parsing never raises on model
output: a malformed response becomes a :class:`ParsedChain` whose flags say what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from e2c.chain.tags import ChainTags

# Every value of ParsedChain.status, "ok" first.
STATUSES = (
    "ok",
    "no_tags",
    "truncated_exploration",
    "missing_explore_close",
    "missing_execution",
    "truncated_execution",
    "empty_phase",
    "repeated_tags",
    "trailing_text",
)


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


def parse_chain(response: str, fmt: ChainTags, prefilled: bool | None = None) -> ParsedChain:
    """Split a response into exploration and execution.

    Args:
        response: the model output. Either the continuation after a prefilled opening tag, or a text that
            itself starts with the opening tag.
        fmt: the chain format (:func:`e2c.chain.parse_chain` defaults it to :data:`e2c.chain.E2C`).
        prefilled: whether the opening tag was prefilled. ``None`` (default) infers it: the tag is assumed
            prefilled when the format prefills and the text does not start with it.

    Rules: the exploration runs from the opening tag to the first exploration boundary (its closing tag,
    or the execution's opening tag when the closing tag is empty or missing). The execution starts at the
    first ``execute_open`` after that and runs to the first ``execute_close`` after it, or to the end
    (truncated). A tag seen more than once is reported in ``repeated_tags``.
    """
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


def phase_char_spans(
    response: str, fmt: ChainTags, prefilled: bool | None = None
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
        exec_end = p.execute_span[1] + len(fmt.execute_close) - p.offset
    return {"exploration": (0, max(end, 0)), "execution": (max(end, 0), exec_end)}
