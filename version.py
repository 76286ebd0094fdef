"""The package version, in a module of its own: any module may read it without importing the
plugin's entry point (``__init__.py`` imports the engine when the host registers the plugin)."""

__version__ = "0.1.0"
