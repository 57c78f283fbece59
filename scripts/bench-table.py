#!/usr/bin/env python3
"""bench-table.py RESULTS_DIR OUT.md: the markdown table of scripts/bench-peers.sh.

Each RESULTS_DIR/BROKER.SCENARIO.RUN.json is one `loadtest -json` run, with
.cpu (broker CPU ticks during the run, ticks per second) beside it, and
BROKER.SCENARIO.hwm is the broker's peak RSS over the scenario's runs. Figures
are medians of the runs; ratios are xmq over the peer (for latency and memory,
peer over xmq, so > 1 always means xmq is better).
"""
import glob
import json
import os
import statistics
import sys

BROKERS = ["xmq", "mosquitto", "mochi", "nats"]
res_dir, out = sys.argv[1], sys.argv[2]


def runs(b, s):
    out = []
    for f in sorted(glob.glob(f"{res_dir}/{b}.{s}.*.json")):
        try:
            d = json.load(open(f))
        except (OSError, ValueError):
            continue
        if not d.get("cases"):
            continue
        c = d["cases"][0]
        try:
            ticks, hz = open(f[:-5] + ".cpu").read().split()
            c["_cpu_s"] = int(ticks) / int(hz)
        except (OSError, ValueError):
            c["_cpu_s"] = None
        out.append(c)
    return out


def hwm(b, s):
    try:
        return int(open(f"{res_dir}/{b}.{s}.hwm").read())
    except (OSError, ValueError):
        return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def lat(c, q):
    s = c.get("latency_summary") or {}
    return s.get(q) if s.get("count") else None


def per_cpu(c):
    """Deliveries per broker CPU-second while publishing: from the per-second
    series (connecting 2,000 clients would otherwise dominate a short run)."""
    msgs = cpu = 0.0
    prev_t = 0.0
    for p in c.get("series") or []:
        dt, prev_t = p["t"] - prev_t, p["t"]
        if p.get("published", 0) > 0 and p.get("broker_cpu_pct") is not None:
            msgs += p.get("delivered", 0)
            cpu += p["broker_cpu_pct"] / 100 * dt
    return msgs / cpu if cpu > 0 else None


# metric: (label, function of a case, higher is better, formatter)
def rate(x):
    return "—" if x is None else (f"{x/1e6:.2f}M" if x >= 1e6 else f"{x/1e3:.1f}k")


def us(x):
    return "—" if x is None else f"{x/1e3:.0f} µs"


def mib(x):
    return "—" if x is None else f"{x/2**20:.0f} MiB"


def num(x):
    return "—" if x is None else f"{x:,.0f}"


def conns(c):
    return c["established"] / (c["ramp_ns"] / 1e9) if c.get("ramp_ns") else None


ROWS = [
    ("qos0", "QoS 0 ingest, 10 pubs, 64 B (msg/s)", lambda c: c["published_per_s"], True, rate),
    ("qos1", "QoS 1 ingest, 10 pubs, inflight 64 (msg/s)", lambda c: c["published_per_s"], True, rate),
    ("fanout", "fan-out 10 pubs → 100 subs, one topic, QoS 0 (deliveries/s)", lambda c: c["delivered_per_s"], True, rate),
    ("latency", "latency 10 pubs × 100/s → 10 subs, QoS 0: p50", lambda c: lat(c, "p50_ns"), False, us),
    ("latency", "latency 10 pubs × 100/s → 10 subs, QoS 0: p99", lambda c: lat(c, "p99_ns"), False, us),
    ("fanin", "fan-in 1,000 pubs × 1/s → 10 subs on $share/g/bench/#, QoS 1: p99", lambda c: lat(c, "p99_ns"), False, us),
    ("fanin", "fan-in: delivered / published", lambda c: c["delivered_ratio"], True, lambda x: "—" if x is None else f"{x:.2f}"),
    ("p2p", "p2p 1,000 pairs × 1/s, QoS 1, persistent: p99", lambda c: lat(c, "p99_ns"), False, us),
    ("p2p", "p2p: deliveries per broker CPU-second while publishing", per_cpu, True, num),
    ("idle", "10,000 idle connections: connects/s", conns, True, num),
]
MEM = ["qos0", "qos1", "fanout", "latency", "fanin", "p2p", "idle"]

present = [b for b in BROKERS if glob.glob(f"{res_dir}/{b}.*.json")]
peers = [b for b in present if b != "xmq"]

lines = []
hdr = "| scenario | " + " | ".join(present) + " | " + " | ".join(f"xmq/{p}" for p in peers) + " |"
lines += [hdr, "|" + "---|" * (1 + len(present) + len(peers))]


def row(label, vals, higher, fmt):
    cells = [fmt(vals.get(b)) for b in present]
    ratios = []
    x = vals.get("xmq")
    for p in peers:
        v = vals.get(p)
        if x is None or v is None or x == 0 or v == 0:
            ratios.append("—")
        else:
            ratios.append(f"{(x / v) if higher else (v / x):.1f}×")
    lines.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


for s, label, f, higher, fmt in ROWS:
    vals = {}
    for b in present:
        rs = runs(b, s)
        if rs:
            vals[b] = med([f(c) for c in rs])
    row(label, vals, higher, fmt)
for s in MEM:
    row(f"peak RSS, {s} (VmHWM)", {b: hwm(b, s) for b in present if hwm(b, s)}, False, mib)
for s in MEM:
    vals = {}
    for b in present:
        rs = runs(b, s)
        if rs:
            vals[b] = med([c.get("_cpu_s") for c in rs])
    row(f"broker CPU s per run, {s}", vals, False, lambda x: "—" if x is None else f"{x:.2f}")

# Transports: xmq only, QoS 0 ingest as a ratio to TCP.
tr = {}
for t in ["tcp", "tls", "ws", "wss", "quic"]:
    rs = runs("xmq", f"transport-{t}")
    if rs:
        tr[t] = med([c["published_per_s"] for c in rs])
tlines = []
if tr:
    tlines += ["| transport | QoS 0 ingest (msg/s) | ratio to tcp |", "|---|---|---|"]
    for t, v in tr.items():
        r = f"{v / tr['tcp']:.2f}×" if tr.get("tcp") else "—"
        tlines.append(f"| {t} | {rate(v)} | {r} |")

nruns = max((len(runs(b, s)) for b in present for s, *_ in ROWS), default=0)
text = "\n".join(lines) + "\n"
if tlines:
    text += "\nxmq over each transport (same broker, all listeners on):\n\n" + "\n".join(tlines) + "\n"
text += f"\nMedians of {nruns} runs each. Ratios: > 1× means xmq is better (higher rate, lower latency or memory).\n"

# Keep the hand-written parts of OUT: replace only what sits between the markers.
BEGIN, END = "<!-- bench-peers:begin -->", "<!-- bench-peers:end -->"
if os.path.exists(out) and BEGIN in open(out).read():
    doc = open(out).read()
    pre, rest = doc.split(BEGIN, 1)
    post = rest.split(END, 1)[1] if END in rest else ""
    doc = pre + BEGIN + "\n" + text + END + post
else:
    doc = "# Benchmarks\n\n" + BEGIN + "\n" + text + END + "\n"
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
open(out, "w").write(doc)
print(text)
