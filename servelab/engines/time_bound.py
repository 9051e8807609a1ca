"""A load point bounded in time, inside the engine's own benchmark client.

`vllm bench serve` and SGLang's bench_serving send a count of prompts and have no duration
option: an open loop sends rate x duration even where the server completes far less (its
queue then drains long after), and a closed loop sized from a guess of the request time
runs 2-3x longer than asked. servelab bounds them from inside: from the first request the
point sends for `duration_s`, then stops sending (a closed loop's next request, an open
loop's next arrival); the requests still in flight get `grace_s` to finish and are then
cut (their connection closed, so the engine aborts them). Both clients schedule requests
through a module-level `get_request` generator and call a request function from
`ASYNC_REQUEST_FUNCS`: those two are wrapped for the run, nothing else of the client
changes. The bound's count of what happened is saved in the client's result under
`bound` (servelab's options `--servelab-duration` and `--servelab-grace` in the argv; the
client never sees them).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

DURATION_FLAG, GRACE_FLAG = "--servelab-duration", "--servelab-grace"
CUT = "servelab: cut at the end of the grace period"


def bound_args(duration_s: float | None, grace_s: float) -> list[str]:
    """servelab's options for a point sized in time (none for a point sized in prompts)."""
    return [] if duration_s is None else [DURATION_FLAG, f"{duration_s:g}", GRACE_FLAG, f"{grace_s:g}"]


def split(argv: list[str]) -> tuple[list[str], "Bound | None"]:
    """(the client's own argv, the bound servelab's options ask for, or None)."""
    rest, found = [], {}
    items = iter(argv)
    for arg in items:
        if arg in (DURATION_FLAG, GRACE_FLAG):
            found[arg] = float(next(items))
        else:
            rest.append(arg)
    if DURATION_FLAG not in found:
        return rest, None
    concurrency = rest[rest.index("--max-concurrency") + 1] if "--max-concurrency" in rest else None
    return rest, Bound(found[DURATION_FLAG], found.get(GRACE_FLAG, 0.0),
                       int(concurrency) if concurrency not in (None, "None") else None)


class Bound:
    """The schedule's cut-off and the count of what was sent, finished and cut."""

    def __init__(self, duration_s: float, grace_s: float, concurrency: int | None = None):
        self.duration_s, self.grace_s, self.concurrency = duration_s, grace_s, concurrency
        self.first: float | None = None
        self.last_sent = self.last_done = self.stopped = None
        self.sent = self.in_time = self.in_grace = self.cut = self.failed = 0
        self.slots: asyncio.Semaphore | None = None

    def requests(self, schedule):
        """The client's request generator, stopped `duration_s` after its first request.
        A closed loop yields its next request only once one of its slots is free, so that
        the requests not sent by the end are never created (a client otherwise creates
        every task at once and its semaphore lets them in one by one)."""
        async def bounded(*args, **kwargs):
            if self.concurrency:
                self.slots = asyncio.Semaphore(self.concurrency)
            async for item in schedule(*args, **kwargs):
                if self.slots is not None:
                    await self.slots.acquire()
                now = time.perf_counter()
                self.first = self.first or now
                if now - self.first >= self.duration_s:
                    self.stopped = now
                    if self.slots is not None:
                        self.slots.release()
                    break
                self.sent += 1
                self.last_sent = now
                yield item
        return bounded

    def request_func(self, call, output_type):
        """One request, cut at the end of the grace period (a failed output that says so)."""
        async def bounded(*args, **kwargs):
            if self.first is None:   # the client's ready check and warm-ups, before the point
                return await call(*args, **kwargs)
            request = kwargs.get("request_func_input", args[0] if args else None)
            started = time.perf_counter()
            left = self.first + self.duration_s + self.grace_s - started
            try:
                output = await asyncio.wait_for(call(*args, **kwargs), timeout=max(left, 0.0))
            except asyncio.TimeoutError:
                self.cut += 1
                output = output_type()
                output.success, output.error, output.start_time = False, CUT, started
                output.prompt_len = getattr(request, "prompt_len", 0)
                return output
            finally:
                self.last_done = time.perf_counter()
                if self.slots is not None:
                    self.slots.release()
            if not output.success:
                self.failed += 1
            elif self.last_done - self.first <= self.duration_s:
                self.in_time += 1
            else:
                self.in_grace += 1
            return output
        return bounded

    @contextlib.contextmanager
    def around(self, client_module, output_type):
        """The client module's schedule and request functions bounded while the run lasts."""
        schedule, funcs = client_module.get_request, dict(client_module.ASYNC_REQUEST_FUNCS)
        client_module.get_request = self.requests(schedule)
        for name, call in funcs.items():
            client_module.ASYNC_REQUEST_FUNCS[name] = self.request_func(call, output_type)
        try:
            yield self
        finally:
            client_module.get_request = schedule
            client_module.ASYNC_REQUEST_FUNCS.update(funcs)

    def summary(self) -> dict:
        """What the result's `bound` holds: the asked duration and grace, how long the point
        sent (first to last request sent) and ran (to the last completion or cut), and
        the requests sent, completed in time, completed in the grace period, cut, failed.
        `stopped_s`: when the schedule found its duration over (None: it ran out before)."""
        def since_first(t):
            return round(t - self.first, 3) if t is not None and self.first is not None else None

        send_s, wall_s = since_first(self.last_sent), since_first(self.last_done)
        return {"duration_s": self.duration_s, "grace_s": self.grace_s, "send_s": send_s,
                "stopped_s": since_first(self.stopped), "wall_s": wall_s,
                "drain_s": round(wall_s - send_s, 3) if send_s is not None and wall_s is not None else None,
                "sent": self.sent, "completed_in_time": self.in_time, "completed_in_grace": self.in_grace,
                "cut": self.cut, "failed": self.failed}
