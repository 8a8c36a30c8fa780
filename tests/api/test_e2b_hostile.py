"""The E2B front end attacked (issue 11, a hostile review): what a client
without the API key, or with only one sandbox's token, can reach; bytes that
are not UTF-8 where the answers quote what the client sent.

One daemon for the module, in a memory cgroup of its own, with an E2B-shaped
key; raw requests, as no SDK would send them.
"""
import json
import secrets
import socket
import urllib.parse

import pytest
import requests

from apihelp import answer_on, attacked_server, wait_for
from harness import unread

CG_LIMIT = 2 << 30
ENVD, CODE = "49983", "49999"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    key = "e2b_" + secrets.token_hex(16)
    with attacked_server(tmp_path_factory.mktemp("e2b-hostile"), "e2b-hostile", CG_LIMIT,
                         f"[server]\napi_keys = {key}\n") as srv:
        srv.key = key
        yield srv


@pytest.fixture(scope="module")
def box(daemon):
    r = requests.post(daemon.url + "/sandboxes", headers={"X-API-KEY": daemon.key},
                      json={"timeout": 600}, timeout=120)
    assert r.status_code == 201, r.text
    b = r.json()
    yield b
    requests.delete(daemon.url + "/sandboxes/" + b["sandboxID"],
                    headers={"X-API-KEY": daemon.key}, timeout=60)


def data(box, port=ENVD, **extra):
    h = {"E2b-Sandbox-Id": box["sandboxID"], "E2b-Sandbox-Port": port,
         "X-Access-Token": box["envdAccessToken"]}
    h.update(extra)
    return h


def raw_get(url, path, headers):
    """A GET whose path goes on the wire as written (requests would quote it)."""
    s = requests.Session()
    req = requests.Request("GET", url + "/", headers=headers).prepare()
    req.url = url + path
    return s.send(req, timeout=60)


# ---- the native API's own routes stay the native API's --------------------

@pytest.mark.parametrize("path", ["/metrics", "/v1/openapi.json", "/v1/sessions"])
def test_native_routes_need_the_api_key_whatever_e2b_headers_say(daemon, box, path):
    """A data-plane port petri does not serve (no credential at all), and a
    sandbox's own token: neither opens the server's metrics, its API
    document or the native session list, which need the API key."""
    for headers in ({"E2b-Sandbox-Id": "x", "E2b-Sandbox-Port": "1"},
                    {"E2b-Sandbox-Id": box["sandboxID"], "E2b-Sandbox-Port": "80"},
                    data(box), data(box, CODE),
                    {"X-Access-Token": box["envdAccessToken"]}):
        r = requests.get(daemon.url + path, headers=headers, timeout=60)
        assert r.status_code == 401, (headers, r.status_code, r.text[:300])
        assert "petri_" not in r.text and "openapi" not in r.text
    assert requests.get(daemon.url + path, timeout=60,
                        headers={"Authorization": "Bearer " + daemon.key}).status_code == 200


def test_a_native_upload_with_e2b_headers_needs_the_api_key(daemon, box):
    """A native upload (PUT /v1/sessions/{id}/files/...) streams into its
    session's writer, which the native route starts once its key is
    checked: with E2B headers, and no key, it must still be refused, never
    run without its writer."""
    for headers in ({"E2b-Sandbox-Id": "x", "E2b-Sandbox-Port": "1"}, data(box)):
        r = requests.put(f"{daemon.url}/v1/sessions/{box['sandboxID']}/files/a.txt",
                         data=b"x" * 100000, headers=headers, timeout=60)
        assert r.status_code == 401, r.text
    assert requests.get(daemon.url + "/healthz", timeout=30).status_code == 200


@pytest.mark.parametrize("port,status", [("8080", b"401"), ("80a", b"404")])
def test_a_port_without_credentials_is_answered_before_its_body(daemon, port, status):
    """No credential for a sandbox's server on another port (its token is
    needed), or a port that is no number: answered from the headers, as a
    request without the API key is, so that such a client holds none of the
    server's budget for bodies while it sends one slowly."""
    u = urllib.parse.urlsplit(daemon.url)
    c = socket.create_connection((u.hostname, u.port), timeout=60)
    c.sendall((f"POST /execute HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
               f"E2b-Sandbox-Id: x\r\nE2b-Sandbox-Port: {port}\r\n"
               "Content-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{").encode())
    head = answer_on(c)   # the rest of the request's body never comes
    c.close()
    assert head.split(b" ", 2)[1] == status, head[:300]


# ---- what the answers quote is made valid UTF-8 ------------------------------

def test_bytes_that_are_not_utf8_in_a_path_get_a_4xx(daemon, box):
    """Answers quote the path or id the client sent: a byte that is not
    UTF-8 there must not turn a client's 4xx into the daemon's 500."""
    for path in ("/files?path=%ff%fe", "/files?path=/etc/%ff", "/nothing%ff"):
        r = raw_get(daemon.url, path, data(box))
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text)
        assert isinstance(r.json()["code"], int) and r.json()["message"], r.text
    for path in ("/sandboxes/%ff%fe", "/templates/%ff", "/sandboxes/x/%ff"):
        r = raw_get(daemon.url, path, {"X-API-KEY": daemon.key})
        assert 400 <= r.status_code < 502 and r.status_code != 500, (path, r.status_code,
                                                                      r.text)
        assert r.json()["code"] == r.status_code, r.text


def test_a_quote_cut_inside_a_character_gets_a_4xx(daemon, box):
    """Messages quote at most so many bytes: a cut in the middle of a
    two-byte character is still no 500."""
    long_name = "/etc/" + "x" + "\u00e9" * 400
    r = requests.post(daemon.url + "/filesystem.Filesystem/Stat", timeout=60,
                      data=json.dumps({"path": long_name}),
                      headers=data(box, **{"Content-Type": "application/json",
                                           "Connect-Protocol-Version": "1"}))
    assert r.status_code == 403, r.text
    assert r.json()["code"] == "permission_denied", r.text
    for odd in (0, 1):
        r = requests.post(daemon.url + "/sandboxes", headers={"X-API-KEY": daemon.key},
                          json={"templateID": "t" * (62 + odd) + "\u00e9" * 10}, timeout=60)
        assert r.status_code == 400, r.text
        assert "template" in r.json()["message"]


# ---- a sandbox that goes away while its request's body arrives --------------

def new_box(daemon):
    r = requests.post(daemon.url + "/sandboxes", headers={"X-API-KEY": daemon.key},
                      json={}, timeout=120)
    assert r.status_code == 201, r.text
    return r.json()


def slow_request(url, method, path, headers, body):
    """Send the headers and all of the body but its last byte: the daemon
    has authorized the request and waits for the rest."""
    u = urllib.parse.urlsplit(url)
    c = socket.create_connection((u.hostname, u.port), timeout=60)
    head = f"{method} {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    c.sendall(head.encode() + body[:-1])
    return c, body[-1:]


def answer(c, rest):
    c.sendall(rest)
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    c.close()
    return int(data.split(b" ", 2)[1]), data


@pytest.mark.parametrize("kill", ["e2b", "native"])
def test_a_token_only_request_whose_sandbox_is_killed_meanwhile(daemon, kill):
    """e2b 2.14 sends /files with its token and no E2b-Sandbox-Id: the token
    names the sandbox.  Killed between the headers (authorized) and the end
    of the body, the sandbox is gone when the request is answered: 502, and
    the daemon keeps serving."""
    b = new_box(daemon)
    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"a.txt\"\r\n\r\nhello\r\n--{boundary}--\r\n").encode()
    c, rest = slow_request(daemon.url, "POST", "/files?path=/home/user/a.txt",
                           {"X-Access-Token": b["envdAccessToken"],
                            "Content-Type": f"multipart/form-data; boundary={boundary}"},
                           body)
    assert wait_for(lambda: unread(c) == 0, 30), "the daemon never read the request"
    if kill == "e2b":
        r = requests.delete(daemon.url + "/sandboxes/" + b["sandboxID"],
                            headers={"X-API-KEY": daemon.key}, timeout=60)
    else:
        r = requests.delete(daemon.url + "/v1/sessions/" + b["sandboxID"],
                            headers={"Authorization": "Bearer " + daemon.key}, timeout=60)
        # the registry forgets it at its next sweep: a create or a list
        assert requests.get(daemon.url + "/v2/sandboxes", headers={"X-API-KEY": daemon.key},
                            timeout=60).status_code == 200
    assert r.status_code in (200, 204), r.text
    status, raw = answer(c, rest)
    assert status in (401, 502), raw[:500]
    assert requests.get(daemon.url + "/healthz", timeout=30).status_code == 200


# ---- refusals before a handler runs speak E2B's words ----------------------

def test_early_refusals_are_e2b_shaped(daemon, box):
    """The SDKs read {"code": <int>, "message"}; the native {"error": {...}}
    would reach the user as "[object Object]"."""
    key = {"X-API-KEY": daemon.key}
    cases = [
        requests.post(daemon.url + "/sandboxes", headers={**key, "Content-Type": "application/json"},
                      data=b"{not json", timeout=60),
        requests.post(daemon.url + "/sandboxes", headers={**key, "Content-Type": "text/plain"},
                      data=b"{}", timeout=60),
        requests.post(daemon.url + "/execute", headers={**data(box, CODE),
                                                        "Content-Type": "application/json"},
                      data=b"[" * 100 + b"]" * 100, timeout=60),
    ]
    for r in cases:
        assert 400 <= r.status_code < 500, r.text
        body = r.json()
        assert body.get("code") == r.status_code and body.get("message"), body
