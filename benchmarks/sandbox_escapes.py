"""Sandbox escapes by agent-written experts and judges (issue 9's campaign). Prints a table.

    .venv/bin/python benchmarks/sandbox_escapes.py                 # every case of tests/task/escapes.py
    .venv/bin/python benchmarks/sandbox_escapes.py --only "DNS lookup" "judge: infinite loop"

Each case: a copy of apple_on_scale whose expert or judge attacks once (network, DNS, reading the
judge or the user's home, writing outside, fork bombs, infinite loops, a memory blow-up, huge output,
processes left behind), run through the farm's IsolatedRollouts; then a clean seed. A row says what
stopped the attack (the reason the farm records), whether anything escaped (the attack's own report,
a connection to a host server, files outside, processes left on the host) and whether the next seed
was accepted. The unbounded fork bomb runs only after the bounded one proved the process cap.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "task"))

from escapes import ATTACKS, CAP, TIMEOUT_MARGIN, ATTACK_WALL, limits_in_force, run_case  # noqa: E402

from datafarm.agent.sandbox import _ProcessCap  # noqa: E402

BOUNDED, UNBOUNDED = "fork bomb (bounded at 4x the cap)", "fork bomb (unbounded)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="case names (default: all)")
    args = parser.parse_args()
    cases = [c for c in ATTACKS if not args.only or c.name in args.only]
    if any(c.name == UNBOUNDED for c in cases) and all(c.name != BOUNDED for c in cases):
        cases.insert(0, next(c for c in ATTACKS if c.name == BOUNDED))  # prove the cap first
    cases.sort(key=lambda c: c.name == UNBOUNDED)

    mechanism = _ProcessCap(CAP).acquire()
    print(f"process cap: {CAP} per sandbox via {mechanism.mechanism}; limits: " +
          "; ".join(f"{who} {limits.memory_bytes >> 20} MiB address space, {limits.max_processes} processes, "
                    f"files <= {limits.file_bytes >> 20} MiB" for who, limits in limits_in_force().items()) +
          f"; attacked episode wall {ATTACK_WALL:.0f} s (+{TIMEOUT_MARGIN:.0f} s before the sandbox is killed)")
    mechanism.release()
    # not under /tmp: there a write "outside" would land in the sandbox's private /tmp and prove nothing
    work = Path(tempfile.mkdtemp(prefix="sandbox-escapes-", dir="/var/tmp"))
    rows, cap_proven = [], False
    for index, case in enumerate(cases):
        if case.name == UNBOUNDED and not cap_proven:
            rows.append({"case": case.name, "who": case.who, "stopped_by": "NOT RUN: the bounded bomb did not "
                         "prove the cap", "escaped": None, "next_seed_accepted": None, "attack_seconds": 0.0,
                         "host_pids_left": 0})
            continue
        started = time.monotonic()
        row = run_case(case, work / f"case{index:02d}")
        row["case_seconds"] = time.monotonic() - started
        if case.name == BOUNDED:
            cap_proven = "fork refused after" in row["stopped_by"] and not row["escaped"]
        rows.append(row)
        print(f"  {case.name}: {'ESCAPED' if row['escaped'] else 'stopped'} ({row['case_seconds']:.0f} s)", flush=True)

    print()
    print(f"{'case':38s} {'who':6s} {'escaped':7s} {'next ok':7s} {'left':>4s} {'secs':>5s}  stopped by (the recorded reason)")
    for row in rows:
        print(f"{row['case'][:38]:38s} {row['who']:6s} {str(row['escaped']):7s} {str(row['next_seed_accepted']):7s} "
              f"{row['host_pids_left']:4d} {row['attack_seconds']:5.1f}  {row['stopped_by'][:100]}")
    ran = [r for r in rows if r["escaped"] is not None]
    print(f"\n{len(ran)} attacks run: {sum(not r['escaped'] for r in ran)} stopped, "
          f"{sum(bool(r['escaped']) for r in ran)} escaped; next seed accepted after "
          f"{sum(bool(r['next_seed_accepted']) for r in ran)} of {len(ran)}; "
          f"processes left on the host: {sum(r['host_pids_left'] for r in ran)}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
