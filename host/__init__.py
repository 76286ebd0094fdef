"""What faces Hermes without being the adapter (``engine.py`` is): the plugin hooks (``hooks``),
what a turn's user message gets added (``turncontext``), the engine's own share of the prompt
(``overhead``), what the engine borrows from a running host (``calls``), the host's base class
(``base``), presets (``presets``) and the install check Hermes' own Python runs (``install``,
stdlib only, also run as a script by scripts/install.sh).
"""
