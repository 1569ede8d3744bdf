"""What :func:`optimizer.plan_io.load_plan` does to a plan after parsing it: older encodings upgraded
(:mod:`.upgrade`), nesting depth bounded (:mod:`.protobuf_depth`), producers' quirks conformed to the
specification (:mod:`.producer_quirks`, :mod:`.grouping_sets`). And plans that come from Python rather
than from a file: :mod:`.builder` builds them relation by relation (the rules' examples, the tests)."""
