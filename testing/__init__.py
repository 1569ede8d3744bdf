"""Test and fuzz support, kept out of the ``optimizer`` package (not installed with it; run from a checkout).

* :mod:`.builder`: plans built relation by relation in Python (the rules' before/after examples, the tests).
* :mod:`.strategies`: Hypothesis strategies for valid plans over random tables (:mod:`.values`), their
  expressions (:mod:`.gen_expressions`, aimed at the rows by :mod:`.rows`), lying statistics and reader
  profiles (:mod:`.profiles`); they need the ``test`` extra.
* :mod:`.fuzz`: ``python -m testing.fuzz [--long]`` runs :func:`optimizer.difftest.compare` on generated
  plans and saves shrunk failures as regressions; :mod:`.mutate` scores it against planted bugs.
* :mod:`.hostile`: ``python -m testing.hostile`` feeds hostile inputs to the loader and the CLI
  (docs/security.md).
"""
