"""The one service every entry point goes through, and its HTTP API.

``facade`` (:class:`CoordinatorService`), ``api_requests`` and ``api_models`` (request
and answer documents), ``api`` and ``server`` (``federation serve coordinator``),
``settings``.
"""

__all__: list[str] = []
