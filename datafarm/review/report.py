"""What an episode review decides and why: thresholds, named checks with values, the verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class ReviewThresholds:
    """Limits of the automated episode checks (levels are 0..255 sRGB / luma units)."""

    timestamp_tolerance_s: float = 1e-3  # |dt - 1/fps| allowed between consecutive sim time stamps
    black_level: float = 12.0  # a frame whose mean luma is below this is black
    uniform_level: float = 2.0  # a frame whose luma spread (std) is below this is blank: a solid colour
    max_bad_frames: int = 0  # black or blank frames allowed per view
    frozen_level: float = 1.0  # mean |change| over the pixels the sim changed, below which a step is frozen
    min_sim_change: float = 0.002  # fraction of pixels whose sim segmentation changes for a step to count
    max_frozen_frames: int = 3  # consecutive frozen steps allowed while the sim view changes
    # A block differing from its background estimate by more than robot_noise_factor x the view's measured
    # background-estimate error (99th percentile on sim table / floor blocks), clipped to
    # [robot_difference_min_level, robot_difference_level], is estimated robot. Measured on 5 good composite
    # episodes (head, left wrist): that error is 2.5..4.4 levels (17 on one noisy wrist view), robot blocks
    # differ by a median 12..95; on reversed / shifted renders it is 34..145, so the level stays at 30 there.
    robot_difference_level: float = 30.0  # the ceiling of that level (and the level when uncalibrated)
    robot_difference_min_level: float = 6.0  # above codec noise: 99.9th pct of good-render error is 4..7
    robot_noise_factor: float = 2.0
    min_robot_iou: float = 0.6  # IoU of estimated vs simulated robot mask, per view
    max_flicker: float = 2.0  # mean |luma change| in static background between still frames, per view
    # Generated views only (datafarm.review.generated): chosen above what composite renders show (a seam
    # marked on a good composite render measures 1-2), not yet calibrated on a real video model's output.
    max_seam_jump: float = 4.0  # change into a chunk's first frame / median change around it
    max_colour_drift: float = 10.0  # RGB levels between the static background's first and last frames
    # AUC of outline against robot/object interior gradients. Measured on 84 views of 28 farmed composite
    # episodes (3 tasks): head 0.74-0.82, wrists 0.66-1.00; the same head views shifted 8 px: 0.35-0.53.
    min_edge_agreement: float = 0.6


@dataclass(frozen=True)
class Check:
    """One named check: the value measured, the limit it was held to, and the outcome."""

    name: str
    passed: bool
    value: float | int | str | bool | None
    threshold: float | int | str | bool | None
    camera: str | None = None
    detail: str = ""

    def describe(self) -> str:
        where = f"[{self.camera}]" if self.camera else ""
        value = f"{self.value:.4g}" if isinstance(self.value, float) else str(self.value)
        text = f"{self.name}{where}: {value} (limit {self.threshold})"
        return f"{text}; {self.detail}" if self.detail else text


@dataclass
class EpisodeReview:
    """The automated review of one rendered episode; admitted only if every check passed."""

    episode: str
    checks: list[Check] = field(default_factory=list)
    thresholds: ReviewThresholds = field(default_factory=ReviewThresholds)

    @property
    def admitted(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def reasons(self) -> list[str]:
        """The failed checks, with their values and limits."""
        return [check.describe() for check in self.checks if not check.passed]

    def failed(self) -> list[str]:
        """Names of the failed checks (each once)."""
        return list(dict.fromkeys(check.name for check in self.checks if not check.passed))

    def to_dict(self) -> dict:
        """The content of review.json."""
        return {"episode": self.episode, "admitted": self.admitted, "reasons": self.reasons,
                "checks": [asdict(check) for check in self.checks], "thresholds": asdict(self.thresholds)}
