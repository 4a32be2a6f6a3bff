"""IAM proven by replay: the supervisor's AWS calls in the drill, checked against the template's policies.

`recorder` records calls, `requests` maps them to authorization requests, `cfn` resolves the
template, `evaluate` decides, `replay` runs the check. Why: docs/deploy.md (*IAM proven by replay*)."""


class IamReplayError(AssertionError):
    """A recorded call is denied, undecidable or unmapped (raised when a LocalAccount closes)."""


__all__ = ["IamReplayError"]
