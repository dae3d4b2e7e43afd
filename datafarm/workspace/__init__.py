"""The workspace: one folder per farm run, every phase's outputs recorded with their hashes."""

from datafarm.workspace.workspace import PhaseRecord, Workspace, WorkspaceError, sha256_file

__all__ = ["PhaseRecord", "Workspace", "WorkspaceError", "sha256_file"]
