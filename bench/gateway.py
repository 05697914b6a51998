#!/usr/bin/env python3
"""bench/gateway.py — the model gateway's cost per request, and streams through it.

Two parts, both run by bench/gateway.sh:

  gateway.py server PORT_FILE
      A Messages API on 127.0.0.1 (a free port, written to PORT_FILE): every POST is answered
      200 with a server-sent-event stream: `message_start` at once, then EVENTS
      `content_block_delta` events GAP_MS apart, `message_delta` and `message_stop`
      (chunked, keep-alive). EVENTS and GAP_MS come from the request's query
      (`?events=20&gap=50`); no query: one delta, no gap.

  gateway.py client OUT_FILE
      Run as dagexec's worker (so it holds the attempt's token and $ANTHROPIC_BASE_URL is the
      gateway), with $BENCH_DIRECT the server itself. It measures, for each path:
        - latency: REQUESTS sequential requests of a short stream (one delta, no gap), each
          on a new connection, from the request's first byte to the stream's last; p50, p99;
        - concurrency: 64 streams at once (20 deltas 50 ms apart each, so about 1 s long),
          time to first byte of each stream's body (p50, p99, max) and the wall time of all.
      Then, for both paths together, the time to first byte of one stream at a time (two deltas
      20 ms apart, so the first byte comes 20 ms before the rest: a gateway that buffered would
      add that), PAIRS pairs, direct and through the gateway alternating, so a change of load
      hits both alike: each path's p50 and p99, and the p50 and p99 of the pairs' differences.
      The figures go to OUT_FILE as text; the worker prints dagexec's status line.
"""

import asyncio
import os
import statistics
import sys
import time
import urllib.parse

BODY = b'{"model":"claude-sonnet-4-5","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'


def sse(event: str) -> bytes:
    data = f"event: {event.split(chr(34))[3]}\ndata: {event}\n\n".encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


START = sse('{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":100,"output_tokens":1}}}')
DELTA = sse('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tokens "}}')
END = sse('{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":20}}') + sse('{"type":"message_stop"}') + b"0\r\n\r\n"


async def serve_one(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            target = lines[0].split(" ")[1]
            length = 0
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            if length:
                await reader.readexactly(length)
            q = urllib.parse.parse_qs(urllib.parse.urlparse(target).query)
            events = int(q.get("events", ["1"])[0])
            gap = float(q.get("gap", ["0"])[0]) / 1000
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + START)
            await writer.drain()
            for _ in range(events):
                if gap:
                    await asyncio.sleep(gap)
                writer.write(DELTA)
                await writer.drain()
            writer.write(END)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def server(port_file: str):
    srv = await asyncio.start_server(serve_one, "127.0.0.1", 0, backlog=512)
    port = srv.sockets[0].getsockname()[1]
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(port_file + ".tmp", port_file)
    async with srv:
        await srv.serve_forever()


async def stream(base: str, key: str, query: str):
    """One request on a new connection: (time to the first body byte, time to the end)."""
    url = urllib.parse.urlparse(base)
    path = url.path.rstrip("/") + "/v1/messages" + query
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(
        (f"POST {path} HTTP/1.1\r\nhost: {url.netloc}\r\nx-api-key: {key}\r\n"
         f"content-type: application/json\r\ncontent-length: {len(BODY)}\r\nconnection: close\r\n\r\n").encode()
        + BODY
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"{base}: {head.decode(errors='replace')}")
    first = None
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        if size == 0:
            break
        await reader.readexactly(size + 2)
        if first is None:
            first = time.perf_counter() - t0
    end = time.perf_counter() - t0
    writer.close()
    return first, end


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def client(out: str):
    through = (os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"])
    direct = (os.environ["BENCH_DIRECT"], "sk-direct")
    requests = int(os.environ.get("REQUESTS", "300"))
    lines = []
    for label, (base, key) in [("direct", direct), ("gateway", through)] * 2:
        # Warm-up, then the measured runs (each path twice, alternating, the later kept).
        for _ in range(20):
            await stream(base, key, "")
        ends = [(await stream(base, key, ""))[1] * 1000 for _ in range(requests)]
        firsts = []
        t0 = time.perf_counter()
        results = await asyncio.gather(*[stream(base, key, "?events=20&gap=50") for _ in range(64)])
        wall = time.perf_counter() - t0
        firsts = [f * 1000 for f, _ in results]
        lines.append(
            f"{label:8} latency  p50 {statistics.median(ends):6.2f} ms  p99 {pct(ends, 99):6.2f} ms  ({requests} requests)\n"
            f"{label:8} 64 streams: first byte p50 {statistics.median(firsts):6.2f} ms  p99 {pct(firsts, 99):6.2f} ms  max {max(firsts):6.2f} ms;  all 64 done in {wall:5.2f} s"
        )
    # First byte, one stream at a time, the two paths alternating (paired).
    pairs = int(os.environ.get("PAIRS", "200"))
    d_first, g_first, diffs = [], [], []
    for i in range(pairs):
        order = [direct, through] if i % 2 == 0 else [through, direct]
        got = {}
        for base, key in order:
            got[base] = (await stream(base, key, "?events=2&gap=20"))[0] * 1000
        d_first.append(got[direct[0]])
        g_first.append(got[through[0]])
        diffs.append(got[through[0]] - got[direct[0]])
    lines.append(
        f"first byte, one stream at a time ({pairs} pairs, alternating): direct p50 {statistics.median(d_first):5.2f} ms  "
        f"p99 {pct(d_first, 99):5.2f} ms;  gateway p50 {statistics.median(g_first):5.2f} ms  p99 {pct(g_first, 99):5.2f} ms;  "
        f"gateway minus direct, per pair: p50 {statistics.median(diffs):+5.2f} ms  p99 {pct(diffs, 99):+5.2f} ms"
    )
    with open(out, "w") as f:
        f.write("\n".join(lines[2:]) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "server":
        asyncio.run(server(sys.argv[2]))
    else:
        asyncio.run(client(sys.argv[2]))
        print("COMPLETED: measured the gateway")
