"""The bounded HTTP edge both services run behind (issue 13).

* :mod:`http_edge.limits`: the limits, their documented defaults, and how they are set;
* :mod:`http_edge.protocol`: uvicorn's httptools protocol with the limits a connection
  needs before any ASGI app runs: header bytes (431 before the whole header is read),
  time to receive the headers and the body (408), connections per client and in total;
* :mod:`http_edge.body`: an ASGI middleware counting body bytes as they stream in (413,
  before anything parses them) and holding JSON bodies to one spelling (UTF-8), a depth
  and a number range (:mod:`http_edge.json_shape`) before the app parses them.

Like :mod:`contracts`, this package belongs to neither service and imports neither.
"""

__all__: list[str] = []
