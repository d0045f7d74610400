"""The benchmark suite (issue 7): what governance costs, measured against the baselines.

``python -m bench`` (``make bench``) runs every figure and writes ``bench/results.json``
and ``bench/results.md``; ``python -m bench.soak`` (``make soak``) is the bounded load and
soak run. One module per figure:

* :mod:`bench.remote_side`  (1) remote_risk SendMessage against the a2a-sdk server (its
  in-memory and its SQLite task store) and a bare FastAPI POST;
* :mod:`bench.handoffs`     (2) governed handoffs through the coordinator against the
  a2a-sdk client-to-server round trip, (4) ledger appends while they run, and (8) the
  durable points per commit of the coordinator's writer (group commit);
* :mod:`bench.token_cost`   (3) delegation-token verification against a bare ``jwt.decode``;
* :mod:`bench.ledger_verify` (4) ``audit verify`` over a ledger of 100,000 events;
* :mod:`bench.memory`       (5) memory retained per finished handoff and per finished task;
* :mod:`bench.fanout`       (6) four slow specialists consulted in parallel;
* :mod:`bench.tracing_cost` (7) governed handoffs with tracing on against tracing off, in
  alternating paired rounds (``BENCH_ONLY=7`` runs it alone);
* :mod:`bench.scale_out`    (9) governed handoffs on PostgreSQL with one and two coordinator
  processes and one and two remote_risk replicas.

``python -m bench.db_paths`` (not part of ``make bench``) measures the ways an event loop
can reach the database (inline, one writer thread, a thread pool, SQLAlchemy asyncio).

Servers run as separate processes pinned to core 0 and the load to core 1 when
``taskset`` exists (:mod:`bench.procs`); all traffic stays on 127.0.0.1. Nothing here is
run by ``make test``.
"""
