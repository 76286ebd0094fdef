"""The prompt we hand back: assembled from summaries and the fresh tail within the budget
(``assemble``), provider groups kept whole (``blocks``), and each compaction's make-up before and
after (``timeline``).
"""
