"""remote_risk on the wire: the A2A JSON-RPC layer, its operations, streams and push."""

from remote_risk.server.app import create_app, serve

__all__ = ["create_app", "serve"]
