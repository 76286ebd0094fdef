"""Finding things: the ``Searcher`` (``searcher``) over its arms (``arms``: full text, the identifier
arm, vectors), ranking (``rank``), how the two arms' scores mix (``fusion``), the query language
(``query``), what the caller's prompt already shows (``visible``), proactive recall's block
(``proactive``) and how a hit's text is cut to a snippet (``snippets``).
"""
