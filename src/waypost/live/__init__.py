"""Live updates: the event fan-out hub, the SSE stream and what GraphQL
subscriptions build on. See `hub.py` for how events reach listeners."""

from __future__ import annotations

from waypost.live.hub import Hub, LiveLimits, SlowConsumer, StreamEnded, TooManyStreams
from waypost.runtime import Runtime

__all__ = ["Hub", "LiveLimits", "SlowConsumer", "StreamEnded", "TooManyStreams", "hub_for"]


def hub_for(rt: Runtime, limits: LiveLimits | None = None) -> Hub:
    """The runtime's hub, made on first use (one per process, like the writer);
    the runtime closes it with its other resources."""
    if rt.hub is None:
        hub = Hub(rt.db, limits)
        rt.hub = hub
        rt.resources.push_async_callback(hub.close)
        if rt.stopping.is_set():
            # made once the stop began (a request pipelined behind one under
            # way runs after it): `begin_stop` found no hub to stop, and this
            # one's streams held the graceful stop for ever
            hub.stop()
    return rt.hub
