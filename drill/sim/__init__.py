"""The simulated SageMaker, split by concern; import it from `drill.sim.sagemaker`.

See drill/sim/sagemaker.py for the modules; why: docs/drill.md (*The simulated services*)."""
