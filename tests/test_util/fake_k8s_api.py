#!/usr/bin/python3
"""A fake Kubernetes API server for batch/v1 Jobs, for tests and benchmarks.

  fake_k8s_api.py --token-file FILE --dir DIR [--cert PEM --key PEM]

Serves HTTPS on a free loopback port (a certificate made with the openssl
tool in DIR unless --cert/--key are given; DIR/ca.crt is what clients must
trust) and a plain-HTTP control port for the test, then prints one line:

  fake-k8s-api listening api=https://127.0.0.1:PORT control=127.0.0.1:PORT ca=PATH

The API port answers the requests of the Kubernetes launcher
(server/jobs/kubernetes/) the way the real API server does:

  POST   /apis/batch/v1/namespaces/NS/jobs[?fieldValidation=Strict]
  GET    /apis/batch/v1/namespaces/NS/jobs[?labelSelector=...]
  GET    /apis/batch/v1/namespaces/NS/jobs/NAME
  DELETE /apis/batch/v1/namespaces/NS/jobs/NAME[?propagationPolicy=...]

Every request must carry `Authorization: Bearer TOKEN` with the token the
file holds at that moment (re-read per request; otherwise 401), and
`Accept: application/json` (406); a POST `Content-Type: application/json`
(415). A POSTed body is checked against the batch/v1 schema of
python3-kubernetes (tests/test_util/k8s_schema.py, V1Job and every nested
model) and the API server's own validation of the fields the launcher
writes, answering as the API server does with a Status object:
  - not JSON, or a value of the wrong type: 400 BadRequest
    ("Job in version "v1" cannot be handled as a Job: ...");
  - an unknown field: 400 BadRequest with ?fieldValidation=Strict ("strict
    decoding error: unknown field ..."), otherwise dropped with a Warning
    header, as the server's default (Warn) does;
  - apiVersion/kind other than batch/v1 Job, or metadata.namespace other
    than the path's: 400 BadRequest;
  - a required field missing or an invalid value (DNS-1123 names, label
    keys and values, restartPolicy Never/OnFailure, quantities, requests
    above limits, negative counts): 422 Invalid with details.causes;
  - a name already taken: 409 AlreadyExists; unknown name: 404 NotFound.
A created Job is answered with 201 and the stored object (metadata.uid,
creationTimestamp, resourceVersion, namespace, status {}); DELETE answers
200 with a Status of Success.

The control port (no TLS, no token), for the test:
  GET  /requests            every API request so far: method, path, query,
                            headers (Authorization as "Bearer <ok>" or
                            "<bad>", never the token), body, answer code
  GET  /jobs                the stored Jobs
  POST /jobs/NS/NAME/status body: a JobStatus, which replaces the Job's
                            status (404 if there is no such Job)
  POST /inject              body: {"code": 403, "reason": "Forbidden",
                            "message": "...", "delay_seconds": 0.0,
                            "count": 1, "method": "POST"}: the next
                            `count` API requests (of `method` if given)
                            wait `delay_seconds`, then are answered with
                            that Status (code 0: answered normally after
                            the delay)
"""

import argparse
import datetime
import http.server
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_schema  # noqa: E402

JOBS_PATH = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# apimachinery's resource.Quantity, as its parse error states it.
QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
SUFFIXES = {"": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6,
            "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Ki": 2**10,
            "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def status_object(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure" if code >= 400 else "Success",
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    if code < 400:
        del body["message"]
        del body["reason"]
    return body


def quantity_value(text):
    """The value of a Kubernetes quantity, or None if it is not one."""
    match = re.match(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                     r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$",
                     text)
    if not match:
        return None
    suffix = match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return float(match.group(1)) * 10 ** int(suffix[1:])
    return float(match.group(1)) * SUFFIXES[suffix]


class Invalid(Exception):
    """A 422: causes is a list of (field, reason, message)."""

    def __init__(self, causes):
        super().__init__()
        self.causes = causes


class BadRequest(Exception):
    pass


def check_labels(labels, path, causes):
    for key, value in (labels or {}).items():
        prefix, _, name = key.rpartition("/")
        if (prefix and (len(prefix) > 253 or
                        not DNS1123_SUBDOMAIN.match(prefix))) or \
                len(name) > 63 or not LABEL_NAME.match(name):
            causes.append((f"{path}", "FieldValueInvalid",
                           f"Invalid value: \"{key}\": name part must "
                           "consist of alphanumeric characters, '-', '_' or "
                           "'.', and must start and end with an alphanumeric "
                           "character"))
        if value and (len(value) > 63 or not LABEL_NAME.match(value)):
            causes.append((f"{path}", "FieldValueInvalid",
                           f"Invalid value: \"{value}\": a valid label must "
                           "be an empty string or consist of alphanumeric "
                           "characters, '-', '_' or '.', and must start and "
                           "end with an alphanumeric character (max 63)"))


def validate_job(job, causes):
    """The API server's validation of the fields the launcher writes."""
    meta = job.get("metadata", {})
    name = meta.get("name", "")
    if not name:
        causes.append(("metadata.name", "FieldValueRequired",
                       "Required value: name or generateName is required"))
    elif len(name) > 63 or not DNS1123_LABEL.match(name):
        # A Job's name becomes its pods' job-name label value: a DNS-1123
        # label of at most 63 characters.
        causes.append(("metadata.name", "FieldValueInvalid",
                       f"Invalid value: \"{name}\": a lowercase RFC 1123 "
                       "label must consist of lower case alphanumeric "
                       "characters or '-', and must start and end with an "
                       "alphanumeric character (max 63)"))
    check_labels(meta.get("labels"), "metadata.labels", causes)
    spec = job.get("spec", {})
    for field in ("backoffLimit", "ttlSecondsAfterFinished"):
        if spec.get(field, 0) < 0:
            causes.append((f"spec.{field}", "FieldValueInvalid",
                           f"Invalid value: {spec[field]}: must be greater "
                           "than or equal to 0"))
    if "activeDeadlineSeconds" in spec and spec["activeDeadlineSeconds"] <= 0:
        causes.append(("spec.activeDeadlineSeconds", "FieldValueInvalid",
                       f"Invalid value: {spec['activeDeadlineSeconds']}: "
                       "must be greater than 0"))
    template = spec.get("template", {})
    check_labels(template.get("metadata", {}).get("labels"),
                 "spec.template.metadata.labels", causes)
    pod = template.get("spec", {})
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        causes.append(("spec.template.spec.restartPolicy",
                       "FieldValueNotSupported",
                       f"Unsupported value: {pod.get('restartPolicy')!r}: "
                       "supported values: \"OnFailure\", \"Never\""))
    account = pod.get("serviceAccountName")
    if account and not DNS1123_SUBDOMAIN.match(account):
        causes.append(("spec.template.spec.serviceAccountName",
                       "FieldValueInvalid", f"Invalid value: \"{account}\""))
    check_labels(pod.get("nodeSelector"), "spec.template.spec.nodeSelector",
                 causes)
    volumes = {v.get("name") for v in pod.get("volumes", [])}
    containers = pod.get("containers", [])
    if not containers and "containers" in pod:
        causes.append(("spec.template.spec.containers", "FieldValueRequired",
                       "Required value"))
    for i, container in enumerate(containers):
        path = f"spec.template.spec.containers[{i}]"
        if not DNS1123_LABEL.match(container.get("name", "")):
            causes.append((f"{path}.name", "FieldValueInvalid",
                           f"Invalid value: \"{container.get('name')}\""))
        if not container.get("image"):
            causes.append((f"{path}.image", "FieldValueRequired",
                           "Required value"))
        if container.get("imagePullPolicy", "IfNotPresent") not in (
                "Always", "IfNotPresent", "Never"):
            causes.append((f"{path}.imagePullPolicy",
                           "FieldValueNotSupported",
                           f"Unsupported value: "
                           f"\"{container['imagePullPolicy']}\""))
        for mount in container.get("volumeMounts", []):
            if mount.get("name") not in volumes:
                causes.append((f"{path}.volumeMounts.name", "FieldValueNotFound",
                               f"Not found: \"{mount.get('name')}\""))
        resources = container.get("resources", {})
        values = {}
        for part in ("requests", "limits"):
            for resource, quantity in resources.get(part, {}).items():
                value = quantity_value(str(quantity))
                if value is None:
                    raise BadRequest(
                        "quantities must match the regular expression "
                        f"'{QUANTITY.pattern}'")
                values[(part, resource)] = value
        for (part, resource), value in values.items():
            limit = values.get(("limits", resource))
            if part == "requests" and limit is not None and value > limit:
                causes.append((f"{path}.resources.requests", "FieldValueInvalid",
                               f"Invalid value: \"{resources['requests'][resource]}\""
                               f": must be less than or equal to {resource} "
                               "limit"))


class State:
    def __init__(self, token_file):
        self.token_file = token_file
        self.lock = threading.Lock()
        self.jobs = {}  # (namespace, name) -> Job
        self.requests = []
        self.resource_version = 1000
        self.inject = None  # {"code", "reason", "message", "delay", "count"}

    def next_version(self):
        self.resource_version += 1
        return str(self.resource_version)


def selector_matches(selector, labels):
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class ApiHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as the API server's Go net/http sets it: headers and body
    # are two writes, and Nagle's algorithm would hold the body back until
    # the client's delayed ACK (40 ms a response).
    disable_nagle_algorithm = True
    state = None  # set by main

    def log_message(self, fmt, *args):  # quiet: the test's log is stderr
        pass

    def answer(self, code, body, warning=None):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if warning:
            self.send_header("Warning", f'299 - "{warning}"')
        self.end_headers()
        self.wfile.write(data)
        self.record["code"] = code

    def fail(self, code, reason, message, details=None):
        self.answer(code, status_object(code, reason, message, details))

    def handle_any(self, method):
        parsed = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        auth = self.headers.get("Authorization", "")
        try:
            with open(self.state.token_file) as f:
                token = f.read().strip()
        except OSError:
            token = None
        auth_ok = token is not None and auth == f"Bearer {token}"
        self.record = {
            "method": method, "path": parsed.path, "query": query,
            "headers": {
                "Authorization": "Bearer <ok>" if auth_ok else "<bad>",
                "Content-Type": self.headers.get("Content-Type"),
                "Accept": self.headers.get("Accept"),
                "User-Agent": self.headers.get("User-Agent")},
            "body": raw.decode(errors="replace"), "code": 0,
            "time": time.time()}
        with self.state.lock:
            self.state.requests.append(self.record)
            inject = self.state.inject
            if inject and inject.get("method", method) != method:
                inject = None
            if inject:
                inject["count"] -= 1
                if inject["count"] <= 0:
                    self.state.inject = None
        if inject:
            time.sleep(inject.get("delay_seconds", 0))
            if inject.get("code"):
                self.fail(inject["code"], inject.get("reason", ""),
                          inject.get("message", ""))
                return
        if not auth_ok:
            self.fail(401, "Unauthorized", "Unauthorized")
            return
        if "application/json" not in (self.headers.get("Accept") or ""):
            self.fail(406, "NotAcceptable",
                      "only the following media types are accepted: "
                      "application/json")
            return
        match = JOBS_PATH.match(parsed.path)
        if not match:
            self.fail(404, "NotFound", "the server could not find the "
                      "requested resource")
            return
        namespace, name = match.groups()
        if method == "POST" and name is None:
            self.create(namespace, raw, query)
        elif method == "GET" and name is None:
            self.list(namespace, query)
        elif method == "GET":
            self.get(namespace, name)
        elif method == "DELETE" and name is not None:
            self.delete(namespace, name, raw, query)
        else:
            self.fail(405, "MethodNotAllowed",
                      f"the server does not allow this method on the "
                      f"requested resource")

    def create(self, namespace, raw, query):
        if self.headers.get("Content-Type", "").split(";")[0].strip() != \
                "application/json":
            self.fail(415, "UnsupportedMediaType",
                      f"the body of the request was in an unknown format - "
                      f"accepted media types include: application/json")
            return
        prefix = 'Job in version "v1" cannot be handled as a Job: '
        try:
            job = json.loads(raw)
        except ValueError as error:
            self.fail(400, "BadRequest", prefix + f"invalid JSON: {error}")
            return
        if not isinstance(job, dict):
            self.fail(400, "BadRequest", prefix + "json: cannot unmarshal "
                      "into Go value of type batch.Job")
            return
        if job.get("apiVersion") != "batch/v1" or job.get("kind") != "Job":
            self.fail(400, "BadRequest",
                      f"the API version in the data ({job.get('apiVersion')})"
                      f" does not match the expected API version (batch/v1)"
                      if job.get("apiVersion") != "batch/v1" else
                      f"the kind in the data ({job.get('kind')}) does not "
                      "match the expected kind (Job)")
            return
        problems = k8s_schema.problems_of(job, "V1Job")
        wrong_type = [p for p in problems if p.kind == "type"]
        if wrong_type:
            self.fail(400, "BadRequest", prefix + "json: cannot unmarshal: "
                      + wrong_type[0].message)
            return
        unknown = [p for p in problems if p.kind == "unknown"]
        warning = None
        if unknown:
            if query.get("fieldValidation") == "Strict":
                self.fail(400, "BadRequest", prefix + "strict decoding error: "
                          + ", ".join(f'unknown field "{p.path}"'
                                      for p in unknown))
                return
            warning = f'unknown field "{unknown[0].path}"'
        body_namespace = job.get("metadata", {}).get("namespace")
        if body_namespace and body_namespace != namespace:
            self.fail(400, "BadRequest", "the namespace of the provided "
                      "object does not match the namespace sent on the "
                      "request")
            return
        causes = [(p.path, "FieldValueRequired", "Required value")
                  for p in problems if p.kind == "required"]
        try:
            validate_job(job, causes)
        except BadRequest as error:
            self.fail(400, "BadRequest", prefix + str(error))
            return
        name = job.get("metadata", {}).get("name", "")
        if causes:
            self.fail(422, "Invalid", f'Job.batch "{name}" is invalid: ' +
                      ", ".join(f"{f}: {m}" for f, _, m in causes),
                      {"name": name, "group": "batch", "kind": "Job",
                       "causes": [{"reason": r, "message": m, "field": f}
                                  for f, r, m in causes]})
            return
        with self.state.lock:
            if (namespace, name) in self.state.jobs:
                self.fail(409, "AlreadyExists",
                          f'jobs.batch "{name}" already exists',
                          {"name": name, "group": "batch", "kind": "jobs"})
                return
            for part in (job, job.get("spec", {}).get("template", {})):
                part.setdefault("metadata", {})
            meta = job["metadata"]
            meta.update(namespace=namespace, uid=str(uuid.uuid4()),
                        creationTimestamp=now(),
                        resourceVersion=self.state.next_version(),
                        generation=1)
            uid = meta["uid"]
            template_labels = job["spec"]["template"]["metadata"].setdefault(
                "labels", {})
            template_labels.update({"controller-uid": uid, "job-name": name})
            job["spec"].setdefault("selector",
                                   {"matchLabels": {"controller-uid": uid}})
            job["status"] = {}
            self.state.jobs[(namespace, name)] = job
            self.answer(201, job, warning)

    def list(self, namespace, query):
        selector = query.get("labelSelector", "")
        with self.state.lock:
            items = [dict((k, v) for k, v in job.items()
                          if k not in ("kind", "apiVersion"))
                     for (ns, _), job in sorted(self.state.jobs.items())
                     if ns == namespace and selector_matches(
                         selector, job["metadata"].get("labels", {}))]
            version = str(self.state.resource_version)
        self.answer(200, {"kind": "JobList", "apiVersion": "batch/v1",
                          "metadata": {"resourceVersion": version},
                          "items": items})

    def get(self, namespace, name):
        with self.state.lock:
            job = self.state.jobs.get((namespace, name))
            if job is None:
                self.fail(404, "NotFound", f'jobs.batch "{name}" not found',
                          {"name": name, "group": "batch", "kind": "jobs"})
                return
            self.answer(200, job)

    def delete(self, namespace, name, raw, query):
        policy = query.get("propagationPolicy")
        if raw:
            try:
                options = json.loads(raw)
            except ValueError as error:
                self.fail(400, "BadRequest", f"invalid JSON: {error}")
                return
            problems = k8s_schema.problems_of(options, "V1DeleteOptions")
            if problems:
                self.fail(400, "BadRequest", problems[0].message)
                return
            policy = options.get("propagationPolicy", policy)
        if policy not in (None, "Orphan", "Background", "Foreground"):
            self.fail(400, "BadRequest", f"propagationPolicy: Unsupported "
                      f"value: \"{policy}\"")
            return
        with self.state.lock:
            job = self.state.jobs.pop((namespace, name), None)
            if job is None:
                self.fail(404, "NotFound", f'jobs.batch "{name}" not found',
                          {"name": name, "group": "batch", "kind": "jobs"})
                return
            self.answer(200, status_object(
                200, "", "", {"name": name, "group": "batch", "kind": "jobs",
                              "uid": job["metadata"]["uid"]}))

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_PATCH(self):
        self.handle_any("PATCH")


class ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    state = None

    def log_message(self, fmt, *args):
        pass

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with self.state.lock:
            if self.path == "/requests":
                self.answer(200, self.state.requests)
            elif self.path == "/jobs":
                self.answer(200, list(self.state.jobs.values()))
            else:
                self.answer(404, {"error": f"no control path {self.path}"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError as error:
            self.answer(400, {"error": str(error)})
            return
        match = re.match(r"^/jobs/([^/]+)/([^/]+)/status$", self.path)
        with self.state.lock:
            if match:
                problems = k8s_schema.problems_of(body, "V1JobStatus")
                if problems:
                    self.answer(400, {"error": problems[0].message})
                    return
                job = self.state.jobs.get(match.groups())
                if job is None:
                    self.answer(404, {"error": "no such job"})
                    return
                job["status"] = body
                job["metadata"]["resourceVersion"] = \
                    self.state.next_version()
                self.answer(200, job)
            elif self.path == "/inject":
                body.setdefault("count", 1)
                self.state.inject = body
                self.answer(200, body)
            else:
                self.answer(404, {"error": f"no control path {self.path}"})


class TlsServer(http.server.ThreadingHTTPServer):
    """Completes each TLS handshake on the connection's own thread, so a
    slow or failing client (one that does not trust the certificate) does
    not hold up the others."""

    context = None
    daemon_threads = True

    def finish_request(self, request, client_address):
        try:
            request = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass  # a client hanging up mid-request; nothing to report


def make_certificate(directory):
    """A self-signed certificate for 127.0.0.1 and localhost (its own CA)."""
    cert = os.path.join(directory, "ca.crt")
    key = os.path.join(directory, "server.key")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
         "-days", "2", "-subj", "/CN=fake-k8s-api",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True)
    return cert, key


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--dir", required=True,
                        help="where the certificate is made")
    parser.add_argument("--cert", help="PEM certificate (with --key)")
    parser.add_argument("--key")
    args = parser.parse_args()
    if args.cert:
        cert, key = args.cert, args.key
    else:
        cert, key = make_certificate(args.dir)
    state = State(args.token_file)
    ApiHandler.state = state
    ControlHandler.state = state
    TlsServer.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    TlsServer.context.load_cert_chain(cert, key)
    api = TlsServer(("127.0.0.1", 0), ApiHandler)
    control = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                              ControlHandler)
    control.daemon_threads = True
    threading.Thread(target=control.serve_forever, daemon=True).start()
    print(f"fake-k8s-api listening api=https://127.0.0.1:"
          f"{api.server_address[1]} control=127.0.0.1:"
          f"{control.server_address[1]} ca={cert}", flush=True)
    api.serve_forever()


if __name__ == "__main__":
    main()
