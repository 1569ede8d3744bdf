"""Loading a plan: :mod:`.pipeline` (:func:`~optimizer.load.pipeline.load`, behind
:func:`optimizer.plan_io.load_plan`) runs the steps in order and returns the plan with its function table
and schemas. The steps: input limits (:mod:`.limits`, :mod:`.counts`), nesting depth bounded
(:mod:`.protobuf_depth`), older encodings upgraded (:mod:`.upgrade`), producers' quirks conformed to the
specification (:mod:`.producer_quirks`, :mod:`.grouping_sets`); :mod:`.functions` answers "which function
is anchor N". :mod:`.producers` makes plans with real producers (DataFusion, DuckDB)."""
