"""Episode review: automated checks that admit or reject a rendered episode (review.json)."""

from datafarm.review.episode import review_episode
from datafarm.review.report import Check, EpisodeReview, ReviewThresholds

__all__ = ["review_episode", "Check", "EpisodeReview", "ReviewThresholds"]
