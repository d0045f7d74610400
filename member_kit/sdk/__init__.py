"""The kit in-process, for an agent built on the a2a-sdk (1.3): the one kit module that
imports ``a2a`` (install the ``sdk`` extra).

A team keeps its agent as the SDK's quickstart writes it (its ``AgentExecutor``, the
SDK's ``DefaultRequestHandler`` over a task store, its ``AgentCard``) and, instead of
serving the handler with the SDK's routes and gRPC server, hands it to :func:`govern`,
which gives back what to put in any Starlette app: the governed routes (the signed
card, the JWK Set, JSON-RPC and HTTP+JSON, health, metrics, the audit routes), the
lifespan that runs the gRPC binding, and ``install`` for the edge limits and the
token-first check. The governing is the guard's (:mod:`member_kit.guard`), the SDK's
handler called in-process in place of an upstream over HTTP (:mod:`.local`): every
token verified in the kit's order, each task bound to its handoff and owner, the
handoff echoed into task metadata, a receipt on every terminal task, the decision log.
:func:`serve_member` runs such an app as a process with the guard's flags.
"""

from member_kit.sdk.member import govern, serve_member

__all__ = ["govern", "serve_member"]
