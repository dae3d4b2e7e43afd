"""Expert for apple_on_scale: one arm picks the apple and sets it on the scale's plate."""

from datafarm.skills import GraspFailed, GraspSlipped


def solve(env, skills, params):
    apple = env.object("apple")
    scale = env.fixture("scale")

    # Reach and grasp across the apple's equator with the arm on the apple's side of the table.
    # After a miss (the apple was knocked), look where it is now, choose the arm again and retry.
    for attempt in range(params["grasp_attempts"]):
        side = "left" if apple.center()[0] < 0 else "right"
        try:
            skills.grasp(side, "apple", opening=0.07)
            # Lift clear of the table and the scale's rim.
            skills.lift(side, params["lift_height"])
            break
        except (GraspFailed, GraspSlipped):
            env.note("regrasp", attempt=attempt + 1)
            skills.release(side)
    else:
        raise GraspFailed(f"apple not grasped in {params['grasp_attempts']} attempts")

    # Place: the apple's bottom onto the centre of the plate, then open and back off.
    skills.place(side, scale.plate_center(), clearance=0.004)
    skills.home([side])
