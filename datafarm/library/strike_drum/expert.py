"""Expert for strike_drum: the arm nearer the drum strikes its head once, then the other arm twice
(either arm falls back to the other where it cannot reach the whole stroke)."""

from datafarm.skills import Unreachable


def _strike(env, skills, params, sides, target, times) -> str:
    """Strike with the first of `sides` that reaches the stroke; returns the side that struck."""
    for side in sides:
        try:
            skills.strike(side, target, times=times, lift=params["strike_lift"],
                          speed=params["strike_speed"], tilts=params["strike_tilts"])
            return side
        except Unreachable:
            env.note("strike_unreachable", side=side)
    raise Unreachable(f"no arm reaches a stroke onto the drum head at {target.round(3).tolist()}")


def solve(env, skills, params):
    drum = env.fixture("drum")
    # The strike skill drives the TCP 1 cm past its target; aim the TCP a fingertip's reach above the
    # head so the fingertips, not the wrist's full stiffness, meet the head: a tap, not a press.
    target = drum.head_center() + [0.0, 0.0, params["fingertip_reach"]]

    # The drum may stand anywhere across the table: the arm on its side strikes first, once, with a
    # closed gripper from above, then gets out of the way ...
    nearer = "left" if target[0] < 0 else "right"
    farther = "right" if nearer == "left" else "left"
    skills.home([_strike(env, skills, params, (nearer, farther), target, params["first_strikes"])])
    # ... then the other arm (the nearer again if the other cannot reach) twice: one hit more than needed.
    skills.home([_strike(env, skills, params, (farther, nearer), target, params["second_strikes"])])
