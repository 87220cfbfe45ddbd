"""Throw-away database servers that a test starts on loopback ports and stops.

* ``RedisCluster``: a local Redis Cluster (``redis-server --cluster-enabled yes``,
  joined with ``redis-cli --cluster create``), masters and replicas, in a tmp dir.
* ``RedisServer``: one private ``redis-server`` (the fault tests kill and restart it).
* ``PostgresServer``: one private PostgreSQL (``initdb`` + ``pg_ctl``), trust auth.

Each finds its binaries on the machine; ``missing()`` says why a server cannot run here
(the caller skips with that reason). Ports are free loopback ports picked at random (a
Redis Cluster node also needs port + 10000 for its bus).
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(bus: bool = False) -> int:
    """A loopback port nobody listens on (and port + 10000 too, with ``bus``)."""
    for _ in range(200):
        port = random.randint(20000, 55000 - 1) if bus else random.randint(20000, 60000)
        if _free(port) and (not bus or _free(port + 10000)):
            return port
    raise RuntimeError("no free loopback port")


def _wait(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except RuntimeError:
            raise
        except Exception as e:  # keep polling, report the last one
            last = e
        time.sleep(0.05)
    raise RuntimeError(f"{what} not ready within {timeout} s (last: {last!r})")


def _cli(port: int, *args: str, timeout: float = 10) -> str:
    out = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return out.stdout


# -- Redis ----------------------------------------------------------------------------


def redis_missing() -> str | None:
    for exe in ("redis-server", "redis-cli"):
        if shutil.which(exe) is None:
            return f"{exe} is not installed: no private Redis server can be started"
    return None


class RedisServer:
    """One ``redis-server`` on a loopback port; ``restart`` keeps the port and its data."""

    def __init__(self, root: Path | None = None, *, cluster: bool = False) -> None:
        self.port = free_port(bus=cluster)
        # A directory of its own under the system tmp dir (not pytest's tmp_path, which
        # other pytest sessions of the same user may prune while this one runs).
        self.root = Path(tempfile.mkdtemp(prefix="tether-redis-", dir=root))
        self.dir = self.root / str(self.port)
        self.dir.mkdir()
        self.cluster = cluster
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [
            "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--save", "",
            # Every write in the AOF before the reply: a restart loses nothing acked.
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--daemonize", "no",
            "--protected-mode", "no",
            "--logfile", str(self.dir / "redis.log"),
        ]  # fmt: skip
        if self.cluster:
            args += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(self.dir / "nodes.conf"),
                "--cluster-node-timeout", "1500",
            ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                log = self.dir / "redis.log"
                raise RuntimeError(
                    f"redis-server :{self.port} exited: "
                    + (log.read_text()[-500:] if log.exists() else "no log")
                )
            return _cli(self.port, "PING").strip() == "PONG"

        _wait(up, 30, f"redis-server :{self.port}")

    def stop(self, *, kill: bool = False) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        if kill:
            p.kill()
        else:
            p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        self.stop(kill=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def cli(self, *args: str) -> str:
        return _cli(self.port, *args)


class RedisCluster:
    """``masters`` masters with ``replicas`` replicas each, on loopback ports."""

    def __init__(self, *, masters: int = 3, replicas: int = 1) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tether-redis-cluster-"))
        self.nodes = [RedisServer(self.root, cluster=True) for _ in range(masters * (1 + replicas))]
        self.masters = masters
        self.replicas = replicas

    @property
    def url(self) -> str:
        """A plain URL to one node: the store finds out that it is a cluster."""
        return self.nodes[0].url

    def start(self) -> None:
        try:
            for n in self.nodes:
                n.start()
            create = ["redis-cli", "--cluster", "create"]
            create += [f"127.0.0.1:{n.port}" for n in self.nodes]
            create += ["--cluster-replicas", str(self.replicas), "--cluster-yes"]
            subprocess.run(
                create,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            _wait(self._ready, 30, "the Redis Cluster")
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        for n in self.nodes:
            info = n.cli("CLUSTER", "INFO")
            if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
                return False
        # Every node sees the same masters, and every replica has synced with its master.
        for n in self.nodes:
            lines = [ln.split() for ln in n.cli("CLUSTER", "NODES").splitlines() if ln]
            if len(lines) != len(self.nodes):
                return False
            if sum("master" in f[2] for f in lines) != self.masters:
                return False
            info = n.cli("INFO", "replication")
            if "role:slave" in info and "master_link_status:up" not in info:
                return False
        return True

    def stop(self) -> None:
        for n in self.nodes:
            n.stop(kill=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def roles(self) -> dict[int, tuple[str, str, str]]:
        """port -> (node id, "master"/"slave", master id or "-"), as CLUSTER NODES says."""
        out = {}
        for line in self.nodes[0].cli("CLUSTER", "NODES").splitlines():
            f = line.split()
            if len(f) < 8:
                continue
            port = int(f[1].split("@")[0].rsplit(":", 1)[1])
            role = "master" if "master" in f[2] else "slave"
            out[port] = (f[0], role, f[3])
        return out

    def node(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)


# -- PostgreSQL -----------------------------------------------------------------------


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    exe = shutil.which("pg_ctl")
    return Path(exe).parent if exe else None


def postgres_missing() -> str | None:
    b = pg_bin()
    if b is None or not (b / "initdb").exists():
        return "initdb/pg_ctl not found (/usr/lib/postgresql/*/bin): no private PostgreSQL"
    if os.geteuid() == 0 and _as_postgres() is None:
        return "PostgreSQL refuses to run as root, and there is no postgres user to run it"
    return None


def _as_postgres() -> list[str] | None:
    """As root, the prefix that runs a command as the ``postgres`` user (None: none)."""
    import pwd

    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return None
    exe = shutil.which("runuser")
    return [exe, "-u", "postgres", "--"] if exe else None


class PostgresServer:
    """A private cluster (initdb) run by pg_ctl on a loopback port, trust auth."""

    def __init__(self) -> None:
        b = pg_bin()
        assert b is not None
        self.bin = b
        # Its own directory under the system tmp dir, removed by ``stop``; not pytest's
        # tmp_path, whose parents pytest keeps at mode 0700 (the postgres user, which runs
        # the server when the tests run as root, could not reach it).
        self.root = Path(tempfile.mkdtemp(prefix="tether-pg-"))
        self.data = self.root / "pgdata"
        self.port = free_port()
        self.log = self.root / "postgres.log"
        # PostgreSQL refuses to run as root: then as the postgres user, in a dir it owns.
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            import pwd

            self.prefix = _as_postgres() or []
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str, timeout: float = 60) -> None:
        done = subprocess.run(
            [
                *self.prefix,
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                *args,
            ],
            cwd=self.data.parent,  # one the postgres user may enter
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl {args[-1]} failed: {done.stderr}{done.stdout}\n{log}")

    def start(self) -> None:
        initdb = [*self.prefix, str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres"]
        subprocess.run(
            [*initdb, "--auth=trust", "--no-sync", "-E", "UTF8"],
            cwd=self.data.parent,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} "
            "-c fsync=off -c max_connections=60 -c shared_buffers=16MB"
        )
        self._ctl("-o", opts, "-w", "start")

    def restart(self) -> None:
        self._ctl("-m", "fast", "-w", "restart")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._ctl("-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
