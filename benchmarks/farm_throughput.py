"""Farm throughput, embedded Prefect, on this machine: apple_on_scale, N episodes (default 20).

    python benchmarks/farm_throughput.py [--episodes 20] [--cores 1] [--rollout-workers 2] [--runner dask]
                                         [--output out/bench-farm]

Prints admitted episodes per hour, wall time per accepted episode by phase (phases overlap: a rollout
runs beside the render and review of the episode before it), accepted/attempted seeds, peak memory,
Prefect's overhead as a share of wall time (wall time when no library call was running), harvest speed.
`--cores N` pins the farm (and every process it starts) to N cores; `--rollout-workers N` simulates N seeds at
once (the farm's `rollout_workers` setting); `--runner dask` runs rollouts, renders and reviews in that many
processes (the farm's `rollout_runner` setting; needs the `dask` extra).
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
    parser.add_argument("--cores", type=int, default=None, help="pin the farm to this many cores")
    parser.add_argument("--rollout-workers", type=int, default=1, help="seeds simulated at once")
    parser.add_argument("--runner", choices=["threads", "dask", "ray"], default="threads",
                        help="where rollouts (and with dask or ray, renders and reviews) run")
    args = parser.parse_args()
    if args.cores:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:args.cores])

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
    settings = FarmSettings(target_count=args.episodes, rollout_workers=args.rollout_workers, rollout_runner=args.runner)
    prepare(calibration, "Place the apple on the scale.", base / "ws", settings)
    started = time.perf_counter()
    report = farm_flow(str(base / "ws"))
    wall = time.perf_counter() - started
    workspace = Workspace.open(base / "ws")

    by_phase = collections.defaultdict(float)
    for row in workspace.timings():
        by_phase[row["phase"]] += row["seconds"]
    inside = busy_seconds([(row["end"] - row["seconds"], row["end"]) for row in workspace.timings()])
    tries = attempts(workspace)
    accepted = sum(a.accepted for a in tries)
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)

    cores = len(os.sched_getaffinity(0))
    print(f"farm throughput: apple_on_scale, {args.episodes} episodes, embedded Prefect, {cores} cores, "
          f"{args.rollout_workers} rollout workers ({args.runner})\n")
    print(f"{'phase':<18}{'wall s':>10}{'s / accepted episode':>24}")
    for phase, seconds in by_phase.items():
        print(f"{phase:<18}{seconds:>10.1f}{seconds / max(1, accepted):>24.2f}")
    print(f"{'total (farm flow)':<18}{wall:>10.1f}{wall / max(1, accepted):>24.2f}\n")
    admitted = len(workspace.read_json("manifest.json")["episodes"])
    print(f"admitted episodes per hour: {admitted / wall * 3600:.0f}")
    print(f"accepted / attempted seeds: {accepted} / {len(tries)} ({accepted / max(1, len(tries)):.0%})")
    print(f"peak memory (RSS): {peak / 1024:.0f} MiB")
    print(f"Prefect overhead: {(wall - inside) / wall:.1%} of wall time ({wall - inside:.1f} s outside library calls)")
    harvest = workspace.read_json("reports/harvest.json")
    print(f"harvest speed: {harvest['recorded_seconds_per_wall_second']:.2f} recorded s per wall s "
          f"({harvest['frames']} frames x 3 cameras in {harvest['wall_seconds']:.1f} s)")
    print(f"verify: {'ok' if report.ok else report.problems}")
    print(f"workspace: {base / 'ws'}")


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one of the (start, end) intervals."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered


if __name__ == "__main__":
    main()
