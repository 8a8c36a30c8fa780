"""petri cluster haproxy: what it refuses, and a configuration HAProxy
accepts for one node or many (the cluster tier runs one for real)."""
import shutil
import subprocess

import pytest

from harness import PETRI


def generate(*args):
    return subprocess.run([PETRI, "cluster", "haproxy", *args], capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize("bad", [
    "n1", "n1=", "n-1=127.0.0.1:1", "N1=127.0.0.1:1", "n1=host", "n1=127.0.0.1:1,agent=0",
    "n1=127.0.0.1:1,agent=70000", "n1=127.0.0.1:1,weight=3", "n1=127.0.0.1:1 x",
    "n1=127.0.0.1:1'", "0123456789abcdef0=127.0.0.1:1",
])
def test_bad_nodes_are_refused(bad):
    p = generate("--node", bad)
    assert p.returncode == 2 and "--node" in p.stderr and not p.stdout, (bad, p.stderr)


def test_refusals():
    assert generate().returncode == 2
    p = generate("--node", "a=127.0.0.1:1", "--node", "a=127.0.0.1:2")
    assert p.returncode == 2 and "two nodes named a" in p.stderr
    assert generate("--node", "a=127.0.0.1:1", "--listen", "nocolon").returncode == 2
    assert generate("--node", "a=127.0.0.1:1", "--stats-socket", "relative").returncode == 2


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy is not installed (scripts/deps)")
@pytest.mark.parametrize("nodes", [1, 7])
def test_haproxy_accepts_it(tmp_path, nodes):
    args = []
    for k in range(nodes):
        args += ["--node", f"n{k}=10.0.0.{k + 1}:8080" + (",agent=8081" if k % 2 else "")]
    p = generate("--listen", "127.0.0.1:18080", "--stats-socket", str(tmp_path / "s.sock"), *args)
    assert p.returncode == 0, p.stderr
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(p.stdout)
    c = subprocess.run(["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=30)
    assert c.returncode == 0, c.stdout + c.stderr
    for k in range(nodes):
        assert f"use_backend node_n{k} if {{ var(txn.node) -m str n{k} }}" in p.stdout
    assert p.stdout.count("agent-check agent-port 8081") == nodes // 2


@pytest.mark.parametrize("args", [
    ["--node", "a=127.0.0.1:1\ndisabled"], ["--node", "a=127.0.0.1:1\r"],
    ["--node", "a=127.0.0.1:1", "--listen", "127.0.0.1:8080\ndisabled"],
    ["--node", "a=127.0.0.1:1", "--stats-socket", "/run/x\nuser root"],
    ["--node", "a=127.0.0.1:1", "--source", "127.0.0.2\n"],
])
def test_no_line_can_be_added(args):
    """A value goes into the configuration as one word: a newline, a
    control character or a quote is refused."""
    p = generate(*args)
    assert p.returncode == 2 and not p.stdout, (args, p.stderr)


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy is not installed (scripts/deps)")
def test_many_nodes(tmp_path):
    """Each known node is a line of its own: HAProxy takes at most 64
    words a line."""
    args = [a for k in range(200) for a in ("--node", f"n{k}=10.0.{k // 200}.{k % 200 + 1}:8080")]
    p = generate("--listen", "127.0.0.1:18080", *args)
    assert p.returncode == 0, p.stderr
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(p.stdout)
    c = subprocess.run(["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c.stdout[-2000:] + c.stderr[-2000:]


def resolv_conf_has_nameserver():
    try:
        with open("/etc/resolv.conf") as f:
            return any(line.split()[:1] == ["nameserver"] for line in f)
    except OSError:
        return False


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy is not installed (scripts/deps)")
@pytest.mark.skipif(not resolv_conf_has_nameserver(),
                    reason="/etc/resolv.conf names no name server for HAProxy's parse-resolv-conf")
def test_dns_names_a_router_starts_before_its_nodes(tmp_path):
    """--dns: the nodes are names HAProxy resolves while it runs (pods of a
    StatefulSet, deploy/kubernetes), so a name that does not resolve yet is
    not an error at start; without --dns the same configuration is refused."""
    name = "petri-0.petri-nodes.petri.svc.cluster.local.invalid"
    args = ["--listen", "127.0.0.1:18080", "--node", f"petri0={name}:8080,agent=8081"]
    cfg = tmp_path / "haproxy.cfg"
    for dns, accepted in ((True, True), (False, False)):
        p = generate(*args, *(["--dns"] if dns else []))
        assert p.returncode == 0, p.stderr
        cfg.write_text(p.stdout)
        c = subprocess.run(["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=60)
        assert (c.returncode == 0) == accepted, (dns, c.stdout + c.stderr)
        if dns:
            assert "resolvers dns\n    parse-resolv-conf\n" in p.stdout
            # Both of the node's server lines (the shared pool, its own backend).
            assert p.stdout.count(f"{name}:8080") == p.stdout.count("resolvers dns init-addr none") == 2
        else:
            assert "resolvers" not in p.stdout and "could not resolve" in c.stderr
