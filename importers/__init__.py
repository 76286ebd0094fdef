"""Other stores read into ours: lossless-claw databases and OpenClaw JSONL transcripts (``claw``,
the way in; ``claw_sqlite`` and ``claw_jsonl`` read the two sources, ``claw_write`` plans and
writes, ``claw_parts`` carries message parts, ``claw_report`` holds the records), LCM-X databases
(``lcmx``, the way in: import, and the in-place upgrade at start; ``lcmx_source`` reads,
``lcmx_write`` writes a conversation, ``lcmx_build`` plans, builds and verifies, ``lcmx_swap``
upgrades a file in place, ``lcmx_report`` holds the records), and a SQLite file copied into
PostgreSQL (``postgres``).
"""
