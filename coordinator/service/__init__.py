"""The one service every entry point goes through, and its HTTP API.

``facade`` (:class:`CoordinatorService`), ``api_models`` (request and answer documents),
``api`` and ``server`` (``federation serve coordinator``), ``settings``.
"""

from coordinator.service.facade import CoordinatorService

__all__ = ["CoordinatorService"]
