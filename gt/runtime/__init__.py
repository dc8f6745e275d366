"""GT's runtime, one package per process: :mod:`.client`, :mod:`.dispatcher`, :mod:`.worker`, the
pure :mod:`.sharding` logic, and what they share: :mod:`.protocol` (the messages), :mod:`.control`
(control requests), :mod:`.discovery` and :mod:`.launch` (local clusters)."""
