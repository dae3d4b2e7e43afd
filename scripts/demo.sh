#!/usr/bin/env bash
# The main job on the embedded default: a request and a calibration episode in, a verified LeRobot
# dataset out. No server, GPU or API key. Rerunning resumes where the last run stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
DF=.venv/bin/datafarm
OUT=${DEMO_OUT:-out/demo}
COUNT=${DEMO_COUNT:-10}

if [ ! -f "$OUT/calibration/meta/info.json" ]; then
    $DF synth-calibration --output "$OUT/calibration" --task apple_on_scale
fi
if [ ! -f "$OUT/ws/workspace.json" ]; then
    $DF prepare --episode "$OUT/calibration" --request-file examples/apple_on_scale.txt \
        --target-count "$COUNT" --output "$OUT/ws"
fi
$DF farm "$OUT/ws" --target-count "$COUNT"
$DF verify "$OUT/ws"
$DF cost "$OUT/ws"
$DF show "$OUT/ws"
