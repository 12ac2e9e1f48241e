"""Medians, per-round ratios, targets, and the markdown and JSON result files.

A ratio between two contenders is computed within each round (both measured minutes apart at
most, under the same background load) and the median of those per-round ratios is reported; it
is usually steadier than the ratio of the medians on a shared machine.
"""
import statistics
from dataclasses import dataclass

from . import profile


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    fmt: str
    better: str = ""      # "higher" or "lower": ratios are taken and "best other" means this
    in_ratio_table: bool = False
    optional: bool = False  # measured in some scenarios only: no column where no contender has it


METRICS = {
    "load": [
        Metric("rps", "req/s", "{:,.0f}", "higher", True),
        Metric("proxy_cpu_busy", "proxy CPU busy", "{:.2f}"),
        Metric("req_per_cpu_s", "req per proxy CPU-s", "{:,.0f}", "higher", True),
        Metric("user_us_per_req", "proxy user µs / req", "{:.2f}", "lower"),
        Metric("sys_us_per_req", "proxy system µs / req", "{:.2f}", "lower"),
        Metric("p50_ms", "p50 ms", "{:.2f}", "lower"),
        Metric("p99_ms", "p99 ms", "{:.2f}", "lower", True),
        Metric("origin_conns_per_1k", "origin conns / 1k req (steady)", "{:.2f}", "lower"),
        Metric("origin_conns_open_max", "origin conns open (busiest server)", "{:.0f}", "lower",
               optional=True),
        Metric("origin_cpu_busy", "origins CPU busy", "{:.2f}"),
        Metric("load_cpu_busy", "load side CPU busy", "{:.2f}"),
        Metric("errors", "errors", "{:.0f}", "lower"),
    ],
    "idle": [
        Metric("kib_per_conn", "KiB per idle conn (2nd step)", "{:.2f}", "lower", True),
        Metric("kib_per_conn_first", "KiB per idle conn (1st step)", "{:.2f}", "lower"),
        Metric("rss_base_kib", "RSS before, KiB", "{:,.0f}", "lower"),
        Metric("still_open", "conns still open", "{:.0f}"),
    ],
    "bursts": [
        Metric("growth_kib", "RSS growth burst 1 → 10, KiB", "{:,.0f}", "lower", True),
        Metric("rss_first_kib", "RSS after burst 1, KiB", "{:,.0f}", "lower"),
        Metric("rss_last_kib", "RSS after burst 10, KiB", "{:,.0f}", "lower"),
        Metric("peak_kib", "highest RSS after a burst, KiB", "{:,.0f}", "lower"),
        Metric("rss_base_kib", "RSS before, KiB", "{:,.0f}", "lower"),
    ],
    "startup": [
        Metric("startup_ms", "spawn to first 200, ms", "{:.1f}", "lower", True),
        Metric("rss_kib", "RSS after it, KiB", "{:,.0f}", "lower", True),
    ],
    "instr": [
        Metric("ir_per_request", "instructions per request", "{:,.0f}", "lower", True),
    ],
    "tls-resume": [
        Metric("new_per_cpu_s", "full handshakes per proxy CPU-s", "{:,.0f}", "higher", True),
        Metric("reuse_per_cpu_s", "resumed handshakes per proxy CPU-s", "{:,.0f}", "higher", True),
        Metric("reuse_vs_new", "resumed ÷ full", "{:.2f}", "higher"),
    ],
}

# Targets of issue 9, for the three-way comparison; "vs_best" = sluice ÷ the better of nginx and
# HAProxy, median of per-round ratios; "absolute" = sluice's own median.
TARGETS = [
    ("small", "req_per_cpu_s", "vs_best", ">=", 1.10, "small: req per proxy CPU-s vs better of nginx/HAProxy"),
    ("1k", "req_per_cpu_s", "vs_best", ">=", 1.10, "1k: req per proxy CPU-s vs better"),
    ("64k", "req_per_cpu_s", "vs_best", ">=", 1.00, "64k: req per proxy CPU-s vs better"),
    ("close", "req_per_cpu_s", "vs_best", ">=", 1.00, "close: req per proxy CPU-s vs better"),
    ("small", "p99_ms", "vs_best", "<=", 1.00, "p99 latency (small) vs better"),
    ("idle", "kib_per_conn", "absolute", "<=", 1.0, "idle: KiB per idle client connection"),
    ("bursts", "growth_kib", "absolute", "<=", 5120, "bursts: RSS growth burst 1 → 10, KiB (issue 17)"),
    ("reuse", "origin_conns_per_1k", "absolute", "<=", 0.0, "reuse: origin conns per 1k requests"),
    ("h2c", "req_per_cpu_s", "vs_best", ">=", 1.10, "h2c: req per proxy CPU-s vs better"),
    ("h2c", "p99_ms", "vs_best", "<=", 1.00, "h2c: p99 vs better"),
    ("h2-tls", "req_per_cpu_s", "vs_best", ">=", 1.10, "h2-tls: req per proxy CPU-s vs better"),
    ("h2-tls", "p99_ms", "vs_best", "<=", 1.00, "h2-tls: p99 vs better"),
    ("idle-h2", "kib_per_conn", "absolute", "<=", 2.0, "idle-h2: KiB per idle HTTP/2 connection"),
    ("grpc", "req_per_cpu_s", "vs_best", ">=", 1.10, "grpc: calls per proxy CPU-s vs better (issue 48)"),
    ("grpc", "p99_ms", "vs_best", "<=", 1.00, "grpc: p99 vs better (issue 48)"),
    ("grpc", "origin_conns_open_max", "absolute", "<=", 5,
     "grpc: connections to one gRPC server ≤ ⌈640 streams / 128⌉ (default settings; issue 48)"),
]


# Checks of every round rather than of medians (issue 43), for the three-way comparison: the
# 64 KiB relay's tail, and a proxy that does not idle while clients wait. A round whose load side
# (wrk and the origins on their core) was saturated says nothing of the proxy's idling: the
# proxy then waits for the load side, so the busy check counts only rounds with headroom there.
LOAD_SIDE_SATURATED = 0.95
ROUND_CHECKS = [
    ("64k", "p99_vs_best", "64k: p99 ≤ the better peer's, every round"),
    ("64k", "busy_with_headroom", "64k: proxy core ≥ 90% busy, every round whose load side had headroom"),
]


def evaluate_round_checks(scenarios, names):
    """Each per-round check whose scenario ran: per round, sluice's figure, the comparison's and
    whether it held (None: not applicable to that round)."""
    out = []
    if names[0] != "sluice" or len(names) < 3:
        return out
    for scenario, check, label in ROUND_CHECKS:
        if scenario not in scenarios:
            continue
        rows = []
        for r in scenarios[scenario]["rounds"]:
            mine = r["sluice"]
            if check == "p99_vs_best":
                best = min(r[n]["p99_ms"] for n in names[1:])
                rows.append({"sluice": mine["p99_ms"], "other": best, "met": mine["p99_ms"] <= best})
            else:
                load = mine.get("load_cpu_busy")
                applies = load is not None and load < LOAD_SIDE_SATURATED
                rows.append({"sluice": mine["proxy_cpu_busy"], "other": load,
                             "met": (mine["proxy_cpu_busy"] >= 0.90) if applies else None})
        held = [x["met"] for x in rows if x["met"] is not None]
        out.append({"scenario": scenario, "check": check, "label": label, "rounds": rows,
                    "met": all(held) if held else None})
    return out


def _ratio(a, b):
    return a / b if a is not None and b else None


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# slow-one: least_time's p99 with one slow origin against its p99 on the healthy fleet.
LATENCY_BOUND = 1.5


def summarize_latency(result):
    """slow-one: per client count and policy variant, medians over the rounds (p99 on each fleet,
    the per-round ratio slow ÷ healthy, the slow origin's share of answers), and the targets."""
    rounds, out, targets = result["rounds"], {}, []
    for clients in result["clients"]:
        rows = {}
        for v in result["variants"]:
            h = [r[f"{v}|healthy|{clients}"] for r in rounds]
            s = [r[f"{v}|slow|{clients}"] for r in rounds]
            rows[v] = {"p99_healthy_ms": _median([x["p99_ms"] for x in h]),
                       "p99_slow_ms": _median([x["p99_ms"] for x in s]),
                       "p50_slow_ms": _median([x["p50_ms"] for x in s]),
                       "slow_vs_healthy": _median([_ratio(a["p99_ms"], b["p99_ms"]) for a, b in zip(s, h)]),
                       "slow_share": _median([x["slow_share"] for x in s]),
                       "errors": sum(x["errors"] for x in h + s)}
        out[str(clients)] = rows
        mine = {v: r for v, r in rows.items() if result["products"][v] == "sluice"}
        theirs = {v: r for v, r in rows.items() if result["products"][v] != "sluice"}
        lt = next((r for v, r in mine.items() if v.endswith("-least_time")), None)
        if lt is not None:
            value = lt["slow_vs_healthy"]
            targets.append({"label": f"{clients} clients: least_time p99, one slow ÷ healthy",
                            "target": f"≤ {LATENCY_BOUND:.2f}", "value": value,
                            "met": None if value is None else value <= LATENCY_BOUND})
        if mine and theirs:
            best_mine = min(mine.items(), key=lambda kv: kv[1]["p99_slow_ms"] or float("inf"))
            best_theirs = min(theirs.items(), key=lambda kv: kv[1]["p99_slow_ms"] or float("inf"))
            targets.append({"label": f"{clients} clients: sluice's best p99 with one slow, the lowest of all",
                            "target": f"< {best_theirs[0]} ({best_theirs[1]['p99_slow_ms']:.1f} ms)",
                            "value": best_mine[1]["p99_slow_ms"], "best": best_mine[0],
                            "met": best_mine[1]["p99_slow_ms"] < best_theirs[1]["p99_slow_ms"]})
    return {"per_clients": out, "targets": targets}


def latency_markdown(name, sc):
    summ = sc["summary"]
    out = [f"## {name}", "", sc["description"][:1].upper() + sc["description"][1:] + ".", ""]
    for clients, rows in summ["per_clients"].items():
        out += [f"{clients} concurrent clients (medians over the rounds):", "",
                "| policy | p99 healthy, ms | p99 one slow, ms | slow ÷ healthy | p50 one slow, ms "
                "| answers from the slow origin | errors |", "|---|---|---|---|---|---|---|"]
        for v, r in rows.items():
            out.append(f"| {v} | {_fmt_ms(r['p99_healthy_ms'])} | {_fmt_ms(r['p99_slow_ms'])} | "
                       f"{_fmt_ratio(r['slow_vs_healthy'])} | {_fmt_ms(r['p50_slow_ms'])} | "
                       f"{r['slow_share']:.1%} | {r['errors']} |")
        out.append("")
    out += ["| check | target | sluice | met |", "|---|---|---|---|"]
    for t in summ["targets"]:
        value = _fmt_ratio(t["value"]) if "÷" in t["label"] else f"{_fmt_ms(t['value'])} ms ({t['best']})"
        met = "yes" if t["met"] else "no" if t["met"] is not None else "—"
        out.append(f"| {t['label']} | {t['target']} | {value} | {met} |")
    return out


def _fmt_ms(x):
    return "—" if x is None else f"{x:.1f}"


def summarize(result, names):
    """Per-contender medians of every metric, per-pair medians of per-round ratios, and for the
    first contender its per-round ratio to the best of the others."""
    if result["kind"] == "latency":
        return summarize_latency(result)
    metrics = METRICS[result["kind"]]
    rounds = result["rounds"]
    medians = {n: {m.key: _median([r[n].get(m.key) for r in rounds]) for m in metrics} for n in names}
    pairs = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pairs[f"{a}/{b}"] = {
                m.key: _median([_ratio(r[a].get(m.key), r[b].get(m.key)) for r in rounds])
                for m in metrics if m.in_ratio_table}
    vs_best, per_round = {}, {}
    primary, others = names[0], names[1:]
    if others:
        for m in metrics:
            if not m.better:
                continue
            pick = max if m.better == "higher" else min
            series = []
            for r in rounds:
                theirs = [r[o].get(m.key) for o in others if r[o].get(m.key) is not None]
                series.append(_ratio(r[primary].get(m.key), pick(theirs)) if theirs else None)
            vs_best[m.key] = _median(series)
            per_round[m.key] = series
    return {"medians": medians, "ratios": pairs, "vs_best": vs_best, "vs_best_per_round": per_round,
            "scaling": scaling(result, names)}


def scaling(result, names):
    """--workers 2: for each product run both ways (X-w2 and X-w1), the per-round ratios
    w2 ÷ w1 of throughput and of requests per CPU-second, and their medians."""
    if result["kind"] != "load":
        return {}
    out = {}
    for n in names:
        if not n.endswith("-w2") or n[:-3] + "-w1" not in names:
            continue
        one = n[:-3] + "-w1"
        entry = {}
        for key in ("rps", "req_per_cpu_s"):
            series = [_ratio(r[n][key], r[one][key]) for r in result["rounds"]]
            entry[key] = _median(series)
            entry[key + "_per_round"] = series
        entry["w2_cpu_busy"] = _median([r[n]["proxy_cpu_busy"] for r in result["rounds"]])
        entry["w1_cpu_busy"] = _median([r[one]["proxy_cpu_busy"] for r in result["rounds"]])
        out[n[:-3]] = entry
    return out


def evaluate_targets(scenarios, names):
    """Each target whose scenario ran, with sluice's value and whether it is met."""
    out = []
    if names[0] != "sluice" or len(names) < 3:
        return out
    for scenario, key, how, op, threshold, label in TARGETS:
        if scenario not in scenarios:
            continue
        s = scenarios[scenario]["summary"]
        value = s["vs_best"].get(key) if how == "vs_best" else s["medians"]["sluice"][key]
        met = None if value is None else (value >= threshold if op == ">=" else value <= threshold)
        out.append({"scenario": scenario, "metric": key, "how": how, "op": op,
                    "threshold": threshold, "label": label, "value": value, "met": met,
                    "others": {n: s["medians"][n][key] for n in names[1:]}})
    return out


def _fmt(metric, value):
    return "—" if value is None else metric.fmt.format(value)


def markdown(doc):
    names = doc["contenders"]
    lines = [f"# sluice side-by-side benchmark — {doc['date']}, commit {doc['commit']}"
             + (" (working tree had local changes)" if doc["dirty"] else ""), ""]
    m, v, s = doc["machine"], doc["versions"], doc["settings"]
    lines += [
        f"- Command: `{doc['command']}`",
        f"- Machine: {m['nproc']} × {m['cpu_model']}, {m['memory']}, kernel {m['kernel']}; "
        f"load average {m['loadavg_start']} at start, {m['loadavg_end']} at end (other work shares it).",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        "- Placement: " + ", ".join(f"{n} `taskset -c {c}`" for n, c in s["cpus"].items())
        + f"; wrk (1 thread), the three origins and the harness on CPU {s['client_cpus']}. "
        f"Origins: {doc['origin']['kind']} ×3"
        + _calibration_text(doc["origin"]),
        f"- Rounds: {s['rounds']} × {s['duration']} s per contender after a {s['warmup']} s warm-up, "
        f"order rotated every round ({', '.join(names)}; then the next one first); "
        f"{s['connections']} wrk connections.",
        "- Ratios are medians of per-round ratios; \"best other\" is the better of the other "
        "contenders in the same round."]
    if s.get("pgo") == "use":
        lines.append("- sluice built with profile-guided optimisation (`bench/run.sh --pgo`: "
                     "scripts/build-pgo.sh, as the package is built); nginx and HAProxy are "
                     "Debian's builds.")
    if s.get("others_defer_accept"):
        lines.append("- `--others-defer-accept`: nginx listens with `deferred` and HAProxy binds "
                     "with `defer-accept` (TCP_DEFER_ACCEPT, sluice's default; off by default "
                     "in both).")
    busy = [sc["summary"]["medians"][n]["proxy_cpu_busy"]
            for sc in doc["scenarios"].values() if sc["kind"] == "load" for n in names]
    if busy and min(busy) < 0.9:
        lines.append(
            f"- The proxies were busy {min(busy):.0%}–{max(busy):.0%} of the time (medians), not "
            "~100%: other work on the machine took CPU time from them (or the load side could "
            "not keep up). Per-CPU-second figures count only each proxy's own CPU time, but with "
            "fewer requests per wake-up every proxy pays more per request.")
    lines.append("")
    if doc.get("round_checks"):
        lines += ["## Every round", "", "| check | per round: sluice (the comparison) | met |", "|---|---|---|"]
        for c in doc["round_checks"]:
            if c["check"] == "p99_vs_best":
                cells = [f"{x['sluice']:.2f} ({x['other']:.2f})" for x in c["rounds"]]
            else:
                cells = [f"{x['sluice']:.2f} (load side "
                         + ("not measured" if x["other"] is None else f"{x['other']:.2f}")
                         + (", saturated" if x["other"] is not None and x["met"] is None else "") + ")"
                         for x in c["rounds"]]
            met = "yes" if c["met"] else "no" if c["met"] is not None else "— (no round applies)"
            lines.append(f"| {c['label']} | {', '.join(cells)} | {met} |")
        lines.append("")
    if doc["targets"]:
        lines += ["## Against the targets of issue 9", "",
                  "| check | target | sluice | " + " | ".join(names[1:]) + " | met |",
                  "|---|---|---|" + "---|" * (len(names) - 1) + "---|"]
        for t in doc["targets"]:
            metric = next(x for x in METRICS[doc["scenarios"][t["scenario"]]["kind"]] if x.key == t["metric"])
            shown = (f"{t['value']:.2f}× best" if t["how"] == "vs_best" and t["value"] is not None
                     else _fmt(metric, t["value"]))
            threshold = f"{t['threshold']:.2f}×" if t["how"] == "vs_best" else f"{t['threshold']:g}"
            lines.append(f"| {t['label']} | {t['op'].replace('>=', '≥').replace('<=', '≤')} "
                         f"{threshold} | {shown} | "
                         + " | ".join(_fmt(metric, t["others"][n]) for n in names[1:])
                         + f" | {'yes' if t['met'] else 'no' if t['met'] is not None else '—'} |")
        lines.append("")
    for name, sc in doc["scenarios"].items():
        lines += scenario_markdown(name, sc, names) + [""]
    return "\n".join(lines)


def _calibration_text(origin):
    cal = origin.get("calibration")
    if not cal:
        return " (chosen on the command line)."
    parts = [f"{k} {c['cpu_us_per_request']} µs CPU per request ({c['requests_per_s']:,} req/s)"
             for k, c in cal.items()]
    return (", chosen by measuring each alone: " + ", ".join(parts)
            + " (nginx is taken only when it needs under 90% of sluice-origin's CPU per request).")


def scenario_markdown(name, sc, names):
    if sc["kind"] == "latency":
        return latency_markdown(name, sc)
    summ = sc["summary"]
    metrics = [m for m in METRICS[sc["kind"]]
               if not m.optional or any(summ["medians"][n].get(m.key) is not None for n in names)]
    out = [f"## {name}", "", sc["description"][:1].upper() + sc["description"][1:] + ".", "",
           "| | " + " | ".join(m.label for m in metrics) + " |",
           "|---|" + "---|" * len(metrics)]
    for n in names:
        out.append(f"| {n} | " + " | ".join(_fmt(m, summ["medians"][n][m.key]) for m in metrics) + " |")
    ratio_metrics = [m for m in metrics if m.in_ratio_table]
    if len(names) > 1 and ratio_metrics:
        out += ["", "| ratio (median of per-round ratios) | "
                + " | ".join(m.label for m in ratio_metrics) + " |",
                "|---|" + "---|" * len(ratio_metrics)]
        for pair, vals in summ["ratios"].items():
            a, b = pair.split("/")
            out.append(f"| {a} ÷ {b} | " + " | ".join(_fmt_ratio(vals.get(m.key)) for m in ratio_metrics) + " |")
        if len(names) > 2:
            out.append(f"| {names[0]} ÷ best other | "
                       + " | ".join(_fmt_ratio(summ["vs_best"].get(m.key)) for m in ratio_metrics) + " |")
        if len(sc["rounds"]) > 1:
            key = ratio_metrics[1].key if sc["kind"] == "load" else ratio_metrics[0].key
            label = next(m.label for m in ratio_metrics if m.key == key)
            series = summ["vs_best_per_round"].get(key, [])
            other = "best other" if len(names) > 2 else names[1]
            out += ["", f"Per round, {names[0]} ÷ {other} in {label}: "
                    + ", ".join(_fmt_ratio(x) for x in series) + "."]
    if sc["kind"] == "instr":
        out += profile_markdown(sc, names)
    if summ.get("scaling"):
        out += ["", "Scaling, two workers ÷ one (median of per-round ratios; per round in brackets):", "",
                "| | req/s w2 ÷ w1 | req per CPU-s w2 ÷ w1 | CPU busy w2 (of 2 cores) | CPU busy w1 |",
                "|---|---|---|---|---|"]
        for product, e in summ["scaling"].items():
            per = ", ".join(_fmt_ratio(x) for x in e["rps_per_round"])
            out.append(f"| {product} | **{_fmt_ratio(e['rps'])}** ({per}) | {_fmt_ratio(e['req_per_cpu_s'])} | "
                       f"{e['w2_cpu_busy']:.2f} | {e['w1_cpu_busy']:.2f} |")
    return out


def profile_markdown(sc, names):
    """For `instr`: where each contender's instructions per request go (profile.py)."""
    row = sc["rounds"][0]
    out = []
    for n in names:
        prof = row.get(n, {}).get("profile")
        if not prof:
            continue
        out += ["", f"### Where {n}'s instructions per request go", ""]
        lines = profile.markdown(prof, n)
        if not n.startswith("sluice"):
            # Grouping is by sluice's function names: for the others, objects and functions only.
            first_blank = lines.index("", 2)
            lines = lines[:2] + lines[first_blank + 1:]
        out += lines
    return out


def _fmt_ratio(x):
    return "—" if x is None else f"{x:.2f}"
