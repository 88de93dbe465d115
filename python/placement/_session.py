"""The session a Client opens for itself (SessionService,
docs/api/sessions.md): everything the client's calls create belongs to it,
so a process that dies leaves nothing behind once the lease runs out, and
close() frees it at once. A background thread renews the lease every
ttl / 3; a renewal that finds the session gone (NOT_FOUND) stops and sets
`lost`. The C++ client's client::Session.

Thread-safe.
"""
from __future__ import annotations

import os
import socket
import threading
from typing import Any, Optional

from placement import errors
from placement.v1 import session_service_pb2 as spb
from placement.v1 import session_service_pb2_grpc


class OwnSession:
    """Opens the session on construction; close() ends it."""

    def __init__(self, transport: Any, ttl: Optional[float]) -> None:
        self._transport = transport
        self._stub = session_service_pb2_grpc.SessionServiceStub(transport.channel)
        request = spb.OpenSessionRequest(
            name=f"python pid {os.getpid()} on {socket.gethostname()}"[:128])
        if ttl:
            request.ttl.FromNanoseconds(int(ttl * 1e9))
        response = transport.unary(self._stub.OpenSession, request, idempotent=False)
        self.id: str = response.session.id
        self.ttl: float = response.session.ttl.ToNanoseconds() / 1e9
        self.lost = False
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="placement-session",
                                        daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self._transport.unary(self._stub.RenewSession,
                                      spb.RenewSessionRequest(session_id=self.id),
                                      idempotent=True)
                self.renewals += 1
            except errors.NotFoundError:
                self.lost = True  # the lease ran out: nothing left to renew
                return
            except errors.PlacementError:
                pass  # the daemon restarting, the network: again next period

    def persist(self, tensor_ids: Any) -> None:
        """Takes tensors out of every session: they outlive the client."""
        self._transport.unary(self._stub.PersistTensors,
                              spb.PersistTensorsRequest(tensor_ids=list(tensor_ids)),
                              idempotent=True)

    def abandon(self) -> None:
        """Stops renewing a session the daemon no longer has."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def close(self) -> int:
        """Stops renewing and ends the session, deleting what it holds;
        returns how many tensors went. Idempotent (later calls return 0)."""
        if self._stop.is_set():
            return 0
        self._stop.set()
        self._thread.join()
        response = self._transport.unary(self._stub.CloseSession,
                                         spb.CloseSessionRequest(session_id=self.id),
                                         idempotent=False)
        return int(response.deleted_tensors)
