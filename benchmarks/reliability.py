"""The reliability campaign of issue 9: bad inputs, kill -9 and resume, tamper. Prints its figures.

    .venv/bin/python benchmarks/reliability.py                     # everything: 30 episodes, 10 kills, 200 positions
    .venv/bin/python benchmarks/reliability.py --only bad-inputs   # the corpus alone (a few minutes)
    .venv/bin/python benchmarks/reliability.py --episodes 4 --kills 6 --only kill,tamper

- bad inputs: every case of tests/farm/bad_inputs.py through the real `datafarm` command line: one
  message naming the problem and the fix, the documented exit code, no traceback, nothing lost.
- kill: a workspace is farmed to the expert once, copied twice; one copy is farmed without
  interruption (the reference), the other is killed (SIGKILL to the whole process group) at `--kills`
  points during rollout, render, review, harvest and while a file is written, resumed with
  `datafarm farm` each time, then checked: 0 episodes lost, 0 duplicated, `datafarm verify` passes,
  actions and states equal to the reference frame by frame.
- tamper: `--positions` single-byte changes across the reference's delivery, verify after each.

The sandbox escapes of issue 9 are measured by the sandbox's own benchmark, not here.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "farm"))

from bad_input_judging import run_case  # noqa: E402
from bad_inputs import CASES, ON_FINISHED_WORKSPACE, REQUEST, Ground, run_datafarm  # noqa: E402
from campaign import kill_resume_campaign, tamper_campaign  # noqa: E402

CHECKS = ("bad-inputs", "kill", "tamper")


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def bad_inputs(workdir: Path, finished: Path | None = None) -> tuple[int, list[str]]:
    """The corpus; with `finished` (a farmed workspace), the workspace cases of ON_FINISHED_WORKSPACE on copies of it."""
    ground = Ground(workdir / ("bad-inputs-finished" if finished else "bad-inputs"), workspace_source=finished)
    cases = [c for c in CASES if c.name in ON_FINISHED_WORKSPACE] if finished else list(CASES)
    rows, failed = [], []
    for case in cases:
        outcome = run_case(case, ground)
        rows.append([case.name, case.kind, outcome.exit_code, f"{outcome.seconds:.1f}",
                     "pass" if outcome.passed else "FAIL", "; ".join(outcome.failures)[:150]])
        if not outcome.passed:
            failed.append(case.name)
            last = [line for line in outcome.output.splitlines() if line.strip()][-3:]
            rows.append(["", "", "", "", "", "output: " + " / ".join(line.strip() for line in last)[:300]])
        print(f"  {case.name}: {'pass' if outcome.passed else 'FAIL'}", flush=True)
    print(_table(rows, ["case", "input", "exit", "s", "result", "why"]))
    print(f"bad inputs{' on a finished workspace' if finished else ''}: {len(cases)} cases, "
          f"{len(cases) - len(failed)} passed, {len(failed)} failed")
    return len(cases), failed


def _run(args: list[str], cwd: Path, what: str) -> float:
    started = time.perf_counter()
    result = run_datafarm(args, cwd=cwd, timeout=7200)
    if result.returncode != 0:
        raise SystemExit(f"{what} failed (exit {result.returncode}):\n{result.stdout.decode()[-3000:]}"
                         f"{result.stderr.decode()[-3000:]}")
    return time.perf_counter() - started


def farmed_pair(workdir: Path, episodes: int) -> tuple[Path, Path, dict]:
    """(a workspace farmed to the expert and reset for the kills, the reference farmed to the end, timings)."""
    timings = {}
    calibration, base = workdir / "calibration", workdir / "ws-base"
    if not calibration.exists():
        timings["synth-calibration"] = _run(["synth-calibration", "--output", str(calibration), "--task", "apple_on_scale"],
                                            workdir, "synth-calibration")
    (workdir / "request.txt").write_text(REQUEST + "\n")
    timings["prepare"] = _run(["prepare", "--episode", str(calibration), "--request-file", str(workdir / "request.txt"),
                               "--target-count", str(episodes), "--output", str(base)], workdir, "prepare")
    timings["farm --until expert"] = _run(["farm", str(base), "--until", "expert"], workdir, "farm --until expert")
    killed, reference = workdir / "ws-killed", workdir / "ws-reference"
    shutil.copytree(base, killed)
    shutil.copytree(base, reference)
    timings[f"farm {episodes} episodes, never killed"] = _run(["farm", str(reference)], workdir, "the reference farm")
    return killed, reference, timings


def kill(killed: Path, reference: Path, kills: int, seed: int) -> tuple[int, list[str]]:
    result = kill_resume_campaign(killed, reference, kills, seed=seed)
    rows = [[i, k.target, k.stage, f"{k.after_seconds:.1f}", k.detail] for i, k in enumerate(result.kills)]
    print(_table(rows, ["kill", "target", "landed in", "s after start", "detail"]))
    landed = [k for k in result.kills if k.stage not in ("finished", "timeout")]
    print(f"kill -9: {len(landed)} kills landed ({len(result.kills)} tried), final resume exit {result.resume_exit} "
          f"in {result.resume_seconds:.0f} s, verify exit {result.verify_exit}; {result.episodes} episodes delivered "
          f"(reference {result.reference_episodes}), lost {result.lost}, duplicated {result.duplicated}; "
          f"{result.frames_compared} frames compared, {result.frames_differing} differ in action or state; "
          f"campaign {result.seconds:.0f} s")
    failed = [] if result.passed else ["kill-resume"]
    return 1, failed


def tamper(reference: Path, workdir: Path, positions: int, seed: int) -> tuple[int, list[str]]:
    copy = workdir / "ws-tamper"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(reference, copy)
    result = tamper_campaign(copy, positions, seed)
    print(f"tamper: {result.positions} single-byte changes over {result.files} files ({result.delivery_bytes} bytes); "
          f"{result.detected} detected, {len(result.missed)} missed {result.missed[:10]}; verify before "
          f"{'ok' if result.verified_before else 'FAILED'}, after restoring {'ok' if result.verified_after else 'FAILED'}; "
          f"{result.seconds:.1f} s ({result.seconds / max(1, result.positions) * 1000:.0f} ms a verify)")
    passed = result.verified_before and result.verified_after and not result.missed
    return result.positions, [] if passed else [f"{f}@{o}" for f, o in result.missed] or ["tamper-controls"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(CHECKS), help=f"comma-separated subset of {CHECKS}")
    parser.add_argument("--episodes", type=int, default=30, help="target count of the kill -9 run")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--positions", type=int, default=200, help="single-byte changes for the tamper check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="keep everything here (default: a temporary folder)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="tamper with this farmed workspace instead of farming one (with --only tamper)")
    args = parser.parse_args()
    only = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = set(only) - set(CHECKS)
    if unknown:
        parser.error(f"unknown checks {sorted(unknown)}; choose from {CHECKS}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="datafarm-reliability-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"reliability campaign in {workdir}: {', '.join(only)}", flush=True)
    summary = []
    if "bad-inputs" in only:
        summary.append(("bad inputs", *bad_inputs(workdir)))
    if "kill" in only or ("tamper" in only and args.reference is None):
        started = time.perf_counter()
        killed, reference, timings = farmed_pair(workdir, args.episodes)
        print("farm timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
              + f" (setup {time.perf_counter() - started:.0f} s)", flush=True)
    else:
        reference = args.reference
    if "kill" in only:
        summary.append((f"kill -9 x{args.kills}, {args.episodes} episodes", *kill(killed, reference, args.kills, args.seed)))
    if "tamper" in only:
        summary.append((f"tamper x{args.positions}", *tamper(reference, workdir, args.positions, args.seed)))
    if "bad-inputs" in only and reference is not None:
        summary.append(("bad inputs, finished workspace", *bad_inputs(workdir, finished=reference)))
    rows = [[name, cases, cases - len(failed), len(failed),
             ", ".join(failed)] for name, cases, failed in summary]
    print()
    print(_table(rows, ["check", "cases", "passed", "failed", "failed names"]))
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(1 if any(failed for _, _, failed in summary) else 0)


if __name__ == "__main__":
    main()
