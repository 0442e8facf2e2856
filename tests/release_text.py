"""Text of the paper's release that the release-compatibility tests (eval's prompt and data) compare with."""

SUFFIX = "Provide the final answer in the boxed{}. Please reasoning step-by-step."
OLD_SUFFIX = (
    "Provide the final answer in the boxed{}.Please reasoning step-by-step."  # the SFT data's spelling
)
CHAIN = "<EXPLORATION>1. add the numbers</EXPLORATION><EXECUTION>2 + 3 = 5, so \\boxed{5}</EXECUTION>"
