#!/usr/bin/python3
"""The Prometheus and Grafana files of deploy/ against promtool and a real bnn-server.

  prometheus_test.py SOURCE_DIR BNN_SERVER BNNCTL PROMTOOL

1. `promtool check config` on deploy/prometheus/prometheus.yml (which loads
   alerts.yml) and `promtool check rules` on deploy/prometheus/alerts.yml.
2. deploy/grafana/bnn-serve.json: the dashboard's structure (unique panel ids,
   a refId and an expression per target, the data source that
   deploy/grafana/provisioning provisions), and every PromQL expression parsed
   by promtool: they are written as recording rules into a rules file that
   `promtool check rules` checks (Grafana's $__rate_interval becomes 5m; any
   other variable is an error, the dashboard defines none).
3. deploy/compose/compose.yaml wires these files as they expect: the
   mounted files exist, Prometheus's scrape target is the bnn-server service
   at the metrics port the image's entry point listens on, Grafana's data
   source URL is the prometheus service, the dashboard is mounted where the
   provider reads, and the token secret lands at the image's --token-file.
4. Every metric name in those expressions and in the alert rules is one that
   a running bnn-server exports: bnn-server is started from the build tree on
   free loopback ports, a dataset is uploaded, a long job is scraped while it
   runs (training loss, checkpoint age), then cancelled, a short job is
   trained and published, and Predict is called, so the job, training and
   inference series exist. `up` is the only name allowed without being in
   /metrics: Prometheus writes it for each target.
"""

import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

# Names the expressions may use that are not in bnn-server's /metrics:
# Prometheus adds `up` to every scrape target.
PROMETHEUS_SERIES = {"up"}

# PromQL words that are not metric names: aggregation operators, set and
# binary keywords, modifiers. Functions are recognised by the '(' after them.
KEYWORDS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
    "count_values", "bottomk", "topk", "quantile", "by", "without", "on",
    "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
    "offset", "atan2", "inf", "nan",
}

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return condition


def metric_names(expr):
    """The metric names an expression selects.

    PromQL is tokenised after removing, in order: string literals (label
    values, regexes, quantile labels), label matcher bodies {...} (label
    names), range and subquery brackets [...], the label lists of
    by/without/on/ignoring/group_left/group_right (...), the durations of
    `offset`, and numbers (1e3, 0.99, 0x1f). What is left are identifiers;
    those followed by '(' are functions or aggregations, the keywords above
    are operators, and the rest are metric names. A {__name__="..."} matcher is read too.
    """
    names = set(re.findall(r'__name__\s*=~?\s*"([A-Za-z_:][A-Za-z0-9_:]*)"',
                           expr))
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""',
                  expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
        r" \1 ", text)
    text = re.sub(r"\boffset\s+-?(?:[0-9]+(?:ms|[smhdwy]))+", " ", text)
    text = re.sub(r"(?<![A-Za-z0-9_:])(0[xX][0-9a-fA-F]+|"
                  r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)", " ", text)
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith("("):
            continue  # a function or an aggregation
        if word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def tokenizer_self_test():
    """The tokenizer on expressions whose answer is known (it can fail)."""
    cases = {
        'sum by (rpc, code) (rate(bnn_rpc_requests_total{code!="OK"}[5m]))':
            {"bnn_rpc_requests_total"},
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket[1m]))) > 1e3':
            {"a_bucket"},
        'x / on (instance) group_left(method) y unless z offset 5m':
            {"x", "y", "z"},
        'sum(rate(a{l=~"b|c{1}"}[5m])) without (d) or vector(0)': {"a"},
        '{__name__="bnn_datasets", job="x"}': {"bnn_datasets"},
        'max_over_time(m[10m:1m]) and bool 0x1F': {"m"},
        'label_replace(up, "a", "$1", "b", "(.*)")': {"up"},
    }
    for expr, want in cases.items():
        got = metric_names(expr)
        check(got == want, f"tokenizer: {expr!r} gave {sorted(got)}, "
                           f"want {sorted(want)}")


def promtool(tool, *args):
    run = subprocess.run([tool, *args], capture_output=True, text=True,
                         check=False)
    check(run.returncode == 0,
          f"promtool {' '.join(args)} exited {run.returncode}:\n"
          f"{run.stdout}{run.stderr}")
    return run


def dashboard_expressions(root):
    """(where, expression) of every dashboard target, after structure checks."""
    dashboard = json.loads(
        (root / "deploy/grafana/bnn-serve.json").read_text())
    provisioned = yaml.safe_load(
        (root / "deploy/grafana/provisioning/datasources/prometheus.yml")
        .read_text())
    uids = {d["uid"] for d in provisioned["datasources"]}
    check(dashboard.get("uid") == "bnn-serve", "dashboard uid is bnn-serve")
    for key in ("title", "schemaVersion", "panels"):
        check(key in dashboard, f"dashboard has {key}")
    provider = yaml.safe_load(
        (root / "deploy/grafana/provisioning/dashboards/bnn-serve.yml")
        .read_text())
    check(provider["providers"][0]["options"]["path"] ==
          "/var/lib/grafana/dashboards",
          "dashboard provider reads /var/lib/grafana/dashboards")
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    check(not variables, "the dashboard defines no template variables")
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    check(len(ids) == len(set(ids)), f"panel ids are unique: {ids}")
    exprs = []
    for panel in panels:
        where = f"panel {panel['id']} ({panel.get('title')})"
        grid = panel.get("gridPos", {})
        check(all(k in grid for k in ("h", "w", "x", "y")) and
              grid["x"] + grid["w"] <= 24, f"{where}: gridPos within 24 columns")
        if panel["type"] == "row":
            continue
        check(panel["datasource"].get("uid") in uids,
              f"{where}: data source {panel['datasource']} is provisioned")
        targets = panel.get("targets", [])
        check(targets, f"{where}: has targets")
        refs = [t.get("refId") for t in targets]
        check(len(refs) == len(set(refs)) and all(refs),
              f"{where}: refIds unique and set: {refs}")
        for target in targets:
            check(target["datasource"].get("uid") in uids,
                  f"{where} {target['refId']}: data source is provisioned")
            expr = target.get("expr", "")
            check(expr.strip(), f"{where} {target['refId']}: has expr")
            expr = expr.replace("$__rate_interval", "5m")
            check("$" not in expr, f"{where}: unknown variable in {expr!r}")
            exprs.append((f"{where} {target['refId']}", expr))
    return exprs


def check_compose(root):
    compose_dir = root / "deploy/compose"
    compose = yaml.safe_load((compose_dir / "compose.yaml").read_text())
    services = compose["services"]
    mounts = {}
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("."):
                check((compose_dir / source).exists(),
                      f"compose {name}: mounted {source} exists")
            mounts[(name, target)] = source
        build = service.get("build")
        if build:
            context = compose_dir / build["context"]
            check((context / build["dockerfile"]).is_file(),
                  f"compose {name}: {build['dockerfile']} in {context}")
    entrypoint = re.search(r"^ENTRYPOINT (\[.*?\])\s*$",
                           (root / "Dockerfile").read_text().replace(
                               "\\\n", ""), re.MULTILINE | re.DOTALL)
    args = json.loads(entrypoint.group(1))
    flags = dict(zip(args[1::2], args[2::2]))
    metrics_port = flags["--metrics-listen"].rsplit(":", 1)[1]
    config = yaml.safe_load(
        (root / "deploy/prometheus/prometheus.yml").read_text())
    targets = [t for job in config["scrape_configs"]
               for sc in job["static_configs"] for t in sc["targets"]]
    check(targets == [f"bnn-server:{metrics_port}"] and
          "bnn-server" in services,
          f"Prometheus scrapes the bnn-server service at the image's metrics "
          f"port {metrics_port}: {targets}")
    check(mounts.get(("prometheus", "/etc/prometheus/prometheus.yml")) ==
          "../prometheus/prometheus.yml" and
          mounts.get(("prometheus", "/etc/prometheus/alerts.yml")) ==
          "../prometheus/alerts.yml",
          "compose mounts prometheus.yml and alerts.yml side by side")
    datasource = yaml.safe_load(
        (root / "deploy/grafana/provisioning/datasources/prometheus.yml")
        .read_text())["datasources"][0]
    check(datasource["url"] == "http://prometheus:9090" and
          "prometheus" in services,
          f"Grafana's data source is the prometheus service: "
          f"{datasource['url']}")
    check(mounts.get(("grafana", "/var/lib/grafana/dashboards/"
                                 "bnn-serve.json")) ==
          "../grafana/bnn-serve.json", "compose mounts the dashboard where "
                                       "the provider reads")
    secret = services["bnn-server"].get("secrets", [])
    check(secret == ["bnn-tokens"] and
          flags["--token-file"] == "/run/secrets/bnn-tokens",
          "the token secret is mounted at the image's --token-file")


def start_server(server, data_dir, log):
    process = subprocess.Popen(
        [server, "--listen", "127.0.0.1:0", "--metrics-listen",
         "127.0.0.1:0", "--data-dir", data_dir, "--threads", "1"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    grpc_address = metrics_url = None
    deadline = time.time() + 30
    while time.time() < deadline and not grpc_address:
        line = process.stdout.readline()
        if line.startswith("bnn-server metrics on "):
            metrics_url = line.split()[-1]
        elif line.startswith("bnn-server listening on "):
            grpc_address = line.split()[-1]
        elif not line and process.poll() is not None:
            break
    if not grpc_address or not metrics_url:
        process.kill()
        raise RuntimeError("bnn-server did not start")
    return process, grpc_address, metrics_url


def scrape(url):
    """Sample names of one /metrics scrape (the text format's sample lines)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0)
            for line in text.splitlines() if line and not line.startswith("#")}


def exported_names(server, bnnctl, work):
    log = open(work / "server.log", "w")
    process, address, url = start_server(server, str(work / "data"), log)
    try:
        def ctl(*args):
            run = subprocess.run([bnnctl, "--server", address, "--json",
                                  *args], capture_output=True, text=True,
                                 timeout=120, check=False)
            if run.returncode != 0:
                raise RuntimeError(f"bnnctl {' '.join(args)}: {run.stderr}")
            return json.loads(run.stdout) if run.stdout.strip() else {}

        csv = work / "data.csv"
        csv.write_text("x,y\n" + "".join(
            f"{x / 10},{(x / 10) ** 2}\n" for x in range(-20, 20)))
        dataset = ctl("upload", "--name", "d", "--task", "regression",
                      "--csv", str(csv), "--target", "y")["dataset_id"]
        train = ["train", "--dataset", dataset, "--method", "slang",
                 "--hidden", "8", "--seed", "1", "--model", "m"]
        # A job long enough to be scraped while it runs: the loss and
        # checkpoint age gauges exist only then.
        long_job = ctl(*train, "--epochs", "1000000")["job_id"]
        names = set()
        deadline = time.time() + 30
        while time.time() < deadline and "bnn_training_loss" not in names:
            time.sleep(0.2)
            names = scrape(url)
        check("bnn_training_loss" in names,
              "the running job's loss appeared in /metrics")
        ctl("cancel", long_job)
        ctl(*train, "--epochs", "20", "--publish", "--wait")
        ctl("predict", "--model", "m", "--csv", str(csv), "--target", "y",
            "--samples", "4")
        names |= scrape(url)
        return names
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def main():
    root = pathlib.Path(sys.argv[1])
    server, bnnctl, tool = sys.argv[2:5]
    started = time.time()
    tokenizer_self_test()

    promtool(tool, "check", "config",
             str(root / "deploy/prometheus/prometheus.yml"))
    promtool(tool, "check", "rules", str(root / "deploy/prometheus/alerts.yml"))

    check_compose(root)
    exprs = dashboard_expressions(root)
    check(len(exprs) >= 20, f"dashboard has {len(exprs)} expressions")
    alerts = yaml.safe_load((root / "deploy/prometheus/alerts.yml").read_text())
    for group in alerts["groups"]:
        for rule in group["rules"]:
            exprs.append((f"alert {rule['alert']}", rule["expr"]))

    with tempfile.TemporaryDirectory(prefix="bnn-deploy-") as tmp:
        work = pathlib.Path(tmp)
        rules = {"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:expr_{i}", "expr": expr}
            for i, (_, expr) in enumerate(exprs)]}]}
        (work / "dashboard_rules.yml").write_text(yaml.safe_dump(rules))
        promtool(tool, "check", "rules", str(work / "dashboard_rules.yml"))

        exported = exported_names(server, bnnctl, work)
        used = set()
        for where, expr in exprs:
            names = metric_names(expr)
            check(names, f"{where}: names a metric: {expr!r}")
            used |= names
            unknown = names - exported - PROMETHEUS_SERIES
            check(not unknown, f"{where}: {sorted(unknown)} not exported by "
                               f"bnn-server: {expr!r}")
        print(f"{len(exprs)} expressions name {len(used)} metrics; the "
              f"server exported {len(exported)}", flush=True)

    print(f"prometheus_test: {time.time() - started:.1f} s, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
