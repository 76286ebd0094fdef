"""The SQLite implementation of the data layer, in parts by job.

``store.py`` is the front door: it names the interface the services use and
opens stores; the modules here hold the SQL. Nothing here imports a service.
"""
