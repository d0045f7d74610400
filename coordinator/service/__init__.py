"""The one service every entry point goes through, and its HTTP API.

``facade`` (:class:`CoordinatorService`), ``api_requests`` and ``api_models`` (request
and answer documents), the operations behind it (``cancel``, ``revoke``, ``run_list``,
``reconcile``, ``token_exchange``...), ``settings``, and ``http`` (the HTTP API and
``federation serve coordinator``).
"""

__all__: list[str] = []
