"""How a bad-input case is judged (see tests/farm/bad_inputs.py for the corpus and the rules)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass

from bad_inputs import MAX_OUTPUT_LINES, TRACEBACK, BadCase, Ground, Words, run_datafarm
from kept_files import lost_files, tree_digest


@dataclass
class Outcome:
    case: str
    kind: str
    exit_code: int
    seconds: float
    failures: list[str]
    output: str

    @property
    def passed(self) -> bool:
        return not self.failures


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text).lower()


def _missing(words: Words, text: str) -> list[str]:
    haystack = _normalized(text)
    missing = []
    for item in words:
        options = (item,) if isinstance(item, str) else item
        if not any(_normalized(option) in haystack for option in options):
            missing.append(" | ".join(options))
    return missing


def run_case(case: BadCase, ground: Ground, timeout: float = 300) -> Outcome:
    folder = ground.root / "cases" / case.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    invocation = case.build(ground, folder)
    before = {path: tree_digest(path) for path in invocation.unchanged}
    started = time.perf_counter()
    try:
        result = run_datafarm(invocation.args, invocation.cwd, invocation.stdin, invocation.env, timeout)
        code, output = result.returncode, result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as error:
        code, output = -1, f"timed out after {error.timeout} s"
    seconds = time.perf_counter() - started
    failures = []
    if code not in case.exit_codes:
        failures.append(f"exit code {code}, expected {' or '.join(map(str, case.exit_codes))}")
    if TRACEBACK in output:
        failures.append("a Python traceback was printed")
    lines = [line for line in output.splitlines() if line.strip()]
    if len(lines) > MAX_OUTPUT_LINES:
        failures.append(f"{len(lines)} lines of output (one message expected)")
    if missing := _missing(case.problem, output):
        failures.append(f"the problem is not named (missing: {'; '.join(missing)})")
    if missing := _missing(case.fix, output):
        failures.append(f"the fix is not named (missing: {'; '.join(missing)})")
    for path, digest in before.items():
        if lost := lost_files(path, digest):
            failures.append(f"{path.name} was modified: {', '.join(lost[:5])}")
    for path in invocation.absent:
        if path.exists():
            failures.append(f"{path} was created")
    return Outcome(case.name, case.kind, code, seconds, failures, output)
