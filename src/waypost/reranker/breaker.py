"""The circuit breaker in front of the reranking provider.

    closed --3 consecutive completed failures--> open (for `open_seconds`)
    open   --window over, one request admitted--> half_open (the probe)
    half_open --probe succeeds--> closed
    half_open --probe fails or is cancelled--> open (a fresh window)
    half_open --probe finds no free permit--> open (window already over:
                                              the next request may probe)

Every transition increments `generation`. A request carries the generation
it was admitted under (its ticket); a completion whose generation is not the
current one is ignored, so a slow request admitted before the circuit opened
(or before the probe closed it) cannot change the newer state. Time is the
monotonic clock, never the service's (possibly simulated) clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

State = Literal["closed", "open", "half_open"]


@dataclass(frozen=True)
class Ticket:
    """Admission to call the provider: under which generation, as the probe or not."""

    generation: int
    probe: bool


class Breaker:
    def __init__(
        self,
        threshold: int = 3,
        open_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.open_seconds = open_seconds
        self._clock = clock
        self.state: State = "closed"
        self.generation = 0
        self.failures = 0  # consecutive completed failures while closed
        self.open_until = 0.0

    def admit(self) -> Ticket | None:
        """A ticket to call the provider, or None: skip with `circuit_open`."""
        if self.state == "closed":
            return Ticket(self.generation, probe=False)
        if self.state == "open" and self._clock() >= self.open_until:
            self._move("half_open")
            return Ticket(self.generation, probe=True)
        return None  # open and in its window, or a probe is already out

    def release(self, ticket: Ticket) -> None:
        """An admitted request made no call (no free permit).

        For the probe this gives the reservation back: the circuit is open
        again with its window already over, so the next request may probe.
        """
        if ticket.probe and self._current(ticket):
            self._move("open")

    def succeeded(self, ticket: Ticket) -> None:
        if not self._current(ticket):
            return
        if ticket.probe:
            self._move("closed")
        self.failures = 0

    def failed(self, ticket: Ticket) -> None:
        """A completed failure (or a cancelled probe)."""
        if not self._current(ticket):
            return
        if ticket.probe:
            self._open()
            return
        self.failures += 1
        if self.failures >= self.threshold:
            self._open()

    def _current(self, ticket: Ticket) -> bool:
        return ticket.generation == self.generation

    def _open(self) -> None:
        self.open_until = self._clock() + self.open_seconds
        self._move("open")

    def _move(self, state: State) -> None:
        self.state = state
        self.failures = 0
        self.generation += 1
