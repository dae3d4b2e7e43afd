"""The agent: roles, their tools, and the sandbox that agent-written code runs in."""

from datafarm.agent.sandbox import (
    SandboxError,
    SandboxLimits,
    SandboxResult,
    Violation,
    run_python_in_sandbox,
    run_sandboxed,
)

__all__ = ["SandboxError", "SandboxLimits", "SandboxResult", "Violation", "run_python_in_sandbox", "run_sandboxed"]
