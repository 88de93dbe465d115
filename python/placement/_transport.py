"""The gRPC transport: one channel per Client, deadlines, retries, errors.

Everything that decides *how* bytes reach the daemon lives here, so the
transport options still to come plug in at one place:
  * TLS, bearer tokens and sessions (docs/security.md): `open_channel` is
    the only function that creates a channel; it picks the credentials from
    TransportOptions and adds the token and session id to every call.
  * the same-host shared-memory region path (docs/api/regions.md):
    `transfer_path` says which way tensor bytes go; the Client's RegionPool
    (placement._region_pool) applies it to every transfer.

Message-size limits stay at gRPC's defaults: tensor bytes travel in chunks of
`chunk_bytes` (1 MiB, at most 4 MiB), as the C++ client sends them.

Retries: only calls that change nothing on the daemon (listing, describing,
downloading, batch-size advice) are retried, and only on UNAVAILABLE (the
daemon not reachable yet, restarting, or draining), `retries` times with
exponential backoff, each attempt with a fresh deadline. Uploads, placements,
deletes and collectives are never retried: a retry after a lost reply could
do the work twice.
"""
from __future__ import annotations

import dataclasses
import enum
import queue
import socket
import threading
import time
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import grpc

from placement import errors

DEFAULT_TARGET = "127.0.0.1:50051"
TARGET_ENV = "PLACEMENT_TARGET"
MAX_CHUNK_BYTES = 4 << 20


class TransferPath(str, enum.Enum):
    """Which way tensor bytes travel between this process and the daemon.
    The strings work wherever one is taken; they are the C++ client's
    TransferPath (kAuto, kStream, kRegion, kInPlace).

    AUTO: for a single-array upload (device_put, the seed calls; not a
      multi-controller part) of at least 1 MiB against a daemon on this
      host, written in place into the daemon's device memory (one copy,
      placement._inplace); for a whole download (to_numpy) of at least
      1 MiB whose shards are all on that daemon, read in place out of its
      device memory (one copy, placement._inplace_read); when the daemon
      cannot (FAILED_PRECONDITION, UNIMPLEMENTED), and for every other
      transfer, a shared-memory region when the daemon is on this host and
      the transfer has at least 256 KiB, else the gRPC stream.
    STREAM: always gRPC chunks.
    REGION: always a region; FailedPreconditionError when the daemon is not
      on this host.
    INPLACE: single-array uploads always written in place, whole downloads
      always read in place; FailedPreconditionError when the daemon is not
      on this host or cannot (uploads: a CUDA daemon, a shard under 256 KiB
      or on another daemon, fd passing off, a daemon without ReserveUpload;
      downloads: a partial tensor, shards on another daemon, fd passing off,
      a daemon without exports). Other transfers as under AUTO.
    """

    AUTO = "auto"
    STREAM = "stream"
    REGION = "region"
    INPLACE = "inplace"

    @classmethod
    def of(cls, value: Union[str, "TransferPath"]) -> "TransferPath":
        try:
            return cls(value)
        except ValueError:
            raise errors.InvalidArgumentError(
                f"transfer_path is {value!r}; expected 'auto', 'stream', 'region' or "
                f"'inplace'") from None


class SessionPolicy(str, enum.Enum):
    """Whether a Client opens a session for its calls (the C++ client's
    SessionPolicy; the strings work wherever one is taken).

    OPEN: connect() opens a session every call of the client joins, renews
      its lease in the background and closes it on close(): what the client
      creates is freed when it closes or its process dies (within the
      session's ttl). RemoteArray.keep() takes a tensor out of it.
    NONE: no session of its own: what the calls create is durable (or
      belongs to `session_id` when that is set).
    """

    OPEN = "open"
    NONE = "none"

    @classmethod
    def of(cls, value: Union[str, "SessionPolicy"]) -> "SessionPolicy":
        try:
            return cls(value)
        except ValueError:
            raise errors.InvalidArgumentError(
                f"session is {value!r}; expected 'open' or 'none'") from None


@dataclasses.dataclass(frozen=True)
class TransportOptions:
    """How a Client talks to the daemon.

    timeout: deadline in seconds of every unary call (None = none).
    stream_timeout: deadline of each upload / download / prefetch stream
      (None = none; large tensors take as long as they take).
    connect_timeout: how long connect() waits for the daemon to accept the
      connection (0 = do not wait; the first call then reports UNAVAILABLE).
      A refused connection (nothing listening, an unreachable host) fails at
      once, without waiting for it; a failed attempt where something listens
      (a TLS handshake, a one-off failure) once gRPC's reconnection has not
      connected within LISTENER_GRACE (5 s).
    chunk_bytes: bytes per upload message and requested per download
      message, 1 to 4 MiB.
    retries, retry_backoff: attempts after the first for idempotent calls
      that failed with UNAVAILABLE, and the first pause (doubling).
    channel_options: extra gRPC channel arguments.
    tls: verify the daemon over TLS against `tls_ca_file` (PEM; None = the
      system roots); `tls_cert_file` + `tls_key_file` present a client
      certificate (mutual TLS); `tls_server_name` overrides the name checked.
    token: sent on every call as "authorization: Bearer <token>".
    session_id: sent on every call as "placement-session" (SessionService):
      what the calls create belongs to that session, opened elsewhere.
    session: with no session_id, SessionPolicy.OPEN (the default) opens a
      session of the client's own; NONE makes what it creates durable. A
      session needs the daemon: with connect_timeout 0 none is opened. After a
      daemon restart (which forgets sessions) the client opens a new one.
    session_ttl: the lease of the client's own session in seconds (None =
      the daemon's default, 60 s): how long the daemon keeps what a dead
      client created.
    transfer_path: TransferPath (or its string) of uploads, downloads and
      prefetch batches: "auto" (against a same-host daemon, uploads of 1 MiB
      or more written in place, whole downloads of 1 MiB or more read in
      place, and other transfers of 256 KiB or more through shared-memory
      regions), "stream", "region" or "inplace".
    inplace_mapping_bytes: how many bytes of the daemon's memory files the
      client keeps mapped between uploads written in place and downloads
      read in place (least recently
      used unmapped first; 0 = none kept: every upload maps afresh). Default
      2 GiB.
    """

    timeout: Optional[float] = 30.0
    stream_timeout: Optional[float] = None
    connect_timeout: float = 10.0
    chunk_bytes: int = 1 << 20
    retries: int = 5
    retry_backoff: float = 0.1
    keepalive_time_ms: int = 30_000
    keepalive_timeout_ms: int = 10_000
    channel_options: Sequence[Tuple[str, Any]] = ()
    tls: bool = False
    tls_ca_file: Optional[str] = None
    tls_cert_file: Optional[str] = None
    tls_key_file: Optional[str] = None
    tls_server_name: Optional[str] = None
    token: Optional[str] = None
    session_id: Optional[str] = None
    session: Union[str, SessionPolicy] = SessionPolicy.OPEN
    session_ttl: Optional[float] = None
    transfer_path: Union[str, TransferPath] = TransferPath.AUTO
    inplace_mapping_bytes: int = 2 << 30

    def __post_init__(self) -> None:
        object.__setattr__(self, "transfer_path", TransferPath.of(self.transfer_path))
        object.__setattr__(self, "session", SessionPolicy.of(self.session))
        if not 1 <= self.chunk_bytes <= MAX_CHUNK_BYTES:
            raise errors.InvalidArgumentError(
                f"chunk_bytes is {self.chunk_bytes}; expected 1 to {MAX_CHUNK_BYTES}")
        if self.inplace_mapping_bytes < 0:
            raise errors.InvalidArgumentError(
                f"inplace_mapping_bytes is {self.inplace_mapping_bytes}; must be >= 0")
        if self.retries < 0:
            raise errors.InvalidArgumentError(f"retries is {self.retries}; must be >= 0")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise errors.InvalidArgumentError(
                "tls_cert_file and tls_key_file must be given together")


class _MetadataInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                           grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the client's metadata (token, session) to every call. `metadata`
    is the Transport's list: a session id added later (the client's own
    session, once opened) rides on every later call."""

    def __init__(self, metadata: List[Tuple[str, str]]) -> None:
        self._metadata = metadata

    def _details(self, details: Any) -> Any:
        metadata = tuple(details.metadata or ()) + tuple(self._metadata)
        return details._replace(metadata=metadata) if hasattr(details, "_replace") else \
            _CallDetails(details.method, details.timeout, metadata, details.credentials,
                         getattr(details, "wait_for_ready", None),
                         getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):  # type: ignore[no-untyped-def]
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):  # type: ignore[no-untyped-def]
        return continuation(self._details(details), requests)


@dataclasses.dataclass(frozen=True)
class _CallDetails(grpc.ClientCallDetails):  # type: ignore[misc]
    method: str
    timeout: Optional[float]
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


def _read(option: str, path: Optional[str]) -> Optional[bytes]:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.InvalidArgumentError(f"{option} '{path}' cannot be read: {e}") from e


def open_channel(target: str, options: TransportOptions,
                 metadata: Optional[List[Tuple[str, str]]] = None) -> grpc.Channel:
    """The channel to `target` ("host:port" or "unix:/path"). Every call
    carries the entries of `metadata` at the time it starts (the token and
    session id are added to it here)."""
    if not target:
        raise errors.InvalidArgumentError("target must not be empty")
    args = [("grpc.keepalive_time_ms", options.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", options.keepalive_timeout_ms),
            # A local daemon comes back within seconds: reconnect at that
            # pace, so retries do not meet a channel still backing off.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000)]
    args.extend(options.channel_options)
    if options.tls:
        if options.tls_server_name:
            args.append(("grpc.ssl_target_name_override", options.tls_server_name))
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read("tls_ca_file", options.tls_ca_file),
            private_key=_read("tls_key_file", options.tls_key_file),
            certificate_chain=_read("tls_cert_file", options.tls_cert_file))
        channel = grpc.secure_channel(target, credentials, options=args)
    else:
        channel = grpc.insecure_channel(target, options=args)
    metadata = metadata if metadata is not None else []
    if options.token:
        metadata.append(("authorization", f"Bearer {options.token}"))
    if options.session_id:
        metadata.append(("placement-session", options.session_id))
    return grpc.intercept_channel(channel, _MetadataInterceptor(metadata))


# After gRPC reports a failed connection to a target where something does
# listen (a plain connect succeeds), how long gRPC's own reconnection (after
# its 1 s backoff) may take before the failure stands: a failed TLS handshake
# fails within this, a one-off failure under load recovers.
LISTENER_GRACE = 5.0


def wait_ready(channel: grpc.Channel, target: str, timeout: float, *, tls: bool = False) -> None:
    """Waits up to `timeout` for the channel to connect. When gRPC reports a
    failed attempt and nothing listens at `target` (refused, unreachable, no
    such socket) it fails at once: gRPC would only retry with backoff until
    the timeout. When something does listen (a failed TLS handshake, or a
    one-off failure under load) gRPC's reconnection gets LISTENER_GRACE."""
    if timeout <= 0:
        return
    states: "queue.Queue[grpc.ChannelConnectivity]" = queue.Queue()
    hint = (" over TLS (or the TLS handshake failed: the daemon must serve TLS with a "
            "certificate that chains to the trusted CA and names the target's host)") if tls else ""
    failed = errors.UnavailableError(
        f"cannot reach placementd at {target}: the connection failed (nothing listens "
        f"there, or it refused or is unreachable){hint}")
    deadline = time.monotonic() + timeout
    give_up: Optional[float] = None  # set once a listener's connection failed
    on_change = states.put
    channel.subscribe(on_change, try_to_connect=True)
    try:
        while True:
            end = deadline if give_up is None else min(deadline, give_up)
            try:
                state = states.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                if give_up is not None:  # an attempt failed: say so, not only "within"
                    raise failed from None
                raise errors.UnavailableError(
                    f"cannot reach placementd at {target} within {timeout:g}s{hint}") from None
            if state is grpc.ChannelConnectivity.READY:
                return
            if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE and give_up is None:
                probe = min(1.0, max(0.05, deadline - time.monotonic()))
                if nothing_listens(target, probe):
                    raise failed
                give_up = time.monotonic() + LISTENER_GRACE
    finally:
        channel.unsubscribe(on_change)


def nothing_listens(target: str, timeout: float) -> bool:
    """Whether a plain connect to a gRPC `target` (host:port, [v6]:port,
    dns:///host:port, ipv4:/ipv6:, unix:path, unix:///path) fails within
    `timeout`: refused, unreachable, unresolvable or no such socket. Targets of
    other forms count as failing (gRPC's failure stands)."""
    if target.startswith("unix:"):
        path = target[len("unix:"):]
        family, where = socket.AF_UNIX, (path[2:] if path.startswith("//") else path)
    else:
        for scheme in ("dns:///", "ipv4:", "ipv6:"):
            if target.startswith(scheme):
                target = target[len(scheme):]
                break
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            return True
        try:
            info = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
        except OSError:
            return True
        family, _, _, _, where = info[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(where)
        except OSError:
            return True
    return False


class Transport:
    """A channel plus the call policy. Thread-safe."""

    def __init__(self, target: str, options: TransportOptions) -> None:
        self.target = target
        self.options = options
        self._metadata: List[Tuple[str, str]] = []
        self.channel = open_channel(target, options, self._metadata)
        # Set by a Client with a session of its own: called with a NOT_FOUND
        # that may say the session is gone (the daemon restarted, the lease
        # ran out); True when a new session replaced it and the call may be
        # made again.
        self.recover_session: Optional[Callable[[errors.PlacementError], bool]] = None

    def leave_session(self) -> None:
        """Later calls carry no session."""
        self._metadata[:] = [(k, v) for k, v in self._metadata if k != "placement-session"]

    def join_session(self, session_id: str) -> None:
        """Every later call carries "placement-session: <session_id>" (in place
        of the session it carried before)."""
        self._metadata[:] = [(k, v) for k, v in self._metadata if k != "placement-session"]
        self._metadata.append(("placement-session", session_id))

    def unary(self, method: Callable[..., Any], request: Any, *, idempotent: bool,
              timeout: Optional[float] = None) -> Any:
        """Calls a unary stub method; PlacementError on failure."""
        deadline = self.options.timeout if timeout is None else timeout
        return self.run(lambda: method(request, timeout=deadline), idempotent=idempotent)

    def run(self, attempt: Callable[[], Any], *, idempotent: bool,
            retryable: Callable[[], bool] = lambda: True) -> Any:
        """Runs `attempt` (which raises grpc.RpcError on failure), again on
        UNAVAILABLE when `idempotent` and `retryable()`; PlacementError on
        failure."""
        attempts = 1 + (self.options.retries if idempotent else 0)
        pause = self.options.retry_backoff
        recovered = False
        n = 0
        while True:
            try:
                return attempt()
            except grpc.RpcError as e:
                error = errors.from_rpc_error(e)
                # A call refused because its session is gone did nothing: with
                # a fresh session it may be made again, idempotent or not.
                if (not recovered and isinstance(error, errors.NotFoundError)
                        and self.recover_session is not None and self.recover_session(error)):
                    recovered = True
                    continue
                n += 1
                if (e.code() != grpc.StatusCode.UNAVAILABLE or not retryable()
                        or n == attempts):
                    raise error from None
            time.sleep(pause)
            pause *= 2

    def close(self) -> None:
        self.channel.close()
