"""The pilot assessment: the scenario the federation was built for.

``scenario`` (frozen cases and records), ``specialists`` (the local operations and
privacy rules), ``pilot`` (one case, consulting operations locally and risk over A2A),
``supervisor`` (a model chooses the consultations inside the host's limits),
``model_gateway`` (the coordinator's adapter to a chat-completions service, over the
shared :mod:`agent_cards.models`, with ``model_reply`` reading its replies as data),
``run_clock`` (a run's deadline), ``demo``, ``evaluate`` and ``evaluation_report`` (the
commands of the same names and what evaluate prints).
"""

__all__: list[str] = []
