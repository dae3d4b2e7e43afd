"""Leave-one-out ablation of the randomization families, closed loop: the full recipe against each family off.

    python benchmarks/ablation.py --episode CALIB --instruction "Place the apple on the scale." --root ABL \
        --episodes 50 --preset cpu --trials 20              # CPU: 7 arms x (farm, ~1.5 h training, 2 evals)
    python benchmarks/ablation.py ... --preset gpu --trials 50   # the full protocol, on a GPU
    python benchmarks/ablation.py ... --episodes 2 --preset smoke --trials 1   # the pipeline only, minutes

One workspace per arm under ROOT, each prepared from the same calibration and request with one
`--randomization` flag changed: `full` (every family on, `recovery_fraction` 0.2) and `<family>-off` for
execution, geometry, camera, appearance (the render's tablecloth and light: one fixed look), background and
recovery. Each arm is farmed to the same count on the same seeds, trained with the same preset and evaluated
on the same evaluation seeds in `original` and `unseen` (out-of-distribution) appearance. Every step is a
`datafarm` command, so a rerun resumes where it stopped. Prints success with its Wilson 95% interval.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datafarm.policy.report import cells  # noqa: E402
from datafarm.workspace import Workspace  # noqa: E402

RECOVERY_FRACTION = 0.2
ARMS: dict[str, dict[str, object]] = {
    "full": {},
    "execution-off": {"execution": False},  # recovery is part of the execution family: off with it
    "geometry-off": {"geometry": False},
    "camera-off": {"camera": False},
    "appearance-off": {"appearance": False},
    "background-off": {"background": False},
    "recovery-off": {"recovery_fraction": 0.0},
}


def datafarm(*args: str) -> None:
    command = [sys.executable, "-m", "cli.main", *args]
    print("$ datafarm " + " ".join(args), flush=True)
    subprocess.run(command, check=True, cwd=Path(__file__).resolve().parents[1])


def run_arm(arm: str, args) -> Path:
    root = args.root / arm
    settings = {"recovery_fraction": RECOVERY_FRACTION, **ARMS[arm]}
    if not (root / "workspace.json").exists():
        flags = [item for name, value in settings.items() for item in ("--randomization", f"{name}={str(value).lower()}")]
        datafarm("prepare", "--episode", str(args.episode), "--instruction", args.instruction,
                 "--target-count", str(args.episodes), "--output", str(root), *flags)
    datafarm("farm", str(root))
    datafarm("train", str(root), "--policy", "act", "--preset", args.preset)
    for appearance in ("original", "unseen"):
        datafarm("eval", str(root), "--policy", str(root / "policies" / f"act-{args.preset}"),
                 "--episodes", str(args.trials), "--appearance", appearance, "--workers", str(args.workers))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episode", type=Path, required=True, help="the calibration episode")
    parser.add_argument("--instruction", required=True, help="the request, in plain words")
    parser.add_argument("--root", type=Path, required=True, help="folder of the arms' workspaces")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=list(ARMS))
    args = parser.parse_args()
    rows = [(arm, cell) for arm in args.arms for cell in cells(Workspace.open(run_arm(arm, args)))]
    print(f"\n{'arm':16s} {'policy':14s} {'appearance':10s} {'success':>9s} {'rate':>6s}  Wilson 95%")
    for arm, c in rows:  # each arm's policy, then its controls (the same seeds, the arm's own scenes)
        print(f"{arm:16s} {c.policy:14s} {c.appearance:10s} {c.successes:>4d}/{c.trials:<4d} {100 * c.rate:5.0f}%  "
              f"[{100 * c.low:.0f}%, {100 * c.high:.0f}%]")


if __name__ == "__main__":
    main()
