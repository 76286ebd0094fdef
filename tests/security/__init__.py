"""Issue 10: the attacks on isolation and secrets, one test module per family of items."""
