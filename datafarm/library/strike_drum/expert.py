"""Expert for strike_drum: the left arm strikes the drum head once, then the right arm twice."""


def solve(env, skills, params):
    drum = env.fixture("drum")
    # The strike skill drives the TCP 1 cm past its target; aim the TCP a fingertip's reach above the
    # head so the fingertips, not the wrist's full stiffness, meet the head: a tap, not a press.
    target = drum.head_center() + [0.0, 0.0, params["fingertip_reach"]]

    # Left arm: closed gripper above the head, one stroke down onto it and back up, then out of the way.
    skills.strike("left", target, times=params["left_strikes"], lift=params["strike_lift"],
                  speed=params["strike_speed"], tilts=params["strike_tilts"])
    skills.home(["left"])

    # Right arm: the same from its side, twice (one hit more than needed, for margin).
    skills.strike("right", target, times=params["right_strikes"], lift=params["strike_lift"],
                  speed=params["strike_speed"], tilts=params["strike_tilts"])
    skills.home(["right"])
