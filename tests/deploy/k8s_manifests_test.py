#!/usr/bin/python3
"""deploy/k8s/ against the Kubernetes API schema, without a cluster.

  k8s_manifests_test.py SOURCE_DIR BNN_SERVER

Every YAML document under deploy/k8s/ (except kustomization.yaml) is an API
object. Its apiVersion and kind must name a resource of the Kubernetes
Python client (Debian python3-kubernetes 22.6: the group's API class, e.g.
AppsV1Api, has a create_[namespaced_]<kind> method) and its body is checked
recursively against the client's model class (V1Deployment, ...):
every field name must be in the model's attribute_map (an unknown or
misspelt field fails, naming its path), every required field (those whose
setter refuses None) must be present, and each value's type must fit the
model's openapi_types (str, int, bool, list[...], dict(str, ...), nested
models; `object` is IntOrString or free-form).

The schema checks are tests/test_util/k8s_schema.py's (shared with the fake
API server of the Kubernetes launcher's tests); fields newer than the
client's Kubernetes 1.22 models are added by hand there in NEWER_FIELDS, each
with the Kubernetes version and API reference that define it. The ServiceMonitor (monitoring.coreos.com/v1) is
not in python3-kubernetes: SERVICE_MONITOR is a hand-written schema of the
fields used, from the prometheus-operator API reference
(https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitor).

Then the objects are checked against each other (selectors match the pod
labels, referenced ConfigMaps, Secrets, claims and named ports exist, the
RoleBindings name existing Roles and ServiceAccounts, and the Deployment's
ServiceAccount may create/get/list/watch/delete batch/v1 Jobs, as the
Kubernetes job launcher does),
kustomization.yaml lists exactly the manifest files, and every bnn-server
flag the Deployment and the ConfigMap pass is one `bnn-server --helpfull`
lists.
"""

import pathlib
import re
import subprocess
import sys
import tempfile

import kubernetes.client as k8s
import yaml

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return condition


# The schema checks, shared with the fake API server of the launcher tests
# (tests/test_util/fake_k8s_api.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] /
                       "test_util"))
import k8s_schema  # noqa: E402
from k8s_schema import SCHEMAS  # noqa: E402

SCHEMAS["ServiceMonitor"] = {
    "fields": {"apiVersion": "str", "kind": "str",
               "metadata": "V1ObjectMeta", "spec": "ServiceMonitorSpec"},
    "required": {"apiVersion", "kind", "spec"},
}
SCHEMAS["ServiceMonitorSpec"] = {
    "fields": {"selector": "V1LabelSelector",
               "namespaceSelector": "NamespaceSelector",
               "endpoints": "list[Endpoint]", "jobLabel": "str",
               "targetLabels": "list[str]", "podTargetLabels": "list[str]",
               "sampleLimit": "int"},
    "required": {"selector", "endpoints"},
}
SCHEMAS["NamespaceSelector"] = {
    "fields": {"any": "bool", "matchNames": "list[str]"},
    "required": set(),
}
SCHEMAS["Endpoint"] = {
    "fields": {"port": "str", "targetPort": "object", "path": "str",
               "scheme": "str", "interval": "str", "scrapeTimeout": "str",
               "honorLabels": "bool", "honorTimestamps": "bool",
               "params": "dict(str, list[str])"},
    "required": set(),
}
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"):
                "ServiceMonitor"}


def check_object(body, schema_name, path):
    for problem in k8s_schema.problems_of(body, schema_name):
        check(False, f"{path}.{problem.message}")


def api_class(api_version, kind):
    """The client's model class name for apiVersion/kind, or None."""
    group, _, version = api_version.rpartition("/")
    # "apps" -> Apps, "rbac.authorization.k8s.io" -> RbacAuthorization.
    group_part = "".join(w.capitalize() for w in re.split(
        r"[.-]", group.removesuffix(".k8s.io"))) or "Core"
    api = getattr(k8s, f"{group_part}{version.capitalize()}Api", None)
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()
    if api is None or not (hasattr(api, f"create_namespaced_{snake}") or
                           hasattr(api, f"create_{snake}")):
        return None
    return f"{version.capitalize()}{kind}"


def labels_match(selector, labels):
    return all(labels.get(k) == v
               for k, v in (selector or {}).get("matchLabels", {}).items())


def cross_check(objects):
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    deployments = list(by_kind.get("Deployment", {}).values())
    if not check(deployments, "a Deployment exists"):
        return
    for dep in deployments:
        name = dep["metadata"]["name"]
        spec = dep["spec"]
        pod_labels = spec["template"]["metadata"]["labels"]
        check(labels_match(spec["selector"], pod_labels),
              f"Deployment {name}: selector matches its pod labels")
        pod = spec["template"]["spec"]
        ports = {p["name"]: p["containerPort"]
                 for c in pod["containers"] for p in c.get("ports", [])}
        for vol in pod.get("volumes", []):
            for key, kind, field in (("secret", "Secret", "secretName"),
                                     ("configMap", "ConfigMap", "name"),
                                     ("persistentVolumeClaim",
                                      "PersistentVolumeClaim", "claimName")):
                if key in vol:
                    ref = vol[key][field]
                    check(ref in by_kind.get(kind, {}),
                          f"Deployment {name}: volume {vol['name']} names "
                          f"{kind} {ref}, which is not in deploy/k8s")
        for container in pod["containers"]:
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                grpc = container.get(probe, {}).get("grpc")
                if grpc:
                    check(grpc["port"] in ports.values(),
                          f"{name} {probe}: port {grpc['port']} is a "
                          "container port")
        for kind in ("Service", "PodDisruptionBudget", "ServiceMonitor"):
            for other in by_kind.get(kind, {}).values():
                spec_other = other["spec"]
                selector = spec_other.get("selector", {})
                if kind == "Service":
                    selector = {"matchLabels": selector}
                    for port in spec_other["ports"]:
                        check(port["targetPort"] in ports or
                              port["targetPort"] in ports.values(),
                              f"Service {other['metadata']['name']}: "
                              f"targetPort {port['targetPort']} exists")
                check(labels_match(selector, pod_labels),
                      f"{kind} {other['metadata']['name']} selects the "
                      f"Deployment's pods")
        for policy in by_kind.get("NetworkPolicy", {}).values():
            check(labels_match(policy["spec"]["podSelector"], pod_labels),
                  "NetworkPolicy selects the Deployment's pods")
            for rule in policy["spec"].get("ingress", []):
                for port in rule.get("ports", []):
                    check(port["port"] in ports or port["port"] in
                          ports.values(),
                          f"NetworkPolicy port {port['port']} exists")
    check_rbac(by_kind)
    for monitor in by_kind.get("ServiceMonitor", {}).values():
        service_ports = {p["name"] for s in by_kind.get("Service", {}).values()
                         for p in s["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            check(endpoint.get("port") in service_ports,
                  f"ServiceMonitor port {endpoint.get('port')} is a Service "
                  "port name")


# What the Kubernetes job launcher does with batch/v1 Jobs
# (server/jobs/kubernetes/job_launcher.h): create (and get, on a relaunch),
# list (its monitor), delete (CancelJob), and watch (rbac.yaml says why).
JOB_RUNNER_VERBS = {"create", "get", "list", "watch", "delete"}


def rule_grants(rule, group, resource, verbs):
    def has(key, value):
        return value in rule.get(key, []) or "*" in rule.get(key, [])
    return (has("apiGroups", group) and has("resources", resource) and
            all(has("verbs", verb) for verb in verbs))


def check_rbac(by_kind):
    """Bindings name existing Roles and ServiceAccounts, and the account the
    Deployment runs as may do what the job launcher does with Jobs."""
    accounts = by_kind.get("ServiceAccount", {})
    roles = by_kind.get("Role", {})
    granted = {}  # service account -> rules bound to it
    for name, binding in by_kind.get("RoleBinding", {}).items():
        ref = binding["roleRef"]
        if not check(ref["kind"] == "Role" and ref["name"] in roles and
                     ref["apiGroup"] == "rbac.authorization.k8s.io",
                     f"RoleBinding {name}: roleRef names Role "
                     f"{ref['name']} of deploy/k8s"):
            continue
        for subject in binding.get("subjects", []):
            if subject["kind"] != "ServiceAccount":
                continue
            check(subject["name"] in accounts,
                  f"RoleBinding {name}: ServiceAccount {subject['name']} "
                  "is in deploy/k8s")
            granted.setdefault(subject["name"], []).extend(
                roles[ref["name"]].get("rules", []))
    for dep in by_kind.get("Deployment", {}).values():
        account = dep["spec"]["template"]["spec"].get("serviceAccountName")
        if not check(account in accounts,
                     f"Deployment {dep['metadata']['name']}: runs as a "
                     f"ServiceAccount of deploy/k8s ({account})"):
            continue
        check(any(rule_grants(rule, "batch", "jobs", JOB_RUNNER_VERBS)
                  for rule in granted.get(account, [])),
              f"ServiceAccount {account} may "
              f"{'/'.join(sorted(JOB_RUNNER_VERBS))} batch/v1 jobs "
              "(--job-runner=kubernetes)")


def check_server_flags(objects, server):
    helpfull = subprocess.run([server, "--helpfull"], capture_output=True,
                              text=True, check=False).stdout
    known = set(re.findall(r"^\s+--(\w+) \(", helpfull, re.MULTILINE))
    check(len(known) > 30, f"bnn-server --helpfull lists flags ({len(known)})")
    used = []
    for obj in objects:
        if obj["kind"] == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                used += [(f"Deployment {container['name']} args", a)
                         for a in container.get("args", [])]
        if obj["kind"] == "ConfigMap":
            for key, text in obj.get("data", {}).items():
                if key.endswith(".flags"):
                    used += [(f"ConfigMap {key}", line)
                             for line in text.splitlines() if line.strip()]
                    # Flag files take the underscore spelling only.
                    for line in text.splitlines():
                        check("-" not in line.strip()[2:].split("=")[0],
                              f"ConfigMap {key}: {line!r} uses underscores")
    check(used, "the manifests pass bnn-server flags")
    # A launcher config (--kubernetes-config) is one bnn-server accepts: it
    # gets past the flag checks (and fails later, at the unreachable store).
    for obj in objects:
        if obj["kind"] != "ConfigMap":
            continue
        for key, text in obj.get("data", {}).items():
            if not key.startswith("kubernetes-launcher"):
                continue
            with tempfile.TemporaryDirectory() as tmp:
                config = pathlib.Path(tmp) / key
                config.write_text(text)
                result = subprocess.run(
                    [server, f"--data-dir={tmp}/data", f"--blob-dir={tmp}",
                     "--metadata=postgres://bnn@127.0.0.1:1/bnn",
                     "--job-runner=kubernetes", "--metrics-listen=",
                     f"--kubernetes-config={config}"],
                    capture_output=True, text=True, check=False, timeout=30)
                check(result.returncode != 0 and
                      "--kubernetes-config" not in result.stderr,
                      f"ConfigMap {key} is a valid --kubernetes-config: "
                      f"{result.stderr.strip()[-300:]}")
    for where, arg in used:
        match = re.match(r"--([\w-]+)(=|$)", arg)
        if check(match, f"{where}: {arg!r} is a --flag[=value]"):
            check(match.group(1).replace("-", "_") in known,
                  f"{where}: {arg!r} is not a bnn-server flag")


def main():
    root = pathlib.Path(sys.argv[1])
    server = sys.argv[2]
    k8s_dir = root / "deploy/k8s"
    files = sorted(p.name for p in k8s_dir.glob("*.yaml"))
    kustomization = yaml.safe_load((k8s_dir / "kustomization.yaml").read_text())
    allowed = {"apiVersion", "kind", "namespace", "resources", "images",
               "labels", "commonLabels", "configMapGenerator",
               "secretGenerator", "patches"}
    check(not set(kustomization) - allowed,
          f"kustomization.yaml fields {sorted(set(kustomization) - allowed)}"
          " are not ones this test knows")
    check(kustomization.get("kind") == "Kustomization" and
          kustomization.get("apiVersion") ==
          "kustomize.config.k8s.io/v1beta1", "kustomization.yaml header")
    listed = kustomization.get("resources", [])
    check(sorted(listed) == sorted(f for f in files
                                   if f != "kustomization.yaml"),
          f"kustomization.yaml lists every manifest: {listed} vs {files}")

    objects = []
    for name in files:
        if name == "kustomization.yaml":
            continue
        for index, doc in enumerate(yaml.safe_load_all(
                (k8s_dir / name).read_text())):
            if doc is None:
                continue
            where = f"{name}[{index}] {doc.get('kind')}"
            api_version, kind = doc.get("apiVersion", ""), doc.get("kind", "")
            schema = CUSTOM_KINDS.get((api_version, kind)) or api_class(
                api_version, kind)
            if not check(schema, f"{where}: {api_version} {kind} is not a "
                                 "known resource"):
                continue
            check(doc.get("metadata", {}).get("name"), f"{where}: has a name")
            check(not doc.get("metadata", {}).get("namespace"),
                  f"{where}: no namespace (kustomization.yaml sets it)")
            check_object(doc, schema, where)
            objects.append(doc)
    print(f"{len(objects)} objects in {len(files) - 1} files checked",
          flush=True)
    if not failures:
        cross_check(objects)
        check_server_flags(objects, server)
    print(f"k8s_manifests_test: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
