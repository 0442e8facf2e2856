"""The page of ``python -m e2c.view`` in a real browser: headless chromium loads the file (``--dump-dom``, no
Python package needed), the script draws the problems, and the ``<script>`` a model wrote shows as text
and never runs (it would set the page's title). Skips, naming why, when no chromium binary is here."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from view.test_view_cpu import SCRIPT, rows, write_run

from e2c.view import write_view
from e2c.view.browser import chromium_on_path


def dump_dom(page: Path, tmp: Path) -> str:
    """The page's DOM after its scripts ran, as headless chromium prints it."""
    cmd = [
        chromium_on_path() or "chromium",
        "--headless",
        "--no-sandbox",  # the tests may run as root, where chromium's sandbox refuses to start
        "--disable-gpu",
        f"--user-data-dir={tmp / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.slow
@pytest.mark.skipif(
    chromium_on_path() is None, reason="no chromium binary on PATH (apt-get install chromium)"
)
def test_the_page_draws_and_model_scripts_do_not_run_browser(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", rows())
    b = write_run(tmp_path / "b", rows(flip=True))
    write_view([a], tmp_path / "one.html", ["A"])
    dom = dump_dom(tmp_path / "one.html", tmp_path)
    assert re.search(r"<title>E2C: A</title>", dom), dom[:500]  # the model's script would retitle the page
    assert "pwned" not in dom.split("</title>")[0]
    assert dom.count('class="problem"') == 3
    for pid in ("toy / p0", "toy / p1", "toy / p2"):
        assert pid in dom
    shown = SCRIPT.replace("<", "&lt;").replace(">", "&gt;")
    assert shown in dom  # drawn as text in the exploration
    assert "<script>alert(1)</script>" not in dom  # never an element
    assert "malformed: truncated_exploration" in dom and "tests passed: 3 / 4" in dom
    assert "&lt;/EXPLORATION&gt;" in dom  # the tags shown as such

    write_view([a, b], tmp_path / "two.html", ["A", "B"])
    dom = dump_dom(tmp_path / "two.html", tmp_path)
    assert "gained 1, lost 1" in dom
    first = dom.index("toy / p0")
    assert first < dom.index("toy / p2") < dom.index("toy / p1")  # gained, lost, then the rest


# Runs before the page's script: every error and console.error of the page is kept for the driver to report.
PROBE_HEAD = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));
const __consoleError = console.error.bind(console);
console.error = (...a) => { window.__errors.push(a.map(String).join(' ')); __consoleError(...a); };
</script>
"""
# Runs after it: works every control as a user would (events on the real elements) and writes what the page
# showed after each into <pre id="probe"> for --dump-dom to carry out.
DRIVER = """<script>
(() => {
  const out = {steps: []};
  const info = () => document.querySelector('.pageinfo').textContent.trim();
  const drawn = () => document.querySelectorAll('#problems section.problem').length;
  const first = () => { const h = document.querySelector('#problems section.problem h3'); return h ? h.firstChild.textContent.trim() : null; };
  const shot = name => out.steps.push({name, info: info(), drawn: drawn(), first: first()});
  shot('start');
  for (const sel of document.querySelectorAll('#controls select')) {
    const label = sel.parentElement.firstChild.textContent.trim();
    for (const opt of Array.from(sel.options)) {
      sel.value = opt.value; sel.dispatchEvent(new Event('change'));
      shot(label + '=' + opt.value);
    }
    sel.value = sel.options[0].value; sel.dispatchEvent(new Event('change'));
  }
  const q = document.querySelector('#controls input[type=search]');
  q.value = QUERY; q.dispatchEvent(new Event('input')); shot('search');
  q.value = ''; q.dispatchEvent(new Event('input'));
  document.querySelector('#controls .next').click(); shot('next');
  out.errors = window.__errors;
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();
</script>
"""


def probe_page(html: str, query: str) -> str:
    """The page with the probe before its script and the driver after it (a copy: the page is untouched)."""
    head, _, rest = html.partition("<script>\nconst PAGE_SIZE")
    driver = DRIVER.replace("QUERY", json.dumps(query))
    return head + PROBE_HEAD + "<script>\nconst PAGE_SIZE" + rest.replace("</body>", driver + "</body>", 1)


def haystack(p: dict) -> str:
    """The page's search text of a problem (page.js ``haystack``), for the expected counts."""
    parts = [p["key"], p.get("problem") or "", str(p["gold"] if p.get("gold") is not None else "")]
    for s in (s for run in p["runs"] for s in run):
        extracted = s.get("extracted")
        parts += [
            str(extracted if extracted is not None else ""),
            s.get("reason") or "",
            s.get("response") or "",
        ]
    return "\n".join(parts).lower()


def expected(data: dict, name: str) -> int | None:
    """How many problems the page should keep after step ``name`` (``control=option``), by a plain loop over
    its data (page.js ``keep``); None for the steps that do not filter (sort order, start)."""
    problems = data["problems"]
    control, _, option = name.partition("=")
    samples = [[s for run in p["runs"] for s in run] for p in problems]
    if control == "verdict":
        if option == "all":
            return len(problems)
        test = {"correct": lambda s: s["correct"], "wrong": lambda s: not s["correct"]}.get(option)
        test = test or (lambda s: s[option])  # malformed, truncated
        return sum(any(test(s) for s in ss) for ss in samples)
    if control == "change":
        if option == "all":
            return len(problems)
        wanted = ("gained", "lost") if option == "changed" else (option,)
        return sum(p.get("change") in wanted for p in problems)
    if control in ("dataset", "kind"):
        return sum(option in ("all", p[control]) for p in problems)
    return None


def check_in_browser(data: dict, page: Path, tmp: Path) -> dict[str, dict]:
    """Open ``page`` with the probe and driver in headless chromium; assert a clean console, that every
    option of every control shows what :func:`expected` keeps (and draws at most a page of it), and that the
    search and the next page show theirs. Returns the steps by name."""
    problems, n = data["problems"], len(data["problems"])
    query = problems[-1]["key"].lower()
    probed = tmp / f"probed-{page.name}"
    probed.write_text(probe_page(page.read_text(encoding="utf-8"), query), encoding="utf-8")
    dom = dump_dom(probed, tmp)
    probe = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))
    assert probe["errors"] == []
    steps = {s["name"]: s for s in probe["steps"]}
    for name, step in steps.items():
        want = {"search": sum(query in haystack(p) for p in problems), "next": n}.get(
            name, expected(data, name)
        )
        want = n if want is None else want
        assert f"({want} of {n} problems)" in step["info"], (name, step)
        if name != "next":
            assert step["drawn"] == min(want, 50), (name, step)
    assert steps["search"]["drawn"] >= 1
    assert steps["next"]["drawn"] == (n - 50 if n > 50 else n)
    by_id = sorted(problems, key=lambda p: p["key"])[0]
    assert steps["sort=id"]["first"] == f"{by_id['dataset']} / {by_id['id']}"
    return steps


@pytest.mark.slow
@pytest.mark.skipif(
    chromium_on_path() is None, reason="no chromium binary on PATH (apt-get install chromium)"
)
def test_a_real_tiny_model_run_in_the_browser(tmp_path: Path, bench_dir: Path) -> None:
    """Two real evaluation runs of the tiny model (30 GSM8K and 30 MedQA problems x 2 samples, two seeds)
    compared on one page in headless chromium: it draws the first 50, every option of every filter shows
    exactly the problems a plain loop over the page's data keeps, the search and the next page show theirs,
    sorting by id puts the smallest id first, the console stays clean; a screenshot is kept in the test's
    folder. The tiny model's chains are all wrong, so the same checks run on a pair of runs whose verdicts
    and changes differ (the fixture's), where those filters split the problems."""
    runs = []
    for seed in (0, 1):
        out = tmp_path / f"run{seed}"
        cmd = [sys.executable, "-m", "e2c.eval.run", "--model", "tiny", "--backend", "hf"]
        cmd += ["--dataset", "gsm8k,medqa", "--data-dir", str(bench_dir), "--no-hub", "--limit", "30"]
        cmd += ["--sample", "2", "--temperature", "1", "--max-tokens", "24", "--seed", str(seed)]
        cmd += ["--output-dir", str(out), "--quiet"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(out)
    data = write_view(runs, tmp_path / "cmp.html", ["seed 0", "seed 1"])
    assert len(data["problems"]) == 60 and {p["dataset"] for p in data["problems"]} == {"gsm8k", "medqa"}
    steps = check_in_browser(data, tmp_path / "cmp.html", tmp_path)
    assert steps["dataset=medqa"]["drawn"] == 30 and steps["kind=mcq"]["drawn"] == 30
    assert "page 2 of 2" in steps["next"]["info"]
    shot = tmp_path / "page.png"
    cmd = [
        chromium_on_path(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'p2'}",
    ]
    cmd += [
        "--hide-scrollbars",
        "--window-size=1280,1600",
        f"--screenshot={shot}",
        (tmp_path / "cmp.html").as_uri(),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.stat().st_size > 10_000, r.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    a = write_run(tmp_path / "a", rows())
    b = write_run(tmp_path / "b", rows(flip=True))
    mixed = write_view([a, b], tmp_path / "mixed.html", ["A", "B"])
    steps = check_in_browser(mixed, tmp_path / "mixed.html", tmp_path)
    assert (steps["verdict=all"]["drawn"], steps["verdict=malformed"]["drawn"]) == (3, 1)
    assert [steps[f"change={c}"]["drawn"] for c in ("gained", "lost", "same")] == [1, 1, 1]
