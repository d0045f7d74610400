from tests.observability.spans import captured

__all__ = ["captured"]
