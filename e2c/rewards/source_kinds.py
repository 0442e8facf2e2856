"""Which data sources are graded as a kind other than the default, for rows that do not say.

Every row the toolkit writes names its kind (``extra_info.kind``, required by :mod:`e2c.data.schema`);
this is the fallback of :func:`e2c.rewards.verl_score.kind_for_source` for rows from elsewhere (verl's
own preprocessors, the paper's release), matched as a fragment of the lower-cased ``data_source``.

The truth is each :class:`e2c.data.registry.DatasetSpec`'s ``kind``; this is a copy of what
:func:`e2c.data.registry.source_kinds` derives from it, kept here because the rewards sit below the data
layer (``e2c.data`` imports ``e2c.rewards``; an import back, even inside a function, would be a cycle).
``tests/rewards/test_answer_kinds_cpu.py`` fails, printing the value to paste here, when the registry and this
copy disagree. Do not edit by hand.
"""

from __future__ import annotations

SOURCE_KINDS: dict[str, str] = {
    "anatomy": "mcq",
    "clinical_knowledge": "mcq",
    "code_generation_lite": "code",
    "codeforces": "code",
    "college_biology": "mcq",
    "college_medicine": "mcq",
    "deepcoder-preview-dataset": "code",
    "humaneval": "code",
    "livecodebench": "code",
    "mbpp": "code",
    "medical_genetics": "mcq",
    "medmcqa": "mcq",
    "medqa": "mcq",
    "mmlu": "mcq",
    "professional_medicine": "mcq",
    "taco": "code",
}
