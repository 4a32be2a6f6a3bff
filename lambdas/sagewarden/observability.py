"""Powertools singletons. The service name comes from POWERTOOLS_SERVICE_NAME, which the stack sets
per deployment (`sagewarden-<jobPrefix>`): it is the `service` dimension of every metric, so two
deployments in one account and region never share (or alarm on) each other's counters."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "sagewarden"
logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace="Sagewarden", service=SERVICE)
