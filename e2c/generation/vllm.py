"""The vLLM backend (GPU). ``vllm`` is imported only when this backend is built, so CPU machines never
need it.

One ``LLM.generate`` call per :meth:`VLLMGenerator.generate`: all prompts x samples at once, prefix caching
on (the n samples of a prompt and the execution phase's re-sent exploration share their prefixes), tensor
parallel over ``tensor_parallel_size`` GPUs. Special tokens are kept when detokenizing
(``skip_special_tokens=False``): the chain tags must survive into the text the grader parses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from e2c.generation.base import Completion, StopSpec, Usage, check_args, derive_seed, split_stops


def completion_from_vllm(output: Any, stops: StopSpec, eos_ids: set[int]) -> Completion:
    """Map one vLLM ``CompletionOutput`` to a :class:`Completion`.

    vLLM reports a stop token as its id in ``stop_reason``; it is reported here as the tag string, and
    the tag text is removed from ``text`` if the detokenizer kept it, so both stop kinds read the same.
    """
    ids = list(output.token_ids)
    text = output.text
    finish_reason = "length" if output.finish_reason == "length" else "stop"
    raw = output.stop_reason
    reason: str | None = None
    if isinstance(raw, int):
        reason = stops.token_ids.get(raw)
        if reason and text.endswith(reason):
            text = text[: -len(reason)]
    elif isinstance(raw, str):
        reason = raw
    if finish_reason == "stop" and reason is None and ids and ids[-1] not in eos_ids:
        # Stopped on a token the stop list knows under its id but vLLM did not report.
        reason = stops.token_ids.get(ids[-1])
    return Completion(text, ids, finish_reason, reason)


class VLLMGenerator:
    """:class:`e2c.generation.base.Generator` over ``vllm.LLM``."""

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        trust_remote_code: bool = False,
        seed: int = 0,
    ) -> None:
        from vllm import LLM  # lazy: GPU-only dependency

        self.llm = LLM(
            model=model_path,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            trust_remote_code=trust_remote_code,
            enable_prefix_caching=True,
            seed=seed,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.usage = Usage()

    def generate(
        self,
        prompts: Sequence[str],
        n: int = 1,
        max_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        check_args(n, max_tokens, temperature, top_p)
        eos = {self.tokenizer.eos_token_id}
        stops = split_stops(self.tokenizer, stop, list(eos))
        # One seed per request: a prompt's samples do not depend on what else is in the batch.
        params = [
            SamplingParams(
                n=n,
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                stop=stops.strings or None,
                stop_token_ids=sorted(stops.token_ids) or None,
                skip_special_tokens=False,
                include_stop_str_in_output=False,
                seed=derive_seed(seed, i),
            )
            for i in range(len(prompts))
        ]
        outs = self.llm.generate(list(prompts), params, use_tqdm=False)
        result = [[completion_from_vllm(o, stops, eos) for o in ro.outputs] for ro in outs]
        self.usage.add([len(ro.prompt_token_ids or ()) for ro in outs], result)
        return result
