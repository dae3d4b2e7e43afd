"""Expert for stack_bowls: the small bowl into the big bowl.

The arm on the small bowl's side of the table pinches its rim, carries it over the big bowl, lowers it
in as far as the outer finger allows and lets go; it drops flat onto the big bowl's floor
(datafarm.skills.nesting, the same motions as nest_cups).
"""

from datafarm.skills.nesting import nest


def solve(env, skills, params):
    nest(env, skills, params["bowls"], params)  # outermost first: big, small
