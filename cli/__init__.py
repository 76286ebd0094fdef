"""The ``lcm`` command: ``main`` builds the parser from the verb families and runs one verb.

Each family is a module exposing ``register(subparsers)``: ``status``, ``browse`` (conversations,
sessions, messages, summaries, expand), ``grep``, ``upkeep`` (doctor, backup, retention),
``export``, ``redact``, ``embed``, ``rollups``, ``assertions``, ``view``, ``migrate``, ``importer``
and ``payloads``. What they share is in ``common`` (the one way to add a verb, the arguments
several verbs take, the settings in force); ``database`` finds and opens the database, ``rows``
and ``output`` shape what a verb prints, ``pg`` is what differs on PostgreSQL, and ``reference``
prints docs/cli.md from the parser. Families import their work inside their handlers, so
``lcm status`` stays fast.
"""
