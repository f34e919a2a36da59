"""What every area module gets: the `Check` record and the run context."""

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Check:
    """One row of the matrix: a subprocess that exits 0 on success."""

    client: str
    version: str
    name: str
    argv: list
    env: dict = field(default_factory=dict)
    cwd: Path | None = None
    timeout: float = 300.0


@dataclass
class Context:
    """The broker under test and where things are."""

    bootstrap: str
    # A scratch directory for this run (deleted afterwards).
    work: Path
    # The repository root.
    repo: Path
    # What scripts/compat built or installed, by name (see its *.sh files),
    # read from <out>/env as KEY=VALUE lines.
    installed: dict
    # --try-all: also run checks that are not on a pass list, to grow it.
    try_all: bool
    # The broker's listeners by security protocol (PLAINTEXT, SSL: client
    # certificates required, SASL_SSL: SCRAM-SHA-512), "host:port" each.
    listeners: dict = field(default_factory=dict)
    # The run's throwaway PKI (pki.Pki): the CA, the client's certificate.
    pki: object = None
    # The SASL_SSL listener's SCRAM-SHA-512 user: (name, password).
    scram_user: tuple = ()
