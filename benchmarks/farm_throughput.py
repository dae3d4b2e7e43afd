"""Farm throughput, embedded Prefect, on this machine: apple_on_scale, N episodes (default 20).

    python benchmarks/farm_throughput.py [--episodes 20] [--output out/bench-farm]

Prints wall time per accepted episode by phase, accepted/attempted seeds, peak memory, Prefect's
overhead as a share of wall time (wall time not spent inside the library calls), harvest speed.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--output", type=Path, default=None, help="workspace folder (default: a temporary one)")
    args = parser.parse_args()

    from datafarm.calibration import synth_calibration
    from datafarm.farm.episodes import attempts
    from datafarm.farm.prepare import prepare
    from datafarm.farm.settings import FarmSettings
    from datafarm.workspace import Workspace
    from flows.farm import farm_flow

    base = args.output or Path(tempfile.mkdtemp(prefix="datafarm-bench-"))
    if base.exists() and args.output:
        shutil.rmtree(base)
    calibration = synth_calibration(base / "calibration", task="apple_on_scale", seconds=2.0)
    prepare(calibration, "Place the apple on the scale.", base / "ws", FarmSettings(target_count=args.episodes))
    started = time.perf_counter()
    report = farm_flow(str(base / "ws"))
    wall = time.perf_counter() - started
    workspace = Workspace.open(base / "ws")

    by_phase = collections.defaultdict(float)
    for row in workspace.timings():
        by_phase[row["phase"]] += row["seconds"]
    inside = sum(by_phase.values())
    tries = attempts(workspace)
    accepted = sum(a.accepted for a in tries)
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)

    print(f"farm throughput: apple_on_scale, {args.episodes} episodes, embedded Prefect, {os.cpu_count()} cores\n")
    print(f"{'phase':<18}{'wall s':>10}{'s / accepted episode':>24}")
    for phase, seconds in by_phase.items():
        print(f"{phase:<18}{seconds:>10.1f}{seconds / max(1, accepted):>24.2f}")
    print(f"{'total (farm flow)':<18}{wall:>10.1f}{wall / max(1, accepted):>24.2f}\n")
    print(f"accepted / attempted seeds: {accepted} / {len(tries)} ({accepted / max(1, len(tries)):.0%})")
    print(f"peak memory (RSS): {peak / 1024:.0f} MiB")
    print(f"Prefect overhead: {(wall - inside) / wall:.1%} of wall time ({wall - inside:.1f} s outside library calls)")
    harvest = workspace.read_json("reports/harvest.json")
    print(f"harvest speed: {harvest['recorded_seconds_per_wall_second']:.2f} recorded s per wall s "
          f"({harvest['frames']} frames x 3 cameras in {harvest['wall_seconds']:.1f} s)")
    print(f"verify: {'ok' if report.ok else report.problems}")
    print(f"workspace: {base / 'ws'}")


if __name__ == "__main__":
    main()
