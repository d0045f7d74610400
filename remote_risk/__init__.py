"""The risk team's remote specialist: an A2A v1.0 JSON-RPC service with one skill.

Start it with ``python -m remote_risk`` (:func:`remote_risk.server.app.serve`), or build
the ASGI app with :func:`remote_risk.server.app.create_app` to run it in-process. Its
skill, ``interpret-risk-policy``, is in :mod:`remote_risk.risk.skill`; the generic
JSON-RPC layer any specialist can reuse is :mod:`remote_risk.server.jsonrpc`. Importing
this package loads none of them: each is imported by name where it is used.
"""

__all__: list[str] = []
