#!/usr/bin/env python3
"""docketd's traces as an OpenTelemetry collector receives them.

    python3 Tests/Operations/traces.py --binary PATH/docketd

Starts a collector of its own on loopback: an HTTP server that takes OTLP/HTTP protobuf posts at /v1/traces and
decodes them with the opentelemetry-proto package (Docket did not write it). Then starts a release docketd with
--demo and --otel-endpoint pointing at it, and checks:
  - a request with a W3C traceparent becomes a SERVER span in the caller's trace, child of the caller's span, named
    by its method and route pattern, with the status, request id, dialect and user as attributes;
  - its storage read (db.read), each statement (db.statement, with placeholders, not values) and the compiled access
    filter (access.filter) are spans under it in the same trace;
  - a write by an itil user has an access check (access.check) under its db.write;
  - a request without traceparent starts a trace of its own; one whose traceparent says "not sampled" exports
    nothing (the parent-based sampler);
  - the resource names the service docketd;
  - no password, token or written value appears in any span;
  - the request's JSON log line names its trace (trace_id);
  - spans still held when docketd is told to stop (SIGTERM) are sent before it exits;
  - with the collector down, requests are answered as fast as ever and docketd still stops cleanly.
Exits 0 when all hold.
"""

import argparse
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

# The same request helpers as the other operations checks (this folder is on the path when run as a script).
from observability import basic, call


class Collector(http.server.ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), CollectorHandler)
        self.lock = threading.Lock()
        self.spans = []  # (resource attributes, span)
        self.requests = []
        self.authorizations = set()

    def all(self):
        with self.lock:
            return list(self.spans)


class CollectorHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.requests.append((self.path, self.headers.get("Content-Type")))
            self.server.authorizations.add(self.headers.get("Authorization"))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.server.lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.server.spans.append((resource, span))
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(span):
    return {a.key: value(a.value) for a in span.attributes}


def start(binary, folder, collector_port, collector_token):
    out = open(os.path.join(folder, "stdout"), "w+")
    err = open(os.path.join(folder, "stderr"), "w")
    # Batches go out every 200 ms instead of every 5 s, with the collector's credentials (the OpenTelemetry
    # variables docketd's exporter reads).
    env = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="200",
               OTEL_EXPORTER_OTLP_HEADERS=f"authorization=Bearer {collector_token}")
    args = [binary, "--demo", "--port", "0", "--data-dir", os.path.join(folder, "data"), "--log-level", "trace",
            "--log-format", "json",
            "--otel-endpoint", f"http://127.0.0.1:{collector_port}"]
    process = subprocess.Popen(args, stdout=out, stderr=err, env=env)
    for _ in range(1800):  # up to 3 minutes: a loaded machine starts the demo slowly
        out.seek(0)
        for line in out.read().splitlines():
            if line.startswith("docketd listening on "):
                return process, int(line.rsplit(":", 1)[1])
        if process.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit("docketd did not start: " + open(os.path.join(folder, "stderr")).read())


def wait_for(collector, condition, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = condition(collector.all())
        if found:
            return found
        time.sleep(0.1)
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    collector = Collector()
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    folder = tempfile.mkdtemp(prefix="docket-traces-")
    collector_token = "collector-" + uuid.uuid4().hex
    process, port = start(args.binary, folder, collector.server_address[1], collector_token)
    problems = []
    secret = "Wombat-" + uuid.uuid4().hex
    written = "Written-" + uuid.uuid4().hex
    try:
        admin = basic("admin", "admin")
        status, _, body = call(port, "GET", "/api/now/table/sys_user?sysparm_query=user_name=john.doe&sysparm_fields=sys_id",
                               headers=admin)
        john_id = json.loads(body)["result"][0]["sys_id"]
        status, _, _ = call(port, "PATCH", f"/api/now/table/sys_user/{john_id}", {"user_password": secret}, headers=admin)
        if status != 200:
            problems.append(f"setting a password: {status}")
        john = basic("john.doe", secret)

        # A request in the caller's trace.
        trace_id = uuid.uuid4().hex
        parent_id = uuid.uuid4().hex[:16]
        status, headers, _ = call(port, "GET", "/api/now/table/incident?sysparm_limit=3",
                                  headers=dict(john, traceparent=f"00-{trace_id}-{parent_id}-01"))
        request_id = headers.get("x-request-id")
        if status != 200:
            problems.append(f"the traced list: {status}")

        def in_trace(spans):
            ours = [(r, s) for r, s in spans if s.trace_id.hex() == trace_id]
            names = {s.name for _, s in ours}
            wanted = {"GET /api/now/table/{table}", "db.read", "db.statement", "access.filter"}
            return ours if wanted <= names else None

        ours = wait_for(collector, in_trace)
        # The request's log line names its trace.
        lines = [json.loads(line) for line in open(os.path.join(folder, "stderr")) if line.startswith("{")]
        logged = [line for line in lines if line.get("request_id") == request_id and line.get("message") == "request"]
        if not logged or logged[0].get("trace_id") != trace_id:
            problems.append(f"the request's log line does not name its trace: {logged[:1]}")
        if not ours:
            problems.append("the traced list's spans did not arrive: "
                            + repr(sorted({s.name for _, s in collector.all()})))
        else:
            server = [s for _, s in ours if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
            if len(server) != 1:
                problems.append(f"{len(server)} server spans in the caller's trace")
            else:
                server = server[0]
                if server.parent_span_id.hex() != parent_id:
                    problems.append(f"the server span's parent is {server.parent_span_id.hex()}, not the caller's {parent_id}")
                a = attributes(server)
                expected = {"http.request.method": "GET", "http.route": "/api/now/table/{table}",
                            "http.response.status_code": 200, "docket.dialect": "servicenow",
                            "docket.request_id": request_id, "enduser.id": "john.doe", "url.path": "/api/now/table/incident"}
                for key, wanted in expected.items():
                    if a.get(key) != wanted:
                        problems.append(f"server span {key} = {a.get(key)!r}, not {wanted!r}")
                if server.end_time_unix_nano <= server.start_time_unix_nano:
                    problems.append("the server span has no duration")
                by_id = {s.span_id: s for _, s in ours}
                for _, span in ours:
                    if span.span_id == server.span_id:
                        continue
                    parent = span.parent_span_id
                    while parent and parent != server.span_id:
                        parent = by_id[parent].parent_span_id if parent in by_id else None
                    if parent != server.span_id:
                        problems.append(f"{span.name} is not under the request's span")
                reads = [s for _, s in ours if s.name == "db.read"]
                if not any(attributes(s).get("db.system.name") == "sqlite" and s.kind == trace_pb2.Span.SPAN_KIND_CLIENT
                           for s in reads):
                    problems.append("no db.read client span on sqlite")
                statements = [s for _, s in ours if s.name == "db.statement"]
                if not any(attributes(s).get("db.query.text", "").startswith("SELECT") and s.parent_span_id in
                           {r.span_id for r in reads} for s in statements):
                    problems.append("no SELECT statement span under a db.read")
            resources = {json.dumps(r, sort_keys=True) for r, _ in ours}
            if not all(json.loads(r).get("service.name") == "docketd" for r in resources):
                problems.append(f"the resource does not name docketd: {resources}")

        # A write by an itil user: its access check is under its db.write; a trace of its own.
        status, _, body = call(port, "POST", "/api/now/table/incident", {"short_description": "traced"}, headers=john)
        sys_id = json.loads(body)["result"]["sys_id"]
        status, headers, _ = call(port, "PATCH", f"/api/now/table/incident/{sys_id}", {"short_description": written},
                                  headers=john)
        patch_id = headers.get("x-request-id")
        if status != 200:
            problems.append(f"the traced write: {status}")

        def write_trace(spans):
            servers = [s for _, s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER
                       and attributes(s).get("docket.request_id") == patch_id]
            if not servers:
                return None
            same = [s for _, s in spans if s.trace_id == servers[0].trace_id]
            return (servers[0], same) if any(s.name == "access.check" for s in same) else None

        found = wait_for(collector, write_trace)
        if not found:
            problems.append("the write's access check did not arrive")
        else:
            server, same = found
            if server.trace_id.hex() == trace_id or server.parent_span_id:
                problems.append("a request without traceparent did not start a trace of its own")
            if server.name != "PATCH /api/now/table/{table}/{sys_id}":
                problems.append(f"the write's span is named {server.name!r}")
            writes = {s.span_id for s in same if s.name == "db.write"}
            check = [s for s in same if s.name == "access.check"][0]
            if check.parent_span_id not in writes:
                problems.append("the access check is not under the write's db.write")
            if attributes(check).get("docket.access.allowed") is not True:
                problems.append(f"access.check attributes: {attributes(check)}")

        # Not sampled by the caller: nothing of it is exported.
        unsampled = uuid.uuid4().hex
        call(port, "GET", "/api/now/table/incident?sysparm_limit=1",
             headers=dict(john, traceparent=f"00-{unsampled}-{uuid.uuid4().hex[:16]}-00"))

        # Spans held when docketd stops are sent before it exits.
        last = uuid.uuid4().hex
        call(port, "GET", "/api/now/table/problem?sysparm_limit=1",
             headers=dict(john, traceparent=f"00-{last}-{uuid.uuid4().hex[:16]}-01"))
        process.send_signal(signal.SIGTERM)
        try:
            if process.wait(timeout=30) != 0:
                problems.append(f"docketd exited with {process.returncode} after SIGTERM")
        except subprocess.TimeoutExpired:
            problems.append("docketd did not stop within 30 s of SIGTERM")
        if not wait_for(collector, lambda spans: any(s.trace_id.hex() == last for _, s in spans), seconds=5):
            problems.append("the last request's spans were not sent when docketd stopped")
        if any(s.trace_id.hex() == unsampled for _, s in collector.all()):
            problems.append("a trace the caller did not sample was exported")

        # Nothing secret or written in any span.
        everything = []
        for resource, span in collector.all():
            everything.append(span.name)
            everything += [f"{k}={v}" for k, v in attributes(span).items()]
            everything += [f"{k}={v}" for k, v in resource.items()]
        text = "\n".join(everything)
        for leaked in [secret, written, basic("john.doe", secret)["Authorization"], "admin:admin"]:
            if leaked in text:
                problems.append(f"a span holds {leaked[:12]}…")
        if collector.authorizations != {f"Bearer {collector_token}"}:
            problems.append(f"the exporter sent {len(collector.authorizations)} different Authorization headers")
        logged = open(os.path.join(folder, "stderr")).read()
        if collector_token in logged or secret in logged:
            problems.append("a secret was logged")
        paths = {path for path, _ in collector.requests}
        types = {content for _, content in collector.requests}
        if paths != {"/v1/traces"} or types != {"application/x-protobuf"}:
            problems.append(f"the exporter posted {paths} as {types}")
        print(f"{len(collector.all())} spans in {len(collector.requests)} exports")

        # A collector that is down costs spans, never requests.
        dead = collector.server_address[1]
        collector.shutdown()
        collector.server_close()
        other = tempfile.mkdtemp(prefix="docket-traces-dead-")
        process, port = start(args.binary, other, dead, collector_token)
        began = time.time()
        for index in range(100):
            status, _, _ = call(port, "GET", "/api/now/table/incident?sysparm_limit=1", headers=admin)
            if status != 200:
                problems.append(f"with the collector down, request {index}: {status}")
                break
        took = time.time() - began
        if took > 20:
            problems.append(f"with the collector down, 100 requests took {took:.1f} s")
        time.sleep(1)
        status, _, _ = call(port, "GET", "/health/ready")
        if status != 200:
            problems.append(f"with the collector down, /health/ready: {status}")
        process.send_signal(signal.SIGTERM)
        stopping = time.time()
        try:
            if process.wait(timeout=40) != 0:
                problems.append(f"with the collector down, docketd exited with {process.returncode} after SIGTERM")
        except subprocess.TimeoutExpired:
            problems.append("with the collector down, docketd did not stop within 40 s of SIGTERM")
        stopped = time.time() - stopping
        if stopped > 14:
            problems.append(f"with the collector down, docketd took {stopped:.1f} s to stop")
        if collector_token in open(os.path.join(other, "stderr")).read():
            problems.append("the collector's credentials were logged")
        print(f"with the collector down: 100 requests in {took:.2f} s, stopped in {stopped:.1f} s")
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)
        collector.shutdown()
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        print(open(os.path.join(folder, "stderr")).read()[-3000:])
        sys.exit(1)
    print("traces: every check passed")


if __name__ == "__main__":
    main()
