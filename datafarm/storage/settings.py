"""How transfers are made: multipart threshold, part size, parallel files. Data, validated on load.

Each setting may come from the environment (`DATAFARM_S3_MULTIPART_THRESHOLD`, `DATAFARM_S3_PART_SIZE`,
`DATAFARM_S3_WORKERS`) or the command line (which wins). Sizes are bytes or a number with a unit
(`64MiB`, `8MB`, `512KiB`). The endpoint and the credentials are NOT settings of ours: boto3 reads them
from its standard places (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
~/.aws/config), so they never sit in the repository or a workspace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from datafarm.errors import BadInput
from datafarm.validation import describe

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
UNITS = {"": 1, "b": 1, "kb": 1000, "kib": KIB, "mb": 1000**2, "mib": MIB, "gb": 1000**3, "gib": GIB}
MAX_PARTS = 10_000  # S3's limit per multipart upload; a larger file gets larger parts
ENVIRONMENT = {"multipart_threshold": "DATAFARM_S3_MULTIPART_THRESHOLD", "part_size": "DATAFARM_S3_PART_SIZE",
               "workers": "DATAFARM_S3_WORKERS"}


def parse_size(value: Any) -> Any:
    """'64MiB' -> 67108864; ints pass through; anything else is left for pydantic to refuse."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
        if match and match.group(2).lower() in UNITS:
            return int(float(match.group(1)) * UNITS[match.group(2).lower()])
        raise ValueError(f"{value!r} is not a size: write bytes or a number with a unit (e.g. 64MiB, 8MB, 512KiB)")
    return value


Size = Annotated[int, BeforeValidator(parse_size)]


class StorageSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Files at least this large go up in parts (each part retried and resumable on its own).
    multipart_threshold: Size = Field(64 * MIB, gt=0)
    # S3 needs parts of at least 5 MiB except the last; S3-compatible test servers may allow less.
    part_size: Size = Field(16 * MIB, ge=KIB, le=5 * GIB)
    workers: int = Field(4, ge=1, le=64, description="files transferred at the same time")

    def part_size_for(self, size: int) -> int:
        """The part size for a file of `size` bytes: ours, or larger so that it fits in MAX_PARTS parts."""
        return max(self.part_size, -(-size // MAX_PARTS))


FIXES = {name: f"set {variable} (or the command's --{name.replace('_', '-')}) to a valid value"
         for name, variable in ENVIRONMENT.items()}


class StorageSettingsError(BadInput, ValueError):
    """A transfer setting is malformed or out of range."""


def load_storage_settings(overrides: Mapping[str, Any] | None = None,
                          environ: Mapping[str, str] | None = None) -> StorageSettings:
    """Settings from the environment, then `overrides` (None values are ignored); StorageSettingsError
    names the setting and the fix."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {name: environ[variable] for name, variable in ENVIRONMENT.items() if environ.get(variable)}
    values.update({name: value for name, value in (overrides or {}).items() if value is not None})
    try:
        return StorageSettings.model_validate(values)
    except ValidationError as error:
        raise StorageSettingsError(describe(error, "storage settings", FIXES)) from None
