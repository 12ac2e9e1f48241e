"""The side-by-side benchmark of sluice, nginx and HAProxy (issue 9); entry point: bench/run.sh.

Modules: `processes` (children pinned to CPUs, /proc readings, ending by PID), `client` (a raw
HTTP/1.1 keep-alive client), `origins` (three fast origins and their connection counters),
`contenders` (the proxies and their equivalent configurations), `wrk` (the load generator),
`scenarios` (what is measured, in interleaved rounds), `report` (medians, per-round ratios,
markdown and JSON), `__main__` (the command line).
"""
