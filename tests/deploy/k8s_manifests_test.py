#!/usr/bin/python3
"""deploy/k8s/ and its scale-out overlay against the Kubernetes API schema,
without a cluster.

  k8s_manifests_test.py SOURCE_DIR BNN_SERVER [KUBECTL]

Each of deploy/k8s (single node) and deploy/k8s/scale-out (replicas on
PostgreSQL, training as Kubernetes Jobs; both list deploy/k8s/common) is
built as `kubectl apply -k` would build it, for the subset of kustomize
they use (build(): resources that are files of the directory or
directories with a kustomization.yaml; any other field fails), and, given
KUBECTL, by `kubectl kustomize` too, which must make the same objects. Every object is an API
object: its apiVersion and kind must name a resource of the Kubernetes
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
not in python3-kubernetes: SCHEMAS["ServiceMonitor"] is a hand-written schema of the
fields used, from the prometheus-operator API reference
(https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitor).

Then the objects of each build are checked against each other: each
Deployment's selector matches its pods; the ConfigMaps, Secrets (and
secretKeyRef keys), claims and ServiceAccounts it names exist; a claim
mounted by several replicas is ReadWriteMany; --blob-dir is a claim's
mount; $(VAR) in args is in the container's env; each Service,
PodDisruptionBudget and NetworkPolicy selects some Deployment's pods and
names ports they have; a PodDisruptionBudget's minAvailable is below the
replicas; each ServiceMonitor's port is a port of the Services it selects,
and every Deployment is scraped; RoleBindings name existing Roles and
ServiceAccounts; a server with --job-runner=kubernetes has its token
mounted and runs as a ServiceAccount bound to a Role granting what the
Kubernetes job launcher does with Jobs, and the --kubernetes-config it
reads (a mounted ConfigMap key) names a Secret key, a ReadWriteMany claim
(the one that server mounts at --blob-dir) and a ServiceAccount that
exist; any other pod mounts no token. Each kustomization.yaml lists
exactly the manifest files of its directory, and every bnn-server flag the
Deployments and the ConfigMap pass is one `bnn-server --helpfull` lists.
"""

import json
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
    match = (selector or {}).get("matchLabels", {})
    return all(labels.get(k) == v for k, v in match.items())


def arg_value(args, flag):
    """The value of --flag=VALUE in a container's args, or None."""
    for arg in args:
        if arg.startswith(f"--{flag}="):
            return arg.split("=", 1)[1]
    return None


def mounted_volume(pod, container, path):
    """The pod volume the container mounts at `path` (or under it, with the
    path inside the volume), as (volume, rest), or (None, None)."""
    best = None
    for mount in container.get("volumeMounts", []):
        mount_path = mount["mountPath"].rstrip("/")
        if path == mount_path or path.startswith(mount_path + "/"):
            if best is None or len(mount_path) > len(best["mountPath"]):
                best = mount
    if best is None:
        return None, None
    volume = next((v for v in pod.get("volumes", [])
                   if v["name"] == best["name"]), None)
    return volume, path[len(best["mountPath"].rstrip("/")):].lstrip("/")


def secret_keys(secret):
    return set(secret.get("data", {})) | set(secret.get("stringData", {}))


def launcher_config(by_kind, pod, container):
    """The --kubernetes-config file a container reads, from the ConfigMap
    mounted at its path, as (description, parsed JSON), or None."""
    path = arg_value(container.get("args", []), "kubernetes-config")
    if path is None:
        return None
    volume, key = mounted_volume(pod, container, path)
    if not check(volume is not None and "configMap" in volume,
                 f"--kubernetes-config={path} is a file of a mounted "
                 "ConfigMap"):
        return None
    config_map = by_kind.get("ConfigMap", {}).get(volume["configMap"]["name"])
    if not check(config_map is not None and
                 key in config_map.get("data", {}),
                 f"--kubernetes-config={path}: ConfigMap "
                 f"{volume['configMap']['name']} has the key {key}"):
        return None
    return f"ConfigMap {volume['configMap']['name']} {key}", json.loads(
        config_map["data"][key])


def check_deployment(by_kind, dep):
    """One Deployment's references to the other objects."""
    name = dep["metadata"]["name"]
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    check(labels_match(spec["selector"], spec["template"]["metadata"]
                       ["labels"]),
          f"Deployment {name}: selector matches its pod labels")
    ports = {p["name"]: p["containerPort"]
             for c in pod["containers"] for p in c.get("ports", [])}
    claims = by_kind.get("PersistentVolumeClaim", {})
    for vol in pod.get("volumes", []):
        for key, kind, field in (("secret", "Secret", "secretName"),
                                 ("configMap", "ConfigMap", "name"),
                                 ("persistentVolumeClaim",
                                  "PersistentVolumeClaim", "claimName")):
            if key in vol:
                ref = vol[key][field]
                check(ref in by_kind.get(kind, {}),
                      f"Deployment {name}: volume {vol['name']} names "
                      f"{kind} {ref}, which is not in the manifests")
        claim = claims.get(vol.get("persistentVolumeClaim", {}).get(
            "claimName"))
        if claim is not None and spec.get("replicas", 1) > 1:
            check("ReadWriteMany" in claim["spec"]["accessModes"],
                  f"Deployment {name}: {spec['replicas']} replicas mount "
                  f"claim {claim['metadata']['name']}, which is not "
                  "ReadWriteMany")
    for container in pod["containers"]:
        where = f"Deployment {name} container {container['name']}"
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None:
                secret = by_kind.get("Secret", {}).get(ref["name"])
                check(secret is not None and ref["key"] in secret_keys(secret),
                      f"{where}: env {env['name']} names Secret "
                      f"{ref['name']} key {ref['key']}, which is not in the "
                      "manifests")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            grpc = container.get(probe, {}).get("grpc")
            if grpc:
                check(grpc["port"] in ports.values(),
                      f"{where} {probe}: port {grpc['port']} is a "
                      "container port")
        args = container.get("args", [])
        for arg in args:
            # $(VAR) in args is expanded from the container's env only.
            for var in re.findall(r"\$\((\w+)\)", arg):
                check(any(e["name"] == var for e in container.get("env", [])),
                      f"{where}: {arg} uses $({var}), which its env lacks")
        blob_dir = arg_value(args, "blob-dir")
        if blob_dir is not None:
            volume, rest = mounted_volume(pod, container, blob_dir)
            check(volume is not None and rest == "" and
                  "persistentVolumeClaim" in volume,
                  f"{where}: --blob-dir={blob_dir} is the mount of a claim")
        kubernetes_mode = arg_value(args, "job-runner") == "kubernetes"
        account = accounts_token(by_kind, pod)
        if not kubernetes_mode:
            check(not account,
                  f"{where}: mounts a service-account token it has no use "
                  "for (only --job-runner=kubernetes calls the API)")
            continue
        check(account, f"{where}: --job-runner=kubernetes needs the "
              "service-account token (automountServiceAccountToken: true)")
        config = launcher_config(by_kind, pod, container)
        if config is not None:
            check_launcher_config(by_kind, pod, container, *config)


def accounts_token(by_kind, pod):
    """Whether the pod gets its ServiceAccount's token mounted."""
    if "automountServiceAccountToken" in pod:
        return pod["automountServiceAccountToken"]
    account = by_kind.get("ServiceAccount", {}).get(
        pod.get("serviceAccountName", "default"), {})
    return account.get("automountServiceAccountToken", True)


def check_launcher_config(by_kind, pod, container, where, config):
    """What the launcher's Jobs will refer to exists, and the training pods
    share the blob volume of the server that launches them."""
    secret_name = config.get("metadata_secret_name", "bnn-metadata")
    secret_key = config.get("metadata_secret_key", "uri")
    secret = by_kind.get("Secret", {}).get(secret_name)
    check(secret is not None and secret_key in secret_keys(secret),
          f"{where}: metadata_secret_name {secret_name} (key {secret_key}) "
          "is a Secret of the manifests")
    claim_name = config.get("blob_pvc_name", "bnn-blobs")
    claim = by_kind.get("PersistentVolumeClaim", {}).get(claim_name)
    if check(claim is not None, f"{where}: blob_pvc_name {claim_name} is a "
             "claim of the manifests"):
        check("ReadWriteMany" in claim["spec"]["accessModes"],
              f"{where}: blob_pvc_name {claim_name} is ReadWriteMany (the "
              "training pods and the servers mount it on any node)")
    blob_dir = arg_value(container.get("args", []), "blob-dir")
    volume, _ = mounted_volume(pod, container, blob_dir or "")
    check(volume is not None and volume.get("persistentVolumeClaim", {}).get(
        "claimName") == claim_name,
          f"{where}: the launching server's --blob-dir is claim "
          f"{claim_name} too")
    account = config.get("service_account")
    if account:
        check(account in by_kind.get("ServiceAccount", {}),
              f"{where}: service_account {account} is a ServiceAccount of "
              "the manifests")


def selected_deployments(by_kind, selector):
    return [d for d in by_kind.get("Deployment", {}).values()
            if labels_match(selector,
                            d["spec"]["template"]["metadata"]["labels"])]


def pod_ports(dep):
    return {p["name"]: p["containerPort"]
            for c in dep["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])}


def cross_check(objects):
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    if not check(by_kind.get("Deployment"), "a Deployment exists"):
        return
    for dep in by_kind["Deployment"].values():
        check_deployment(by_kind, dep)
    # Each Service, PodDisruptionBudget and NetworkPolicy selects the pods
    # of some Deployment, and the ports it names are theirs.
    selectors = {
        "Service": lambda o: {"matchLabels": o["spec"].get("selector", {})},
        "PodDisruptionBudget": lambda o: o["spec"]["selector"],
        "NetworkPolicy": lambda o: o["spec"]["podSelector"],
    }
    ports_named = {
        "Service": lambda o: [p["targetPort"] for p in o["spec"]["ports"]],
        "PodDisruptionBudget": lambda o: [],
        "NetworkPolicy": lambda o: [p["port"]
                                    for rule in o["spec"].get("ingress", [])
                                    for p in rule.get("ports", [])],
    }
    for kind, selector_of in selectors.items():
        for name, obj in by_kind.get(kind, {}).items():
            selected = selected_deployments(by_kind, selector_of(obj))
            if not check(selected, f"{kind} {name} selects a Deployment's "
                         "pods"):
                continue
            for port in ports_named[kind](obj):
                for dep in selected:
                    ports = pod_ports(dep)
                    check(port in ports or port in ports.values(),
                          f"{kind} {name}: port {port} is a port of "
                          f"Deployment {dep['metadata']['name']}")
            if kind != "PodDisruptionBudget":
                continue
            replicas = sum(d["spec"].get("replicas", 1) for d in selected)
            # minAvailable equal to the replicas blocks every drain.
            minimum = obj["spec"].get("minAvailable")
            if isinstance(minimum, int):
                check(minimum < replicas,
                      f"PodDisruptionBudget {name}: minAvailable {minimum} "
                      f"< the {replicas} replicas it selects")
    check_rbac(by_kind)
    scraped = set()
    for name, monitor in by_kind.get("ServiceMonitor", {}).items():
        services = [s for s in by_kind.get("Service", {}).values()
                    if labels_match(monitor["spec"]["selector"],
                                    s["metadata"].get("labels", {}))]
        if not check(services, f"ServiceMonitor {name} selects a Service"):
            continue
        for endpoint in monitor["spec"]["endpoints"]:
            for service in services:
                check(endpoint.get("port") in
                      {p["name"] for p in service["spec"]["ports"]},
                      f"ServiceMonitor {name}: port {endpoint.get('port')} "
                      f"is a port name of Service "
                      f"{service['metadata']['name']}")
                scraped.update(
                    d["metadata"]["name"] for d in selected_deployments(
                        by_kind,
                        {"matchLabels": service["spec"].get("selector", {})}))
    if by_kind.get("ServiceMonitor"):
        for name, dep in by_kind["Deployment"].items():
            check(name in scraped, f"Deployment {name}: a ServiceMonitor "
                  "scrapes its pods (through a Service)")


# What the Kubernetes job launcher does with batch/v1 Jobs
# (server/jobs/kubernetes/job_launcher.h): create (and get, on a relaunch),
# list (its monitor), delete (CancelJob), and watch (common/rbac.yaml says
# why).
JOB_RUNNER_VERBS = {"create", "get", "list", "watch", "delete"}


def rule_grants(rule, group, resource, verbs):
    def has(key, value):
        return value in rule.get(key, []) or "*" in rule.get(key, [])
    return (has("apiGroups", group) and has("resources", resource) and
            all(has("verbs", verb) for verb in verbs))


def check_rbac(by_kind):
    """Bindings name existing Roles and ServiceAccounts, every Deployment
    runs as an existing ServiceAccount, and that of a server with
    --job-runner=kubernetes may do what the job launcher does with Jobs."""
    accounts = by_kind.get("ServiceAccount", {})
    roles = by_kind.get("Role", {})
    granted = {}  # service account -> rules bound to it
    for name, binding in by_kind.get("RoleBinding", {}).items():
        ref = binding["roleRef"]
        if not check(ref["kind"] == "Role" and ref["name"] in roles and
                     ref["apiGroup"] == "rbac.authorization.k8s.io",
                     f"RoleBinding {name}: roleRef names Role "
                     f"{ref['name']} of the manifests"):
            continue
        for subject in binding.get("subjects", []):
            if subject["kind"] != "ServiceAccount":
                continue
            check(subject["name"] in accounts,
                  f"RoleBinding {name}: ServiceAccount {subject['name']} "
                  "is in the manifests")
            granted.setdefault(subject["name"], []).extend(
                roles[ref["name"]].get("rules", []))
    for dep in by_kind.get("Deployment", {}).values():
        pod = dep["spec"]["template"]["spec"]
        account = pod.get("serviceAccountName")
        if not check(account in accounts,
                     f"Deployment {dep['metadata']['name']}: runs as a "
                     f"ServiceAccount of the manifests ({account})"):
            continue
        if not any(arg_value(c.get("args", []), "job-runner") == "kubernetes"
                   for c in pod["containers"]):
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
                used += [(f"Deployment {obj['metadata']['name']} "
                          f"{container['name']} args", a)
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


# The kustomization fields this test builds; any other fails.
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "namespace", "resources",
                        "images"}


def load_manifest(path, where):
    """The API objects of one manifest file, each checked alone."""
    objects = []
    for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
        if doc is None:
            continue
        at = f"{where}[{index}] {doc.get('kind')}"
        api_version, kind = doc.get("apiVersion", ""), doc.get("kind", "")
        schema = CUSTOM_KINDS.get((api_version, kind)) or api_class(
            api_version, kind)
        if not check(schema, f"{at}: {api_version} {kind} is not a known "
                     "resource"):
            continue
        check(doc.get("metadata", {}).get("name"), f"{at}: has a name")
        check(not doc.get("metadata", {}).get("namespace"),
              f"{at}: no namespace (kustomization.yaml sets it)")
        check_object(doc, schema, at)
        objects.append(doc)
    return objects


def object_id(obj):
    return (obj.get("apiVersion"), obj.get("kind"),
            obj.get("metadata", {}).get("name"))


def build(directory, root):
    """The objects `kustomize build DIRECTORY` makes, for the subset of
    kustomize used here: resources that are files of the directory or
    directories with a kustomization.yaml (built first). Any other field
    fails. The namespace and image transformers change nothing this test
    looks at."""
    where = directory.relative_to(root)
    kustomization = yaml.safe_load(
        (directory / "kustomization.yaml").read_text())
    unknown = sorted(set(kustomization) - KUSTOMIZATION_FIELDS)
    check(not unknown, f"{where}/kustomization.yaml fields {unknown} are not "
          "ones this test knows")
    check(kustomization.get("kind") == "Kustomization" and
          kustomization.get("apiVersion") ==
          "kustomize.config.k8s.io/v1beta1",
          f"{where}/kustomization.yaml header")
    listed = kustomization.get("resources", [])
    files = sorted(p.name for p in directory.glob("*.yaml")
                   if p.name != "kustomization.yaml")
    check(sorted(r for r in listed if not (directory / r).is_dir()) == files,
          f"{where}/kustomization.yaml lists every manifest of its "
          f"directory: {listed} vs {files}")
    objects = []
    for resource in listed:
        path = directory / resource
        if path.is_dir():
            check((path / "kustomization.yaml").exists(),
                  f"{where}: resource {resource} is a kustomization")
            objects += build(path.resolve(), root)
        elif check(path.resolve().parent == directory and path.exists(),
                   f"{where}: resource {resource} is a file of the "
                   "directory (kustomize refuses files outside it)"):
            objects += load_manifest(path, f"{where}/{resource}")
    ids = [object_id(o) for o in objects]
    check(len(ids) == len(set(ids)), f"{where}: no object twice: {ids}")
    return objects


def check_kubectl_build(kubectl, directory, objects, where):
    """`kubectl kustomize DIRECTORY` (kustomize itself, no cluster) makes
    the same objects as build(), each in the kustomization's namespace."""
    result = subprocess.run([kubectl, "kustomize", str(directory)],
                            capture_output=True, text=True, check=False,
                            timeout=60)
    if not check(result.returncode == 0, f"{where}: kubectl kustomize: "
                 f"{result.stderr.strip()[-500:]}"):
        return
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    check(sorted(map(object_id, built)) == sorted(map(object_id, objects)),
          f"{where}: kubectl kustomize makes the objects this test built: "
          f"{sorted(map(object_id, built))} vs "
          f"{sorted(map(object_id, objects))}")
    for obj in built:
        if obj["kind"] != "Namespace":
            check(obj["metadata"].get("namespace") == "bnn-serve",
                  f"{where}: {object_id(obj)} is in namespace bnn-serve")


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    server = sys.argv[2]
    kubectl = sys.argv[3] if len(sys.argv) > 3 else None
    if kubectl is None:
        print("no kubectl: the trees are not built by kustomize itself")
    for tree in ("deploy/k8s", "deploy/k8s/scale-out"):
        before = len(failures)
        objects = build(root / tree, root)
        print(f"{tree}: {len(objects)} objects built", flush=True)
        if kubectl is not None:
            check_kubectl_build(kubectl, root / tree, objects, tree)
        if len(failures) == before:
            cross_check(objects)
            check_server_flags(objects, server)
        print(f"{tree}: {len(failures) - before} failures", flush=True)
    print(f"k8s_manifests_test: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
