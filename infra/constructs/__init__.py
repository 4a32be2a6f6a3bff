"""One construct per concern; ``Supervisor`` composes them."""

from .alerts import Alerts
from .api import SupervisorApi
from .event_rules import EventRules
from .functions import SupervisorFunction, SupervisorFunctions
from .hang_signals import HangSignals
from .permissions import SupervisorPermissions
from .state_table import StateTable
from .supervisor import Supervisor

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
