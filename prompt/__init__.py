"""The prompt we hand back: its budget under the threshold (``budget``), assembled from summaries
and the fresh tail within it (``assemble``), provider groups kept whole (``blocks``), and each
compaction's make-up before and after (``timeline``).
"""
