"""Kubernetes API objects checked against the models of python3-kubernetes.

One implementation for the manifest test (tests/deploy/k8s_manifests_test.py)
and the fake API server (tests/test_util/fake_k8s_api.py): a body is checked
recursively against the client's model class (V1Deployment, V1Job, ...):
every field name must be in the model's attribute_map (an unknown or
misspelt field is reported with its path), every required field (those whose
setter refuses None) must be present, and each value's type must fit the
model's openapi_types (str, int, bool, list[...], dict(str, ...), nested
models; `object` is IntOrString or free-form).

The models are those of Debian python3-kubernetes 22.6 (Kubernetes 1.22).
Fields newer than that which bnn-serve writes are added by hand in
NEWER_FIELDS, each with the Kubernetes version and API reference that define
it; schemas of kinds the client lacks (custom resources) can be added to
SCHEMAS by the caller.
"""

import inspect
import re

import kubernetes.client as k8s

# A schema: {"fields": {json_name: type}, "required": {json_name}}, where a
# type is "str", "int", "bool", "float", "object", "datetime", "list[T]",
# "dict(str, T)", a kubernetes client model name, or a schema name in
# SCHEMAS.
SCHEMAS = {}

# Kubernetes fields newer than python3-kubernetes 22.6 (Kubernetes 1.22).
NEWER_FIELDS = {
    # Probe.grpc: gRPC health checking probes, alpha 1.23, beta (on by
    # default) 1.24, GA 1.27.
    # https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe
    "V1Probe": {"grpc": "GRPCAction"},
    # JobStatus.ready: pods of the Job with the Ready condition, beta (on by
    # default) 1.24, GA 1.29.
    # https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/#JobStatus
    "V1JobStatus": {"ready": "int"},
}
SCHEMAS["GRPCAction"] = {
    # https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe
    # grpc.port (int32, required), grpc.service (string).
    "fields": {"port": "int", "service": "str"},
    "required": {"port"},
}


class Problem:
    """One way a body does not fit its schema.

    kind: "unknown" (a field the model does not have), "type" (a value of
    the wrong JSON type) or "required" (a required field missing); path:
    the field's path from the checked object ("spec.template.spec");
    message: the problem in words, with the path.
    """

    def __init__(self, kind, path, message):
        self.kind = kind
        self.path = path
        self.message = message

    def __repr__(self):
        return f"Problem({self.kind}, {self.path!r}, {self.message!r})"


def model_schema(name):
    """The schema of a kubernetes client model class (cached).

    KeyError if `name` is neither in SCHEMAS nor a client model.
    """
    if name in SCHEMAS:
        return SCHEMAS[name]
    cls = getattr(k8s, name, None)
    if cls is None or not hasattr(cls, "openapi_types"):
        raise KeyError(name)
    fields = {cls.attribute_map[attr]: kind
              for attr, kind in cls.openapi_types.items()}
    source = inspect.getsource(cls)
    required = {cls.attribute_map[attr] for attr in re.findall(
        r"Invalid value for `(\w+)`, must not be `None`", source)}
    for json_name, kind in NEWER_FIELDS.get(name, {}).items():
        fields[json_name] = kind
    SCHEMAS[name] = {"fields": fields, "required": required}
    return SCHEMAS[name]


def _join(path, key):
    return f"{path}.{key}" if path else key


def check_value(value, kind, path, problems):
    """Appends to `problems` how `value` does not fit the type `kind`."""
    if kind.startswith("list["):
        if not isinstance(value, list):
            problems.append(Problem("type", path,
                                    f"{path}: {value!r} is not a list "
                                    f"({kind})"))
            return
        for i, item in enumerate(value):
            check_value(item, kind[5:-1], f"{path}[{i}]", problems)
        return
    if kind.startswith("dict("):
        inner = kind[len("dict(str, "):-1]
        if not isinstance(value, dict):
            problems.append(Problem("type", path,
                                    f"{path}: {value!r} is not a map "
                                    f"({kind})"))
            return
        for key, item in value.items():
            check_value(item, inner, f"{path}.{key}", problems)
        return
    scalars = {"str": (str,), "datetime": (str,), "int": (int,),
               "float": (int, float), "bool": (bool,),
               "object": (str, int, dict, list)}
    if kind in scalars:
        ok = isinstance(value, scalars[kind])
        if kind in ("int", "float") and isinstance(value, bool):
            ok = False
        if not ok:
            problems.append(Problem("type", path,
                                    f"{path}: {value!r} is not of type "
                                    f"{kind}"))
        return
    check_object(value, kind, path, problems)


def check_object(body, schema_name, path, problems):
    """Appends to `problems` how `body` does not fit `schema_name`."""
    try:
        schema = model_schema(schema_name)
    except KeyError:
        problems.append(Problem("type", path,
                                f"{path}: no schema for {schema_name}"))
        return
    if not isinstance(body, dict):
        problems.append(Problem("type", path,
                                f"{path}: {body!r} is not an object "
                                f"({schema_name})"))
        return
    for key, value in body.items():
        kind = schema["fields"].get(key)
        if kind is None:
            problems.append(Problem("unknown", _join(path, key),
                                    f"{_join(path, key)}: unknown field of "
                                    f"{schema_name}"))
            continue
        check_value(value, kind, _join(path, key), problems)
    for key in sorted(schema["required"] - body.keys()):
        problems.append(Problem("required", _join(path, key),
                                f"{_join(path, key)}: required field of "
                                f"{schema_name} missing"))


def problems_of(body, schema_name):
    """The problems of `body` as a `schema_name`, paths from its root."""
    problems = []
    check_object(body, schema_name, "", problems)
    return problems
