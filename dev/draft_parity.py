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
def run(extra, port):
    p = subprocess.Popen([server, "-m", root + "/models/1bit-small-145m-q4_0.gguf", "--host", "127.0.0.1", "--port", str(port), "-ngl", "0", "-dev", "none", "--jinja"] + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try: urllib.request.urlopen(f"http://127.0.0.1:{port}/health").read(); break
        except Exception: time.sleep(0.2)
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
base = res["plain fa auto"]
for k, v in res.items():
    diffs = [i for i in range(len(v)) if v[i] != base[i]]
    print(k, "differs from plain fa auto at answers", diffs)
print("draft fa off vs plain fa off:", [i for i in range(12) if res["draft fa off"][i] != res["plain fa off"][i]])
print("draft fa auto vs plain fa auto:", [i for i in range(12) if res["draft fa auto"][i] != res["plain fa auto"][i]])
