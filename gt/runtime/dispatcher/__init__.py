"""The dispatcher process: one poll loop (:mod:`.loop`) around a pure scheduler (:mod:`.planner`)
and the sharding planner (:mod:`gt.runtime.sharding`); control requests in :mod:`.control`."""
