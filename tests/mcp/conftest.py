"""Fixtures of the MCP tests: `make_mcp`/`mcp` start `petri mcp` (stdio),
`make_http`/`http_server` start `petri serve` for /mcp.  Helpers are in
mcphelp.py."""
import pytest

from mcphelp import HttpServer, McpProc


@pytest.fixture
def make_mcp(tmp_path):
    procs = []

    def make(*args, config=None):
        p = McpProc(args, config=config, tmp_path=tmp_path)
        procs.append(p)
        return p

    yield make
    for p in procs:
        if p.proc.returncode is None:
            code, err = p.close()
            assert code == 0, err


@pytest.fixture
def mcp(make_mcp):
    m = make_mcp()
    m.initialize()
    return m


@pytest.fixture
def make_http(tmp_path):
    servers = []

    def make(config=""):
        s = HttpServer(tmp_path, config)
        servers.append(s)
        return s

    yield make
    for s in servers:
        code, err = s.stop()
        assert code == 0, err


@pytest.fixture
def http_server(make_http):
    return make_http()
