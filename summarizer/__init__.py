"""The parts of summarization; ``summarize.py`` is its front door and holds the escalation."""
