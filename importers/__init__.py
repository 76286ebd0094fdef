"""Other stores read into ours: lossless-claw databases and OpenClaw JSONL transcripts (``claw``,
with ``claw_jsonl``, ``claw_parts``, ``claw_report``), LCM-X databases (``lcmx``: import, and the
in-place upgrade at start), and a SQLite file copied into PostgreSQL (``postgres``).
"""
