#!/usr/bin/env python3
"""A streaming benchmark client written the way the seeds' scripts are
(requests + threads, like benchmark_parallel.py), and its aiohttp variant,
for comparing client cost with specctl's engine against the same server.

Prints one JSON line: tokens, wall time, and the client's own CPU time per
token (resource.getrusage covers every thread of this process).

    python_client.py --url http://127.0.0.1:30000 --client threads --streams 100 --requests 200 --max-tokens 512
"""

import argparse
import asyncio
import json
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# Imported before the clock starts: the comparison is about streaming, not start-up.
import aiohttp
import requests

PROMPTS = [
    "Explain the theory of general relativity in detail, covering spacetime curvature, the equivalence "
    "principle, and gravitational waves.",
    "Write a comprehensive guide to implementing a B-tree data structure in Rust, including insertion, "
    "deletion, and search operations.",
    "Analyze the economic implications of artificial intelligence on labor markets, productivity, and "
    "income inequality over the next two decades.",
]


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def payload(args, i):
    return {
        "model": args.model,
        "prompt": PROMPTS[i % len(PROMPTS)],
        "max_tokens": args.max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def count(line, state):
    """Handles one SSE line the usual way: strip "data: ", json.loads, read usage."""
    if not line.startswith(b"data: "):
        return
    data = line[6:].strip()
    if data == b"[DONE]":
        return
    chunk = json.loads(data)
    state["events"] += 1
    usage = chunk.get("usage")
    if usage:
        state["tokens"] = usage["completion_tokens"]


def run_threads(args):
    def one(i):
        state = {"tokens": 0, "events": 0}
        # As the seeds' script does: requests.post per request, stream=True, iter_lines.
        with requests.post(args.url + "/v1/completions", json=payload(args, i), stream=True, timeout=600) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                count(line, state)
        return state

    with ThreadPoolExecutor(max_workers=args.streams) as pool:
        return list(pool.map(one, range(args.requests)))


def run_aiohttp(args):
    async def main():
        connector = aiohttp.TCPConnector(limit=args.streams)
        timeout = aiohttp.ClientTimeout(total=600)
        results = []
        queue = list(range(args.requests))
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def worker():
                while queue:
                    i = queue.pop()
                    state = {"tokens": 0, "events": 0}
                    async with session.post(args.url + "/v1/completions", json=payload(args, i)) as response:
                        response.raise_for_status()
                        async for line in response.content:
                            count(line, state)
                    results.append(state)

            await asyncio.gather(*(worker() for _ in range(args.streams)))
        return results

    return asyncio.run(main())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default="default")
    parser.add_argument("--client", choices=["threads", "aiohttp"], default="threads")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=512)
    args = parser.parse_args()
    cpu_before = cpu_seconds()
    start = time.perf_counter()
    results = run_threads(args) if args.client == "threads" else run_aiohttp(args)
    wall = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_before
    tokens = sum(r["tokens"] for r in results)
    events = sum(r["events"] for r in results)
    print(json.dumps({
        "client": "python-" + args.client,
        "streams": args.streams,
        "requests": args.requests,
        "completed": len(results),
        "output_tokens": tokens,
        "events": events,
        "wall_s": wall,
        "output_tok_s": tokens / wall if wall > 0 else 0,
        "process_cpu_s": cpu,
        "cpu_us_per_event": cpu * 1e6 / events if events else 0,
        "cpu_us_per_token": cpu * 1e6 / tokens if tokens else 0,
        "tokens_per_client_cpu_s": tokens / cpu if cpu > 0 else 0,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
