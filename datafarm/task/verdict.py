"""A judge's verdict: named boolean checks, the values behind them, and a reason."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Verdict:
    checks: dict[str, bool]
    values: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    @property
    def success(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    @classmethod
    def from_checks(cls, checks: dict[str, bool], values: dict[str, float] | None = None) -> Verdict:
        """The reason lists the failed checks (or says all passed), with their values."""
        values = {k: float(v) for k, v in (values or {}).items()}
        checks = {k: bool(v) for k, v in checks.items()}
        failed = [name for name, ok in checks.items() if not ok]
        shown = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
        reason = f"failed: {', '.join(failed)}" if failed else "all checks passed"
        return cls(checks, values, f"{reason} ({shown})" if shown else reason)

    def to_dict(self) -> dict:
        return {"success": self.success, "checks": self.checks, "values": self.values, "reason": self.reason}
