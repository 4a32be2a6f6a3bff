"""Fuzz every route of docs/openapi.json through the template's API routes, with hypothesis.

Each example is one request, invoked the way API Gateway does (the proxy event of the route the
synthesized template wires, against a local account). Requests are drawn from the document
(schema-shaped paths, queries, headers and bodies), from valid submissions and mutations of
them, and from hostile input (every shape of issue 11 among it). Checked for every response:

- no status >= 500, and the status is one the document lists for the route;
- the body is strict JSON (no NaN/Infinity) and matches the documented schema of that status;
- a 4xx carries a `message`; a 400/413 carries field-level `errors`;
- a refused request stored nothing (runs, audit entries and training jobs counted before/after),
  and an accepted submission stored exactly one run and launched at most one job.

SAGEWARDEN_FUZZ_REQUESTS sets the number of requests (default 300; `make soak-api` runs 20,000),
split between the in-memory store (3/4) and moto's DynamoDB (1/4). One summary line is printed
at the end: requests, time, responses by status class, and the count >= 500.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.account.memory_store import InMemoryRunStore
from drill.scenarios.spec import default_training_job
from tests.fuzz.harness import RawResponse, raw_call, strict_json
from tests.fuzz.strategies import (
    HOSTILE_PARAM,
    JSON_VALUE,
    NON_FINITE,
    SchemaStrategies,
    forged_cursors,
    hostile_literals,
    load_doc,
    operations,
    paths_of,
    splice,
)

pytestmark = pytest.mark.fuzz

TOTAL = int(os.environ.get("SAGEWARDEN_FUZZ_REQUESTS", "300"))
SHARE = {"memory": 0.75, "dynamodb": 0.25}
DOC = load_doc()
OPERATIONS = operations(DOC)
SCHEMAS = SchemaStrategies(DOC)
REGISTRY: Registry = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(DOC))
STATS: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
TIMES: dict[str, float] = collections.defaultdict(float)  # in the handler
WALL: dict[str, float] = {}  # first and last request
POLICY_NUMBERS = sorted(
    k for k, v in DOC["components"]["schemas"]["Policy"]["properties"].items() if "description" in v
)


WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


class World:
    """The account under test and what earlier responses revealed (ids, cursors, keys)."""

    def __init__(self, acct: LocalAccount, store: str) -> None:
        self.acct = acct
        self.store = store
        self.run_ids: list[str] = []
        self.cursors: list[str] = []
        self.keys: list[str] = []
        self.ddb_writes = 0
        acct.ddb.meta.events.register("after-call.dynamodb", self._count_write)

    def _count_write(self, model: Any, http_response: Any, **_: Any) -> None:
        if model.name in WRITE_OPERATIONS and http_response.status_code < 300:
            self.ddb_writes += 1  # a write DynamoDB accepted (a cancelled transaction stores nothing)

    def footprint(self) -> tuple[int, int, int]:
        """(runs stored, writes, training jobs): what a refused request must leave unchanged.

        In-memory store: runs and audit entries it holds (test introspection). DynamoDB store:
        runs are not counted (a scan per request would dominate the run time); every write
        DynamoDB accepted from the store is (after-call hook on its client).
        """
        store = self.acct.supervisor.store
        jobs = len(self.acct.sagemaker.jobs())
        if isinstance(store, InMemoryRunStore):
            return len(store._runs), sum(len(v) for v in store._audit.values()), jobs
        return -1, self.ddb_writes, jobs


@pytest.fixture(scope="module")
def summary() -> Iterator[None]:
    yield
    _print_summary()


@pytest.fixture(scope="module", params=sorted(SHARE))
def world(request: pytest.FixtureRequest, template: Any, summary: None) -> Iterator[World]:
    with LocalAccount(template, store=request.param) as acct:
        yield World(acct, request.param)


def _print_summary() -> None:
    total = sum(sum(c.values()) for c in STATS.values())
    if total == 0:
        return
    classes: collections.Counter[str] = collections.Counter()
    statuses: collections.Counter[str] = collections.Counter()
    for counter in STATS.values():
        for status, n in counter.items():
            statuses[status] += n
            classes[status[0] + "xx"] += n
    seconds = WALL["last"] - WALL["first"]
    per_store = ", ".join(f"{s} {sum(STATS[s].values())}" for s in sorted(STATS))
    print(
        f"\napi-fuzz: {total} requests in {seconds:.1f} s ({total / max(seconds, 1e-9):.0f}/s, "
        f"{sum(TIMES.values()):.1f} s in the handler; {per_store}) | "
        + " ".join(f"{k}={classes[k]}" for k in sorted(classes))
        + f" | >=500: {sum(n for s, n in statuses.items() if int(s) >= 500)} | by status: "
        + " ".join(f"{s}={statuses[s]}" for s in sorted(statuses)),
        flush=True,
    )


# --- drawing requests --------------------------------------------------------------------------


def _valid_body(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True))
    body: dict[str, Any] = {"name": name, "training_job": default_training_job(name, BUCKET, EXECUTION_ROLE)}
    if draw(st.booleans()):
        body["policy"] = draw(SCHEMAS.named("Policy"))
    return body


def _mutated_body(draw: st.DrawFn) -> Any:
    body = _valid_body(draw)
    paths = paths_of(body)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        value, key = draw(JSON_VALUE), draw(st.text(max_size=12))
        try:
            node = body
            for step in path[:-1]:
                node = node[step]
            if action == "replace":
                node[path[-1]] = value
            elif action == "delete" and isinstance(node, dict):
                node.pop(path[-1], None)
            elif isinstance(node, dict):
                node[key] = value
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation changed the shape under this path
    return body


def _hostile_body(draw: st.DrawFn) -> str:
    """A valid body with one issue-11 shape spliced in at a random place (or the whole body)."""
    body = _valid_body(draw)
    kind = draw(st.sampled_from(["anywhere", "policy-number", "non-ascii-250kb", "oversized", "whole"]))
    if kind == "policy-number":
        field = draw(st.sampled_from(POLICY_NUMBERS))
        literal = draw(
            st.sampled_from(NON_FINITE) | st.just("1e306") | st.integers(4301, 6000).map("7".__mul__)
        )
        return splice({**body, "policy": {field: 0}}, ["policy", field], literal)
    if kind == "non-ascii-250kb":
        char = draw(st.sampled_from(["é", "ж", "€", "😀"]))
        per = 2500 // 2 if len(char.encode()) == 2 else 2500 // 3 if len(char.encode()) == 3 else 2500 // 4
        body["training_job"]["HyperParameters"] = {f"h{i:02d}": char * per for i in range(100)}
        return json.dumps(body, ensure_ascii=draw(st.booleans()))
    if kind == "oversized":
        body["training_job"]["HyperParameters"] = {"pad": "p" * draw(st.integers(256 * 1024, 300 * 1024))}
        return json.dumps(body)
    literal = draw(hostile_literals())
    if kind == "whole":
        return literal
    return splice(body, draw(st.sampled_from(paths_of(body))), literal)


def _body(draw: st.DrawFn) -> str | None:
    choice = draw(
        st.sampled_from(["schema", "valid", "mutated", "hostile", "hostile", "json", "text", "none"])
    )
    if choice == "schema":
        return json.dumps(draw(SCHEMAS.named("RunSubmission")))
    if choice == "valid":
        return json.dumps(_valid_body(draw))
    if choice == "mutated":
        return json.dumps(_mutated_body(draw))
    if choice == "hostile":
        return _hostile_body(draw)
    if choice == "json":
        return json.dumps(draw(JSON_VALUE))
    if choice == "text":
        return draw(st.text(max_size=200))
    return None


def _param_value(draw: st.DrawFn, param: dict[str, Any], w: World) -> str:
    """A value for one parameter. Every branch draws the same things, so generation never depends
    on what the account holds (hypothesis requires that); known ids, cursors and keys from
    earlier responses are then picked by index."""
    name = param["name"]
    mode = draw(st.sampled_from(["hostile", "schema", "known", "known-altered"]))
    pick = draw(st.integers(0, 2**20))
    hostile = draw(HOSTILE_PARAM)
    if name == "cursor":
        from_doc: Any = draw(forged_cursors())
    else:
        from_doc = draw(SCHEMAS.of(param["schema"]).filter(lambda v: v is not None))
    known = {"run_id": w.run_ids, "cursor": w.cursors, "idempotency-key": w.keys}.get(name, [])
    if mode.startswith("known") and known:
        value = known[pick % len(known)]
        return value[:-2] + "AA" if mode == "known-altered" else value
    if mode == "hostile":
        return hostile
    return from_doc if isinstance(from_doc, str) else json.dumps(from_doc)


# Submissions carry the bodies (and the issue-11 shapes), so they get half of the requests.
WEIGHTED = [o for o in OPERATIONS for _ in range(5 if o[:2] == ("POST", "/runs") else 1)]


def _request(draw: st.DrawFn, w: World) -> dict[str, Any]:
    method, template, op = draw(st.sampled_from(WEIGHTED))
    path, query, headers = template, {}, {}
    for param in op.get("parameters", []):
        where = param["in"]
        if where == "path":
            value = _param_value(draw, param, w)
            path = path.replace("{" + param["name"] + "}", value)
        elif param.get("required") or draw(st.booleans()):
            value = _param_value(draw, param, w)
            (query if where == "query" else headers)[param["name"]] = value
    if draw(st.integers(0, 9)) == 0:
        query[draw(st.text(min_size=1, max_size=8))] = draw(st.text(max_size=20))
    body = _body(draw) if "requestBody" in op or draw(st.integers(0, 9)) == 0 else None
    return {
        "method": method,
        "template": template,
        "op": op,
        "path": path,
        "query": query,
        "headers": headers,
        "body": body,
    }


# --- checking responses ------------------------------------------------------------------------


def _check(w: World, req: dict[str, Any], resp: RawResponse, before: tuple[int, int, int]) -> None:
    where = f"{req['method']} {req['path'][:120]!r} query={str(req['query'])[:200]} body={str(req['body'])[:300]!r}"
    assert resp.status < 500, f"{resp.status} for {where}: {resp.text[:500]}"
    body = strict_json(resp.text)  # raises on NaN/Infinity or malformed JSON
    after = w.footprint()
    if not resp.routed:  # API Gateway's 403 for a path no route matches: the handler never ran
        assert after == before, where
        return
    documented = req["op"]["responses"]
    assert str(resp.status) in documented, f"undocumented {resp.status} for {where}: {resp.text[:300]}"
    schema = documented[str(resp.status)]["content"]["application/json"]["schema"]
    validator = Draft202012Validator({"$ref": "urn:openapi" + schema["$ref"]}, registry=REGISTRY)
    problems = sorted(validator.iter_errors(body), key=str)
    assert not problems, f"response does not match the document for {where}: {problems[0].message[:300]}"
    if resp.status >= 400:
        assert isinstance(body.get("message"), str) and body["message"], where
        if resp.status in (400, 413):
            assert body["errors"] and all(e["field"] and e["message"] for e in body["errors"]), where
    created = req["template"] == "/runs" and resp.status == 201
    cancelled = req["template"].endswith("/cancel") and resp.status < 300
    resumed = req["template"].endswith("/resume") and resp.status < 300
    if created:
        # one run stored; at most one job (the launch may wait for quota or capacity: RETRY_WAIT)
        assert after[1] > before[1] and after[2] - before[2] in (0, 1), f"201 stored {after} after {before}"
        assert after[0] - before[0] == (0 if before[0] < 0 else 1), f"201 stored {after} after {before}"
    elif cancelled:
        assert (after[0], after[2]) == (before[0], before[2]), f"a cancel created something: {where}"
    elif resumed:  # the same run, one new attempt (at most one job)
        assert after[0] == before[0] and after[2] - before[2] in (0, 1), (
            f"resume stored {after} after {before}"
        )
    else:  # refused, replayed or read-only: nothing new anywhere
        assert after == before, f"{resp.status} changed what is stored ({before} -> {after}): {where}"


def _learn(w: World, req: dict[str, Any], resp: RawResponse) -> None:
    if resp.status >= 300:
        return
    body = json.loads(resp.text)
    if isinstance(body, dict):
        if body.get("run_id") and body["run_id"] not in w.run_ids:
            w.run_ids.append(body["run_id"])
        if body.get("next_cursor"):
            w.cursors = [*w.cursors[-20:], body["next_cursor"]]
    key = req["headers"].get("idempotency-key")
    if key and key not in w.keys:
        w.keys = [*w.keys[-20:], key]


@pytest.mark.claim(
    "Bad input gets **400** (**413** when too large) with field-level messages, and **nothing is stored or launched**"
)
@pytest.mark.claim(
    "It checks that no response is ≥ 500, every body is strict JSON matching the documented schema, every 4xx has a message (and field errors for 400/413), and a refused request stored nothing."
)
@pytest.mark.claim(
    "20,000 requests in 427 s on the last run (240 s on an earlier one), 0 responses ≥ 500, 0 refusals that stored anything"
)
def test_api_fuzz_no_5xx_strict_json_field_errors_and_nothing_stored_when_refused(world: World) -> None:
    count = max(1, round(TOTAL * SHARE[world.store]))

    # No shrinking: the world is stateful, and a failure's message already names the request.
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def one_request(data: st.DataObject) -> None:
        req = data.draw(st.composite(lambda draw: _request(draw, world))())
        before = world.footprint()
        start = time.perf_counter()
        resp = raw_call(
            world.acct,
            req["method"],
            req["path"],
            body=req["body"],
            headers=req["headers"],
            query=req["query"] or None,
        )
        TIMES[world.store] += time.perf_counter() - start
        WALL.setdefault("first", start)
        WALL["last"] = time.perf_counter()
        STATS[world.store][str(resp.status)] += 1
        _check(world, req, resp, before)
        _learn(world, req, resp)

    one_request()
    assert sum(STATS[world.store].values()) >= count
    assert not any(int(s) >= 500 for s in STATS[world.store]), dict(STATS[world.store])


def test_api_fuzz_strategies_cover_every_route_and_every_issue_11_shape() -> None:
    """The fuzzer draws from every documented route, and its hostile strategy has each shape class."""
    assert {(m, p) for m, p, _ in OPERATIONS} == {
        ("POST", "/runs"),
        ("GET", "/runs"),
        ("GET", "/runs/{run_id}"),
        ("GET", "/runs/{run_id}/events"),
        ("POST", "/runs/{run_id}/cancel"),
        ("POST", "/runs/{run_id}/resume"),
    }
    seen: set[str] = set()

    @settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hostile_literals())
    def classify(literal: str) -> None:
        if literal.startswith(("[[", '{"a": {')):
            seen.add("deep")
        elif literal.lstrip("-").isdigit() and len(literal.lstrip("-")) > 30:
            seen.add("long-int")
        elif literal in NON_FINITE:
            seen.add("non-finite")
        elif "\\ud" in literal or any(0xD800 <= ord(c) <= 0xDFFF for c in literal):
            seen.add("surrogate")

    classify()
    assert seen == {"deep", "long-int", "non-finite", "surrogate"}
