"""The one verified TLS context of a process, shared by every HTTP client it opens.

httpx builds a new TLS context for each client, loading certifi's CA bundle every time:
about 20 ms of CPU per client, paid by each ``federation`` command, by a member at
every key refresh, and by reconcile at every request. Every client here is given this
context instead. The verification is httpx's own (certifi's CAs, the host name
checked); ``trust_env`` says, as for an httpx client, whether ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` are honoured, as they are when the context is first made.
"""

from __future__ import annotations

import ssl
from functools import cache


@cache
def verified(trust_env: bool = False) -> ssl.SSLContext:
    """The process's verifying TLS context; pass it as an httpx client's ``verify``."""
    # httpx is imported here, not above: a module that marks httpx's own command-line
    # client absent before importing httpx (the CLI's API client) may import this first.
    import httpx

    return httpx.create_ssl_context(verify=True, trust_env=trust_env)
