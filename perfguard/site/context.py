"""Where a command works: its state directory, its site directory, its database and its
Slurm, resolved once at the command's entry and passed down to every layer.

The embedded cluster is one site among others: when the state directory runs one, its
``slurm.conf`` and its database are the defaults here, and nowhere else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from perfguard import paths
from perfguard.cluster.layout import ClusterLayout
from perfguard.errors import PerfguardError, UsageError


@dataclass(frozen=True)
class Context:
    state: Path
    #: --dsn, else $PERFGUARD_DSN; None: the embedded cluster's database, if any.
    given_dsn: str | None = None

    @classmethod
    def resolve(cls, state: Path | None = None, dsn: str | None = None) -> Context:
        return cls((state or paths.state_dir()).resolve(),
                   dsn or os.environ.get("PERFGUARD_DSN") or None)

    @property
    def site(self) -> Path | None:
        """The site directory in use (None: the shipped defaults alone)."""
        return paths.site_dir()

    @property
    def embedded(self) -> ClusterLayout | None:
        """The embedded cluster this state directory runs, read once found (None: the
        site's own Slurm and database)."""
        found = self.__dict__.get("_embedded")
        if found is None:
            found = ClusterLayout.load(self.state)
            if found is not None:
                object.__setattr__(self, "_embedded", found)
        return found

    @property
    def dsn(self) -> str:
        """The run's database: the one its references come from is the one it is stored in."""
        if self.given_dsn:
            return self.given_dsn
        if self.embedded is not None:
            return self.embedded.dsn
        raise PerfguardError("no database configured: pass --dsn, set PERFGUARD_DSN, or start "
                             "the embedded one with `perfguard cluster up`")

    def slurm_env(self) -> dict[str, str] | None:
        """The environment Slurm commands run in: the embedded cluster's ``slurm.conf``
        (and its Slurm's programs first on the PATH, when it runs one built from source)
        where this state runs one; None: ours as it is (the site's Slurm)."""
        if self.embedded is None:
            return None
        return self.embedded.slurm_environ()

    def scheduled_environment(self) -> dict[str, str]:
        """What a scheduled nightly needs to find this context again, every night alike
        (never the submitting shell's environment, which sbatch would otherwise copy):
        state and site directories, the DSN, and the embedded cluster's slurm.conf. A DSN
        with a password in it is refused: Slurm shows a job's command line to others."""
        from urllib.parse import urlsplit

        environment = {"PERFGUARD_STATE_DIR": str(self.state)}
        if self.site is not None:
            environment["PERFGUARD_SITE"] = str(self.site)
        if self.embedded is not None:
            environment["SLURM_CONF"] = str(self.embedded.slurm_conf)
        dsn = self.dsn
        inline = urlsplit(dsn).password if "://" in dsn else ("password=" in dsn or None)
        if inline:
            raise UsageError("the DSN carries a password, which a schedule would show in "
                             "Slurm's job records: put it in a passfile and name that "
                             "(postgresql://USER@HOST/DB?passfile=~/.pgpass)")
        environment["PERFGUARD_DSN"] = dsn
        return environment
