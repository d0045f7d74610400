"""The ``federation`` command: ``parser`` (arguments), ``commands`` (one function a
command), ``backends`` (this data directory or a server), ``printers`` (every line it
prints), ``api_client`` (the HTTP client of ``--server``)."""

__all__: list[str] = []
