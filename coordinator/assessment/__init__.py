"""The pilot assessment: the scenario the federation was built for.

``scenario`` (frozen cases and records), ``specialists`` (the local operations and
privacy rules), ``pilot`` (one case, consulting operations locally and risk over A2A),
``supervisor`` (a model chooses the consultations inside the host's limits),
``model_gateway`` (the one adapter to a chat-completions service), ``demo`` and
``evaluate`` (the commands of the same names).
"""

from coordinator.assessment.pilot import PilotResult, run_pilot

__all__ = ["PilotResult", "run_pilot"]
