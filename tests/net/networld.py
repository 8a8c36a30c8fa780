"""A small internet of the test's own, on this machine only (issue 35).

World     a network namespace joined to the host's by a veth pair, on a /29
          of the documentation ranges (198.51.100.0/24, 203.0.113.0/24)
          claimed with a lock file, so that test processes and other runs
          on the machine never share one:
            .1  the host's end (one of the host's own addresses: never
                reachable from a sandbox)
            .2  "a": an HTTP server (GET /index.txt), the same over HTTPS
                (443; a certificate for allowed.test from a CA the test
                makes: .ca is its PEM), the world's DNS server (dnsmasq with
                local names) and a UDP echo on 9999
            .3  "b": the same HTTP server, on a second address
          Names: allowed.test, api.allowed.test -> a; other.test,
          x.wild.test, bad.wild.test, wild.test -> b; hostaddr.test -> .1;
          meta.test -> 169.254.169.254; private.test -> 10.0.0.1.
probe()   the code a session runs to try each target: a JSON line of
          {target: "reached" | "noname" | errno name | "timeout"}, each
          connection given one second.
REFUSED   what a refused target may answer.
uid_range()          a daemon's own range of host uids.
refused_at_start()   the error `petri serve` stops with for a [network] section.

Every namespace, link and process is removed when the world closes.
"""
import fcntl
import json
import os
import secrets
import subprocess
from pathlib import Path

from harness import PETRI, command_line, process_tree, wait_for

RANGES = ["198.51.100", "203.0.113"]
LOCKS = "/run/lock"
REFUSED = {"EHOSTUNREACH", "ECONNREFUSED", "ENETUNREACH", "EACCES", "EPERM", "timeout"}


def uid_range():
    return (3_000_000_000 + secrets.randbelow(40_000) * 10_000, 200)


def refused_at_start(tmp_path, lines):
    """`petri serve` with [network] of these lines: (its exit code, its
    stderr); a good section would have it serve (and time out)."""
    cfg = tmp_path / "bad.ini"
    cfg.write_text(f"[network]\n{lines}\n")
    r = subprocess.run([PETRI, "serve", "--config", str(cfg), "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=30,
                       env={**os.environ, "STATE_DIRECTORY": str(tmp_path / "st")})
    return r.returncode, r.stderr


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=30)


class World:
    def __init__(self, tmp_path):
        self.lock = None
        for i in range(2 * 32):
            f = open(f"{LOCKS}/petri-test-world-{i}.lock", "w")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            self.lock, self.index = f, i
            break
        if not self.lock:
            raise RuntimeError("every test world's range is taken")
        prefix, base = RANGES[self.index // 32], (self.index % 32) * 8
        self.host = f"{prefix}.{base + 1}"
        self.a = f"{prefix}.{base + 2}"
        self.b = f"{prefix}.{base + 3}"
        self.link = f"pwld{self.index}"
        self.procs = []
        self.holder = None
        self.dir = Path(tmp_path) / "world"
        self.dir.mkdir()
        (self.dir / "index.txt").write_text("hello from the world\n")
        self._clear()
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _clear(self):
        """What a run killed before its end left under this index."""
        sh("ip", "link", "del", self.link, check=False)

    def inside(self, *argv):
        """argv run in the world's network namespace."""
        return ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--", *argv]

    def _build(self):
        # The namespace is held by a process of its own, not named (ip netns
        # add would mount it in /run/netns: the host's mount table changed);
        # it goes when that process and the servers in it have gone.
        self.holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"],
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        ns = f"/proc/{self.holder.pid}/ns/net"
        if not wait_for(lambda: os.path.exists(ns) and
                        os.readlink(ns) != os.readlink("/proc/self/ns/net"), 10):
            raise RuntimeError("the world's namespace was not made")
        sh("ip", "link", "add", self.link, "type", "veth", "peer", "name", "eth0",
           "netns", str(self.holder.pid))
        sh("ip", "addr", "add", f"{self.host}/29", "dev", self.link)
        sh("ip", "link", "set", self.link, "up")
        for cmd in (["addr", "add", f"{self.a}/29", "dev", "eth0"],
                    ["addr", "add", f"{self.b}/29", "dev", "eth0"],
                    ["link", "set", "eth0", "up"], ["link", "set", "lo", "up"]):
            sh(*self.inside("ip", *cmd))
        names = {"allowed.test": self.a, "other.test": self.b, "wild.test": self.b,
                 "hostaddr.test": self.host, "meta.test": "169.254.169.254",
                 "private.test": "10.0.0.1"}
        dns = ["/usr/sbin/dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
               "--no-resolv", "--no-hosts", "--pid-file=", "--bind-interfaces",
               f"--listen-address={self.a}", "--user=root"]
        dns += [f"--address=/{n}/{a}" for n, a in names.items()]
        self._start(dns)
        self._start(["/usr/bin/python3", "-m", "http.server", "80", "--directory",
                     str(self.dir)])
        self._start(["/usr/bin/python3", "-c", UDP_ECHO, self.a])
        self._make_ca()
        self._start(["/usr/bin/python3", "-c", HTTPS, self.a, str(self.dir / "server.pem"),
                     str(self.dir / "server.key"), str(self.dir)])
        if not wait_for(lambda: self._serves(), 15):
            raise RuntimeError("the world's servers did not start")

    def _make_ca(self):
        """A CA of the test's own, and a certificate it signs for
        allowed.test (ca.pem: what a sandbox is told to trust)."""
        d = self.dir
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
           "-subj", "/CN=petri test CA", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=allowed.test",
           "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"))
        (d / "ext").write_text("subjectAltName=DNS:allowed.test\n")
        sh("openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"),
           "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile",
           str(d / "ext"), "-out", str(d / "server.pem"))
        self.ca = (d / "ca.pem").read_bytes()

    def _start(self, argv):
        self.procs.append(subprocess.Popen(self.inside(*argv),
                                           stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL,
                                           start_new_session=True))

    def _serves(self):
        r = sh(*self.inside("/usr/bin/python3", "-c"),
               "import socket\n"
               f"socket.create_connection(('{self.a}', 80), 1).close()\n"
               f"socket.create_connection(('{self.a}', 53), 1).close()\n"
               f"socket.create_connection(('{self.a}', 443), 1).close()\n", check=False)
        return r.returncode == 0

    def config(self, network):
        """petri.ini's [network] for a daemon of this world: network is
        the section's other lines."""
        return f"[network]\nupstream_dns = {self.a}\n{network}\n"

    def close(self):
        for p in self.procs + ([self.holder] if self.holder else []):
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)
        self._clear()
        if self.lock:
            self.lock.close()


HTTPS = """
import functools, http.server, ssl, sys
addr, cert, key, root = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
srv = http.server.ThreadingHTTPServer((addr, 443), handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"""

UDP_ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9999))
while True:
    data, peer = s.recvfrom(2048)
    s.sendto(data, peer)
"""


PROBE = r'''
import errno, json, socket
def reach(target):
    host, _, port = target.partition(':')
    try:
        addr = socket.getaddrinfo(host, int(port or 80), socket.AF_INET,
                                  socket.SOCK_STREAM)[0][4]
    except socket.gaierror:
        return 'noname'
    s = socket.socket()
    s.settimeout(5.0)
    try:
        s.connect(addr)
        s.sendall(b'GET /index.txt HTTP/1.0\r\nHost: x\r\n\r\n')
        data = b''
        while len(data) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return 'reached' if b'hello from the world' in data else 'answered'
    except socket.timeout:
        return 'timeout'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
print('PROBE ' + json.dumps({t: reach(t) for t in TARGETS}))
'''


def probe(api, sid, targets):
    """{target: outcome} of each target tried from the session's sandbox."""
    r = api.execute(sid, f"TARGETS = {list(targets)!r}\n" + PROBE, timeout_s=30)
    assert r.get("status") == "ok", r
    line = next(l for l in r["stdout"].splitlines() if l.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


def router_processes(daemon_pid):
    """{pid: name} of a daemon's descendants that are the router's:
    dnsmasq (and the pid 1 above each, a fork of the daemon's own binary)
    and slirp4netns."""
    out = {}
    for pid in process_tree(daemon_pid):
        line = command_line(pid) or ""
        if "dnsmasq" in line or "slirp4netns" in line:
            out[pid] = line.split()[0]
    return out
