#!/usr/bin/env python3
"""Where a decode step's time goes, from a timeline.cc CSV.

    summary.py TIMELINE.csv [--label NAME] [--every-kind]

A step is one CUDA graph launch (the kernels that carry its correlation); of those, the steps with
the most common kernel count are the decode steps (a prompt's or a warm-up's graphs differ). For
each: the period from one step's first kernel to the next one's, the GPU's busy time (the union of
its kernels), the gaps inside the graph, the idle time between graphs, and what the CPU called in
the CUDA runtime between them; then every kernel by its time per step. Medians over the steps.
With --every-kind, the same kernel table for every other kind of graph launched at least 3 times
(a speculative step's verification and drafter graphs beside each other), and the host's copies
to the device and back by size. Prints markdown.
"""
import argparse
import collections
import csv
import statistics
import sys


def union_length(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def kernel_table(steps, total_busy):
    """Every kernel's median time over the launches of one kind of graph."""
    per_kernel = collections.defaultdict(list)
    for st in steps:
        cls = collections.defaultdict(int)
        for k in st:
            cls[k[2]] += k[1] - k[0]
        for name, t in cls.items():
            per_kernel[name].append(t)
    print("| kernel | launches a step | us a step | share of busy |")
    print("| --- | ---: | ---: | ---: |")
    launches_per = collections.Counter(k[2] for k in steps[len(steps) // 2])
    for name, ts in sorted(per_kernel.items(), key=lambda kv: -statistics.median(kv[1])):
        t = statistics.median(ts) / 1000.0
        print(f"| {name[:90]} | {launches_per.get(name, 0)} | {t:.1f} | {100.0 * t / total_busy:.1f}% |")
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--label", default="")
    ap.add_argument("--every-kind", action="store_true")
    args = ap.parse_args()

    kernels, copies, apis = [], [], []
    with open(args.csv, newline="") as f:
        for row in csv.DictReader(f):
            try:
                rec = (int(row["start_ns"]), int(row["end_ns"]), row["name"], int(row["correlation"]),
                       int(row["graph_id"]), row["extra"])
            except (KeyError, ValueError):
                continue  # a line cut short by a killed process
            {"kernel": kernels, "memcpy": copies, "memset": copies, "api": apis}.get(row["kind"], []).append(rec)
    if not kernels:
        sys.exit("summary: no kernels in " + args.csv)

    launches = collections.defaultdict(list)
    for k in kernels:
        if k[4] != 0:
            launches[k[3]].append(k)
    if not launches:
        sys.exit("summary: no kernel ran inside a CUDA graph")
    count_mode = collections.Counter(len(v) for v in launches.values()).most_common(1)[0][0]
    steps = sorted((sorted(v) for v in launches.values() if len(v) == count_mode), key=lambda v: v[0][0])
    if len(steps) < 3:
        sys.exit("summary: fewer than 3 decode steps")

    period, span, busy, inside_gap, overlap, idle, host_calls = [], [], [], [], [], [], []
    apis.sort()
    api_i = 0
    for i, st in enumerate(steps):
        s0, e0 = st[0][0], max(k[1] for k in st)
        span.append(e0 - s0)
        b = union_length([(k[0], k[1]) for k in st])
        busy.append(b)
        pos, neg = 0, 0
        for a, c in zip(st, st[1:]):
            g = c[0] - a[1]
            pos += max(g, 0)
            neg += max(-g, 0)
        inside_gap.append(pos)
        overlap.append(neg)
        if i + 1 < len(steps):
            nxt = steps[i + 1][0][0]
            period.append(nxt - s0)
            idle.append(nxt - e0)
            calls = collections.defaultdict(int)
            while api_i < len(apis) and apis[api_i][0] < e0:
                api_i += 1
            j = api_i
            while j < len(apis) and apis[j][0] < nxt:
                calls[apis[j][2]] += apis[j][1] - apis[j][0]
                j += 1
            host_calls.append(calls)

    med = lambda xs: statistics.median(xs) / 1000.0 if xs else 0.0
    label = f" ({args.label})" if args.label else ""
    print(f"### Decode steps{label}: {len(steps)} graphs of {count_mode} kernels\n")
    kinds = collections.defaultdict(list)
    for v in launches.values():
        kinds[len(v)].append(v)
    if len(kinds) > 1:
        print("Every kind of graph launched at least 3 times (by its kernel count):\n")
        print("| kernels | launches | median span | median GPU busy |")
        print("| ---: | ---: | ---: | ---: |")
        for n, vs in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
            if len(vs) >= 3:
                spans = [max(k[1] for k in v) - min(k[0] for k in v) for v in vs]
                busys = [union_length([(k[0], k[1]) for k in v]) for v in vs]
                print(f"| {n} | {len(vs)} | {med(spans):.1f} us | {med(busys):.1f} us |")
        print()
    print("| period | GPU busy | gaps inside the graph | overlap (PDL) | idle between graphs |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    print(f"| {med(period):.1f} us | {med(busy):.1f} us | {med(inside_gap):.1f} us | {med(overlap):.1f} us | {med(idle):.1f} us |\n")
    names = collections.Counter()
    for c in host_calls:
        for n, t in c.items():
            names[n] += 1
    if names:
        print("CUDA runtime calls between graphs (median time a step, in steps that made them):\n")
        print("| call | steps | median us |")
        print("| --- | ---: | ---: |")
        for n, cnt in names.most_common(12):
            ts = [c[n] for c in host_calls if n in c]
            print(f"| {n} | {cnt} | {med(ts):.1f} |")
        print()
    print("Kernels, by time a step (median):\n")
    kernel_table(steps, med(busy))
    if args.every_kind:
        for n, vs in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
            if n == count_mode or len(vs) < 3:
                continue
            vs = sorted((sorted(v) for v in vs), key=lambda v: v[0][0])
            b = med([union_length([(k[0], k[1]) for k in v]) for v in vs])
            print(f"Kernels of the {n}-kernel graph ({len(vs)} launches, GPU busy {b:.1f} us), by time a launch (median):\n")
            kernel_table(vs, b)
        sizes = collections.defaultdict(list)
        for c in copies:
            if c[2] in ("kind1", "kind2"):
                sizes[("host to device" if c[2] == "kind1" else "device to host", int(c[5]))].append(c[1] - c[0])
        if sizes:
            print("Copies by direction and size (all steps):\n")
            print("| direction | bytes | copies | median us | total us |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for (d, nbytes), ts in sorted(sizes.items(), key=lambda kv: -sum(kv[1]))[:12]:
                print(f"| {d} | {nbytes} | {len(ts)} | {med(ts):.1f} | {sum(ts) / 1000.0:.1f} |")
            print()
    d2h = [c for c in copies if c[2] == "kind2"]
    if d2h:
        print(f"Device-to-host copies: {len(d2h)}, median {med([c[1] - c[0] for c in d2h]):.1f} us, "
              f"median {statistics.median([int(c[5]) for c in d2h])} bytes\n")


if __name__ == "__main__":
    main()
