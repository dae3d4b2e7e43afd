"""Task packages: what an author (the agent or the built-in one) writes, and how it is run.

A package folder holds task.yaml (name, instruction, limits), scene.yaml (datafarm.scene.spec),
params.yaml (named constants), expert.py (`solve(env, skills, params)`) and judge.py
(`judge(trace, params) -> Verdict`), which the expert never sees.
"""
