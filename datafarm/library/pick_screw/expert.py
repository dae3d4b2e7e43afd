"""Expert for pick_screw: the arm on the screw's side pinches the shaft at its balance point and lifts.

The screw is thin (6 mm) and lies on the table, so the fingertips must reach below the shaft's
axis without striking the table (datafarm.skills.small_parts sets the grasp from the fingers' lowest
corner, not from the screw's height).
"""

from datafarm.skills.small_parts import pick_lying


def solve(env, skills, params):
    # Look, choose the arm, pinch across the shaft, lift; again after a miss or a slip.
    pick_lying(env, skills, "screw", params)
