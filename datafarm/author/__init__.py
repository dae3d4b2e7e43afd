"""Authors: who writes the task package for a request. The built-in author needs no LLM."""

from datafarm.author.base import Author, RequestRefused, TaskMatch
from datafarm.author.builtin import BuiltinAuthor

__all__ = ["Author", "BuiltinAuthor", "RequestRefused", "TaskMatch"]
