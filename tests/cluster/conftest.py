"""The fixture of the cluster tier: `cluster`, one Cluster (clusterhelp.py)
for the whole module, taken down at its end, when no process and no cgroup
of a node may outlive it and its directory must be gone."""
import os

import pytest

from clusterhelp import Cluster
from harness import cgroup_dirs, still_alive


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    if os.path.exists(os.path.join(c.dir, "haproxy.pid")):
        p, pids = c.down()
        assert p.returncode == 0, p.stderr
        for pid, tree in zip(pids, c.trees.values()):
            assert not still_alive(tree), f"processes of node pid {pid} outlived it"
            assert not cgroup_dirs(pid), f"cgroups of node pid {pid} left behind"
        assert not os.path.exists(c.dir), os.listdir(c.dir)
