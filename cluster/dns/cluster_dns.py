"""Cluster DNS for the local cluster: answers `<svc>.<ns>.svc.<domain>` from the API server.

Debian ships no CoreDNS, so the local cluster runs this small server on the node's
bridge address, and kubelet hands that address to pods as their nameserver (with the
usual `search <ns>.svc.<domain> svc.<domain> <domain>` and `ndots:5`). It keeps an
in-memory view of Services and Endpoints through API watches and answers:

- A `<svc>.<ns>.svc.<domain>`: the ClusterIP, or the ready endpoint IPs of a headless service;
- A `<a-b-c-d>.<ns>.pod.<domain>`: the address written in the name;
- SRV `_<port>._<proto>.<svc>.<ns>.svc.<domain>`: the named port;
- anything else: NXDOMAIN (there is no upstream: this machine has no network beyond it).

An existing name with no record of the asked type answers NOERROR with no records,
as resolvers expect for AAAA look-ups.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import socketserver
import threading
import time
from typing import Any

from dnslib import QTYPE, RCODE, RR, SRV, A, DNSRecord  # type: ignore[import-untyped]
from kubernetes import client, config, watch  # type: ignore[import-untyped]

TTL = 5
log = logging.getLogger("cluster-dns")


class Records:
    """Thread-safe view of services and endpoints, keyed by (namespace, name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: dict[tuple[str, str], dict[str, Any]] = {}
        self._endpoints: dict[tuple[str, str], list[str]] = {}

    def set_service(self, ns: str, name: str, svc: dict[str, Any] | None) -> None:
        with self._lock:
            if svc is None:
                self._services.pop((ns, name), None)
            else:
                self._services[(ns, name)] = svc

    def set_endpoints(self, ns: str, name: str, ips: list[str] | None) -> None:
        with self._lock:
            if ips is None:
                self._endpoints.pop((ns, name), None)
            else:
                self._endpoints[(ns, name)] = ips

    def service(self, ns: str, name: str) -> tuple[dict[str, Any] | None, list[str]]:
        with self._lock:
            return self._services.get((ns, name)), list(self._endpoints.get((ns, name), []))


def _watch_forever(records: Records, kind: str) -> None:
    v1 = client.CoreV1Api()
    lister = v1.list_service_for_all_namespaces if kind == "services" else v1.list_endpoints_for_all_namespaces
    while True:
        try:
            listing = lister(_request_timeout=30)
            seen = set()
            for item in listing.items:
                seen.add((item.metadata.namespace, item.metadata.name))
                _apply(records, kind, "ADDED", item)
            rv = listing.metadata.resource_version
            for event in watch.Watch().stream(lister, resource_version=rv, timeout_seconds=300):
                _apply(records, kind, event["type"], event["object"])
        except Exception as exc:  # the API server restarts with the cluster; keep trying
            log.warning("%s watch interrupted: %s", kind, exc)
            time.sleep(1)


def _apply(records: Records, kind: str, etype: str, obj: Any) -> None:
    ns, name = obj.metadata.namespace, obj.metadata.name
    deleted = etype == "DELETED"
    if kind == "services":
        if deleted:
            records.set_service(ns, name, None)
        else:
            ports = [
                {"name": p.name or "", "port": p.port, "protocol": (p.protocol or "TCP").lower()}
                for p in (obj.spec.ports or [])
            ]
            records.set_service(ns, name, {"clusterIP": obj.spec.cluster_ip, "ports": ports})
    else:
        ips = (
            None
            if deleted
            else [a.ip for s in (obj.subsets or []) for a in (s.addresses or [])]
        )
        records.set_endpoints(ns, name, ips)


class Resolver:
    """Turns a question into an answer using the current records."""

    def __init__(self, records: Records, domain: str) -> None:
        self.records = records
        self.domain = domain.strip(".").lower()

    def answer(self, request: DNSRecord) -> DNSRecord:
        reply = request.reply()
        reply.header.ra = 1
        qname = str(request.q.qname)
        qtype = QTYPE[request.q.qtype]
        labels = qname.strip(".").lower().split(".")
        dlabels = self.domain.split(".")
        if len(labels) <= len(dlabels) or labels[-len(dlabels):] != dlabels:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        rest = labels[: -len(dlabels)]
        found = False
        if len(rest) >= 3 and rest[-1] == "svc":
            found = self._service(reply, qname, qtype, rest[:-1])
        elif len(rest) == 3 and rest[-1] == "pod":
            found = self._pod(reply, qname, qtype, rest[0])
        if not found:
            reply.header.rcode = RCODE.NXDOMAIN
        return reply

    def _service(self, reply: DNSRecord, qname: str, qtype: str, rest: list[str]) -> bool:
        if len(rest) == 2:
            name, ns = rest
            svc, ips = self.records.service(ns, name)
            if svc is None:
                return False
            if qtype in ("A", "ANY"):
                cip = svc["clusterIP"]
                addrs = ips if cip in (None, "", "None") else [cip]
                for ip in addrs:
                    reply.add_answer(RR(qname, QTYPE.A, rdata=A(ip), ttl=TTL))
            return True
        if len(rest) == 4 and rest[0].startswith("_") and rest[1].startswith("_"):
            port_name, proto, name, ns = rest[0][1:], rest[1][1:], rest[2], rest[3]
            svc, _ = self.records.service(ns, name)
            if svc is None:
                return False
            target = f"{name}.{ns}.svc.{self.domain}."
            matched = [p for p in svc["ports"] if p["name"] == port_name and p["protocol"] == proto]
            if not matched:
                return False
            if qtype in ("SRV", "ANY"):
                for p in matched:
                    reply.add_answer(RR(qname, QTYPE.SRV, rdata=SRV(0, 100, p["port"], target), ttl=TTL))
            return True
        return False

    def _pod(self, reply: DNSRecord, qname: str, qtype: str, dashed: str) -> bool:
        try:
            ip = ipaddress.IPv4Address(dashed.replace("-", "."))
        except ValueError:
            return False
        if qtype in ("A", "ANY"):
            reply.add_answer(RR(qname, QTYPE.A, rdata=A(str(ip)), ttl=TTL))
        return True


def _handle(resolver: Resolver, data: bytes) -> bytes | None:
    try:
        request = DNSRecord.parse(data)
    except Exception:
        return None
    return bytes(resolver.answer(request).pack())


class UDPHandler(socketserver.BaseRequestHandler):
    resolver: Resolver

    def handle(self) -> None:
        data, sock = self.request
        out = _handle(self.resolver, data)
        if out is not None:
            sock.sendto(out, self.client_address)


class TCPHandler(socketserver.BaseRequestHandler):
    resolver: Resolver

    def handle(self) -> None:
        head = self.request.recv(2)
        if len(head) < 2:
            return
        size = int.from_bytes(head, "big")
        data = b""
        while len(data) < size:
            chunk = self.request.recv(size - len(data))
            if not chunk:
                return
            data += chunk
        out = _handle(self.resolver, data)
        if out is not None:
            self.request.sendall(len(out).to_bytes(2, "big") + out)


class ThreadingUDP(socketserver.ThreadingMixIn, socketserver.UDPServer):
    allow_reuse_address = True
    daemon_threads = True


class ThreadingTCP(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--listen", required=True)
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument("--domain", default="cluster.local")
    parser.add_argument("--state", help="the cluster's state dir (only marks the process as the cluster's)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(config_file=args.kubeconfig)
    records = Records()
    for kind in ("services", "endpoints"):
        threading.Thread(target=_watch_forever, args=(records, kind), daemon=True).start()
    resolver = Resolver(records, args.domain)
    UDPHandler.resolver = resolver
    TCPHandler.resolver = resolver
    udp = ThreadingUDP((args.listen, args.port), UDPHandler)
    tcp = ThreadingTCP((args.listen, args.port), TCPHandler)
    threading.Thread(target=udp.serve_forever, daemon=True).start()
    log.info("serving %s on %s:%d", args.domain, args.listen, args.port)
    tcp.serve_forever()


if __name__ == "__main__":
    main()
