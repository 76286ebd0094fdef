"""The attacks on isolation and secrets, one test module per family of items."""
