"""What is new in the host's list, and what it is stored as: which host messages are new
(``align``), a host message made a record (``normalize``), the ingest steps and the normalizer
(``steps``), which optional steps run (``pipeline``) and large tool outputs moved to files
(``externalize``).
"""
