"""A member on the wire: the A2A JSON-RPC layer, its operations, streams and push."""

__all__: list[str] = []
