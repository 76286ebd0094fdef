"""Finding things: the ``Searcher`` (``searcher``) over its arms (``arms``: full text, the
identifier arm, vectors), ranking (``rank``), the query language (``query``), what the caller's
prompt already shows (``visible``) and proactive recall's block (``proactive``).
"""
