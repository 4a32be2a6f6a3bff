"""The simulated SageMaker, split by concern. Import it from :mod:`drill.sim.sagemaker`.

- :mod:`drill.sim.texts`: the texts SageMaker shows (failure reasons, status messages) and constants
- :mod:`drill.sim.model`: the data classes (JobProfile, StartupTimes, Fault, SimJob)
- :mod:`drill.sim.lifecycle`: the event loop, timers, Training phases, endings, warm pools, events
- :mod:`drill.sim.faults`: which faults match a job, when they fire and what they do
- :mod:`drill.sim.checkpoints`: checkpoint layouts and their progressive writes to S3
- :mod:`drill.sim.logs`: log lines, tails and their flushes to CloudWatch Logs
- :mod:`drill.sim.series`: the metric series (GPU utilisation, progress metric, heartbeat counts)
"""
