"""Frozen unit inputs: what a ticker was scored from on a night, kept so that another path
can later be handed exactly the same input (`dualpath candidate`).

A unit's input is draw-independent apart from the draw number: the ticker, the night, the
adjusted closes the prompts showed and the documents. `FrozenInput.sha256` addresses it by
content (the canonical JSON below), so a night scored twice on the same data stores one row
and a changed price or document is a different input, never an overwrite. `FrozenHistory`
serves stored inputs to `dualpath.night.path_runner` in place of the warehouse's prices.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date

import orjson

from dualpath.errors import DataError
from dualpath.pipeline import UnitInput


@dataclass(frozen=True, slots=True)
class FrozenInput:
    """One ticker's input on one night (every draw of it was scored from this)."""

    ticker: str
    night: date
    closes: tuple[tuple[date, float], ...]
    documents: str | None = None

    def canonical(self) -> bytes:
        """The bytes the hash is taken of: sorted keys, ISO dates, floats as orjson writes
        them (the shortest text that reads back as the same double, so a stored input
        rehashes to its own key)."""
        return orjson.dumps({"ticker": self.ticker, "night": self.night.isoformat(),
                             "closes": [[d.isoformat(), float(c)] for d, c in self.closes],
                             "documents": self.documents}, option=orjson.OPT_SORT_KEYS)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def closes_json(self) -> str:
        return orjson.dumps([[d.isoformat(), float(c)] for d, c in self.closes]).decode()

    @classmethod
    def of_unit(cls, unit: UnitInput) -> "FrozenInput":
        return cls(unit.ticker, unit.night, tuple(unit.closes), unit.documents)

    @classmethod
    def from_stored(cls, ticker: str, night: date, closes_json: str,
                    documents: str | None) -> "FrozenInput":
        closes = tuple((date.fromisoformat(d), float(c)) for d, c in orjson.loads(closes_json))
        return cls(ticker, night, closes, documents)


class FrozenHistory:
    """Serves one night's frozen inputs where a `dualpath.night.PriceHistory` would serve
    the warehouse's prices: the closes exactly as stored (not re-cut to today's
    `history_days`: the candidate sees what the reference saw) and the stored documents."""

    def __init__(self, night: date, inputs: dict[str, FrozenInput]):
        self.night = night
        self._inputs = inputs

    def __contains__(self, ticker: str) -> bool:
        return ticker in self._inputs

    def closes(self, ticker: str, night: date, days: int) -> tuple[tuple[date, float], ...]:
        return self._get(ticker, night).closes

    def documents(self, ticker: str) -> str | None:
        return self._get(ticker, self.night).documents

    def _get(self, ticker: str, night: date) -> FrozenInput:
        if night != self.night or ticker not in self._inputs:
            raise DataError(f"no frozen input for {ticker} on {night}; only nights scored "
                            "since frozen inputs were stored can be replayed")
        return self._inputs[ticker]
