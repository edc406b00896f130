#!/usr/bin/env python3
"""Greedy requests to a llama-server: waits until it is healthy, sends COUNT completions of
N_PREDICT tokens (temperature 0, ignore_eos) and prints each one's decode speed (from the server's
timings; with --stream, those of the stream's last event). --sampled leaves
the temperature out, so the server samples with its defaults. --prompt=TEXT replaces the prompt
(a one-word prompt decodes at the depths llama-bench's tg does, from the start of the context).

    greedy_requests.py PORT N_PREDICT [COUNT] [--stream] [--sampled] [--prompt=TEXT]
"""
import json
import sys
import time
import urllib.request


def main():
    flags = {"--stream", "--sampled"}
    prompt = "def quicksort(items):"
    for a in sys.argv[1:]:
        if a.startswith("--prompt="):
            prompt = a[len("--prompt="):]
    args = [a for a in sys.argv[1:] if a not in flags and not a.startswith("--prompt=")]
    if len(args) < 2:
        sys.exit(__doc__)
    base = f"http://127.0.0.1:{args[0]}"
    n_predict, count, stream = int(args[1]), int(args[2]) if len(args) > 2 else 1, "--stream" in sys.argv
    deadline = time.time() + 1200
    while True:
        try:
            urllib.request.urlopen(base + "/health", timeout=2).read()
            break
        except Exception:
            if time.time() > deadline:
                sys.exit("greedy_requests: the server never became healthy")
            time.sleep(0.5)
    request = {"prompt": prompt, "n_predict": n_predict, "ignore_eos": True, "stream": stream}
    if "--sampled" not in sys.argv:
        request["temperature"] = 0
    body = json.dumps(request).encode()
    for _ in range(count):
        req = urllib.request.Request(base + "/completion", data=body, headers={"Content-Type": "application/json"})
        reply = urllib.request.urlopen(req, timeout=1800).read()
        if stream:
            # the last event of the stream carries the timings
            events = [json.loads(line[5:]) for line in reply.decode().splitlines() if line.startswith("data: {")]
            t = next(e["timings"] for e in reversed(events) if "timings" in e)
        else:
            t = json.loads(reply)["timings"]
        kind = ("sampled" if "--sampled" in sys.argv else "greedy") + (" streamed" if stream else "")
        print(f"server {kind}: {t['predicted_n']} tokens at {t['predicted_per_second']:.1f} tok/s")


if __name__ == "__main__":
    main()
