"""One construct per concern; ``Supervisor`` composes them."""

from infra.constructs.alerts import Alerts
from infra.constructs.api import SupervisorApi
from infra.constructs.event_rules import EventRules
from infra.constructs.functions import SupervisorFunction, SupervisorFunctions
from infra.constructs.hang_signals import HangSignals
from infra.constructs.permissions import SupervisorPermissions
from infra.constructs.state_table import StateTable
from infra.constructs.supervisor import Supervisor

__all__ = [
    "Alerts",
    "EventRules",
    "HangSignals",
    "StateTable",
    "Supervisor",
    "SupervisorApi",
    "SupervisorFunction",
    "SupervisorFunctions",
    "SupervisorPermissions",
]
