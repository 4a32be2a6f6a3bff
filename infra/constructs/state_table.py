"""The DynamoDB table that holds every run, attempt, event and timer of the supervisor."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sagewarden import keys

TTL_ATTRIBUTE = "expires_at"

# What a principal needs on a customer-managed table key to read and write the table: DynamoDB
# uses the key on the caller's behalf (kms:ViaService), so only through DynamoDB
KEY_ACTIONS = ("kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey")

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
    """On-demand table with PITR, SSE, TTL and the three shared GSIs.

    SSE uses the AWS-managed DynamoDB key, or the customer-managed key ``kms_key_arn`` (context
    ``tableKmsKeyArn``): the table stores every run's request, so a deployment may want to
    control (and audit, and revoke) the key itself. The key is the deployment's, not the stack's:
    it outlives the stack like the table does.

    Attributes:
        table: the ``dynamodb.Table``.
        key: the customer-managed ``kms.IKey``, or None.
        index_names: names of the global secondary indexes, in ``keys`` order.
    """

    def __init__(self, scope: Construct, construct_id: str, *, kms_key_arn: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.key: kms.IKey | None = (
            kms.Key.from_key_arn(self, "TableKey", kms_key_arn) if kms_key_arn is not None else None
        )

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=keys.PK, type=_S),
            sort_key=dynamodb.Attribute(name=keys.SK, type=_S),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED
            if self.key is not None
            else dynamodb.TableEncryption.AWS_MANAGED,
            encryption_key=self.key,
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
        if self.key is not None:
            grantee.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="UseTheTableKeyThroughDynamoDB",
                    actions=list(KEY_ACTIONS),
                    resources=[self.key.key_arn],
                    conditions={
                        "StringEquals": {"kms:ViaService": f"dynamodb.{Stack.of(self).region}.amazonaws.com"}
                    },
                )
            )
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(READ_WRITE_ACTIONS), resource_arns=resources
        )
