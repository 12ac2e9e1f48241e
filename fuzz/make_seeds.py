#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (re-run after editing; the files are checked in).

Seeds are named after what they show; libFuzzer adds its own (hash-named) files to a corpus
directory it runs on, so CI fuzzes into a scratch copy (see scripts/fuzz.sh) and these stay clean.
"""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
H = "Host: a.example\r\n"


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode("latin-1")
    with open(os.path.join(HERE, "corpus", target, name), "wb") as f:
        f.write(data)


REQUESTS = {
    # valid
    "get": "GET / HTTP/1.1\r\n" + H + "\r\n",
    "get-query-accept": "GET /a/b?c=d&e=%20 HTTP/1.1\r\n" + H + "Accept: */*\r\nUser-Agent: x\r\n\r\n",
    "get-http10": "GET / HTTP/1.0\r\n\r\n",
    "get-http10-host-keepalive": "GET / HTTP/1.0\r\n" + H + "Connection: keep-alive\r\n\r\n",
    "get-absolute-form": "GET http://a.example/p?q HTTP/1.1\r\n" + H + "\r\n",
    "options-asterisk": "OPTIONS * HTTP/1.1\r\n" + H + "\r\n",
    "head": "HEAD /x HTTP/1.1\r\n" + H + "\r\n",
    "post-cl": "POST /f HTTP/1.1\r\n" + H + "Content-Length: 5\r\n\r\nhello",
    "post-cl0": "POST /f HTTP/1.1\r\n" + H + "Content-Length: 0\r\n\r\n",
    "post-chunked": "POST /f HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
    "post-chunked-trailer": "POST /f HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n",
    "post-expect": "PUT /f HTTP/1.1\r\n" + H + "Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "pipelined-3": ("GET /1 HTTP/1.1\r\n" + H + "\r\n" + "POST /2 HTTP/1.1\r\n" + H +
                    "Content-Length: 2\r\n\r\nhi" + "GET /3 HTTP/1.1\r\n" + H + "Connection: close\r\n\r\n"),
    "pipelined-chunked-then-get": ("POST /1 HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
                                   "2\r\nhi\r\n0\r\n\r\nGET /2 HTTP/1.1\r\n" + H + "\r\n"),
    "leading-crlf": "\r\n\r\nGET / HTTP/1.1\r\n" + H + "\r\n",
    "forwarded-headers": ("GET / HTTP/1.1\r\n" + H + "X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\n"
                          "X-Forwarded-Host: evil\r\nX-Request-Id: abc-123\r\n\r\n"),
    "connection-options": ("GET / HTTP/1.1\r\n" + H + "Connection: X-A, keep-alive\r\nX-A: 1\r\n"
                           "Keep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: websocket\r\n\r\n"),
    "host-ipv6-port": "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
    "unknown-method": "PURGE /x HTTP/1.1\r\n" + H + "\r\n",
    # smuggling classics and malformed heads
    "cl-te": "POST / HTTP/1.1\r\n" + H + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
    "te-cl": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
    "te-space-colon": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
    "te-xchunked": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: xchunked\r\nContent-Length: 4\r\n\r\nabcd",
    "te-chunked-identity": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    "te-tab": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n",
    "te-vtab": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n",
    "te-twice": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-http10": "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "cl-plus": "POST / HTTP/1.1\r\n" + H + "Content-Length: +5\r\n\r\nhello",
    "cl-space-inside": "POST / HTTP/1.1\r\n" + H + "Content-Length: 1 2\r\n\r\nhello",
    "cl-leading-zeros": "POST / HTTP/1.1\r\n" + H + "Content-Length: 0005\r\n\r\nhello",
    "cl-overflow": "POST / HTTP/1.1\r\n" + H + "Content-Length: 18446744073709551617\r\n\r\nhello",
    "cl-duplicate-equal": "POST / HTTP/1.1\r\n" + H + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    "cl-list": "POST / HTTP/1.1\r\n" + H + "Content-Length: 5, 5\r\n\r\nhello",
    "chunk-size-overflow": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n10000000000000001\r\nx\r\n0\r\n\r\n",
    "chunk-size-0x": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    # A chunked body longer than the fuzz target's 29-byte relay streams: chunks leave before a
    # later one turns out bad, so the origin must see an unfinished request with nothing of it.
    "chunked-streamed-then-bad": ("POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
                                  "20\r\n" + "a" * 32 + "\r\n10\r\n" + "b" * 16 + "\r\nzz\r\n0\r\n\r\n"),
    "chunked-streamed-then-missing-crlf": ("POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
                                           "20\r\n" + "a" * 32 + "\r\n4\r\nbbbbX\r\n0\r\n\r\n"),
    "chunked-streamed": ("POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
                         "40\r\n" + "a" * 64 + "\r\n3\r\nbcd\r\n0\r\nX-T: 1\r\n\r\nGET /2 HTTP/1.1\r\n" + H + "\r\n"),
    "absolute-form-userinfo": "GET http://user@a.example/ HTTP/1.1\r\n" + H + "\r\n",
    "chunk-size-negative": "POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n-1\r\nx\r\n0\r\n\r\n",
    "bare-lf": "GET / HTTP/1.1\n" + H + "\r\n",
    "bare-cr": "GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n",
    "obs-fold": "GET / HTTP/1.1\r\n" + H + "X-A: 1\r\n 2\r\n\r\n",
    "nul-in-value": "GET / HTTP/1.1\r\n" + H + "X-A: a\x00b\r\n\r\n",
    "empty-header-name-hides-cl": "POST / HTTP/1.1\r\n" + H + ": x\r\nContent-Length: 3\r\n\r\nabc",
    "connection-content-length": "POST / HTTP/1.1\r\n" + H + "Connection: Content-Length, Host\r\nContent-Length: 5\r\n\r\nhelloGET /x HTTP/1.1\r\n" + H + "\r\n",
    "upgrade-then-pipelined": "GET /ws HTTP/1.1\r\n" + H + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\nGET /2 HTTP/1.1\r\n" + H + "\r\n",
    "upgrade-h2c": "GET / HTTP/1.1\r\n" + H + "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
    "h2-preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "missing-host": "GET / HTTP/1.1\r\n\r\n",
    "repeated-host": "GET / HTTP/1.1\r\n" + H + H + "\r\n",
    "bad-host": "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
    "connect": "CONNECT a.example:443 HTTP/1.1\r\n" + H + "\r\n",
    "obs-text-target": "GET /\xe9 HTTP/1.1\r\n" + H + "\r\n",
    "long-target": "GET /" + "a" * 1100 + " HTTP/1.1\r\n" + H + "\r\n",
    "many-headers": "GET / HTTP/1.1\r\n" + H + "".join("X-%d: v\r\n" % i for i in range(500)) + "\r\n",
}

RESPONSES = {
    # byte 0: bit0 HEAD, bit1 HTTP/1.0 client, bit2 client keep-alive, bit3 retried
    "ok-cl": b"\x04HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "ok-chunked": b"\x04HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "ok-gzip-chunked": b"\x04HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    "ok-until-close": b"\x04HTTP/1.1 200 OK\r\n\r\nuntil the origin closes",
    "ok-until-close-http10-client": b"\x06HTTP/1.1 200 OK\r\n\r\nbody",
    "ok-chunked-http10-client": b"\x06HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    "http10-origin": b"\x04HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi",
    "head-with-cl": b"\x05HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
    "no-content": b"\x04HTTP/1.1 204 No Content\r\n\r\n",
    "not-modified": b"\x04HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
    "continue-then-ok": b"\x04HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "early-hints": b"\x04HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
    "switching-protocols": b"\x04HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    "hop-by-hop": b"\x0cHTTP/1.1 200 OK\r\nConnection: close, X-A\r\nX-A: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 1\r\n\r\nx",
    "empty-reason": b"\x04HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n",
    "cl-te": b"\x04HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two-cl": b"\x04HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "extra-bytes": b"\x04HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n\r\n",
    "status-999": b"\x04HTTP/1.1 999 What\r\nContent-Length: 0\r\n\r\n",
    "bad-chunk": b"\x04HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
}

CHUNKED = {
    "simple": "5\r\nhello\r\n0\r\n\r\n",
    "two-chunks-ext": "3;a=b\r\nabc\r\n4;x\r\ndefg\r\n0\r\n\r\n",
    "trailers": "1\r\nx\r\n0\r\nX-Sum: 1\r\nY: 2\r\n\r\n",
    "uppercase-hex": "A\r\n0123456789\r\n0\r\n\r\n",
    "big-size": "FFFFFFFFFFFFFFFF\r\nx",
    "overflow": "10000000000000000\r\nx\r\n0\r\n\r\n",
    "0x-prefix": "0x1\r\nx\r\n0\r\n\r\n",
    "bare-lf": "1\nx\n0\n\n",
    "missing-crlf": "1\r\nxy\r\n0\r\n\r\n",
    "incomplete": "10\r\nshort",
    "then-request": "0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
}


def main():
    for target in ("request", "response", "chunked", "config"):
        d = os.path.join(HERE, "corpus", target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    for name, data in REQUESTS.items():
        write("request", name, data)
    for name, data in RESPONSES.items():
        write("response", name, data)
    for name, data in CHUNKED.items():
        write("chunked", name, data)
    conf = os.path.join(HERE, "..", "conf")
    for f in sorted(os.listdir(conf)):
        if f.endswith(".toml"):
            shutil.copy(os.path.join(conf, f), os.path.join(HERE, "corpus", "config", f))
    write("config", "minimal.toml", '[upstreams.app]\nservers = ["127.0.0.1:9000"]\n')
    write("config", "errors.toml",
          '[server]\nlisten = 5\nmax_uri_bytes = "1x"\n[upstreams.app]\nservers = []\nbalancer = "nope"\n')
    write("config", "syntax-error.toml", '[server\nlisten = "127.0.0.1:80"\n')


if __name__ == "__main__":
    main()
