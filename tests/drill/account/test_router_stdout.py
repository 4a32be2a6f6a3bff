"""What a handler prints in the drill is discarded (in Lambda it goes to the function's log group),
and only in the handler's own thread: the local server runs handlers on its clock thread while a
CLI prints in another (a process-wide redirect made that CLI print nothing)."""

from __future__ import annotations

import io
import sys
import threading

from drill.account.router import _attributed


def test_a_handlers_print_is_discarded_while_another_thread_still_prints(monkeypatch):
    captured = io.StringIO()
    monkeypatch.setattr(sys, "stdout", captured)
    inside, release = threading.Event(), threading.Event()

    def handler(event, context):
        print("EMF batch from the handler")
        inside.set()
        release.wait(5)
        print("more EMF")
        return "done"

    results = []
    worker = threading.Thread(target=lambda: results.append(_attributed("m.handler", handler)({}, None)))
    worker.start()
    assert inside.wait(5)
    print("the CLI's output")  # this thread, while the handler is mid-run
    release.set()
    worker.join(5)

    assert results == ["done"]
    assert captured.getvalue() == "the CLI's output\n"
    assert sys.stdout is captured  # the routing is taken down when the last handler returns


def test_nested_and_concurrent_handlers_restore_stdout(monkeypatch):
    captured = io.StringIO()
    monkeypatch.setattr(sys, "stdout", captured)

    def inner(event, context):
        print("inner")
        return 1

    def outer(event, context):
        print("outer")
        return _attributed("m.inner", inner)(event, context) + 1

    threads = [threading.Thread(target=_attributed("m.outer", outer), args=({}, None)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    print("after")
    assert captured.getvalue() == "after\n"
    assert sys.stdout is captured
