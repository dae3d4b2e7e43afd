"""Expert for block_in_drawer: one arm drops the block into the open drawer, the other pushes it shut."""

import numpy as np

from datafarm.skills import GraspFailed, GraspSlipped
from datafarm.skills.drawer import push_drawer_closed


def _face_yaw(block) -> float:
    """The block's yaw folded into [-pi/4, pi/4]: fingers on two opposite faces, opening along ~x
    (the drawer's wide side, so the open fingers fit inside it)."""
    pose = block.pose()
    yaw = np.arctan2(pose[1, 0], pose[0, 0])
    return float((yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4)


def solve(env, skills, params):
    block = env.object("block")
    drawer = env.fixture("drawer")

    # Grasp the block with the arm on its side of the table, fingers on two faces; after a miss (the
    # block was knocked), look where it is now, choose the arm again and retry.
    for attempt in range(params["grasp_attempts"]):
        side = "left" if block.center()[0] < drawer.interior_center()[0] else "right"
        try:
            skills.grasp(side, "block", height=params["grasp_height"], yaw=_face_yaw(block),
                         opening=params["grasp_opening"], squeeze=params["grasp_squeeze"])
            # Lift so the block's bottom clears the drawer front on the way over.
            skills.lift(side, params["lift_height"])
            break
        except (GraspFailed, GraspSlipped):
            env.note("regrasp", attempt=attempt + 1)
            skills.release(side)
    else:
        raise GraspFailed(f"block not grasped in {params['grasp_attempts']} attempts")

    # Carry it over the open drawer, lower it onto the drawer bottom behind the middle (the gripper,
    # leaning back towards its base, then stays clear of the drawer front), let go and back off upwards.
    target = drawer.interior_center() - drawer.pull_direction() * params["place_behind_middle"]
    skills.place(side, target, clearance=params["place_clearance"], hover=params["place_hover"],
                 release=False)
    skills.release(side, opening=params["grasp_opening"])

    # The placing arm goes home while the other arm pushes the drawer front until the drawer is shut.
    pusher = "right" if side == "left" else "left"
    skills.home([side])
    for attempt in range(params["push_attempts"]):
        push_drawer_closed(skills, pusher, drawer)
        if drawer.opening() < params["pushed_shut_opening"]:
            break
        env.note("push_again", attempt=attempt + 1, opening=drawer.opening())
    skills.home([pusher])
