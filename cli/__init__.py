"""The ``lcm`` command: ``main`` builds the parser and runs a verb; one module per verb family
(``embed``, ``export``, ``migrate``, ``payloads``, ``pg``, ``redact``, ``rollups``, ``view``,
``assertions``) and the output shapes every verb shares (``output``). Verb modules import their
work inside their handlers, so ``lcm status`` stays fast.
"""
