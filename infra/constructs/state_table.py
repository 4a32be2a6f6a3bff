"""The DynamoDB table that holds every run, attempt, event and timer of the supervisor."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from sagewarden import keys

TTL_ATTRIBUTE = "expires_at"

# Item-level data actions the supervisor needs. No Scan: every read goes through a key or one
# of the three indexes. (TransactWriteItems is authorised through these per-item actions.)
READ_WRITE_ACTIONS = (
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
)

_S = dynamodb.AttributeType.STRING
_N = dynamodb.AttributeType.NUMBER

GLOBAL_SECONDARY_INDEXES = (
    (keys.GSI_RUNS, keys.GSI_RUNS_PK, _S, keys.GSI_RUNS_SK, _S),
    (keys.GSI_STATUS, keys.GSI_STATUS_PK, _S, keys.GSI_STATUS_SK, _S),
    (keys.GSI_DUE, keys.GSI_DUE_PK, _S, keys.GSI_DUE_SK, _N),
)


class StateTable(Construct):
    """On-demand table with PITR, SSE (AWS managed key), TTL and the three shared GSIs.

    Attributes:
        table: the ``dynamodb.Table``.
        index_names: names of the global secondary indexes, in ``keys`` order.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=keys.PK, type=_S),
            sort_key=dynamodb.Attribute(name=keys.SK, type=_S),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute=TTL_ATTRIBUTE,
            # The audit trail of every run outlives the stack: `cdk destroy` leaves it behind.
            removal_policy=RemovalPolicy.RETAIN,
        )
        for index_name, pk, pk_type, sk, sk_type in GLOBAL_SECONDARY_INDEXES:
            self.table.add_global_secondary_index(
                index_name=index_name,
                partition_key=dynamodb.Attribute(name=pk, type=pk_type),
                sort_key=dynamodb.Attribute(name=sk, type=sk_type),
                projection_type=dynamodb.ProjectionType.ALL,
            )
        self.index_names = tuple(spec[0] for spec in GLOBAL_SECONDARY_INDEXES)

    def grant_read_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """Item reads/writes on the table and Query on exactly its indexes (no ``index/*``)."""
        resources = [self.table.table_arn] + [
            f"{self.table.table_arn}/index/{name}" for name in self.index_names
        ]
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(READ_WRITE_ACTIONS), resource_arns=resources
        )
