"""Which conversation a host session reads and writes, whether it writes and who owns it
(``binding``), and the summarized prompt of a session that stores nothing (``unstored``: ignored,
stateless, a host fork, a subagent).
"""
