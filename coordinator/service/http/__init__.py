"""The coordinator's HTTP API: its routes (``api``), how it refuses (``api_errors``,
``faults``), the operator's token (``operator_auth``), the checks every body is held to,
its public routes, metrics and reference page, the bounded edge (``limits``), and the
long-lived process (``server``, ``federation serve coordinator``)."""

__all__: list[str] = []
