"""The delegation check of each call: what a request asks for (:mod:`.asked`) and the hook
that has the token checked against it before any operation runs (:mod:`.hook`)."""

__all__: list[str] = []
