"""The member kit: the remote half of the federation, for any team's agent.

A team writes its skill (:class:`member_kit.skill.Skill`) and names its card
(:class:`member_kit.skill.Member`); the kit serves it as a governed member: it verifies
every delegation token in the documented order (:mod:`member_kit.trust`), binds each task
to its handoff and its owner, signs a receipt for every terminal task and keeps the
decision log with signed heads and the audit routes reconcile reads
(:mod:`member_kit.audit`), publishes and rotates its keys, holds the edge's limits, and
serves A2A v1.0 on JSON-RPC, HTTP+JSON and gRPC (:mod:`member_kit.server`). It imports
nothing of the coordinator nor of any member; importing this package loads no server.

Build the app with :func:`member_kit.server.app.create_app` or run it with
:func:`member_kit.server.app.serve`; remote_risk (:mod:`remote_risk.service`) is a member
built this way.
"""

__all__: list[str] = []
