"""The ``federation`` command: ``parser`` (arguments), ``commands`` (one function a
command; the audit ones in ``audit_commands``), ``inputs`` (the files a command reads),
``backends`` (this data directory or a server), ``printers`` (every line it prints; the
demo's in ``demo_printers``, the audit verdicts in ``audit_printers``), ``api_client``
(the HTTP client of ``--server``)."""

__all__: list[str] = []
