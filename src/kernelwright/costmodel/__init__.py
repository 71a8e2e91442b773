"""A learned performance model that orders a search's configurations before they are timed (issue 31).

- :mod:`.features`: what is known of a candidate before timing (its launch configuration, variant, family, its
  problem's roofline, the arch).
- :mod:`.data`: timed candidates from run databases, grouped by run (one problem on one device: the candidates that
  competed).
- :mod:`.model`: a LightGBM lambdarank model over them (the ``costmodel`` extra), saved with the data it came from;
  leave-one-problem-out and leave-one-family-out evaluation against the search's own order and random.
"""
