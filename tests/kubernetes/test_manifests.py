"""deploy/kubernetes, offline: what `kubectl apply -k` would be given, and that
its parts agree with each other.

validate.mjs (node, kubernetes-models) checks the kustomization and every
object against its schema, unknown fields included, and prints the objects
as JSON lines; these tests check it refuses what it must, then what no
schema can see: the ports of petri.ini, the StatefulSet, the Services, the
NetworkPolicies and haproxy.cfg are one set; the paths petri.ini names are
where the pod mounts them; the grace period covers the drain; haproxy.cfg is
what deploy/kubernetes/generate writes, HAProxy accepts it, and it starts
and answers in JSON though no node's name resolves (as in a cluster whose
pods do not exist yet).

PETRI_KUBERNETES_DIR=DIR runs the same tests on another copy of the
directory (to see what a broken one looks like).
"""
import configparser
import difflib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess

import pytest

from harness import free_port, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.abspath(os.environ.get("PETRI_KUBERNETES_DIR", os.path.join(REPO, "deploy", "kubernetes")))
VALIDATE = os.path.join(HERE, "validate.mjs")
PETRI = os.environ.get("PETRI_BIN", os.path.join(REPO, "build", "petri"))
HAPROXY = shutil.which("haproxy", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def validate(directory=DEPLOY):
    return subprocess.run(["node", VALIDATE, str(directory)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def manifests():
    """{"kustomization": ..., "objects": [(file, object)...]} as validate.mjs
    printed them (the generated ConfigMaps among the objects)."""
    p = validate()
    assert p.returncode == 0, f"validate.mjs failed:\n{p.stderr}"
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert lines and lines[0]["object"]["kind"] == "Kustomization", p.stdout[:500]
    return {"kustomization": lines[0]["object"],
            "objects": [(line["file"], line["object"]) for line in lines[1:]]}


def find(manifests, kind, name):
    found = [o for _, o in manifests["objects"] if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} in deploy/kubernetes"
    return found[0]


def read_ini(text):
    """petri.ini as petri's inih reads it: ';' and '#' start a comment line,
    ' ;' an inline comment; a key may repeat (a list on more lines)."""
    cp = configparser.ConfigParser(comment_prefixes=(";", "#"), inline_comment_prefixes=(";",),
                                   interpolation=None, strict=False)
    cp.read_string(text)
    return cp


def port_of(listen):
    host, _, port = listen.rpartition(":")
    assert host and port.isdigit(), f"not HOST:PORT: {listen!r}"
    return int(port)


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@pytest.fixture(scope="module")
def k(manifests):
    """What the tests below compare, read once."""
    sts = find(manifests, "StatefulSet", "petri")
    router = find(manifests, "Deployment", "petri-router")
    pod = sts["spec"]["template"]["spec"]
    (node,) = pod["containers"]
    rpod = router["spec"]["template"]["spec"]
    (haproxy,) = rpod["containers"]
    ini_text = find(manifests, "ConfigMap", "petri-config")["data"]["petri.ini"]
    return {
        "namespace": manifests["kustomization"]["namespace"],
        "sts": sts, "pod": pod, "node": node,
        "router": router, "rpod": rpod, "haproxy": haproxy,
        "node_labels": sts["spec"]["template"]["metadata"]["labels"],
        "router_labels": router["spec"]["template"]["metadata"]["labels"],
        "node_ports": {p["name"]: p["containerPort"] for p in node["ports"]},
        "router_ports": {p["name"]: p["containerPort"] for p in haproxy["ports"]},
        "ini": read_ini(ini_text),
        "haproxy_cfg": find(manifests, "ConfigMap", "haproxy-config")["data"]["haproxy.cfg"],
    }


def mount_of(container, pod, test):
    """The path where `container` sees the volume for which test(volume) holds
    (with its subPath, if any), and the volume."""
    volumes = [v for v in pod.get("volumes", []) if test(v)]
    assert len(volumes) == 1, f"{len(volumes)} volumes match"
    (m,) = [m for m in container["volumeMounts"] if m["name"] == volumes[0]["name"]]
    return m["mountPath"], m.get("subPath"), volumes[0]


def config_path(k):
    """Where the node's container finds petri.ini."""
    path, sub, _ = mount_of(k["node"], k["pod"], lambda v: v.get("configMap", {}).get("name") == "petri-config")
    return path if sub == "petri.ini" else os.path.join(path, "petri.ini")


# --- the validator refuses what it must -----------------------------------

def test_validator_passes(manifests):
    kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for _, o in manifests["objects"])
    assert kinds == sorted(["Namespace/petri", "StatefulSet/petri", "Service/petri-nodes",
                            "Deployment/petri-router", "Service/petri",
                            "PodDisruptionBudget/petri", "PodDisruptionBudget/petri-router",
                            "NetworkPolicy/petri-nodes", "NetworkPolicy/petri-router",
                            "ConfigMap/petri-config", "ConfigMap/haproxy-config"])


def _edit(name, pattern, new):
    """The first match of the regular expression `pattern` in `name`, replaced."""
    def edit(d):
        path = d / name
        text, n = re.subn(pattern, new, path.read_text(), count=1, flags=re.M)
        assert n == 1, f"{pattern!r} not in {name}"
        path.write_text(text)
    return edit


def _write(name, text):
    return lambda d: (d / name).write_text(text)


def _remove(name):
    return lambda d: (d / name).unlink()


BROKEN = {
    "misspelled container key": (
        _edit("statefulset.yaml", r"\bimagePullPolicy:", "imagePullPolcy:"),
        ["statefulset.yaml", "StatefulSet/petri",
         "spec.template.spec.containers[0].imagePullPolcy: unknown field"]),
    "misspelled spec key": (
        _edit("statefulset.yaml", r"^  replicas:", "  replicsa:"),
        ["statefulset.yaml", "StatefulSet/petri", "spec.replicsa: unknown field"]),
    "wrong type": (
        _edit("statefulset.yaml", r"^  replicas: .*$", '  replicas: "three"'),
        ["statefulset.yaml", "StatefulSet/petri", "spec.replicas: must be integer"]),
    "wrong enum": (
        _edit("service-nodes.yaml", r"^  clusterIP: .*$", "\\g<0>\n  type: Headless"),
        ["service-nodes.yaml", "Service/petri-nodes", "spec.type: must be one of"]),
    "duplicate key": (
        _edit("router.yaml", r"^  replicas: .*$", "\\g<0>\n  replicas: 3"),
        ["router.yaml", "line ", "Map keys must be unique", "replicas: 3"]),
    "unknown kind": (
        _edit("disruption.yaml", r"^kind: PodDisruptionBudget$", "kind: PodDisruptionBuget"),
        ["disruption.yaml", "PodDisruptionBuget/petri", "no schema"]),
    "unlisted yaml file": (
        _write("extra.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"),
        ["kustomization.yaml", "extra.yaml is not listed in resources"]),
    "missing resource": (
        _remove("disruption.yaml"),
        ["kustomization.yaml", "disruption.yaml does not exist"]),
    "missing generator file": (
        _remove("haproxy.cfg"),
        ["kustomization.yaml", "configMapGenerator[1].files[0]: haproxy.cfg does not exist"]),
    "misspelled kustomization key": (
        _edit("kustomization.yaml", r"^configMapGenerator:", "configMapGenerators:"),
        ["kustomization.yaml", "unknown field 'configMapGenerators'"]),
}


@pytest.mark.parametrize("case", BROKEN)
def test_validator_refuses(tmp_path, case):
    edit, said = BROKEN[case]
    d = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, d)
    edit(d)
    p = validate(d)
    assert p.returncode == 1, f"validate.mjs accepted {case}:\n{p.stdout[:300]}{p.stderr}"
    assert p.stdout == ""
    lines = [line for line in p.stderr.splitlines() if all(s in line for s in said)]
    assert lines, f"no line of validate.mjs says {said}:\n{p.stderr}"


def test_yaml_1_1_octal(tmp_path):
    """0400 is octal to Kubernetes' YAML 1.1 parser, as validate.mjs reads it."""
    d = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, d)
    _edit("statefulset.yaml", r"defaultMode: 256\b", "defaultMode: 0400")(d)
    p = validate(d)
    assert p.returncode == 0, p.stderr
    assert '"defaultMode":256' in p.stdout


# --- the parts agree -------------------------------------------------------

def test_namespace(manifests, k):
    assert find(manifests, "Namespace", k["namespace"])["metadata"]["name"] == k["namespace"]
    for _, o in manifests["objects"]:
        assert o["metadata"].get("namespace", k["namespace"]) == k["namespace"], o["metadata"]["name"]


def test_ports(manifests, k):
    ini = k["ini"]
    want = {"http": port_of(ini["server"]["listen"]), "agent": port_of(ini["cluster"]["agent_listen"])}
    assert k["node_ports"] == want, \
        f"the StatefulSet's container ports {k['node_ports']} are not petri.ini's listen and agent_listen {want}"

    nodes = find(manifests, "Service", "petri-nodes")
    assert nodes["spec"]["clusterIP"] == "None"
    assert nodes["spec"]["publishNotReadyAddresses"] is True
    assert k["sts"]["spec"]["serviceName"] == "petri-nodes"
    for p in nodes["spec"]["ports"]:
        assert p["targetPort"] in k["node_ports"], f"Service petri-nodes: targetPort {p['targetPort']} is no port of the StatefulSet's"
        assert p["port"] == k["node_ports"][p["targetPort"]], \
            f"Service petri-nodes: port {p['port']} to {p['targetPort']}, which is {k['node_ports'][p['targetPort']]}"
    assert {p["targetPort"] for p in nodes["spec"]["ports"]} == set(k["node_ports"])

    svc = find(manifests, "Service", "petri")
    (p,) = svc["spec"]["ports"]
    assert p["targetPort"] in k["router_ports"], f"Service petri: targetPort {p['targetPort']} is no port of the router's"
    bind = "bind 0.0.0.0:%d" % k["router_ports"][p["targetPort"]]
    assert re.search(r"^\s*%s$" % bind, k["haproxy_cfg"], re.M), f"haproxy.cfg has no '{bind}'"


def test_selectors(manifests, k):
    """Each selector picks its own pods and never the others'."""
    nodes, routers = k["node_labels"], k["router_labels"]
    assert nodes != routers

    def picks(selector, mine, other, what):
        assert selects(selector, mine), f"{what}: {selector} selects none of its pods"
        assert not selects(selector, other), f"{what}: {selector} selects the other pods too"

    picks(k["sts"]["spec"]["selector"]["matchLabels"], nodes, routers, "StatefulSet")
    picks(k["router"]["spec"]["selector"]["matchLabels"], routers, nodes, "Deployment")
    picks(find(manifests, "Service", "petri-nodes")["spec"]["selector"], nodes, routers, "Service petri-nodes")
    picks(find(manifests, "Service", "petri")["spec"]["selector"], routers, nodes, "Service petri")
    picks(find(manifests, "PodDisruptionBudget", "petri")["spec"]["selector"]["matchLabels"],
          nodes, routers, "PDB petri")
    picks(find(manifests, "PodDisruptionBudget", "petri-router")["spec"]["selector"]["matchLabels"],
          routers, nodes, "PDB petri-router")
    anti = k["pod"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    picks(anti[0]["labelSelector"]["matchLabels"], nodes, routers, "podAntiAffinity")


def test_network_policies(manifests, k):
    nodes, routers = k["node_labels"], k["router_labels"]
    np = find(manifests, "NetworkPolicy", "petri-nodes")["spec"]
    assert selects(np["podSelector"]["matchLabels"], nodes)
    assert not selects(np["podSelector"]["matchLabels"], routers)
    (rule,) = np["ingress"]
    (peer,) = rule["from"]
    assert selects(peer["podSelector"]["matchLabels"], routers)
    assert {p["port"] for p in rule["ports"]} == set(k["node_ports"]), "NetworkPolicy petri-nodes: ingress ports"

    rp = find(manifests, "NetworkPolicy", "petri-router")["spec"]
    assert selects(rp["podSelector"]["matchLabels"], routers)
    assert not selects(rp["podSelector"]["matchLabels"], nodes)
    (rule,) = rp["ingress"]
    assert {p["port"] for p in rule["ports"]} <= set(k["router_ports"]), "NetworkPolicy petri-router: ingress ports"
    to_nodes = [e for e in rp["egress"] if any(selects(t.get("podSelector", {}).get("matchLabels"), nodes)
                                               and "namespaceSelector" not in t for t in e["to"])]
    assert len(to_nodes) == 1, rp["egress"]
    # A port by name is the destination pod's port of that name.
    ports = {k["node_ports"].get(p["port"], p["port"]) for p in to_nodes[0]["ports"]}
    assert ports == set(k["node_ports"].values()), \
        f"NetworkPolicy petri-router: egress to the nodes on {sorted(ports)}, their ports are {k['node_ports']}"


def test_haproxy_cfg_names_the_pods(k):
    cfg = k["haproxy_cfg"]
    replicas = k["sts"]["spec"]["replicas"]
    http_port, agent_port = k["node_ports"]["http"], k["node_ports"]["agent"]
    service = k["sts"]["spec"]["serviceName"]
    servers = re.findall(r"^\s*server (\S+) (\S+):(\d+) (.*)$", cfg, re.M)
    assert servers
    names = set()
    for name, host, port, rest in servers:
        m = re.fullmatch(r"petri(\d+)", name)
        assert m, name
        assert host == f"petri-{m[1]}.{service}.{k['namespace']}.svc.cluster.local", \
            f"haproxy.cfg: server {name} at {host}: not pod petri-{m[1]} of Service {service} in {k['namespace']}"
        assert int(port) == http_port, f"haproxy.cfg: server {name} on port {port}, the pods' http is {http_port}"
        if "agent-check" in rest:
            assert f"agent-port {agent_port} " in rest + " ", \
                f"haproxy.cfg: server {name}: {rest!r}, the pods' agent is {agent_port}"
        names.add(int(m[1]))
    assert names == set(range(replicas)), f"haproxy.cfg names nodes {sorted(names)}, the StatefulSet has {replicas} replicas"
    # Each node in the shared backend, with its agent, and in its own.
    assert len(re.findall(r"agent-port %d\b" % agent_port, cfg)) == replicas
    assert len(servers) == 2 * replicas


def test_probes(k):
    node = k["node"]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        got = node[probe].get("httpGet")
        assert got == {"path": path, "port": "http"}, f"{probe}: {got}, expected GET {path} on port http"


def test_config_mounted_where_args_say(k):
    path = config_path(k)
    args = k["node"]["args"]
    assert args[0] == "serve"
    i = args.index("--config")
    assert args[i + 1] == path, f"args {args}: petri.ini is mounted at {path}"
    cmd = k["node"]["lifecycle"]["preStop"]["exec"]["command"]
    assert os.path.basename(cmd[0]) == "petri"
    assert cmd[1:] == ["drain", "--config", path], f"preStop {cmd}: petri.ini is mounted at {path}"

    rpath, sub, _ = mount_of(k["haproxy"], k["rpod"], lambda v: v.get("configMap", {}).get("name") == "haproxy-config")
    if sub != "haproxy.cfg":
        rpath = os.path.join(rpath, "haproxy.cfg")
    rargs = k["haproxy"]["args"]
    assert rargs[rargs.index("-f") + 1] == rpath


def test_prestop_drain_is_allowed(k):
    """`petri drain --config` reaches [server] listen on loopback (0.0.0.0:P ->
    127.0.0.1:P) with that Host: allowed_hosts, when set, must name it."""
    server = k["ini"]["server"]
    hosts = [h.strip().lower() for h in server.get("allowed_hosts", "").replace("\n", ",").split(",") if h.strip()]
    host = server["listen"].rpartition(":")[0]
    host = {"0.0.0.0": "127.0.0.1", "[::]": "::1"}.get(host, host).strip("[]")
    assert not hosts or "*" in hosts or host in hosts, f"allowed_hosts {hosts} lacks {host}"


def test_allowed_hosts_name_the_service(manifests, k):
    hosts = {h.strip() for h in k["ini"]["server"]["allowed_hosts"].replace("\n", ",").split(",")}
    svc, ns = "petri", k["namespace"]
    find(manifests, "Service", svc)
    assert {svc, f"{svc}.{ns}", f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local"} <= hosts


def test_grace_period_covers_the_drain(k):
    ini = k["ini"]
    need = int(ini["cluster"]["drain_grace_s"]) + int(ini["server"]["shutdown_grace_s"]) + 10
    assert k["pod"]["terminationGracePeriodSeconds"] >= need, \
        f"terminationGracePeriodSeconds {k['pod']['terminationGracePeriodSeconds']} < drain_grace_s + shutdown_grace_s + 10 = {need}"


def test_keys_and_record_on_their_volumes(k):
    ini = k["ini"]
    keys, _, vol = mount_of(k["node"], k["pod"], lambda v: "secret" in v)
    assert vol["secret"]["secretName"] == "petri-keys"
    for section, key in (("server", "api_keys_file"), ("cluster", "admin_keys_file")):
        assert ini[section][key].startswith(keys.rstrip("/") + "/"), \
            f"petri.ini [{section}] {key} = {ini[section][key]}: not on the Secret's mount {keys}"

    (claim,) = k["sts"]["spec"]["volumeClaimTemplates"]
    (m,) = [m for m in k["node"]["volumeMounts"] if m["name"] == claim["metadata"]["name"]]
    assert ini["server"]["record"].startswith(m["mountPath"].rstrip("/") + "/"), \
        f"petri.ini record = {ini['server']['record']}: not on the volume {claim['metadata']['name']} at {m['mountPath']}"
    size = claim["spec"]["resources"]["requests"]["storage"]
    num, unit = re.fullmatch(r"(\d+)(Mi|Gi|Ti)", size).groups()
    cap_mb = int(num) * {"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}[unit]
    assert int(ini["server"]["record_max_mb"]) < cap_mb, "the record outgrows its volume"


def test_every_mount_has_a_volume(k):
    for pod, claims in ((k["pod"], k["sts"]["spec"].get("volumeClaimTemplates", [])), (k["rpod"], [])):
        names = {v["name"] for v in pod.get("volumes", [])} | {c["metadata"]["name"] for c in claims}
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in names, f"{c['name']}: volumeMount {m['name']} has no volume"


def test_privileged_is_explained():
    """Every `privileged: true` has a comment just above it that says why."""
    found = 0
    for name in sorted(os.listdir(DEPLOY)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(DEPLOY, name)) as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\bprivileged\s*:\s*(true|yes|on)\b", line, re.I):
                found += 1
                assert re.fullmatch(r"\s*privileged\s*:\s*\S+\s*", line), \
                    f"{name}:{i + 1}: privileged on a line of its own, under its reason"
                assert i > 0 and lines[i - 1].lstrip().startswith("#"), \
                    f"{name}:{i + 1}: privileged: true without a comment just above it"
    assert found >= 1


# --- haproxy.cfg -------------------------------------------------------------

def test_haproxy_cfg_is_generated(tmp_path, k):
    """haproxy.cfg is what ./generate writes for the StatefulSet's replicas,
    by default (it reads replicas from statefulset.yaml) and when told."""
    d = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, d)
    with open(os.path.join(DEPLOY, "haproxy.cfg")) as f:
        committed = f.read()
    for extra in ([], ["--nodes", str(k["sts"]["spec"]["replicas"]), "--namespace", k["namespace"]]):
        (d / "haproxy.cfg").unlink()
        p = subprocess.run([str(d / "generate"), "--petri", PETRI] + extra,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        got = (d / "haproxy.cfg").read_text()
        diff = list(difflib.unified_diff(committed.splitlines(), got.splitlines(), "haproxy.cfg",
                                         "generate " + " ".join(extra), lineterm="", n=0))
        assert not diff, "haproxy.cfg is not what deploy/kubernetes/generate writes " \
            "(run it again):\n" + "\n".join(diff[:12])
    assert sorted(os.listdir(d)) == sorted(os.listdir(DEPLOY))


@pytest.fixture
def haproxy():
    if not HAPROXY:
        pytest.skip("haproxy is not installed (scripts/deps installs it)")
    return HAPROXY


def test_haproxy_accepts_it(haproxy):
    p = subprocess.run([haproxy, "-c", "-f", os.path.join(DEPLOY, "haproxy.cfg")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def request(port, method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, body=b"{}" if method == "POST" else None,
                  headers={"Authorization": "Bearer any", "Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        c.close()


def test_haproxy_starts_before_the_nodes_exist(tmp_path, haproxy, k):
    """With --dns a node whose name does not resolve is in maintenance, not an
    error at start: HAProxy answers at once, in petri's JSON."""
    port = free_port()
    node = (f"petri0=petri-0.{k['sts']['spec']['serviceName']}.{k['namespace']}.svc.cluster.local:"
            f"{k['node_ports']['http']},agent={k['node_ports']['agent']}")
    cfg = tmp_path / "haproxy.cfg"
    with open(cfg, "w") as f:
        subprocess.run([PETRI, "cluster", "haproxy", "--dns", "--listen", f"127.0.0.1:{port}",
                        "--node", node], stdout=f, check=True, timeout=30)
    log = open(tmp_path / "haproxy.log", "w+")
    proc = subprocess.Popen([haproxy, "-db", "-f", str(cfg)], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    def listening():
        assert proc.poll() is None, f"haproxy exited {proc.returncode}: " + (tmp_path / "haproxy.log").read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    try:
        assert wait_for(listening, 10, 0.05), "haproxy did not listen within 10 s"
        status, ctype, body = request(port, "GET", "/v1/sessions/ses_petri0-0123456789abcdef")
        assert (status, ctype) == (503, "application/json"), body
        assert json.loads(body)["error"]["code"] == "node_unavailable"
        status, ctype, body = request(port, "POST", "/v1/sessions")
        assert (status, ctype) == (503, "application/json"), body
        assert json.loads(body)["error"]["code"] == "no_node_available"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
