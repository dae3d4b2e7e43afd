"""PiPER driver latency: the real driver (piper_sdk's own code, PiperPair, its safety layer and watchdog)
against two fake firmwares on python-can's virtual bus, with a policy in the control loop. Prints:

* command-to-bus: from calling ``pair.act(target)`` to the command's frames on the bus (the virtual bus
  stamps each frame when it is sent), as a listener on each arm's channel sees them: the first frame
  (left arm's MotionCtrl_2) and the last (right arm's GripperCtrl);
* feedback-to-observation: the fake arm is moved (``set_state``), and the time from the first feedback
  frame carrying the new angle on the bus to ``pair.observe()`` returning it (observe polled tightly);
  and, inside the 30 Hz loop, the age of the feedback each observation holds (the SDK's receive stamp);
* control-loop jitter at ``--hz`` (30) over ``--seconds``: tick period spread, late ticks;
* the highest rate the loop sustains: observe + policy + act with no sleep, for ``--max-rate-seconds``.

The policy: a torch MLP (14 -> hidden -> hidden -> 14, one thread) per tick by default, or a trained
policy folder (``--policy WS/policies/act-cpu``) fed gray frames of its cameras. The policy's output is
computed every tick but the arms are sent a slow scripted sine about the rest pose (a trained policy
would steer the fake arms anywhere; the driver's latency does not depend on the values).

    nice -n 19 python benchmarks/piper_latency.py [--seconds 10] [--hz 30] [--policy FOLDER]
"""

from __future__ import annotations

import argparse
import math
import struct
import threading
import time
import uuid
from collections.abc import Callable

import can
import numpy as np

from datafarm.errors import SafetyStop
from datafarm.piper.driver import PiperPair, PiperPairConfig
from datafarm.piper.fake_firmware import (
    GRIPPER_CTRL_ID,
    JOINT_FEEDBACK_IDS,
    MOTION_CTRL_2_ID,
    FakePiperFirmware,
    rad_to_mdeg,
)


class Listener:
    """Every frame on one virtual channel: (bus send time, receive time, id, data)."""

    def __init__(self, channel: str):
        self.frames: list[tuple[float, float, int, bytes]] = []
        self._bus = can.Bus(interface="virtual", channel=channel, receive_own_messages=False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._bus.recv(timeout=0.05)
            if message is not None:
                self.frames.append((message.timestamp, time.time(), message.arbitration_id, bytes(message.data)))

    def sent_times(self, can_id: int, after: float = 0.0) -> list[float]:
        return [sent for sent, _, i, _ in list(self.frames) if i == can_id and sent >= after]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._bus.shutdown()


def mlp_policy(hidden: int) -> Callable[[np.ndarray], np.ndarray]:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(14, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.ReLU(), torch.nn.Linear(hidden, 14)).eval()

    def act(state: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return net(torch.as_tensor(state, dtype=torch.float32)[None]).numpy()[0]

    return act


def trained_policy(folder: str) -> Callable[[np.ndarray], np.ndarray]:
    import torch

    from datafarm.policy.inference import load_lerobot_policy

    torch.set_num_threads(1)
    runner = load_lerobot_policy(folder)
    runner.reset()
    frames = {camera: np.full((240, 320, 3), 128, np.uint8) for camera in runner.cameras}
    return lambda state: runner.act(frames, state.astype(np.float32))


def ms(values, q: float | None = None) -> float:
    values = np.asarray(values, dtype=float) * 1000
    return float(np.percentile(values, q)) if q is not None else float(np.median(values))


def scripted_target(rest: np.ndarray, t: float) -> np.ndarray:
    target = rest.copy()
    target[[0, 7]] += 0.05 * math.sin(2 * math.pi * t / 2.0)  # both base joints, +-0.05 rad, 2 s period
    return target


def control_loop(pair: PiperPair, policy, rest: np.ndarray, hz: float, seconds: float) -> dict:
    period, ticks = 1.0 / hz if hz > 0 else 0.0, max(1, round(seconds * hz)) if hz > 0 else None
    starts, calls, work, ages, policy_s = [], [], [], [], []
    begin = time.perf_counter()
    next_tick = begin
    stop = None
    while (ticks is not None and len(starts) < ticks) or (ticks is None and time.perf_counter() - begin < seconds):
        start = time.perf_counter()
        try:
            observation = pair.observe()
        except SafetyStop as error:  # the watchdog stopped the arms: report the figures up to here
            stop = str(error)
            break
        starts.append(start)
        ages.append(time.time() - observation.stamp)
        t0 = time.perf_counter()
        policy(observation.position)
        policy_s.append(time.perf_counter() - t0)
        target = scripted_target(rest, start - begin)
        calls.append(time.time())
        try:
            pair.act(target)
        except SafetyStop as error:
            calls.pop()
            starts.pop()
            stop = str(error)
            break
        work.append(time.perf_counter() - start)
        if period:
            next_tick += period
            delay = next_tick - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
    pair.stop()
    return {"starts": np.array(starts), "calls": calls, "work": work, "ages": ages, "policy": policy_s,
            "wall": time.perf_counter() - begin, "stop": stop}


def command_to_bus(calls: list[float], left: Listener, right: Listener, after: float) -> tuple[list[float], list[float]]:
    time.sleep(0.05)  # the listeners catch up
    first = left.sent_times(MOTION_CTRL_2_ID, after)[:len(calls)]
    last = right.sent_times(GRIPPER_CTRL_ID, after)[:len(calls)]
    if len(first) < len(calls) or len(last) < len(calls):
        raise RuntimeError(f"the listeners saw {len(first)} / {len(last)} commands for {len(calls)} act() calls")
    return [f - c for f, c in zip(first, calls)], [f - c for f, c in zip(last, calls)]


def feedback_to_observation(pair: PiperPair, fake: FakePiperFirmware, listener: Listener, steps: int) -> list[float]:
    latencies = []
    base = np.array(fake.joints_rad())
    for step in range(steps):
        joints = base.copy()
        joints[0] += 0.01 if step % 2 == 0 else 0.0
        wanted = rad_to_mdeg(joints[0])
        moved = time.time()
        fake.set_state(joints)
        while abs(pair.observe().position[0] - joints[0]) > 1e-4:
            time.sleep(0.0002)
        seen = time.time()
        time.sleep(0.01)
        carried = [sent for sent, _, i, data in list(listener.frames)
                   if i == JOINT_FEEDBACK_IDS[0] and sent >= moved and struct.unpack(">i", data[:4])[0] == wanted]
        if carried:
            latencies.append(seen - carried[0])
        time.sleep(0.02)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the 30 Hz loop")
    parser.add_argument("--hz", type=float, default=30.0, help="control rate of the jitter measurement")
    parser.add_argument("--max-rate-seconds", type=float, default=2.0, help="duration of the free-running loop")
    parser.add_argument("--feedback-steps", type=int, default=30, help="feedback-to-observation samples")
    parser.add_argument("--hidden", type=int, default=256, help="the MLP policy's hidden width")
    parser.add_argument("--policy", default=None, help="a trained policy folder instead of the MLP")
    parser.add_argument("--max-feedback-age-ms", type=float, default=50.0,
                        help="the watchdog's feedback age limit (the driver's default: 50; raise it on a starved host)")
    parser.add_argument("--min-feedback-hz", type=float, default=100.0, help="the watchdog's least feedback rate")
    args = parser.parse_args()

    policy = trained_policy(args.policy) if args.policy else mlp_policy(args.hidden)
    label = args.policy or f"torch MLP 14-{args.hidden}-{args.hidden}-14, 1 thread"
    channels = {side: f"bench-{side}-{uuid.uuid4().hex[:8]}" for side in ("left", "right")}
    fakes = {side: FakePiperFirmware(channel).start() for side, channel in channels.items()}
    listeners = {side: Listener(channel) for side, channel in channels.items()}
    # Half a second of deadline: the figures, not a stop, should show a slow host (the real default is 0.1 s).
    pair = PiperPair(PiperPairConfig(left_can=channels["left"], right_can=channels["right"], bustype="virtual",
                                     watchdog={"deadline_s": 0.5, "max_feedback_age_s": args.max_feedback_age_ms / 1000,
                                               "min_feedback_hz": args.min_feedback_hz}))
    try:
        pair.connect()
        rest = pair.observe().position
        for _ in range(20):
            policy(rest)  # warm up the policy outside the timing
        after = time.time()
        loop = control_loop(pair, policy, rest, args.hz, args.seconds)
        first, last = command_to_bus(loop["calls"], listeners["left"], listeners["right"], after)
        feedback, free = [], None
        if pair.estopped is None:
            feedback = feedback_to_observation(pair, fakes["left"], listeners["left"], args.feedback_steps)
            free = control_loop(pair, policy, rest, 0.0, args.max_rate_seconds)
        stopped = pair.estopped
    finally:
        pair.disconnect()
        for listener in listeners.values():
            listener.close()
        for fake in fakes.values():
            fake.stop()

    if len(loop["starts"]) < 3:
        print(f"the watchdog stopped the arms after {len(loop['starts'])} ticks: {loop['stop']}")
        return
    periods = np.diff(loop["starts"])
    nominal = 1.0 / args.hz
    error = np.abs(periods - nominal)
    late = int(np.sum(periods > 1.5 * nominal))
    print(f"PiPER driver latency: piper_sdk over python-can's virtual bus, two fake firmwares at 200 Hz feedback, "
          f"policy: {label}\n")
    print(f"command-to-bus (act() -> frame sent), {len(first)} commands:")
    print(f"  first frame (left MotionCtrl_2)  median {ms(first):6.2f} ms  p99 {ms(first, 99):6.2f} ms  max {ms(first, 100):6.2f} ms")
    print(f"  last frame (right GripperCtrl)   median {ms(last):6.2f} ms  p99 {ms(last, 99):6.2f} ms  max {ms(last, 100):6.2f} ms")
    print(f"feedback-to-observation (frame sent -> observe() returns it), {len(feedback)} samples:")
    if feedback:
        print(f"  median {ms(feedback):6.2f} ms  p99 {ms(feedback, 99):6.2f} ms  max {ms(feedback, 100):6.2f} ms")
    print(f"  feedback age at each 30 Hz observe: median {ms(loop['ages']):6.2f} ms  p99 {ms(loop['ages'], 99):6.2f} ms")
    print(f"control loop at {args.hz:g} Hz for {args.seconds:g} s ({len(loop['starts'])} ticks):")
    print(f"  period median {ms(periods):6.2f} ms (nominal {1000 * nominal:.2f})  jitter std {1000 * periods.std():5.2f} ms"
          f"  p99 |error| {ms(error, 99):6.2f} ms  max |error| {ms(error, 100):6.2f} ms  late (>1.5 periods) {late}")
    print(f"  per tick: observe+policy+act median {ms(loop['work']):6.2f} ms  p99 {ms(loop['work'], 99):6.2f} ms;"
          f" policy alone median {ms(loop['policy']):6.2f} ms")
    if free is not None and free["work"]:
        free_hz = len(free["starts"]) / free["wall"]
        print(f"highest rate (no sleep, {args.max_rate_seconds:g} s): {free_hz:,.0f} Hz sustained; tick median "
              f"{ms(free['work']):.2f} ms p99 {ms(free['work'], 99):.2f} ms")
    print(f"watchdog limits: feedback age {args.max_feedback_age_ms:g} ms, feedback rate {args.min_feedback_hz:g} Hz, "
          "deadline 500 ms")
    where = f" (after {len(loop['starts'])} of {round(args.seconds * args.hz)} ticks of the {args.hz:g} Hz loop)" \
        if loop["stop"] else ""
    print(f"safety stop during the run: {stopped or 'none'}{where}")


if __name__ == "__main__":
    main()
