"""The data layer's SQL, in parts by job: SQLite here, PostgreSQL in ``pg/``.

``store.py`` is the front door: it names the interface the services use and
opens stores; the modules here hold the SQL. Nothing here imports a service.
"""
