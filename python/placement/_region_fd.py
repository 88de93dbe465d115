"""The platform side of same-host regions (docs/api/regions.md), as the C++
client does it (client/src/region_fd.cc, common/host_identity.cc):

* host_id() / boot_id(): what GetStatus reports for the daemon's machine
  (/etc/machine-id, else the hostname; /proc/sys/kernel/random/boot_id);
* local_target(): whether a gRPC target can reach a daemon sharing memory
  with this process (a unix socket or a loopback address);
* create_sealed_memfd(): a memfd sized and sealed against shrinking and
  growing (the daemon refuses a memfd without F_SEAL_SHRINK: a file that
  shrinks under its mapping would make its next access fault);
* pass_fd(): hands an fd to the daemon's region socket (SCM_RIGHTS, one
  byte) and reads back the single-use token ("ERR <reason>" on refusal);
* redeem_view(): the other direction (shard views, docs/api/views.md):
  sends "V<token>\n" and receives "OK <n>" with n fds.

Linux only; nothing here talks gRPC.
"""
from __future__ import annotations

import fcntl
import os
import socket
from typing import List

from placement import errors

_TOKEN_TIMEOUT = 10.0  # seconds to wait for the daemon's answer on the region socket


def _first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().strip()
    except OSError:
        return ""


def host_id() -> str:
    """/etc/machine-id, else the hostname (the daemon's GetStatus.host_id rule)."""
    return _first_line("/etc/machine-id") or socket.gethostname()


def boot_id() -> str:
    return _first_line("/proc/sys/kernel/random/boot_id")


def local_target(target: str) -> bool:
    """A unix socket, or a loopback host: the only targets whose daemon can
    share memory with this process (a same-host daemon reached through
    another address is probably behind NAT or a proxy; the stream is right
    there)."""
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    for prefix in ("dns:///", "ipv4:", "ipv6:"):
        if target.startswith(prefix):
            target = target[len(prefix):]
    return (target.startswith(("127.", "localhost:", "[::1]:")) or target == "localhost")


def create_sealed_memfd(name: str, size: int) -> int:
    """A memfd of `size` bytes sealed with F_SEAL_SHRINK | F_SEAL_GROW |
    F_SEAL_SEAL; the caller owns the fd. ResourceExhaustedError when the
    memory cannot be made."""
    try:
        fd = os.memfd_create(name or "placement-region", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except OSError as e:
        raise errors.ResourceExhaustedError(f"memfd_create: {e.strerror}") from None
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except OSError as e:
        os.close(fd)
        raise errors.ResourceExhaustedError(
            f"cannot size and seal a {size}-byte memfd: {e.strerror}") from None
    return fd


def socket_address(address: str) -> str:
    """The AF_UNIX address of a GetStatus.region_socket ("@name" is a Linux
    abstract socket: a leading NUL byte)."""
    if not address or len(address.encode()) >= 108:
        raise errors.InvalidArgumentError(f"bad region socket address '{address}'")
    return "\0" + address[1:] if address.startswith("@") else address


def pass_fd(address: str, fd: int) -> str:
    """Sends `fd` to the region socket at `address` and returns the token.
    UnavailableError when the socket cannot be reached or says nothing;
    FailedPreconditionError when the daemon answers "ERR <reason>". The fd
    stays the caller's."""
    path = socket_address(address)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_TOKEN_TIMEOUT)
        try:
            sock.connect(path)
        except OSError as e:
            raise errors.UnavailableError(
                f"cannot reach the daemon's region socket {address}: "
                f"{e.strerror or e}") from None
        try:
            if socket.send_fds(sock, [b"R"], [fd]) != 1:
                raise OSError("short write")
        except OSError as e:
            raise errors.UnavailableError(
                f"cannot pass the fd to {address}: {e.strerror or e}") from None
        reply: List[bytes] = []
        size = 0
        while size < 512:
            try:
                part = sock.recv(128)
            except OSError:
                break
            if not part:
                break
            reply.append(part)
            size += len(part)
            if b"\n" in part:
                break
    text = b"".join(reply).decode(errors="replace")
    if "\n" not in text:
        raise errors.UnavailableError(f"the region socket {address} closed without answering")
    line = text.split("\n", 1)[0]
    if line.startswith("ERR "):
        raise errors.FailedPreconditionError(f"region socket: {line[4:]}")
    return line


def redeem_view(address: str, token: str) -> List[int]:
    """Redeems a view token (ExportShards) on the region socket and returns
    the fds handed over, in order (the caller owns them). UnavailableError
    when the socket cannot be reached or breaks off; NotFoundError with the
    daemon's reason for "ERR" (an unknown, used or expired token)."""
    path = socket_address(address)
    fds: List[int] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_TOKEN_TIMEOUT)
        try:
            sock.connect(path)
            sock.sendall(b"V" + token.encode() + b"\n")
            # The line arrives with the first fds; more ride on 1-byte messages.
            data, got, _, _ = socket.recv_fds(sock, 512, 253)
        except OSError as e:
            raise errors.UnavailableError(
                f"cannot redeem a view token on {address}: {e.strerror or e}") from None
        fds.extend(got)
        text = data.decode(errors="replace")
        try:
            if "\n" not in text:
                raise errors.UnavailableError(
                    f"the region socket {address} closed without answering the view token")
            line = text.split("\n", 1)[0]
            if line.startswith("ERR "):
                raise errors.NotFoundError(f"region socket: {line[4:]}")
            if not line.startswith("OK "):
                raise errors.InternalError(f"region socket: unexpected answer {line!r}")
            expected = int(line[3:])
            while len(fds) < expected:
                try:
                    part, more, _, _ = socket.recv_fds(sock, 1, 253)
                except OSError as e:
                    raise errors.UnavailableError(
                        f"the region socket {address} broke off: {e.strerror or e}") from None
                if not part:
                    raise errors.UnavailableError(
                        f"the region socket {address} sent {len(fds)} of {expected} fds")
                fds.extend(more)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
    return fds
