"""Who may talk to a GT cluster: ZeroMQ's own CURVE on every TCP socket, and roles.

A cluster's *keyring* is a directory (mode 0700) of ZeroMQ certificates (``zmq.auth``):

* ``server.key`` / ``server.key_secret``: the dispatcher's own keypair (everyone needs the public
  half to know they talk to the real dispatcher; only the dispatcher holds the secret);
* ``worker``, ``client``, ``monitor``, ``admin``: one keypair per role. Holding a role's secret is
  being that role: **worker** registers workers; **client** runs programs; **monitor** reads the
  event stream and stats (read-only); **admin** does everything, and alone applies shard configs
  and memory settings.
* ``tenants/NAME.key``: a keypair per *tenant* (``gt keys tenant add NAME``), for shared machines
  where each person should hold a key of their own. A tenant's key acts as the client role; the
  dispatcher knows the tenant by name (``gt top`` shows it), a tenant sees the details of all its
  programs, and its programs share one memory quota on each worker (the dispatcher names the
  tenant in each batch it hands a worker). ``gt keys tenant remove NAME`` takes one person's
  access away without giving everyone new keys: a running dispatcher and its local workers read
  the change within a second, refuse that key's new connections and end its programs.

``gt keys`` makes one (``$GT_KEYS`` or ``~/.config/gt/keys``) and ``gt keys export --role R DIR``
(or ``--tenant NAME``) copies what one role (or one tenant) needs. Every TCP socket a dispatcher
or worker binds is a CURVE server whose ZAP handler (pyzmq's
:class:`~zmq.auth.thread.ThreadAuthenticator`) lets in only the roles that socket serves, and
names each peer's role (``client:NAME`` for a tenant) as the ``User-Id`` of its messages; every
socket that connects over TCP is a CURVE client. A worker's data socket uses a keypair the worker
makes when it starts (its public key travels in its registration). A private local cluster (what
``gt.connect()`` starts for one program) uses ipc sockets in the 0700 runtime directory instead:
the file system is its guard, and nothing needs keys.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
from zmq.utils import z85

# zmq.auth (certificates, the ZAP thread) is imported where it is used: it imports asyncio, a
# tenth of a second that a local cluster over ipc, which uses no keys, need not pay at start.

ROLES = ("worker", "client", "monitor", "admin")
SERVER = "server"
#: The roles that may run programs (say hello and send batches on the front socket).
RUNS_PROGRAMS = frozenset({"client", "admin", None})  # (None: over ipc, the owner)
KEYS_ENV = "GT_KEYS"
#: The keyring's folder of tenants' keys, and what a tenant may be called.
TENANTS = "tenants"
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
#: Which roles each kind of socket lets in (the ZAP domain is the kind).
SERVES: dict[str, tuple[str, ...]] = {
    # every role may ask the front for the other endpoints; only clients (and admins) may run
    # programs there (the dispatcher checks each message's role)
    "front": ("client", "admin", "monitor", "worker"),
    "back": ("worker",),
    "control": ("client", "monitor", "admin", "worker"),
    "events_in": ("worker", "admin"),  # clients publish through the front socket (checked)
    "events": ("monitor", "admin"),
    "data": ("client", "worker", "admin"),
}


class KeysMissing(RuntimeError):
    """The keys a socket needs are missing or unreadable; the message says what to do."""


def default_dir() -> Path:
    """Where keys live: ``$GT_KEYS``, else ``~/.config/gt/keys``."""
    env = os.environ.get(KEYS_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gt" / "keys"


@dataclass
class Keyring:
    """The keys one process has: the dispatcher's public key, and per role the public keys and
    whichever secrets this machine holds.

    Attributes:
        path: the directory they were read from.
        server: the dispatcher's ``(public, secret)`` (``secret`` is ``None`` off its machine).
        public: role -> public key (z85 bytes).
        secret: role -> secret key, for the roles this process may act as.
        tenants: a tenant's public key (z85) -> its name (``tenants/NAME.key``).
    """

    path: Path
    server: tuple[bytes, bytes | None]
    public: dict[str, bytes] = field(default_factory=dict)
    secret: dict[str, bytes] = field(default_factory=dict)
    tenants: dict[bytes, str] = field(default_factory=dict)
    _tenants_seen: int | None = None  # the tenants folder's mtime when last read
    _revoked: set[str] = field(default_factory=set)  # removed since take_revoked last asked
    _revoked_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def peer_of(self, key: bytes) -> str | None:
        """Who holds this public key (z85): a role, ``client:NAME`` for a tenant's own key (what
        sockets report as the ``User-Id``), or ``None``."""
        for role, pub in self.public.items():
            if pub == key:
                return role
        name = self.tenants.get(key)
        return f"client:{name}" if name is not None else None

    def role_of(self, key: bytes) -> str | None:
        """The role whose public key this is (z85); a tenant's key is a client's."""
        return base_role(self.peer_of(key))

    def refresh_tenants(self) -> None:
        """Read the tenants' keys again if their folder changed since (cheap when it did not:
        one ``stat``). Both the ZAP thread (at each handshake) and the dispatcher's loop call
        this; the names that went are kept for :meth:`take_revoked`."""
        d = self.path / TENANTS
        try:
            seen = d.stat().st_mtime_ns
        except OSError:
            seen = None
        if seen == self._tenants_seen:
            return
        before = set(self.tenants.values())
        self.tenants = _read_tenants(d)  # (one assignment: the other thread may be reading)
        self._tenants_seen = seen
        with self._revoked_lock:  # (the ZAP thread and the dispatcher's loop both get here)
            self._revoked.update(before - set(self.tenants.values()))

    def take_revoked(self) -> list[str]:
        """The tenants removed since the last call (and not added again), for the dispatcher to
        end their programs."""
        with self._revoked_lock:
            gone, self._revoked = self._revoked, set()
        return sorted(gone - set(self.tenants.values()))

    def best(self, *wanted: str) -> str:
        """The first of ``wanted`` this keyring can act as.

        Raises:
            KeysMissing: it holds none of them.
        """
        for role in wanted:
            if role in self.secret:
                return role
        raise KeysMissing(
            f"the keys in {self.path} hold no {' or '.join(wanted)} secret: ask the cluster's "
            f"admin for them (gt keys export --role {wanted[0]} DIR, then GT_KEYS=DIR)"
        )


def create(path: str | os.PathLike[str] | None = None, *, force: bool = False) -> Keyring:
    """Make a new keyring (every role) in ``path`` (default :func:`default_dir`), mode 0700.

    Raises:
        FileExistsError: a keyring is there already (unless ``force``).
    """
    d = Path(path) if path is not None else default_dir()
    if (d / f"{SERVER}.key").exists() and not force:
        raise FileExistsError(f"{d} already holds GT keys (--force makes new ones)")
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    import zmq.auth  # noqa: PLC0415 - see the imports

    for name in (SERVER, *ROLES):
        zmq.auth.create_certificates(str(d), name)
        os.chmod(d / f"{name}.key_secret", 0o600)
    return load(d)


def load(path: str | os.PathLike[str] | None = None) -> Keyring:
    """Read a keyring (every public key there, and the secrets present).

    Raises:
        KeysMissing: no keyring there, or one readable by other users.
    """
    d = Path(path) if path is not None else default_dir()
    server = d / f"{SERVER}.key"
    if not server.exists():
        raise KeysMissing(
            f"no GT keys in {d}: run `gt keys` there (or set {KEYS_ENV} to where the cluster's "
            "admin put them)"
        )
    for secret in d.glob("*.key_secret"):  # a secret others can read is no secret
        if secret.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeysMissing(f"{secret} is readable by other users: chmod 600 {secret}")
    pub, sec = _pair(d, SERVER)
    ring = Keyring(d, (pub, sec))
    for role in ROLES:
        if (d / f"{role}.key").exists():
            ring.public[role], s = _pair(d, role)
            if s is not None:
                ring.secret[role] = s
    ring.refresh_tenants()
    return ring


def _read_tenants(d: Path) -> dict[bytes, str]:
    """``tenants/*.key``: public key -> name (an unreadable one is left out, as if revoked)."""
    import zmq.auth  # noqa: PLC0415 - see the imports

    found: dict[bytes, str] = {}
    for f in sorted(d.glob("*.key")) if d.is_dir() else ():
        if TENANT_NAME.fullmatch(f.stem):
            try:
                found[zmq.auth.load_certificate(str(f))[0]] = f.stem
            except (OSError, ValueError):
                continue
    return found


def check_tenant_name(name: str) -> str:
    """``name`` if a tenant may be called so.

    Raises:
        KeysMissing: it may not (letters, digits, ``_ . -``, 32 at most, not starting with one
            of the last three).
    """
    if not TENANT_NAME.fullmatch(name or ""):
        raise KeysMissing(
            f"a tenant's name is letters, digits, _ . - (at most 32), not {name!r:.40}"
        )
    return name


def add_tenant(path: str | os.PathLike[str], name: str) -> Path:
    """Make tenant ``name``'s keypair in keyring ``path``; returns its public key file.

    Raises:
        KeysMissing: a bad name, or no keyring there.
        FileExistsError: the tenant exists.
    """
    ring = load(path)
    check_tenant_name(name)
    d = ring.path / TENANTS
    if (d / f"{name}.key").exists():
        raise FileExistsError(f"tenant {name} already has keys in {d}")
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o700)
    import zmq.auth  # noqa: PLC0415 - see the imports

    pub, sec = zmq.auth.create_certificates(str(d), name)
    os.chmod(sec, 0o600)
    return Path(pub)


def remove_tenant(path: str | os.PathLike[str], name: str) -> None:
    """Take tenant ``name``'s keys out of keyring ``path`` (its access ends).

    Raises:
        KeysMissing: no such tenant there.
    """
    d = Path(path) / TENANTS
    check_tenant_name(name)
    if not (d / f"{name}.key").exists():
        raise KeysMissing(f"no tenant {name} in {d.parent}")
    for f in (d / f"{name}.key", d / f"{name}.key_secret"):
        f.unlink(missing_ok=True)


def _pair(d: Path, name: str) -> tuple[bytes, bytes | None]:
    import zmq.auth  # noqa: PLC0415 - see the imports

    secret = d / f"{name}.key_secret"
    try:
        if secret.exists():
            pub, sec = zmq.auth.load_certificate(str(secret))
            return pub, sec
        pub, _ = zmq.auth.load_certificate(str(d / f"{name}.key"))
        return pub, None
    except (OSError, ValueError) as exc:
        raise KeysMissing(f"cannot read GT key {d / name}: {exc}") from None


def export(ring: Keyring, role: str, dest: str | os.PathLike[str],
           tenant: str | None = None) -> list[Path]:  # fmt: skip
    """Copy what a process of ``role`` needs into ``dest`` (made 0700): the dispatcher's public
    key, every role's public key, and that role's secret; a worker also gets the tenants' public
    keys (its data socket lets them in). With ``tenant``, the tenant's own keypair stands in for
    the client role's. Returns the files written.

    Raises:
        KeysMissing: the keyring does not hold that role's secret (or that tenant's).
    """
    if role not in ROLES:
        raise KeysMissing(f"no role {role!r}: one of {', '.join(ROLES)}")
    own: dict[str, Path] = {}
    if tenant is not None:
        role = "client"
        src = ring.path / TENANTS / f"{check_tenant_name(tenant)}.key"
        if not src.with_suffix(".key_secret").exists():
            raise KeysMissing(f"no tenant {tenant} in {ring.path} (gt keys tenant add {tenant})")
        own = {"client.key": src, "client.key_secret": src.with_suffix(".key_secret")}
    else:
        ring.best(role)
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    files = [
        f"{SERVER}.key",
        *(f"{r}.key" for r in ROLES if r in ring.public),
        f"{role}.key_secret",
    ]
    if role == "worker" and (ring.path / TENANTS).is_dir():
        (out / TENANTS).mkdir(exist_ok=True)
        os.chmod(out / TENANTS, 0o700)
        files += [f"{TENANTS}/{p.name}" for p in sorted((ring.path / TENANTS).glob("*.key"))]
    written = []
    for f in files:
        shutil.copyfile(own.get(f, ring.path / f), out / f)
        os.chmod(out / f, 0o600 if f.endswith("_secret") else 0o644)
        written.append(out / f)
    return written


# ------------------------------------------------------------------------------ sockets
def _authenticator(ctx: zmq.Context, ring: Keyring, extra: dict[bytes, str]) -> Any:
    """pyzmq's ZAP handler, naming each authenticated peer by its role (the ``User-Id``)."""
    from zmq.auth.thread import ThreadAuthenticator  # noqa: PLC0415 - see the imports

    class Auth(ThreadAuthenticator):
        def curve_user_id(self, client_key: bytes) -> str:
            key = z85.encode(client_key)
            return ring.peer_of(key) or extra.get(key) or "?"

    return Auth(ctx)


class _Roles:
    """A ZAP credentials provider: the peer's key must be one of these roles'."""

    def __init__(self, guard: Guard, roles: Iterable[str]) -> None:
        self.guard, self.roles = guard, frozenset(roles)

    def callback(self, domain: str, key: bytes) -> bool:
        ring = self.guard.ring
        ring.refresh_tenants()  # a tenant added or removed a moment ago counts now
        role = ring.role_of(key) or self.guard.extra.get(key)
        return role in self.roles


class Guard:
    """The serving side of CURVE in one process: makes sockets CURVE servers that let in the
    roles they are for (connecting sockets use :func:`secure_connect`). One per ZeroMQ context;
    :meth:`close` stops its ZAP thread.

    Args:
        ctx: the process's context.
        ring: the cluster's keys.
    """

    def __init__(self, ctx: zmq.Context, ring: Keyring) -> None:
        self.ctx, self.ring = ctx, ring
        self.extra: dict[bytes, str] = {}  # keys this process trusts beyond the keyring's
        self._auth: Any = None  # the ZAP thread, started by the first serve()
        self._domains: set[str] = set()

    def trust(self, public: bytes, role: str) -> None:
        """Also let in this public key, as ``role`` (e.g. the dispatcher's own event emitter)."""
        self.extra[public] = role

    def serve(
        self, sock: zmq.Socket, kind: str, keypair: tuple[bytes, bytes] | None = None
    ) -> None:
        """Make ``sock`` (before it binds) a CURVE server that lets in the roles of ``kind``
        (:data:`SERVES`), with ``keypair`` (default: the dispatcher's)."""
        pub, sec = keypair or self.ring.server
        if sec is None:
            raise KeysMissing(f"the keys in {self.ring.path} hold no server secret (serve from the "
                            "dispatcher's machine, or run gt keys there)")  # fmt: skip
        if self._auth is None:
            self._auth = _authenticator(self.ctx, self.ring, self.extra)
            self._auth.start()
        if kind not in self._domains:
            self._auth.configure_curve_callback(
                domain=kind, credentials_provider=_Roles(self, SERVES[kind])
            )
            self._domains.add(kind)
        sock.curve_secretkey, sock.curve_publickey = sec, pub
        sock.curve_server = True
        sock.zap_domain = kind.encode()

    def close(self) -> None:
        """Stop the ZAP thread."""
        if self._auth is not None:
            self._auth.stop()
            self._auth = None


def base_role(peer: str | None) -> str | None:
    """The role in a peer's name (``client:alice`` is a client)."""
    return peer.split(":", 1)[0] if peer else peer


def role_of(frame: Any) -> str | None:
    """The role of the peer a received frame came from (``None`` on an ipc socket)."""
    try:
        peer = frame.get("User-Id")
    except (zmq.ZMQError, AttributeError):
        return None
    return peer.split(":", 1)[0] if peer else peer


def tenant_of(frame: Any) -> str | None:
    """The tenant whose own key sent a received frame (``None``: a role's key, or ipc)."""
    try:
        peer = frame.get("User-Id")
    except (zmq.ZMQError, AttributeError):
        return None
    return peer.split(":", 1)[1] if peer and ":" in peer else None


def keypair() -> tuple[bytes, bytes]:
    """A fresh CURVE keypair (a worker's data socket, the dispatcher's own emitter)."""
    return zmq.curve_keypair()


_rings: dict[Path, Keyring] = {}


def keyring(path: str | os.PathLike[str] | None = None) -> Keyring:
    """This process's keyring (read once per directory; see :func:`load`)."""
    d = Path(path) if path is not None else default_dir()
    ring = _rings.get(d)
    if ring is None:
        ring = _rings[d] = load(d)
    return ring


def is_tcp(endpoint: str) -> bool:
    """Whether an endpoint is TCP (and so needs CURVE)."""
    return endpoint.startswith("tcp://")


def secure_connect(sock: zmq.Socket, endpoint: str, roles: tuple[str, ...] = ("admin", "client"),
                   server_key: bytes | None = None) -> str | None:  # fmt: skip
    """Before ``sock`` connects to ``endpoint``: over TCP, make it a CURVE client as the first of
    ``roles`` this process's keyring holds (``$GT_ROLE`` picks one), to the dispatcher (or to
    ``server_key``). Returns the role, ``None`` for ipc/inproc endpoints (nothing to do).

    Raises:
        KeysMissing: TCP, and no usable keys (the message says where to get them).
    """
    if not is_tcp(endpoint):
        return None
    ring = keyring()
    wanted = os.environ.get("GT_ROLE")
    role = ring.best(*((wanted,) if wanted else roles))
    sock.curve_secretkey = ring.secret[role]
    sock.curve_publickey = ring.public[role]
    sock.curve_serverkey = server_key or ring.server[0]
    return role


def silence_hint(address: str) -> str:
    """What to add to "no dispatcher answered at ``address``": over TCP, CURVE drops a client whose
    keys are not the cluster's without a word, so a wrong keyring looks like a dead address."""
    if isinstance(address, str) and address.startswith("tcp://"):
        return (
            " (is it running? If it is, your keys ($GT_KEYS, else the default keyring) may not be "
            "that cluster's: see `gt keys`)"
        )
    return ""
