"""The base layer: what every other layer stands on and that imports nothing above it.

Records and token counts (``records``, ``tokens``), the provider's sequence rules (``wire``), the
host's scaffolding and our seal (``scaffold``), payload files and the stub of an externalized
output (``payloads``, ``outputs``), ignore patterns (``patterns``), secrets: the catalog and the
redactor (``sensitive``), what a text says is secret (``secretscan``), the masking of every output
(``redact``); private files (``private``), times and display (``times``, ``display``), background
jobs and the live-engine registry (``jobs``, ``registry``), the database-open state
(``startup``), embedding vectors (``vectors``), progress lines (``progress``), bounded HTTP calls
(``httpcall``), which of the host's agents is calling (``hostagents``), the peers' settings
and what each means here (``peer_settings``), the rules our settings' values obey
(``setting_rules``), and the settings reference printed from them (``settings_doc``).
"""
