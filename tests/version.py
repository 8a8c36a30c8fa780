"""What petri says it is, for the tiers that check it (docs/releasing.md):
the version a binary reports, and the one the source tree it was built
from gives (scripts/version)."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def reported(petri):
    """The version `petri --version` prints ("petri VERSION")."""
    out = subprocess.run([petri, "--version"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    name, version = out.split()
    assert name == "petri", out
    return version


def of_source(root=ROOT):
    """What scripts/version prints for the tree at root."""
    return subprocess.run([str(Path(root) / "scripts" / "version")], capture_output=True,
                          text=True, timeout=30, check=True).stdout.strip()
