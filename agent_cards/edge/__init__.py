"""The bounded HTTP edge both services run behind (issue 13).

* :mod:`agent_cards.edge.limits`: the limits, their documented defaults, and how they are set;
* :mod:`agent_cards.edge.protocol`: uvicorn's httptools protocol with the limits a connection
  needs before any ASGI app runs: header bytes (431 before the whole header is read),
  time to receive the headers and the body (408), connections per client and in total;
* :mod:`agent_cards.edge.body`: an ASGI middleware counting body bytes as they stream in (413,
  before anything parses them) and holding JSON bodies to one spelling (UTF-8), a depth
  and a number range (:mod:`agent_cards.edge.json_shape`) before the app parses them.

It lives in ``agent_cards`` beside :mod:`agent_cards.serving` because it is the other half
of how a federation service serves: shared by both services, importing neither (the top
level of the repository is fixed; a copy in each service would be two places for one
guarantee).
"""

__all__: list[str] = []
