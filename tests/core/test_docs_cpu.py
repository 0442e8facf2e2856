"""The README stays a short front page and docs/ a manual whose links and commands work.

Checked without running or importing anything heavy: the README's size; every relative link in README.md and
docs/*.md (the file, and for a ``#anchor`` the heading, slugged as GitHub does); every command the docs name
(fenced shell blocks, and inline code that starts like a command): scripts and Python files exist, ``python -m
X`` names a module that can be found, other programs are on a short list of external tools; no issue
references; the README's two commands and the CI entry that runs the test command.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from e2c.commandline.command import BY_NAME

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_BYTES = 12_500
# The pages the README's map promises (each part of the pipeline has one).
DOC_PAGES = {
    "index.md",
    "data.md",
    "chain-format-and-grader.md",
    "generation-and-evaluation.md",
    "training.md",
    "test-time-scaling.md",
    "cluster-and-gpu.md",
    "bad-input.md",
    "verified-where.md",
    "results.md",
    "extending.md",
}

# Programs the docs may name that are not part of this repository.
EXTERNAL = {
    "pip",
    "pip3",
    "git",
    "sbatch",
    "srun",
    "salloc",
    "huggingface-cli",
    "hf",
    "ray",
    "tensorboard",
    "torchrun",
    "printf",
    "echo",
    "export",
    "source",
    "nvidia-smi",
    "ruff",
    "pytest",
    "conda",
    "uv",
}
PYTHONS = {"python", "python3"}
SHELLS = {"bash", "sh"}
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
# Inline code is a command when it starts with one of these words (after VAR=value prefixes) ...
INLINE_COMMAND_WORDS = PYTHONS | SHELLS | {"cd", "sbatch", "srun", "e2c"}
# ... or with a path under one of these folders, or with ./ or .venv/bin/.
CHECKED_DIRS = ("scripts/", "tts/", "bench/", "tests/", "e2c/", "configs/", ".ci/", "docs/")
# Paths under these are written by runs, not shipped.
GENERATED = ("tts/outputs/",)
PLACEHOLDER = re.compile(r"[<>*{}\[\]|$]|\.\.\.")
SEPARATORS = {"|", "||", "&&", ";"}
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
ISSUE_REFERENCES = (
    re.compile(r"(?<![\w&#/])#\d{1,5}\b"),  # "#12"; not "&#35;", "##", colours (#1f77b4, #123456), URLs
    re.compile(r"\b(?:issues?|PR|pull request)\s*#?\d+\b", re.IGNORECASE),
)


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def scan(text: str) -> Iterator[tuple[int, str | None, str]]:
    """(line number, fence language or None for prose, line) for every line outside the fence markers."""
    fence: tuple[str, str] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = (m.group(1), m.group(2).lower())
        elif fence is not None and m and m.group(1).startswith(fence[0]) and not m.group(2):
            fence = None
        else:
            yield n, None if fence is None else fence[1], line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, lang, line in scan(path.read_text(encoding="utf-8")):
        m = HEADING.match(line) if lang is None else None
        if m:
            base = slug(m.group(2))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else f"{base}-{k}")
    return out


def link_problems(path: Path) -> list[str]:
    problems = []
    for n, lang, line in scan(path.read_text(encoding="utf-8")):
        if lang is not None:
            continue
        prose = INLINE_CODE.sub(lambda m: "code", line)
        for target in LINK.findall(prose):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{rel(path)}:{n}: link {target!r}"
            if not dest.exists():
                problems.append(f"{where}: no such file {dest}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: no heading with anchor #{anchor} in {rel(dest)}")
    return problems


def module_findable(name: str) -> bool:
    """Whether ``python -m name`` can find its module, without importing it (nor, for ours, any parent)."""
    parts = name.split(".")
    local = ROOT / parts[0]
    if local.is_dir() or local.with_suffix(".py").is_file():
        locations: list[str] | None = [str(local)] if local.is_dir() else None
    else:
        spec = importlib.util.find_spec(parts[0])
        if spec is None:
            return False
        locations = list(spec.submodule_search_locations or []) or None
    for part in parts[1:]:
        if not locations:
            return False
        found: list[str] | None = None
        for loc in map(Path, locations):
            if (loc / part).is_dir():
                found = [str(loc / part)]
                break
            if (loc / f"{part}.py").is_file() or any(loc.glob(f"{part}.*.so")):
                found = []
                break
        if found is None:
            return False
        locations = found or None
    # A package runs through its __main__.
    return locations is None or any((Path(loc) / "__main__.py").is_file() for loc in locations)


def command_problems(words: list[str], cwd: Path) -> list[str]:
    """What is wrong with one simple command (its words after shell splitting), run from ``cwd``."""
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return []
    problems = []
    prog, args = words[0], words[1:]
    name = prog.rsplit("/", 1)[-1] if prog.startswith(".venv/bin/") else prog
    operand = next((a for a in args if not a.startswith("-")), None)
    if name in PYTHONS:
        if args and args[0] == "-m":
            module = args[1] if len(args) > 1 else ""
            if not PLACEHOLDER.search(module) and not module_findable(module):
                problems.append(f"python -m {module}: no such module")
        elif operand is not None and args[0] == operand and not (cwd / operand).is_file():
            problems.append(f"python {operand}: no such file")
    elif name in SHELLS:
        if operand is None or not (cwd / operand).is_file():
            problems.append(f"{name} {operand}: no such script")
    elif name == "e2c":  # the console command: its subcommand must be one it has
        if (
            operand is not None
            and not PLACEHOLDER.search(operand)
            and operand not in (*BY_NAME, "completion")
        ):
            problems.append(f"e2c {operand}: no such command (e2c/commandline/command.py)")
    elif name == "cd":
        if operand is None or not (cwd / operand).is_dir():
            problems.append(f"cd {operand}: no such folder")
    elif name in EXTERNAL:
        pass
    elif prog.startswith(("./", *CHECKED_DIRS)):
        if not PLACEHOLDER.search(prog) and not prog.startswith(GENERATED) and not (cwd / prog).exists():
            problems.append(f"{prog}: no such file")
    else:
        problems.append(f"{prog}: not a script of this repository nor a known external program")
    for word in args:  # every other repository path the command names, whatever runs it
        path = word.split("=", 1)[-1] if word.startswith("-") else word
        checked = path.startswith(CHECKED_DIRS) and not path.startswith(GENERATED)
        said = any(path in p for p in problems)  # one line per missing path
        if checked and not said and not PLACEHOLDER.search(path) and not (cwd / path).exists():
            problems.append(f"{path}: no such file")
    return problems


def line_problems(source: str, cwd: Path) -> tuple[list[str], Path]:
    """Problems of one shell line (``a && b | c``); returns the folder a ``cd`` in it leaves."""
    try:
        words = shlex.split(source.replace("\\|", "|"), comments=True)
    except ValueError as e:
        return [f"cannot be split as shell words ({e})"], cwd
    problems: list[str] = []
    command: list[str] = []
    for word in [*words, ";"]:
        if word not in SEPARATORS:
            command.append(word)
            continue
        problems += command_problems(command, cwd)
        if command and command[0] == "cd" and len(command) > 1 and (cwd / command[1]).is_dir():
            cwd = cwd / command[1]
        command = []
    return problems, cwd


def is_inline_command(code: str) -> bool:
    words = code.split()
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return False
    first = words[0]
    if first in INLINE_COMMAND_WORDS:
        return len(words) > 1
    return first.startswith(("./", ".venv/bin/", "scripts/", "tts/", "bench/"))


def commands(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, command text, whether it starts a new line of inline code) for every command the doc names."""
    pending: tuple[int, str] | None = None
    for n, lang, line in scan(path.read_text(encoding="utf-8")):
        if lang is None:
            pending = None
            first = True
            for m in INLINE_CODE.finditer(line):
                code = m.group(2).strip()
                if is_inline_command(code):
                    yield n, code, first
                    first = False
            continue
        if lang not in SHELL_LANGS:
            continue
        text = line.strip()
        if lang == "console":
            if pending is None and not text.startswith("$ "):
                continue
            text = text[2:] if pending is None else text
        if pending is not None:
            start, text = pending[0], pending[1] + " " + text
        else:
            start = n
        if text.endswith("\\"):
            pending = (start, text[:-1])
            continue
        pending = None
        if text and not text.startswith("#"):
            yield start, text, True


def test_readme_is_short() -> None:
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes (at most {README_MAX_BYTES}): move detail into docs/ and link to it"
    )


def test_docs_pages_exist_and_the_readme_maps_them() -> None:
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages >= DOC_PAGES, f"missing docs pages: {sorted(DOC_PAGES - pages)}"
    readme = README.read_text(encoding="utf-8")
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall(readme) if t.startswith("docs/")}
    assert pages <= linked, f"README.md does not link these docs pages: {sorted(pages - linked)}"


def test_relative_links_resolve() -> None:
    problems = [p for path in doc_files() for p in link_problems(path)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_named_commands_exist() -> None:
    problems = []
    n_checked = 0
    for path in doc_files():
        cwd = ROOT
        for n, text, new_line in commands(path):
            n_checked += 1
            if new_line:  # each command runs from the checkout, but a `cd` in one inline span holds for
                cwd = ROOT  # the span right after it on the same line (`cd tts && pip ...`, `python scripts/...`)
            found, after = line_problems(text, cwd)
            cwd = after if after != cwd else ROOT
            problems += [f"{rel(path)}:{n}: {text!r}: {p}" for p in found]
    assert n_checked > 100, n_checked  # the scan found the docs' commands
    assert not problems, "commands the docs name that do not exist:\n" + "\n".join(problems)


def test_inline_code_stays_on_one_line() -> None:
    """An inline code span broken over two lines would hide its command from the check above."""
    problems = []
    for path in doc_files():
        for n, lang, line in scan(path.read_text(encoding="utf-8")):
            if lang is None and re.sub(r"``.+?``", "", line).count("`") % 2:
                problems.append(f"{rel(path)}:{n}: {line.strip()[:80]!r}")
    assert not problems, "inline code that wraps to the next line:\n" + "\n".join(problems)


def test_no_issue_references() -> None:
    problems = []
    for path in doc_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            text = HEADING.sub(lambda m: m.group(2), line)  # a heading's own hashes are not a reference
            for pattern in ISSUE_REFERENCES:
                problems += [f"{rel(path)}:{n}: {m.group(0)!r}" for m in pattern.finditer(text)]
    assert not problems, "user docs describe the toolkit, not its tracker:\n" + "\n".join(problems)


def test_no_issue_references_in_code_or_tests() -> None:
    """Code and tests say what they do and why, not which ticket asked for it."""
    me = Path(__file__).resolve()
    files = [
        p
        for pattern in ("e2c/**/*.py", "bench/*.py", "tts/**/*.py", "tests/**/*.py", "*.py", "scripts/*")
        for p in ROOT.glob(pattern)
        if p.is_file() and p.resolve() != me
    ]
    assert len(files) > 150, len(files)
    problems = [
        f"{rel(path)}:{n}: {m.group(0)!r}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        for pattern in ISSUE_REFERENCES
        for m in pattern.finditer(line)
    ]
    assert not problems, "issue numbers in code or tests:\n" + "\n".join(problems)


def test_readme_gives_the_two_commands_and_ci_runs_the_test_command() -> None:
    readme = README.read_text(encoding="utf-8")
    first_block = [text for _, text, _ in commands(README)][:2]
    assert [shlex.split(t, comments=True) for t in first_block] == [
        ["bash", "scripts/quickstart.sh"],
        ["bash", "scripts/test.sh"],
    ], first_block
    assert "bash .ci/run" in readme
    ci = [shlex.split(line, comments=True) for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    # the README's command as typed (an environment in front of it is allowed: CI runs it in a bare clone)
    assert any(line[-2:] == ["bash", "scripts/test.sh"] for line in ci), ci


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """The scanners on a page with one of each kind of mistake (so a scanner that finds nothing fails here)."""
    (tmp_path / "index.md").write_text("# Index\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n## Two words\n\nSee [x](nowhere.md), [y](index.md#no-such-heading), [z](#two-words).\n"
        "Run `bash scripts/no_such.sh` or `python -m e2c.no_such_module`; issue 12 and #34.\n\n"
        "```bash\nbash scripts/test.sh\npython bench/no_such.py --flag \\\n    value\nfrobnicate --all\n```\n",
        encoding="utf-8",
    )
    links = link_problems(page)
    assert len(links) == 2 and "nowhere.md" in links[0] and "#no-such-heading" in links[1], links
    found: dict[int, str] = {}
    for n, text, _ in commands(page):
        found[n] = found.get(n, "") + " ".join(line_problems(text, ROOT)[0])
    assert found[6].count("no such") == 2 and "no_such.sh" in found[6] and "e2c.no_such_module" in found[6]
    assert found[9] == "" and "bench/no_such.py" in found[10] and "frobnicate" in found[12], found
    issues = [
        m.group(0) for pattern in ISSUE_REFERENCES for m in pattern.finditer("issue 12 and #34, #1f77b4")
    ]
    assert sorted(issues) == ["#34", "issue 12"], issues
    assert module_findable("e2c.eval.score") and module_findable("e2c.quickstart")
    assert not module_findable("e2c.rewards") and module_findable("venv")  # a package needs its __main__
