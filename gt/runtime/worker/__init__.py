"""The worker process (one per GPU): the socket shell (:mod:`.loop`), the array backend
(:mod:`.backend`, the only module that imports CuPy), peer links and collectives (:mod:`.peers`)
and NVML sampling (:mod:`.device_monitor`)."""
