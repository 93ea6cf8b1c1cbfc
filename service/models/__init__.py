"""All models, imported here so ``Base.metadata`` is complete for Alembic and create_all."""

from service.domain.states import Outcome, RunState, StepName, StepStatus
from service.models.audit import AuditEntry
from service.models.backend import Backend, BackendChange
from service.models.base import Base, utcnow
from service.models.bisection import Bisection, BisectionProbe
from service.models.breakage import Breakage, BreakageStatus
from service.models.conformance import ConformanceResult
from service.models.log_chunk import LogChunk
from service.models.outbox import OutboxKind, OutboxMessage, OutboxState
from service.models.pin_report import PinReport
from service.models.quarantine import Quarantine
from service.models.run import Failure, IllegalTransition, Run, Step, TestResult
from service.models.shard import ShardState, TestShard
from service.models.subscription import Subscription
from service.models.token import ApiToken
from service.models.torch_build import SourceKind, TorchBuild
from service.models.verification import CulpritVerification
from service.models.webhook import WebhookDelivery

__all__ = [
    "ApiToken",
    "AuditEntry",
    "Backend",
    "BackendChange",
    "Base",
    "Bisection",
    "BisectionProbe",
    "Breakage",
    "BreakageStatus",
    "ConformanceResult",
    "CulpritVerification",
    "Failure",
    "IllegalTransition",
    "LogChunk",
    "Outcome",
    "OutboxKind",
    "OutboxMessage",
    "OutboxState",
    "PinReport",
    "Quarantine",
    "Run",
    "RunState",
    "ShardState",
    "SourceKind",
    "Step",
    "StepName",
    "StepStatus",
    "Subscription",
    "TestResult",
    "TestShard",
    "TorchBuild",
    "WebhookDelivery",
    "utcnow",
]
