"""Compaction: passes until the prompt fits (``passes``), summaries that always fit their target
(``summarize``: the escalation; ``routes``: the LLM routes and their guard; ``prompts``: the
prompt and the answer checks; ``extractive``: the offline summary; ``fitting``: cutting to the
target), and the temporal rollups (``rollups``).
"""
