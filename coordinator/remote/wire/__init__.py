"""How a request reaches a remote agent: the A2A client, the bindings it speaks (JSON-RPC,
HTTP+JSON, gRPC, and A2A v0.3 for older agents), where it may send, and how a remote's
errors and calls are told apart and traced."""

__all__: list[str] = []
