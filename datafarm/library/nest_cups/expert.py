"""Expert for nest_cups: medium cup into the big cup, then the small cup into the medium cup.

Each arm pinches the rim of the cup on its side (both at once), carries it over the receiving cup and
lets it drop in (datafarm.skills.nesting).
"""

from datafarm.skills.nesting import nest


def solve(env, skills, params):
    nest(env, skills, params["cups"], params)  # outermost first: big, medium, small
