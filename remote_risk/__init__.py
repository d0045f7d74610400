"""The risk team's remote specialist: an A2A v1.0 JSON-RPC service with one skill.

Start it with :func:`serve` (or ``python -m remote_risk``), or build the ASGI app with
:func:`create_app` to run it in-process. Its skill, ``interpret-risk-policy``, is in
:mod:`remote_risk.risk.skill`; the generic JSON-RPC layer any specialist can reuse is
:mod:`remote_risk.server.jsonrpc`.
"""

from remote_risk.risk.skill import SKILL_ID
from remote_risk.server.app import JSONRPC_PATH, create_app, serve
from remote_risk.settings import Settings

__all__ = ["JSONRPC_PATH", "SKILL_ID", "Settings", "create_app", "serve"]
