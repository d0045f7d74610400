"""The A2A protocol bindings' shared wire code: the gRPC modules generated from the
normative ``a2a.proto`` (:mod:`agent_cards.bindings.grpc`) and the mapping between their
ProtoJSON form and our wire models; both services import it."""

__all__: list[str] = []
