"""Agent Card documents the federation ships, and how a service serves its card."""

__all__: list[str] = []
