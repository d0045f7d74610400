"""The database mechanics both services run the same way, importing neither service.

* :mod:`agent_cards.storage.engine`: a service's database (its file name and SQLite
  settings) opened as an engine: SQLite in WAL mode with our own ``BEGIN``, or PostgreSQL
  by URL; write and read transactions; the idle checkpoint;
* :mod:`agent_cards.storage.migrator`: Alembic run in code over a service's revisions,
  under a lock so two processes never migrate one database twice;
* :mod:`agent_cards.storage.driver`: SQL with ``:name`` placeholders in the driver's style;
* :mod:`agent_cards.storage.faults`: telling a database fault from a bug;
* :mod:`agent_cards.storage.writer`: one writer thread per process, with group commit;
* :mod:`agent_cards.storage.in_place`: on SQLite, the writer's commits made on the event
  loop's own thread, never waiting there;
* :mod:`agent_cards.storage.sqlite`: a connection SQLite opened read-only is not kept;
* :mod:`agent_cards.storage.held`: on SQLite, each thread's connection kept from one of its
  transactions to the next.

Each service binds its own names (file, pragmas, tables, revisions, version table) in its
``storage`` package and turns :class:`agent_cards.errors.StorageFailure` into its own error.
"""

__all__: list[str] = []
