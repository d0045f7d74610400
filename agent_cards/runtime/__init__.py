"""How a federation process runs once it has started, whichever service it is.

* :mod:`agent_cards.runtime.collector`: Python's cyclic garbage collector as a service
  sets it after start-up (what start-up allocated frozen, the youngest generation
  collected less often).
"""

__all__: list[str] = []
