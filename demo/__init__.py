"""The replayed coding session the README's first command runs (``python -m hermes_lcm.demo``):
``replay`` drives the real engine through the recorded host turns, ``main`` checks and reports.
"""
