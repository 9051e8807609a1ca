"""A load point bounded in time, inside the engine's own benchmark client.

`vllm bench serve` and SGLang's bench_serving send a count of prompts and have no duration
option: an open loop sends rate x duration even where the server completes far less (its
queue then drains long after), and a closed loop sized from a guess of the request time
runs 2-3x longer than asked. servelab bounds them from inside: from the first request the
point sends for `duration_s`, then stops sending (a closed loop's next request, an open
loop's next arrival), unless it has not sent `least` requests yet (a closed loop's floor:
then it sends them first, and says so); the requests still in flight get `grace_s` to
finish and are then cut (their connection closed, so the engine aborts them). Both clients schedule requests
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

DURATION_FLAG, GRACE_FLAG, LEAST_FLAG = "--servelab-duration", "--servelab-grace", "--servelab-least"
CUT = "servelab: cut at the end of the grace period"
POLL_S = 0.5   # a request in flight looks again at when sending ends this often


def bound_args(duration_s: float | None, grace_s: float, least: int = 0) -> list[str]:
    """servelab's options for a point sized in time (none for a point sized in prompts);
    `least`: requests it sends even past its duration (a closed loop's floor: too few
    leave no held window to judge), 0 for none."""
    if duration_s is None:
        return []
    return [DURATION_FLAG, f"{duration_s:g}", GRACE_FLAG, f"{grace_s:g}", *([LEAST_FLAG, str(least)] if least else [])]


def split(argv: list[str]) -> tuple[list[str], "Bound | None"]:
    """(the client's own argv, the bound servelab's options ask for, or None)."""
    rest, found = [], {}
    items = iter(argv)
    for arg in items:
        if arg in (DURATION_FLAG, GRACE_FLAG, LEAST_FLAG):
            found[arg] = float(next(items))
        else:
            rest.append(arg)
    if DURATION_FLAG not in found:
        return rest, None
    concurrency = rest[rest.index("--max-concurrency") + 1] if "--max-concurrency" in rest else None
    return rest, Bound(found[DURATION_FLAG], found.get(GRACE_FLAG, 0.0),
                       int(concurrency) if concurrency not in (None, "None") else None, int(found.get(LEAST_FLAG, 0)))


class Bound:
    """The schedule's cut-off and the count of what was sent, finished and cut."""

    def __init__(self, duration_s: float, grace_s: float, concurrency: int | None = None, least: int = 0):
        self.duration_s, self.grace_s, self.concurrency, self.least = duration_s, grace_s, concurrency, least
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
                if self.slots is not None and not await self.free_slot():
                    self.stopped = time.perf_counter()   # the duration ended while every slot was busy
                    break
                now = time.perf_counter()
                self.first = self.first or now
                if now - self.first >= self.duration_s and self.sent >= self.least:
                    self.stopped = now
                    if self.slots is not None:
                        self.slots.release()
                    break
                self.sent += 1
                self.last_sent = now
                yield item
            self.stopped = self.stopped or time.perf_counter()   # (the schedule may end first)
        return bounded

    async def free_slot(self) -> bool:
        """A slot taken for the next request; False where the duration ended while waiting
        for one (once the floor is sent). Without the bound on the wait, a loop whose slots
        were all busy sent past its duration until a request ended: 16.7 s of a 10 s point
        at 250 in flight on an H200 (requests of 8 s)."""
        if self.first is None or self.sent < self.least:
            await self.slots.acquire()
            return True
        left = self.first + self.duration_s - time.perf_counter()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(self.slots.acquire(), left)
        except asyncio.TimeoutError:
            return False
        return True

    def end_of_sending(self) -> float | None:
        """When sending ends: the duration's end, or, where the floor (`least`) was not sent
        by then, the last send once the schedule stopped; None while that is not known."""
        if self.stopped is not None:
            return max(self.first + self.duration_s, self.last_sent or 0.0)
        return self.first + self.duration_s if self.sent >= self.least else None

    async def within_grace(self, call):
        """The request's output, or None where it was still running at the end of the
        grace period (its task cancelled: the client closes its connection)."""
        task = asyncio.ensure_future(call)
        while True:
            end = self.end_of_sending()
            left = None if end is None else end + self.grace_s - time.perf_counter()
            if left is not None and left <= 0:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return None
            done, _ = await asyncio.wait({task}, timeout=POLL_S if left is None else min(left, POLL_S))
            if done:
                return task.result()

    def request_func(self, call, output_type):
        """One request, cut at the end of the grace period (a failed output that says so)."""
        async def bounded(*args, **kwargs):
            if self.first is None:   # the client's ready check and warm-ups, before the point
                return await call(*args, **kwargs)
            request = kwargs.get("request_func_input", args[0] if args else None)
            started = time.perf_counter()
            try:
                output = await self.within_grace(call(*args, **kwargs))
            finally:
                self.last_done = time.perf_counter()
                if self.slots is not None:
                    self.slots.release()
            if output is None:
                self.cut += 1
                output = output_type()
                output.success, output.error, output.start_time = False, CUT, started
                output.prompt_len = getattr(request, "prompt_len", 0)
            elif not output.success:
                self.failed += 1
            elif (end := self.end_of_sending()) is None or self.last_done <= end:
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
        return {"duration_s": self.duration_s, "grace_s": self.grace_s, "least": self.least, "send_s": send_s,
                "stopped_s": since_first(self.stopped), "wall_s": wall_s,
                "drain_s": round(wall_s - send_s, 3) if send_s is not None and wall_s is not None else None,
                "sent": self.sent, "completed_in_time": self.in_time, "completed_in_grace": self.in_grace,
                "cut": self.cut, "failed": self.failed}
