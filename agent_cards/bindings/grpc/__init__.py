"""Protobuf and gRPC modules generated from ``a2a.proto`` (package ``lf.a2a.v1``) into a
private descriptor pool; regenerate with ``python -m agent_cards.bindings.regenerate``."""

__all__: list[str] = []
