"""A prefill/decode proxy for a pair of vLLM servers (week 16). vLLM 0.32's wheel
ships none, so servelab has this one:

    python -m servelab.engines.vllm.pd_proxy --port 8000 --prefill http://127.0.0.1:8100 \
        --decode http://127.0.0.1:8200

Each completion request goes first to the prefill server with max_tokens=1 and
`kv_transfer_params: {do_remote_decode: true}`; that server computes the prompt's
KV cache and answers with the kv_transfer_params that locate it (block ids, host,
engine id). The proxy then sends the original request, with those params, to the
decode server, which pulls the KV cache instead of recomputing it, and streams
the decode server's answer back to the client. Both requests carry the same
X-Request-Id. GET /health answers 200 when both servers do.
"""

from __future__ import annotations

import argparse
import copy
import functools
import uuid

# a request for the prefill server: one token, no streaming, the remote-decode flag
PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}
MIN_TOKEN_FIELDS = ("min_tokens", "min_completion_tokens")
# Seconds an idle connection to a server is kept for reuse: under vLLM's API server's own
# keep-alive (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s). aiohttp's default, 15 s, reuses connections
# the server has just closed: "Connection reset by peer", a failed request to the client.
KEEPALIVE_S = 2


def prefill_request(body: dict) -> dict:
    req = copy.deepcopy(body)
    req.update(max_tokens=1, stream=False, kv_transfer_params=dict(PREFILL_PARAMS))
    if "max_completion_tokens" in req:
        req["max_completion_tokens"] = 1
    for key in ("stream_options", *MIN_TOKEN_FIELDS):
        req.pop(key, None)
    return req


def decode_request(body: dict, prefill_response: dict) -> dict:
    """The client's request plus what the prefill server said about its KV cache.
    A server without a KV connector returns no kv_transfer_params: decode then
    recomputes the prompt, which still answers correctly."""
    req = copy.deepcopy(body)
    params = prefill_response.get("kv_transfer_params")
    if params:
        req["kv_transfer_params"] = params
    return req


@functools.cache
def session_key():
    """The app's key to its client session (a typed key: aiohttp warns of a str one)."""
    import aiohttp
    from aiohttp import web

    return web.AppKey("session", aiohttp.ClientSession)


def make_app(prefill: str, decode: str):
    import aiohttp
    from aiohttp import web

    key = session_key()

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        headers = {"X-Request-Id": request.headers.get("X-Request-Id", str(uuid.uuid4()))}
        session: aiohttp.ClientSession = request.app[key]
        async with session.post(prefill + request.path, json=prefill_request(body), headers=headers) as resp:
            if resp.status != 200:
                return web.Response(status=resp.status, body=await resp.read(), content_type="application/json")
            first = await resp.json()
        async with session.post(decode + request.path, json=decode_request(body, first), headers=headers) as resp:
            out = web.StreamResponse(status=resp.status, headers={"Content-Type": resp.headers.get(
                "Content-Type", "application/json")})
            await out.prepare(request)
            async for chunk in resp.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    async def health(request: web.Request) -> web.Response:
        session: aiohttp.ClientSession = request.app[key]
        for server in (prefill, decode):
            try:
                async with session.get(server + "/health") as resp:
                    if resp.status != 200:
                        return web.Response(status=503, text=f"{server} answered {resp.status}")
            except aiohttp.ClientError as exc:
                return web.Response(status=503, text=f"{server}: {exc}")
        return web.Response(text="ok")

    async def models(request: web.Request) -> web.Response:
        async with request.app[key].get(decode + "/v1/models") as resp:
            return web.Response(status=resp.status, body=await resp.read(), content_type="application/json")

    async def open_session(app):
        # no overall timeout: a long decode under load is not an error of the proxy
        app[key] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None),
                                         connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S))
        yield
        await app[key].close()

    app = web.Application(client_max_size=64 * 1024 ** 2)
    app.cleanup_ctx.append(open_session)
    app.router.add_post("/v1/completions", forward)
    app.router.add_post("/v1/chat/completions", forward)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    return app


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servelab.engines.vllm.pd_proxy", description="prefill/decode proxy for two vLLM servers")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--prefill", required=True, help="base URL of the prefill server")
    p.add_argument("--decode", required=True, help="base URL of the decode server")
    return p


def main(argv: list[str] | None = None) -> None:
    from aiohttp import web

    args = parser().parse_args(argv)
    web.run_app(make_app(args.prefill.rstrip("/"), args.decode.rstrip("/")), host=args.host, port=args.port,
                access_log=None, print=lambda msg: print(msg, flush=True))


if __name__ == "__main__":
    main()
