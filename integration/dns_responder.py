"""A DNS server on loopback that a test controls (python3-dnslib): it answers A, AAAA and SRV
questions from a table the test changes at any moment, with the TTLs it chooses, and can stop
answering (every question times out) or answer SERVFAIL on demand. UDP only, one thread.

    dns = DnsResponder()
    dns.set("app.test", a=["127.0.0.2", "127.0.0.3"], ttl=1)
    dns.set("_http._tcp.app.test", srv=[(10, 3, 8081, "one.test"), ...], ttl=1)
    ... [dns] servers = ["127.0.0.1:{dns.port}"] ...
    dns.mode = "drop"      # or "servfail"; "answer" again to recover
    dns.close()
"""
import socket
import threading

from dnslib import AAAA, QTYPE, RCODE, RR, SRV, A, DNSRecord


class DnsResponder:
    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.mode = "answer"  # answer | drop | servfail
        self.records = {}     # name -> {"a": [...], "aaaa": [...], "srv": [...], "ttl": n}
        self.queries = []     # (name, type) in the order asked
        self.reverse = False  # answer records in reverse order (two instances, two orders)
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def set(self, name, a=(), aaaa=(), srv=(), ttl=1):
        """srv: (priority, weight, port, target) tuples."""
        with self._lock:
            self.records[name.rstrip(".").lower()] = {"a": list(a), "aaaa": list(aaaa),
                                                      "srv": list(srv), "ttl": ttl}

    def count(self, name, qtype="A"):
        with self._lock:
            return sum(1 for n, t in self.queries if n == name and t == qtype)

    def close(self):
        self._stop = True
        self._thread.join(timeout=5)
        self.sock.close()

    def _answer(self, request):
        reply = request.reply()
        name = str(request.q.qname).rstrip(".").lower()
        qtype = QTYPE[request.q.qtype]
        with self._lock:
            self.queries.append((name, qtype))
            entry = self.records.get(name)
            mode, reverse = self.mode, self.reverse
        if mode == "drop":
            return None
        if mode == "servfail":
            reply.header.rcode = RCODE.SERVFAIL
            return reply
        if entry is None:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        ttl = entry["ttl"]
        rrs = []
        if qtype == "A":
            rrs = [RR(request.q.qname, QTYPE.A, rdata=A(ip), ttl=ttl) for ip in entry["a"]]
        elif qtype == "AAAA":
            rrs = [RR(request.q.qname, QTYPE.AAAA, rdata=AAAA(ip), ttl=ttl) for ip in entry["aaaa"]]
        elif qtype == "SRV":
            rrs = [RR(request.q.qname, QTYPE.SRV, rdata=SRV(p, w, port, target), ttl=ttl)
                   for p, w, port, target in entry["srv"]]
        for rr in (reversed(rrs) if reverse else rrs):
            reply.add_answer(rr)
        return reply  # no records of that type: NOERROR with no answer (NODATA)

    def _serve(self):
        while not self._stop:
            try:
                data, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                reply = self._answer(DNSRecord.parse(data))
            except Exception:  # a malformed question: no answer, as a real server may do
                continue
            if reply is not None:
                self.sock.sendto(reply.pack(), peer)
