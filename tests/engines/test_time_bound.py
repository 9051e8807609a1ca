"""How soon a point's bound (servelab.engines.clients.time_bound) ends its requests: wrapped
around vLLM's own completions request function, against a stand-in that streams a token
every 50 ms over real HTTP (what a cut closes). The real client against the real server,
on a loaded host, is tests/engines/test_zygote.py: there the counts are asserted, here the
timing, on a quiet host (CI's loaded host woke the client's loop 0.75-2.5 s late)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from servelab.engines.clients import time_bound

TOKEN_S = 0.05


async def streaming_standin(ends: list):
    """An OpenAI-style completions server that streams `max_tokens` tokens, one every
    TOKEN_S; each stream's end ("done" or "closed" by the client, its tokens and time)
    goes to `ends`. Returns (runner, url)."""
    async def completions(request):
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sent = 0
        try:
            for _ in range(body["max_tokens"]):
                await asyncio.sleep(TOKEN_S)
                await response.write(b'data: {"choices": [{"text": "x"}]}\n\n')
                sent += 1
            await response.write(b"data: [DONE]\n\n")
            ends.append(("done", sent, time.perf_counter()))
        except (ConnectionResetError, asyncio.CancelledError):
            ends.append(("closed", sent, time.perf_counter()))
            raise
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/v1/completions"


def closed_loop_point(grace_s: float, tokens: int):
    """A closed loop of 2 in flight, 400 requests of `tokens` tokens, sending for 0.5 s then
    `grace_s` for those in flight, as vLLM's client runs one (a task per request the schedule
    yields): (the bound's summary, the outputs, the stand-in's ends, seconds since the first)."""
    bound = time_bound.Bound(0.5, grace_s, concurrency=2)
    outputs, ends = asyncio.run(run_point(bound, tokens))
    return bound.summary(), outputs, [(what, sent, at - bound.first) for what, sent, at in ends]


async def run_point(bound: time_bound.Bound, tokens: int):
    from vllm.benchmarks.lib.endpoint_request_func import (RequestFuncInput, RequestFuncOutput,
                                                           async_request_openai_completions)

    async def schedule():
        for i in range(400):
            yield i

    ends: list = []
    runner, url = await streaming_standin(ends)
    request = bound.request_func(async_request_openai_completions, RequestFuncOutput)
    try:
        async with aiohttp.ClientSession() as session:
            tasks = [asyncio.create_task(request(request_func_input=RequestFuncInput(
                        prompt="hi", api_url=url, prompt_len=1, output_len=tokens, model="standin"),
                        session=session))
                     async for _ in bound.requests(schedule)()]
            outputs = await asyncio.gather(*tasks)
        await asyncio.sleep(3 * TOKEN_S)   # the stand-in's next write finds its stream closed
    finally:
        await runner.cleanup()
    return outputs, ends


@pytest.mark.quiet_host   # a timing of the client's own loop: nothing beside it
def test_a_grace_of_zero_cuts_the_requests_in_flight_when_sending_ends():
    # 2 in flight at once, each 5 s long; sending ends after 0.5 s, and nothing waits after it
    found, outputs, ends = closed_loop_point(0.0, tokens=100)
    print(f"\ncut at once: {found}; the stand-in's streams: {ends}")
    assert found["sent"] == found["cut"] == 2 and found["completed_in_time"] == found["completed_in_grace"] == 0
    assert 0.5 <= found["stopped_s"] and 0.5 <= found["wall_s"] <= 1.0
    assert [o.error for o in outputs] == [time_bound.CUT] * 2 and all(not o.success for o in outputs)
    assert all(o.start_time > 0 for o in outputs)   # a cut request keeps its send time
    # the cut closed both connections: the stand-in stopped streaming them near 0.5 s, not at 5 s
    assert [what for what, _, _ in ends] == ["closed", "closed"]
    assert all(sent < 20 and at <= 1.0 for _, sent, at in ends), ends


@pytest.mark.quiet_host
def test_a_grace_lets_the_requests_in_flight_finish_and_counts_them_apart():
    # each request streams for 1 s: both outlive the 0.5 s of sending, and finish in the grace
    found, outputs, ends = closed_loop_point(5.0, tokens=20)
    print(f"\nin grace: {found}")
    assert found["sent"] == found["completed_in_grace"] == 2 and found["cut"] == found["completed_in_time"] == 0
    assert 1.0 <= found["wall_s"] <= 1.5 and all(o.success for o in outputs)
    assert [(what, sent) for what, sent, _ in ends] == [("done", 20), ("done", 20)]


@pytest.mark.quiet_host
def test_a_loop_whose_slots_are_all_busy_stops_sending_when_its_duration_ends():
    # 2 slots, requests of 2 s: no slot frees before the 0.5 s of sending end; the loop stops
    # then, not when a request ends (a 10 s point at 250 in flight sent for 16.7 s on an H200)
    found, outputs, ends = closed_loop_point(3.0, tokens=40)
    print(f"\nslots busy at the end: {found}")
    assert found["sent"] == 2 and 0.5 <= found["stopped_s"] < 0.8, found
    assert found["completed_in_grace"] == 2 and 2.0 <= found["wall_s"] <= 2.6
