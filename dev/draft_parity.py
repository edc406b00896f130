#!/usr/bin/env python3
"""Greedy answers of the shipped 1bit-small served four ways in turn, compared answer by answer:
plain with flash attention as the engine picks it and off, and with the shipped draft model (at 4)
both ways; the prompts and lengths of DefaultModel.TheDraftModelKeepsItsKv, in its order, on one
server each (so its prompt cache is reused as there). Prints which answers part from whose.

    dev/draft_parity.py [LLAMA_SERVER]      (from the checkout; default build/bin/llama-server)
"""
import json, os, subprocess, sys, time, urllib.request
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
server = sys.argv[1] if len(sys.argv) > 1 else root + "/build/bin/llama-server"
if not os.access(server, os.X_OK):
    sys.exit(f"draft_parity: no llama-server at {server} (make build, or name one)")
def run(extra, port):
    p = subprocess.Popen([server, "-m", root + "/models/1bit-small-145m-q4_0.gguf", "--host", "127.0.0.1", "--port", str(port), "-ngl", "0", "-dev", "none", "--jinja"] + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while True:
        try: urllib.request.urlopen(f"http://127.0.0.1:{port}/health").read(); break
        except Exception:
            if p.poll() is not None or time.time() > deadline:
                p.kill(); sys.exit(f"draft_parity: the server ({' '.join(extra) or 'plain'}) did not become healthy")
            time.sleep(0.2)
    out = []
    for prompt in ["Write a Python function `is_palindrome`: Return True if a string reads the same backwards.", "Write a Python function `getpos`: Return current line number and offset."]:
        for n in [96, 3, 5, 9, 17, 33]:
            body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": n, "temperature": 0}).encode()
            r = json.loads(urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})).read())
            out.append(r["choices"][0]["message"]["content"])
    p.terminate(); p.wait()
    return out
draft = ["--spec-type", "draft-simple", "-md", root + "/models/1bit-small-draft-19m-q8_0.gguf", "-ngld", "0", "-devd", "none", "--spec-draft-n-max", "4"]
configs = {"plain fa auto": [], "plain fa off": ["-fa", "off"], "draft fa off": draft + ["-fa", "off"], "draft fa auto": draft}
res = {k: run(v, 42000 + i) for i, (k, v) in enumerate(configs.items())}
def parting(a, b):
    return [i for i, (x, y) in enumerate(zip(res[a], res[b])) if x != y]
for k in res:
    print(k, "differs from plain fa auto at answers", parting(k, "plain fa auto"))
print("draft fa off vs plain fa off:", parting("draft fa off", "plain fa off"))
print("draft fa auto vs plain fa auto:", parting("draft fa auto", "plain fa auto"))
