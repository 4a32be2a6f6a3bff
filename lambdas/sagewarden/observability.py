"""Powertools singletons (service name and namespace come from the environment)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger(service="sagewarden")
tracer = Tracer(service="sagewarden")
metrics = Metrics(namespace="Sagewarden", service="sagewarden")
