"""A real etcd and kube-apiserver on loopback for the ``apiserver`` test tier.

The binaries are found as controller-runtime's envtest finds them: a folder named by ``KUBEBUILDER_ASSETS``
(else envtest's default ``/usr/local/kubebuilder/bin``) holding ``etcd`` and ``kube-apiserver``
(``setup-envtest use 1.36 -p path`` prints one). Everything lives in
a temporary directory: a CA and a serving certificate for 127.0.0.1 (openssl), a service-account key pair
(for TokenRequest), two static tokens in ``system:masters`` (``admin`` for the tests, ``topolink-agent`` for
an agent the tests run with full rights, so that its requests are told apart in the log), etcd's data, and an
audit log of every request at the Metadata level, which the tests read to count writes and check the
User-Agent.

Both processes run in process groups of their own; :meth:`ApiServer.stop` signals exactly those groups,
SIGTERM then SIGKILL, and the session fixture calls it however the tests ended. :meth:`ApiServer.restart`
stops and starts the API server alone (etcd and its data stay), as an upgrade or a crash would.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ASSETS = "KUBEBUILDER_ASSETS"
SKIP = ("apiserver tier skipped: it needs envtest's etcd and kube-apiserver (go install "
        "sigs.k8s.io/controller-runtime/tools/setup-envtest@latest; then "
        "export KUBEBUILDER_ASSETS=$(setup-envtest use 1.36 -p path))")
CONTROL_PLANE_SKIP = ("control-plane tier skipped: it needs kube-scheduler and kube-controller-manager v1.36 beside "
                      "etcd and kube-apiserver in $KUBEBUILDER_ASSETS (built from the same Kubernetes tree)")
HOST = "127.0.0.1"
AGENT_USER = "topolink-agent"
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
"""


# envtest's own default when KUBEBUILDER_ASSETS is unset.
DEFAULT_ASSETS = Path("/usr/local/kubebuilder/bin")


def assets(binaries: tuple[str, ...] = ("etcd", "kube-apiserver")) -> Path | None:
    """The folder of envtest's binaries, when it holds ``binaries``: $KUBEBUILDER_ASSETS, else envtest's default."""
    path = Path(os.environ.get(ASSETS) or DEFAULT_ASSETS)
    return path if all(os.access(path / b, os.X_OK) for b in binaries) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(pki: Path) -> None:
    pki.mkdir(parents=True)
    _openssl("genrsa", "-out", str(pki / "sa.key"), "2048")
    _openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=topolink-test-ca",
             "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver", "-keyout",
             str(pki / "serving.key"), "-out", str(pki / "serving.csr"))
    (pki / "serving.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
                                     "keyUsage=digitalSignature,keyEncipherment\n")
    _openssl("x509", "-req", "-in", str(pki / "serving.csr"), "-CA", str(pki / "ca.crt"), "-CAkey",
             str(pki / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile", str(pki / "serving.ext"),
             "-out", str(pki / "serving.crt"))


@dataclass
class ApiServer:
    bin: Path
    root: Path
    port: int = field(default_factory=free_port)
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: base64.b32encode(os.urandom(20)).decode().lower())
    agent_token: str = field(default_factory=lambda: base64.b32encode(os.urandom(20)).decode().lower())
    extra_args: tuple[str, ...] = ()  # feature gates and runtime-config beyond the defaults
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    @property
    def ca(self) -> Path:
        return self.root / "pki" / "ca.crt"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    @property
    def etcd_url(self) -> str:
        return f"http://{HOST}:{self.etcd_port}"

    def start(self) -> None:
        make_pki(self.root / "pki")
        (self.root / "tokens.csv").write_text(f'{self.token},admin,admin-uid,"system:masters"\n'
                                              f'{self.agent_token},{AGENT_USER},agent-uid,"system:masters"\n')
        (self.root / "audit-policy.yaml").write_text(AUDIT_POLICY)
        (self.root / "kubeconfig").write_text(self.kubeconfig_text(self.token))
        etcd = self.etcd_url
        peer = f"http://{HOST}:{self.etcd_peer_port}"
        # env -i as etcd would turn any ETCD_* variable of ours into a flag
        self._spawn("etcd", [str(self.bin / "etcd"), "--name", "t", "--data-dir", str(self.root / "etcd-data"),
                             "--listen-client-urls", etcd, "--advertise-client-urls", etcd,
                             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                             "--initial-cluster", f"t={peer}", "--log-level", "warn"],
                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root)})
        self._wait("etcd", lambda: b'"health":"true"' in httpx.get(f"{etcd}/health", timeout=2).content)
        self.start_apiserver()

    def start_apiserver(self) -> None:
        pki = self.root / "pki"
        self._spawn("kube-apiserver", [
            str(self.bin / "kube-apiserver"), "--etcd-servers", self.etcd_url, "--bind-address", HOST,
            "--advertise-address", HOST, "--secure-port", str(self.port),
            "--tls-cert-file", str(pki / "serving.crt"), "--tls-private-key-file", str(pki / "serving.key"),
            "--token-auth-file", str(self.root / "tokens.csv"), "--authorization-mode", "RBAC",
            "--service-account-key-file", str(pki / "sa.pub"),
            "--service-account-signing-key-file", str(pki / "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range", "10.0.0.0/24", "--runtime-config", "resource.k8s.io/v1=true",
            "--endpoint-reconciler-type", "none", "--profiling=false",
            "--audit-log-path", str(self.audit_log), "--audit-policy-file", str(self.root / "audit-policy.yaml"),
            "--audit-log-mode", "blocking",
            # open watches (the agents') would hold a SIGTERM for as long as they last: end them after 1 s
            "--shutdown-watch-termination-grace-period=1s", *self.extra_args], env=dict(os.environ))
        with self.admin() as http:
            self._wait("kube-apiserver /readyz", lambda: http.get("/readyz").status_code == 200)
            self._wait("namespace default", lambda: http.get("/api/v1/namespaces/default").status_code == 200)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = (self.root / f"{name}.log").open("ab")
        self._procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                             start_new_session=True)  # a process group of its own
        log.close()

    def _wait(self, what: str, ready: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    tail = (self.root / f"{name}.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"{name} exited with {proc.returncode} while waiting for {what}:\n{tail}")
            try:
                if ready():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready after {timeout:g} s")

    def _stop(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)  # the group this fixture started, by its id
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def start_control_plane(self, controllers: str = "*") -> None:
        """kube-scheduler and kube-controller-manager (every default controller unless ``controllers`` says
        otherwise, in the controller manager's ``--controllers`` syntax), as a cluster runs them: the admin
        kubeconfig, no leader election, their own ports on loopback."""
        kubeconfig = str(self.kubeconfig())
        common = ["--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
                  "--authorization-kubeconfig", kubeconfig, "--authentication-skip-lookup=true",
                  "--leader-elect=false", "--bind-address", HOST]
        ports = {"kube-scheduler": free_port(), "kube-controller-manager": free_port()}
        self._spawn("kube-scheduler", [str(self.bin / "kube-scheduler"), *common,
                                       "--secure-port", str(ports["kube-scheduler"])], env=dict(os.environ))
        pki = self.root / "pki"
        self._spawn("kube-controller-manager", [
            str(self.bin / "kube-controller-manager"), *common, "--secure-port", str(ports["kube-controller-manager"]),
            "--controllers", controllers, "--use-service-account-credentials=false",
            "--service-account-private-key-file", str(pki / "sa.key"), "--root-ca-file", str(pki / "ca.crt")],
            env=dict(os.environ))
        for name, port in ports.items():
            url = f"https://{HOST}:{port}/healthz"
            self._wait(name, lambda url=url: httpx.get(url, verify=False, timeout=2).status_code == 200)

    def stop(self) -> None:
        """The controllers, then the API server, then its storage; only the process groups started here."""
        self._stop("kube-controller-manager")
        self._stop("kube-scheduler")
        self._stop("kube-apiserver")
        self._stop("etcd")

    def restart(self, extra_args: tuple[str, ...] | None = None) -> None:
        """Stop the API server and start it again (``extra_args``: with other flags from now on). Where the scheduler
        and the controllers run they start again after it, with informers that list the fresh server, rather than
        be left to find it on their reflectors' back-off (once, a DaemonSet applied after the restart got no pod
        within 90 s)."""
        controllers = "kube-controller-manager" in self._procs
        if controllers:
            self._stop("kube-controller-manager")
            self._stop("kube-scheduler")
        self._stop("kube-apiserver")
        if extra_args is not None:
            self.extra_args = extra_args
        self.start_apiserver()
        if controllers:
            self.start_control_plane()

    # -- clients ------------------------------------------------------------------------------------
    def kubeconfig_text(self, token: str) -> str:
        ca = base64.b64encode(self.ca.read_bytes()).decode()
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "t",
            "clusters": [{"name": "t", "cluster": {"server": self.url, "certificate-authority-data": ca}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}]})

    def kubeconfig(self, token: str | None = None, where: Path | None = None) -> Path:
        if token is None:
            return self.root / "kubeconfig"
        path = where or self.root / f"kubeconfig-{abs(hash(token)):x}"
        path.write_text(self.kubeconfig_text(token))
        return path

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=ssl.create_default_context(cafile=str(self.ca)), timeout=30,
                            headers={"Authorization": f"Bearer {self.token}"})

    # -- the audit log ------------------------------------------------------------------------------
    def audit_mark(self) -> int:
        """A position in the audit log: events after it are :meth:`audit` ``(since=mark)``."""
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audit(self, since: int = 0) -> list[dict[str, Any]]:
        with self.audit_log.open("rb") as f:
            f.seek(since)
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]


WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def by(events: list[dict[str, Any]], user: str = AGENT_USER) -> list[dict[str, Any]]:
    return [e for e in events if e["user"]["username"] == user]


# Reviews are a "create" that stores nothing: the agent's start-up preflight asks one per permission it needs.
REVIEW_GROUPS = frozenset({"authorization.k8s.io", "authentication.k8s.io"})


def writes(events: list[dict[str, Any]], user: str = AGENT_USER) -> list[dict[str, Any]]:
    """The write requests (create, update, patch, delete, deletecollection) ``user`` made; access reviews, which
    store nothing, are not writes."""
    return [e for e in by(events, user)
            if e["verb"] in WRITES and (e.get("objectRef") or {}).get("apiGroup") not in REVIEW_GROUPS]


def calls(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(verb, resource) of each request, for messages."""
    return [(e["verb"], (e.get("objectRef") or {}).get("resource", e.get("requestURI", ""))) for e in events]


def running(bin_dir: Path, root: Path, control_plane: bool = False) -> Iterator[ApiServer]:
    """Start one (with the scheduler and the controllers when ``control_plane``), yield it, stop it (and keep
    its logs beside the temporary data for a failing run)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the apiserver tier needs openssl for its certificates")
    server = ApiServer(bin=bin_dir, root=root)
    try:
        server.start()
        if control_plane:
            server.start_control_plane()
        yield server
    finally:
        server.stop()
