"""Local drill: a simulated SageMaker on a virtual clock, used by scenario tests and ``make demo``."""
