"""Where the instructions of a proxied request go: the difference of two callgrind profiles (a
run with more requests minus a run with fewer), per function, per object and per group, divided
by the number of requests between them. Start-up, configuration and shutdown cancel out; what
remains is the steady-state cost of a request.

    python3 -m sidebyside.profile BASE.out MORE.out REQUESTS [--top 30]   (from bench/)

prints the markdown tables; `instr` calls difference() and markdown() for its report. Reads
callgrind's own format (name compression, call lines) with the standard library only.
"""
import argparse
import re
import sys
from collections import defaultdict

# Groups of sluice's functions, first match wins. By the function's (demangled) name, then by
# the object it is in.
SLUICE_GROUPS = [
    ("Beast header container (basic_fields: ordered set, iless, field name <-> enum)",
     r"basic_fields|beast::iless|http::to_string\(boost::beast::http::field|string_to_field|"
     r"field_table|bstree|rbtree|intrusive::"),
    ("Beast parser (basic_parser, parser callbacks)", r"basic_parser|beast::http::parser<|beast::http::detail::"),
    ("sluice HTTP (strict scan, framing checks, rewrite, request id)", r"sluice::http::"),
    ("head serialisation (append_fields, std::string appends)",
     r"append_fields|basic_string<.*>::_M_append|basic_string<.*>::_M_replace|__memcpy|__memmove|"
     r"__memset|__memchr|__strlen"),
    ("Asio scheduler, reactor, timers (epoll_reactor, scheduler, mutexes)",
     r"asio::detail::(scheduler|epoll_reactor|conditionally_enabled|posix_mutex|timer_queue|"
     r"reactive_socket_service|socket_ops|eventfd|posix_event)|pthread_mutex|pthread_cond"),
    ("Asio coroutines and handlers (awaitable frames, executors, write_op, as_tuple)",
     r"boost::asio::"),
    ("session coroutines (sluice::proxy::DownstreamSession)", r"sluice::proxy::DownstreamSession"),
    ("sluice other (balancer, pool, counters, clock, routing)", r"sluice::"),
    ("malloc / free / operator new", r"^(malloc|free|_int_malloc|_int_free|cfree|realloc|calloc|"
     r"operator new|operator delete|tcache|unlink_chunk|malloc_consolidate)"),
    ("system call wrappers (libc)", r"^(__libc_|__GI___libc_|epoll_wait|epoll_ctl|recv|send|"
     r"writev|readv|read|write|__recv|__send|__writev|__readv|__read|__write|accept|__close|"
     r"close|ioctl|setsockopt|getsockopt|clock_gettime|__clock_gettime|__vdso|syscall)"),
]


def parse(path):
    """Self cost (first event, Ir) per (object, function), and per function the calls made to it
    and their inclusive cost (summed over all callers)."""
    names = {"ob": {}, "fn": {}, "fl": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn", "fl": "fl", "fi": "fl",
               "fe": "fl", "cfi": "fl", "cfl": "fl"}
    spec = re.compile(r"^(ob|cob|fn|cfn|fl|fi|fe|cfi|cfl)=(?:\((\d+)\))?\s*(.*)$")
    self_cost = defaultdict(int)
    calls = defaultdict(lambda: [0, 0])   # fn -> [count, inclusive Ir]
    ob = fn = cfn = None
    pending_call = None                    # the calls= line's count, until its cost line
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                if pending_call is not None:
                    calls[cfn][0] += pending_call
                    calls[cfn][1] += int(line.split()[1]) if len(line.split()) > 1 else 0
                    pending_call = None
                else:
                    parts = line.split()
                    if len(parts) > 1:
                        self_cost[(ob, fn)] += int(parts[1])
                continue
            if line.startswith("calls="):
                pending_call = int(line[6:].split()[0])
                continue
            m = spec.match(line)
            if not m:
                continue
            key, ident, name = m.group(1), m.group(2), m.group(3).strip()
            table = names[kind_of[key]]
            if ident is not None:
                if name:
                    table[ident] = name
                name = table.get(ident, f"?{ident}")
            if key == "ob":
                ob = name
            elif key == "fn":
                fn = name
            elif key == "cfn":
                cfn = name
    return self_cost, calls


def total(path):
    """The run's total Ir (the `totals:` or `summary:` line)."""
    found = None
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                found = int(line.split()[1])
                if line.startswith("totals:"):
                    break
    if found is None:
        raise RuntimeError(f"no totals in {path}")
    return found


def group_of(function, obj, groups):
    for label, pattern in groups:
        if re.search(pattern, function):
            return label
    base = (obj or "?").rsplit("/", 1)[-1]
    if base.startswith(("libc.so", "libstdc++", "libm.so", "ld-linux")):
        return f"other {base.split('.so')[0]}"
    return "other"


def difference(base_path, more_path, requests, top=30, groups=SLUICE_GROUPS):
    """Per-request Ir of the difference between two runs: per group, per object, top functions."""
    base, _ = parse(base_path)
    more, _ = parse(more_path)
    per = {}
    for key in set(base) | set(more):
        d = (more.get(key, 0) - base.get(key, 0)) / requests
        if d != 0:
            per[key] = d
    by_group, by_object = defaultdict(float), defaultdict(float)
    for (obj, fn), ir in per.items():
        by_group[group_of(fn or "?", obj, groups)] += ir
        by_object[(obj or "?").rsplit("/", 1)[-1]] += ir
    functions = sorted(per.items(), key=lambda kv: -kv[1])[:top]
    return {
        "requests": requests,
        "ir_per_request": (total(more_path) - total(base_path)) / requests,
        "groups": sorted(([k, round(v, 1)] for k, v in by_group.items()), key=lambda kv: -kv[1]),
        "objects": sorted(([k, round(v, 1)] for k, v in by_object.items()), key=lambda kv: -kv[1]),
        "top": [[_short(fn or "?"), (obj or "?").rsplit("/", 1)[-1], round(ir, 1)]
                for (obj, fn), ir in functions],
    }


def _short(name, limit=140):
    """Template arguments elided: `f<...>(...)` keeps a function readable in a table."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).replace("|", "\\|")
    return s if len(s) <= limit else s[:limit - 1] + "…"


def markdown(profile, title="sluice"):
    total_ir = profile["ir_per_request"]
    pct = lambda v: f"{100.0 * v / total_ir:.1f}%" if total_ir else "—"
    out = [f"Instructions per request of {title}: {total_ir:,.0f} "
           f"(difference of two runs, {profile['requests']:,} requests apart).", "",
           "| group | Ir per request | share |", "|---|---|---|"]
    out += [f"| {k} | {v:,.0f} | {pct(v)} |" for k, v in profile["groups"]]
    out += ["", "| object | Ir per request | share |", "|---|---|---|"]
    out += [f"| {k} | {v:,.0f} | {pct(v)} |" for k, v in profile["objects"] if abs(v) >= 1]
    out += ["", "| function (self cost, templates elided) | object | Ir per request |",
            "|---|---|---|"]
    out += [f"| `{fn}` | {obj} | {ir:,.0f} |" for fn, obj, ir in profile["top"]]
    return out


def main(argv):
    p = argparse.ArgumentParser(prog="python3 -m sidebyside.profile", description=__doc__.split("\n\n")[0])
    p.add_argument("base")
    p.add_argument("more")
    p.add_argument("requests", type=int, help="requests made in MORE beyond BASE")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--title", default="the profiled program")
    a = p.parse_args(argv)
    print("\n".join(markdown(difference(a.base, a.more, a.requests, a.top), a.title)))


if __name__ == "__main__":
    main(sys.argv[1:])
