"""sagewarden: a serverless supervisor for long SageMaker training runs."""
