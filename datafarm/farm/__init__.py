"""The farm's phases as plain library functions on a workspace (Prefect wraps them in flows/)."""

PHASES = ("survey", "build", "contract", "review_contract", "judge", "expert", "rollout", "render", "review",
          "harvest", "verify")
