"""A local cluster of three nodes behind HAProxy (deploy/local/cluster):
light nodes (`preload =`), each trusting the router's address and capping
each client at CAP requests in flight.  The fixture `cluster` (conftest.py)
is one for the whole module."""
import os
import socket
import subprocess

from harness import PETRI, ROOT, free_port_block, petri_lock, process_tree, start_time

CLUSTER = str(ROOT / "deploy" / "local" / "cluster")
NODES = 3
CAP = 3


class Cluster:
    def __init__(self, tmp):
        self.dir = str(tmp / "cluster")
        extra = tmp / "node.ini"
        extra.write_text(f"[server]\nmax_connections_per_ip = {CAP}\n")
        self.port = free_port_block(NODES)
        with petri_lock():
            p = subprocess.run([CLUSTER, "up", "--nodes", str(NODES), "--port", str(self.port),
                                "--dir", self.dir, "--preload", "", "--petri", PETRI,
                                "--node-config", str(extra), "--wait", "150"],
                               capture_output=True, text=True, timeout=200)
        assert p.returncode == 0, p.stdout + p.stderr
        self.url = f"http://127.0.0.1:{self.port}"
        self.trees = {k: process_tree(self.pid(k)) | {self.pid(k): start_time(self.pid(k))}
                      for k in range(1, NODES + 1)}

    def pid(self, k):
        with open(os.path.join(self.dir, f"node-{k}.pid")) as f:
            return int(f.read())

    def node_url(self, k):
        with open(os.path.join(self.dir, f"node-{k}.url")) as f:
            return f.read().strip()

    def haproxy(self, command):
        """HAProxy's runtime API (the cluster's stats socket)."""
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.path.join(self.dir, "haproxy.sock"))
        s.sendall(command.encode() + b"\n")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        s.close()
        return out.decode()

    def server_status(self, backend, server):
        for line in self.haproxy("show stat").splitlines():
            f = line.split(",")
            if len(f) > 17 and f[0] == backend and f[1] == server:
                return f[17]
        return None

    def down(self):
        pids = [self.pid(k) for k in range(1, NODES + 1)]
        p = subprocess.run([CLUSTER, "down", "--dir", self.dir, "--petri", PETRI],
                           capture_output=True, text=True, timeout=200)
        return p, pids
