"""IAM proven by replay: the AWS calls the supervisor makes in the drill, checked against the
synthesized template's IAM policies.

* :mod:`drill.iam.recorder` records each function's calls in the local account;
* :mod:`drill.iam.requests` maps a call to the IAM authorization requests AWS makes for it;
* :mod:`drill.iam.cfn` reads the template's policies with the account's physical names;
* :mod:`drill.iam.evaluate` decides each request with IAM's rules (allow / deny / unknown);
* :mod:`drill.iam.replay` runs the check and lists grants no call needed.

``LocalAccount`` records by default and checks when it closes; ``DrillRunner`` reports
failures as invariant violations. ``make iam-report`` prints the report over every shipped
scenario (``python -m drill.iam``).
"""


class IamReplayError(AssertionError):
    """A recorded call is denied, undecidable or unmapped (raised when a LocalAccount closes)."""


__all__ = ["IamReplayError"]
