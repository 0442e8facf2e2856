"""The delimiters of an explore-then-execute chain: the ground floor of the chain format.

:class:`ChainTags` is what parsing (:mod:`e2c.chain.parse`) and token masks (:mod:`e2c.chain.tokens`) need
of a format; :class:`e2c.chain.ChainFormat` adds the prompt, the labels and the methods on top. Kept apart
so those two modules import nothing above them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChainTags:
    """The four delimiters and whether the assistant turn starts inside the exploration.

    A closing tag may be empty when the next opening tag implies it (labels), and ``execute_open`` may be
    empty when ``explore_close`` implies it (``<think>`` style).
    """

    explore_open: str = "<EXPLORATION>"
    explore_close: str = "</EXPLORATION>"
    execute_open: str = "<EXECUTION>"
    execute_close: str = "</EXECUTION>"
    prefill_assistant: bool = True

    @property
    def tags(self) -> tuple[str, ...]:
        """The non-empty delimiters, in chain order."""
        return tuple(
            t for t in (self.explore_open, self.explore_close, self.execute_open, self.execute_close) if t
        )
