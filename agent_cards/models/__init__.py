"""A model service as both services reach one: its configuration and a bounded client.

* :mod:`agent_cards.models.settings`: where an OpenAI-compatible chat-completions service
  is and how each request to it is bounded, read from a service's environment prefix;
  the key is in no repr, record or message;
* :mod:`agent_cards.models.client`: the official ``openai`` client (imported only when a
  client is built, that is when a model is configured) with retries off, a total
  deadline per request and every reply read under a byte cap
  (:mod:`agent_cards.bounded_replies`);
* :mod:`agent_cards.models.reply`: a reply read as data, and refused unless it ended well.

Failures are :class:`agent_cards.errors.ModelFailure` with a stable reason; each service
turns them into its own errors. What a service asks of a reply (tools, JSON mode, budgets)
stays with the service.
"""

__all__: list[str] = []
