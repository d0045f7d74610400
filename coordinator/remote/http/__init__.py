"""HTTP/1.1 as the A2A client reads it: every response bounded (its head, its body, the
events of a stream) by the client's limits, and the small keep-alive pool the JSON-RPC
requests use. It knows nothing of A2A itself."""

__all__: list[str] = []
