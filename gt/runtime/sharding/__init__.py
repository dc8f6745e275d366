"""Pure sharding logic, no sockets: the shard-config schema (:mod:`.config`) and its editor checks
(:mod:`.config_text`), layouts (:mod:`.layout`), the placement planner (:mod:`.placement`,
:mod:`.special`), its rules (:mod:`.rules`) and the explicit re-layouts (:mod:`.relayout`)."""
