"""The operator's work on a store: the doctor's report (``doctor``) and its checks (``checks``,
``config_checks``), backups (``backups``), repairs (``repairs``), cleanups (``cleanup``), rotate
(``rotate``), retention (``retention``), secrets in old history rewritten (``scrub``), large tool
rows moved to files afterwards (``backfill``), payload files no row names (``payload_gc``), the
payload refs' upgrade to keyed, granted refs (``payload_rekey``), PostgreSQL backups
(``pg_backup``), the host's review-fork turns removed (``fork_turns``), broken summaries found
and made again (``summary_health``), and a summary rewritten from its sources for both
(``rebuild``).
"""
