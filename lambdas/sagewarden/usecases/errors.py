"""Field-level request errors: what the API answers with 400 (or 413) and a list of `errors`."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

MAX_ERRORS = 50  # a response lists at most this many problems (then says how many more there were)


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str


class InvalidRequest(Exception):
    """The request is refused before anything is stored; `errors` names every problem found."""

    status = 400
    message = "invalid request"

    def __init__(self, errors: list[FieldError]) -> None:
        if len(errors) > MAX_ERRORS:
            more = len(errors) - MAX_ERRORS + 1
            errors = [*errors[: MAX_ERRORS - 1], FieldError("body", f"{more} more problems not listed")]
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors


class RequestTooLarge(InvalidRequest):
    status = 413
    message = "request too large"


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`; did you mean X?` when one candidate is close to `word` (case or a small typo), else ''."""
    options = list(candidates)
    if len(word) > 200:
        return ""
    lowered = {c.lower(): c for c in options}
    if word.lower() in lowered:
        return f"; did you mean {lowered[word.lower()]}?"
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""
