"""Running a stage's subprocess: its whole output to a log file, progress lines with elapsed time and an ETA
on the console, and the log's tail when it fails."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from e2c.core.errors import Interrupted
from e2c.core.files import RecordFile
from e2c.core.paths import project_root
from e2c.core.progress import EVALUATION_RE

HEARTBEAT_S = 60.0  # a line at least this often while a subprocess runs without visible progress
TAIL_LINES = 25


def fmt_seconds(s: float | None) -> str:
    """``75`` -> ``1m15s``, ``3700`` -> ``1h01m``; ``None`` -> ``?``."""
    if s is None:
        return "?"
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def eta_seconds(elapsed: float, fraction: float | None, estimate: float) -> float:
    """Seconds left: from the stage's own progress once some is made (elapsed / fraction - elapsed), before
    that from the stage's constant ``estimate``."""
    if fraction is not None and fraction > 0:
        return max(0.0, elapsed / min(fraction, 1.0) - elapsed)
    return max(0.0, estimate - elapsed)


class Reporter:
    """Prints ``[<tool> i/N stage] message (elapsed, ETA)`` lines for one stage (``tool``: quickstart, claims)."""

    def __init__(
        self, stage: str, index: int, total: int, estimate: float, out=None, tool: str = "quickstart"
    ) -> None:
        self.stage, self.index, self.total, self.estimate = stage, index, total, estimate
        self.tool = tool
        self.t0 = time.monotonic()
        self.fraction: float | None = None
        self.out = out or sys.stdout

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def say(self, message: str, fraction: float | None = None) -> None:
        if fraction is not None:
            self.fraction = fraction
        eta = eta_seconds(self.elapsed, self.fraction, self.estimate)
        print(
            f"[{self.tool} {self.index}/{self.total} {self.stage}] {message} "
            f"({fmt_seconds(self.elapsed)} elapsed, ETA {fmt_seconds(eta)})",
            file=self.out,
            flush=True,
        )


# ----------------------------------------------------------------------------------------- progress parsers
# Each parser reads one output line of a tool and returns (message, fraction done) or None.
STEP_RE = re.compile(r"\bstep:(\d+) - ")
EVAL_RE = re.compile(r"^(\S+): (\d+)/(\d+) problems")
TTS_RE = re.compile(r"^\[tts\] (\d+)/(\d+) (\S+) K=(\d+)")


def step_parser(total_steps: int, what: str = "step") -> Callable[[str], tuple[str, float] | None]:
    """verl's console lines ``step:N - ...`` (SFT and RL trainers) -> ``step N/total``."""

    def parse(line: str) -> tuple[str, float] | None:
        m = STEP_RE.search(line)
        if not m:
            return None
        step = int(m.group(1))
        return f"{what} {step}/{total_steps}", step / max(total_steps, 1)

    return parse


def eval_parser(totals: dict[str, int], passes: int = 1) -> Callable[[str], tuple[str, float] | None]:
    """The eval runner's ``<dataset>: k/n problems, ...`` lines -> problems done over all datasets and
    ``passes`` evaluations of one command (``--then``), which says where each starts
    (:func:`e2c.core.progress.evaluation_line`): a resumed evaluation that is already complete prints no problem
    line, and its start still counts it done.

    >>> parse = eval_parser({"a": 4}, passes=2)
    >>> parse("evaluation 1/2: out/greedy"), parse("a: 4/4 problems, 4 new samples")
    (('problems a 0/4', 0.0), ('problems a 4/4', 0.5))
    >>> parse("evaluation 2/2: out/avg8"), parse("a: 1/4 problems, 8 new samples")
    (('problems a 0/4 (evaluation 2/2)', 0.5), ('problems a 1/4 (evaluation 2/2)', 0.625))
    """
    done: dict[str, int] = dict.fromkeys(totals, 0)
    before = 0  # the evaluations of the command that have ended
    grand = max(sum(totals.values()), 1) * passes

    def parse(line: str) -> tuple[str, float] | None:
        nonlocal before
        line = line.strip()
        if m := EVALUATION_RE.match(line):
            before = min(int(m.group(1)), passes) - 1
            done.update(dict.fromkeys(totals, 0))
        elif (m := EVAL_RE.match(line)) and m.group(1) in done:
            done[m.group(1)] = min(int(m.group(2)), totals[m.group(1)])
        else:
            return None
        parts = ", ".join(f"{n} {done[n]}/{totals[n]}" for n in totals)
        if passes > 1 and before:
            parts += f" (evaluation {before + 1}/{passes})"
        return f"problems {parts}", (before * sum(totals.values()) + sum(done.values())) / grand

    return parse


def tts_parser() -> Callable[[str], tuple[str, float] | None]:
    """The TTS runner's ``[tts] i/N method K=b id: ...`` lines -> results done."""

    def parse(line: str) -> tuple[str, float] | None:
        m = TTS_RE.match(line.strip())
        if not m:
            return None
        i, n = int(m.group(1)), int(m.group(2))
        return f"result {i}/{n} ({m.group(3)} K={m.group(4)})", i / max(n, 1)

    return parse


# ----------------------------------------------------------------------------------------- subprocess
class StageFailed(Exception):
    """A stage's subprocess exited non-zero; the message says which and where its log is."""


def run_logged(
    cmd: Sequence[str],
    log_path: Path,
    reporter: Reporter,
    parse: Callable[[str], tuple[str, float] | None] | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> None:
    """Run ``cmd``, append its output to ``log_path``, report parsed progress; StageFailed on a non-zero exit.

    The child shares this process group, so Ctrl-C reaches both; an interrupt or a SIGTERM to this process
    stops the child (see :func:`_stop`) and raises KeyboardInterrupt.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    lines: queue.Queue[str | None] = queue.Queue()
    with RecordFile(log_path) as log:
        log.write_text(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            bufsize=1,
            cwd=cwd or project_root(),  # the shell scripts and tts/ live in the project folder
            env=env,
        )

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        old = _pass_sigterm(proc)
        tail: list[str] = []
        last_report = time.monotonic()
        try:
            while True:
                try:
                    line = lines.get(timeout=5.0)
                except queue.Empty:
                    line = ""
                if line is None:
                    break
                if line:
                    log.write_text(line)  # a full disk: one line, and the child is stopped below
                    tail = ([*tail, line.rstrip("\n")])[-TAIL_LINES:]
                    got = parse(line) if parse else None
                    if got is not None:
                        reporter.say(got[0], got[1])
                        last_report = time.monotonic()
                        continue
                if time.monotonic() - last_report >= HEARTBEAT_S:
                    reporter.say("running")
                    last_report = time.monotonic()
            rc = proc.wait()
        except BaseException:
            _stop(proc)
            raise
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
    if rc != 0:
        print("\n".join(tail), file=sys.stderr)
        raise StageFailed(
            f"stage {reporter.stage}: {Path(cmd[0]).name} ... exited with status {rc}; log: {log_path}"
        )


def _pass_sigterm(proc: subprocess.Popen) -> object | None:
    """Make a SIGTERM to this process an interrupt (the child is stopped, the run can resume); only
    possible from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise Interrupted

    return signal.signal(signal.SIGTERM, handler)


def _stop(proc: subprocess.Popen) -> None:
    """Stop a stage's child: SIGINT first (the toolkit's launchers then stop their own children: verl's ray
    driver runs in its own process group, out of reach of a signal to ours), then SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        except OSError:
            return


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a stage's subprocess: this one plus ``extra``, tokenizer threads off."""
    env = dict(os.environ)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env
