"""A member's tasks: the record, the store protocol, in-memory and SQL stores."""

__all__: list[str] = []
