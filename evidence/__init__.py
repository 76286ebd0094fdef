"""The evidence family: typed facts with citations, packs, checks and computations over exact stored refs."""
