"""Where the project's data lives: configs/ ships next to the package in a checkout."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"


def config_path(*parts: str) -> Path:
    """Path of a file under configs/, raising if it does not exist."""
    path = CONFIG_DIR.joinpath(*parts)
    if not path.exists():
        known = sorted(p.name for p in path.parent.glob("*")) if path.parent.exists() else []
        raise FileNotFoundError(f"config {path} not found; known in {path.parent}: {known}")
    return path
