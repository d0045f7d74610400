"""The coordinator: the local owner of a run that delegates slices of it to specialists.

Its sub-packages are layers; each imports only from those above it in this list (checked
by ``tests/test_layers.py``)::

    errors       every exception the coordinator raises, in one tree
    storage      data directory, database engine, schema and migrations, the run store
    audit        the hash-chained ledger, the trail that feeds it, reconstruction
    workspace    one data directory and its database: where runs are written
    authority    the run's root authority, narrowed delegation tokens, the signing keys
    handoff      the run and its handoff book: admission, state map, return admission
    remote       talking A2A to another team: client, streaming, registry, push receiver
    dispatch     driving one handoff attempt to its end
    recovery     resuming in-flight handoffs; background workers
    assessment   the pilot scenario: pilot, specialists, model supervisor, demo, evaluate
    service      the one facade every entry point uses; the HTTP API and its server
    cli          the ``federation`` command: parser, commands, printers
"""

__all__: list[str] = []
