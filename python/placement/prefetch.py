"""prefetch_to_device over PrefetchService.Prefetch (one bidirectional
stream per iterator, auto-release mode), as the C++ client's
PrefetchToDevice does it (client/src/prefetch_iterator.cc,
prefetch_stream.cc):

* A background producer thread pulls items (pytrees of host arrays) from
  the source iterator and sends each as a BatchHeader plus ~1 MiB chunks.
* The credit rule (docs/api/prefetch.md): the header of batch k is sent only
  after the releases that bring the sent-and-unreleased batches below
  buffer_size. The producer blocks for credit; the consumer's "next" (which
  releases the batch it had) is queued in the same critical section that
  returns the credit, and queued control messages always leave before the
  next data message, so a release slips in between a batch's chunks and never
  waits behind one. Data messages in flight are bounded (host memory stays a
  few chunks).
* The consumer's __next__ sends "next", waits until the producer has sent the
  batch it wants (or stopped), and reads its ready message: items come back
  in order, each once, as pytrees of RemoteArray (not owned: the stream
  frees batch k when batch k+1 is taken, and the rest when it ends).
* An exception from the source reaches the consumer after the batches before
  it. close() (also `with`, and garbage collection) cancels the stream: the
  daemon frees every staged batch; close() then joins the producer, waiting
  for a source call in progress to return.
* The region ring (TransportOptions.transfer_path, docs/api/regions.md):
  against a same-host daemon a batch of 256 KiB or more is copied into a
  staging region of the Client's RegionPool and sent as one region slice per
  array instead of chunks; the region goes back to the pool when the
  consumer reads the batch's ready message (the daemon has read every byte
  then) or the stream ends, and serves a later batch. Ordering, credit and
  freeing are the stream path's.
* View batches (``views=True``, docs/api/views.md): against a same-host
  daemon a reader thread takes the ready messages as the daemon sends them
  and opens a zero-copy view of every tensor of the batch while the consumer
  still works on the one before; each leaf then holds its view, so
  ``np.asarray(leaf)`` (a tensor on one device: the shard itself) and
  ``leaf.addressable_shards[i].data`` read the daemon's memory in place with
  no call (arrays under 256 KiB download, as RemoteArray's own views do). A view keeps its batch's memory on the daemon after the stream
  released the batch, until the leaf and every array from it are collected.
  Elsewhere (or when the daemon refuses an export) leaves download as usual.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Deque, Dict, Iterator, List, Optional, Set, Tuple

import grpc

from placement import _dtypes, _staging, _tensors, _tree, _wire, errors, views as _views
from placement._region_pool import AUTO_MIN_BYTES
from placement._transport import TransferPath
from placement.array import RemoteArray
from placement.client import Client
from placement.types import PrefetchStats
from placement.v1 import prefetch_service_pb2 as ppb

DEFAULT_BUFFER_SIZE = 2
_MAX_DATA_IN_QUEUE = 4


class _Requests:
    """The request iterator gRPC consumes on its own thread: control
    messages first, data messages bounded. Thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._control: Deque[Any] = collections.deque()
        self._data: Deque[Any] = collections.deque()
        self._closed = False  # half-close once the queues are empty
        self._dead = False  # the call is over

    def __iter__(self) -> "_Requests":
        return self

    def __next__(self) -> Any:
        with self._cond:
            while True:
                if self._dead:
                    raise StopIteration
                if self._control:
                    return self._control.popleft()
                if self._data:
                    self._cond.notify_all()
                    return self._data.popleft()
                if self._closed:
                    raise StopIteration
                self._cond.wait()

    def put_control(self, message: Any) -> bool:
        with self._cond:
            if self._dead or self._closed:
                return False
            self._control.append(message)
            self._cond.notify_all()
            return True

    def put_data(self, message: Any) -> bool:
        """Blocks while the data queue is full; False once the call is over."""
        with self._cond:
            while len(self._data) >= _MAX_DATA_IN_QUEUE and not self._dead:
                self._cond.wait()
            if self._dead or self._closed:
                return False
            self._data.append(message)
            self._cond.notify_all()
            return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def kill(self) -> None:
        with self._cond:
            self._dead = True
            self._control.clear()
            self._data.clear()
            self._cond.notify_all()


class _Stream:
    """The stream, its producer thread and the consumer's state. Neither the
    thread nor gRPC callbacks refer to the PrefetchIterator, so dropping the
    iterator lets the collector reach its __del__, which cancels this."""

    def __init__(self, client: Client, source: Iterator[Any], rule: Any,
                 buffer_size: int = DEFAULT_BUFFER_SIZE, *, name: str = "",
                 timeout: Optional[float] = None, views: bool = False) -> None:
        if buffer_size < 0:
            raise errors.InvalidArgumentError(
                f"buffer_size is {buffer_size}; must be >= 1 (0 selects the default "
                f"{DEFAULT_BUFFER_SIZE})")
        self._client = client
        self._source = iter(source)
        self._buffer = buffer_size or DEFAULT_BUFFER_SIZE
        self._chunk = client.options.chunk_bytes
        self._path = TransferPath.of(client.options.transfer_path)
        self._requests = _Requests()
        open_message = ppb.PrefetchRequest()
        open_message.open.buffer_size = buffer_size
        open_message.open.name = name
        open_message.open.auto_release = True
        if rule is not None:
            open_message.open.rule.CopyFrom(rule)
        self._requests.put_control(open_message)

        self._cond = threading.Condition()
        self._sent = 0  # batch headers queued
        self._produced = 0  # batches fully queued
        self._unreleased: Set[int] = set()
        self._structures: Dict[int, Tuple[Any, List[str]]] = {}
        self._staged: Dict[int, _staging.Staged] = {}  # the ring: regions the daemon may read
        self._producer_done = False
        self._producer_error: Optional[BaseException] = None
        self._stop = False
        # Consumer side.
        self._taken = 0
        self._over = False
        self._error: Optional[BaseException] = None
        self.stats: Optional[PrefetchStats] = None

        method = client.transport.channel.stream_stream(
            "/placement.v1.PrefetchService/Prefetch", request_serializer=_wire.serializer,
            response_deserializer=ppb.PrefetchResponse.FromString)
        if timeout is None:
            timeout = client.options.stream_timeout
        self._call = method(self._requests, timeout=timeout)
        self._call.add_done_callback(lambda _: self._on_call_done())
        self._thread = threading.Thread(target=self._produce, name="placement-prefetch",
                                        daemon=True)
        self._thread.start()
        # View batches: the reader's batches, views open, in order; it
        # stopped (end of stream, or the call's error in _reader_error) once
        # _reader_done.
        self._ready: Deque[Tuple[Any, List[Optional[_views.TensorView]]]] = collections.deque()
        self._reader_done = False
        self._reader_error: Optional[BaseException] = None
        self._reader: Optional[threading.Thread] = None
        if (views and self._path is not TransferPath.STREAM
                and client.regions.same_host_socket() is not None):
            self._reader = threading.Thread(target=self._read_ahead,
                                            name="placement-prefetch-views", daemon=True)
            self._reader.start()

    # --- Producer ---------------------------------------------------------------
    def _on_call_done(self) -> None:
        self._requests.kill()
        with self._cond:
            self._cond.notify_all()

    def _produce(self) -> None:
        try:
            for item in self._source:
                leaves, treedef, keys = _tree.flatten(item)
                arrays = [_dtypes.as_host_array(x) for x in leaves]
                # Copied into a region of the ring when the path allows, before
                # waiting for credit (a forced region on a remote daemon fails here).
                staged = _staging.stage(self._client.regions, self._path, arrays, locate=False)
                with self._cond:
                    while (len(self._unreleased) >= self._buffer and not self._stop
                           and not self._call.done()):
                        self._cond.wait()
                    if self._stop or self._call.done():
                        staged.release()
                        return
                    sequence = self._sent
                    self._sent += 1
                    self._unreleased.add(sequence)
                    self._structures[sequence] = (treedef, keys)
                    self._staged[sequence] = staged
                header = ppb.PrefetchRequest()
                header.batch.owner = self._client.owner
                _tensors.fill_batch_header(header.batch, list(zip(keys, arrays)))
                if not self._requests.put_data(header):
                    return
                for index, array in enumerate(arrays):
                    found = staged.slices.get(index)
                    if found is not None:
                        message = ppb.PrefetchRequest()
                        message.chunk.array_index = index
                        message.chunk.region.CopyFrom(found)
                        if not self._requests.put_data(message):
                            return
                        continue
                    for chunk in _tensors.batch_chunks(3, index, array, self._chunk):
                        if not self._requests.put_data(chunk):
                            return
                with self._cond:
                    self._produced += 1
                    self._cond.notify_all()
                    if self._stop:
                        return
        except BaseException as e:  # reaches the consumer at its position
            with self._cond:
                self._producer_error = e
        finally:
            with self._cond:
                self._producer_done = True
                self._cond.notify_all()
            if self._call.done():
                self._release_ring()

    def _release_ring(self, sequence: Optional[int] = None,
                      error: Optional[BaseException] = None) -> None:
        """Returns the region of batch `sequence` (None: of every batch) to
        the pool: the daemon has read it, or the stream is over (with
        `error`: see _staging.Staged.finish)."""
        with self._cond:
            if sequence is None:
                done = list(self._staged.values())
                self._staged.clear()
            else:
                one = self._staged.pop(sequence, None)
                done = [one] if one is not None else []
        if error is not None and any(staged.names_staging(error) for staged in done):
            self._client.regions.forget()  # the daemon forgot the pool's regions
        for staged in done:
            staged.finish(error)

    # --- View batches (reader thread) -------------------------------------------
    def _open_view(self, tensor_id: str) -> Optional[_views.TensorView]:
        try:
            return _views.TensorView(self._client, tensor_id)
        except (errors.FailedPreconditionError, errors.UnimplementedError,
                errors.ResourceExhaustedError, errors.NotFoundError):
            return None  # the leaf downloads instead

    def _view_batch(self, ready: Any) -> None:
        """Opens the views of one ready batch and queues it for the consumer
        (a frame of its own: a later error's traceback keeps none of them)."""
        self._release_ring(ready.sequence)  # the daemon read every byte of it
        # A small array downloads (as RemoteArray does): its view would be a
        # private copy on the daemon, a 256 KiB block for a few bytes.
        opened = [self._open_view(t.tensor.id) if t.tensor.size_bytes >= AUTO_MIN_BYTES else None
                  for t in ready.tensors]
        with self._cond:
            self._ready.append((ready, opened))
            self._cond.notify_all()

    def _read_ahead(self) -> None:
        error: Optional[BaseException] = None
        try:
            for response in self._call:
                if response.HasField("stats"):
                    self.stats = PrefetchStats.from_proto(response.stats)
                elif response.HasField("ready"):
                    self._view_batch(response.ready)
        except grpc.RpcError as e:  # its traceback keeps this frame: it holds no views
            error = errors.from_rpc_error(e)
        except BaseException as e:  # a view's unexpected failure reaches the consumer
            error = e
            self._call.cancel()
        with self._cond:
            self._reader_error = error
            self._reader_done = True
            self._cond.notify_all()

    def _next_ready(self) -> Tuple[Any, List[Any]]:
        """The next ready message (and its views): from the reader's queue
        with view batches, else read here. StopIteration at the end of the
        stream; the call's error as a placement error."""
        if self._reader is None:
            try:
                while True:
                    response = next(self._call)
                    if response.HasField("stats"):
                        self.stats = PrefetchStats.from_proto(response.stats)
                        continue
                    if response.HasField("ready"):
                        self._release_ring(response.ready.sequence)  # the daemon read it all
                        return response.ready, []
            except grpc.RpcError as e:
                raise errors.from_rpc_error(e) from None
        with self._cond:
            while not self._ready and not self._reader_done:
                self._cond.wait()
            if self._ready:
                return self._ready.popleft()
            if self._reader_error is not None:
                raise self._reader_error
        raise StopIteration

    # --- Consumer ---------------------------------------------------------------
    def next(self) -> Any:
        if self._over:
            if self._error is not None:
                raise self._error
            raise StopIteration
        with self._cond:
            # "next": the daemon releases batch taken-1. Queued in the same
            # critical section that returns its credit (see module docstring).
            if self._taken >= 1:
                self._unreleased.discard(self._taken - 1)
            next_message = ppb.PrefetchRequest()
            next_message.next.SetInParent()
            self._requests.put_control(next_message)
            self._cond.notify_all()
            while self._produced <= self._taken and not self._producer_done:
                self._cond.wait()
            available = self._produced > self._taken
            producer_error = self._producer_error
        if not available:
            self._finish()  # raises the daemon's error, if any
            return self._end(producer_error)
        try:
            ready, opened = self._next_ready()
        except StopIteration:
            return self._end(errors.UnavailableError(
                f"the daemon finished the prefetch stream before delivering batch {self._taken}"))
        except Exception as e:  # the call's (or a view's) error, as a placement error
            return self._end(e)
        if ready.sequence != self._taken:
            self._call.cancel()
            return self._end(errors.InternalError(
                f"the daemon sent batch {ready.sequence} where batch {self._taken} was due"))
        with self._cond:
            treedef, keys = self._structures.pop(ready.sequence)
        by_key = {t.key: (t.tensor, opened[i] if opened else None)
                  for i, t in enumerate(ready.tensors)}
        leaves = []
        for k in keys:
            info, held = by_key[k]
            leaf = RemoteArray(self._client, info, owned=False)
            # The stream releases its batches: a view made later would hold a
            # released batch's memory (views.md); only the view opened with
            # the batch (views=True) serves it.
            leaf._viewable = False
            leaf._held_view = held
            leaves.append(leaf)
        self._taken += 1
        return _tree.unflatten(treedef, leaves)

    def _finish(self) -> None:
        """Half-closes and reads to the end (or lets the reader): the
        daemon's final status."""
        self._requests.close()
        if self._reader is not None:
            self._reader.join()
            if self._reader_error is not None:
                self._end(self._reader_error)
            return
        try:
            for response in self._call:
                if response.HasField("stats"):
                    self.stats = PrefetchStats.from_proto(response.stats)
        except grpc.RpcError as e:
            self._end(errors.from_rpc_error(e))

    def _end(self, error: Optional[BaseException]) -> Any:
        self._over = True
        self._error = error
        if error is not None:
            self._call.cancel()
        self._join()
        self._release_ring(error=error)
        if error is not None:
            raise error
        raise StopIteration

    def _join(self) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join()
        if self._reader is not None and threading.current_thread() is not self._reader:
            self._reader.join()
        with self._cond:
            unread = list(self._ready)
            self._ready.clear()
        for _, opened in unread:  # views of batches nobody took
            for view in opened:
                if view is not None:
                    view.close()

    # --- Cancellation -------------------------------------------------------------
    def close(self) -> None:
        """Cancels the stream (the daemon frees every staged batch) and joins
        the producer. Idempotent; a finished iterator is left as it is."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if not self._over:
            self._over = True
            self._error = errors.CancelledError("the prefetch stream was cancelled")
            self._call.cancel()
        self._requests.kill()
        self._join()
        self._release_ring()

    def cancel_nowait(self) -> None:
        """close() without joining (safe from a finalizer)."""
        if not self._over:
            self._stop = True
            self._call.cancel()
            self._requests.kill()


class PrefetchIterator:
    """Iterator of device-placed batches; see module docstring.

    `rule`: a PlacementRule applied to every array of every batch.
    `buffer_size`: batches held on the daemon at most (0 = 2).
    `timeout`: deadline of the whole stream (None: the client's
    TransportOptions.stream_timeout).
    `views`: yield view batches (module docstring): against a same-host
    daemon every leaf reads the daemon's memory in place.
    """

    def __init__(self, client: Client, source: Iterator[Any], rule: Any,
                 buffer_size: int = DEFAULT_BUFFER_SIZE, *, name: str = "",
                 timeout: Optional[float] = None, views: bool = False) -> None:
        self._stream = _Stream(client, source, rule, buffer_size, name=name, timeout=timeout,
                               views=views)

    @property
    def stats(self) -> Optional[PrefetchStats]:
        """The daemon's figures (placement.types.PrefetchStats: batches and
        bytes staged, consumer stall and producer wait as timedeltas, most
        batches held), once the stream ended."""
        return self._stream.stats

    @property
    def _thread(self) -> threading.Thread:
        return self._stream._thread

    def __iter__(self) -> "PrefetchIterator":
        return self

    def __next__(self) -> Any:
        return self._stream.next()

    def close(self) -> None:
        """Cancels the stream (the daemon frees every staged batch) and joins
        the producer. Idempotent; a finished iterator is left as it is."""
        self._stream.close()

    def __enter__(self) -> "PrefetchIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        stream = getattr(self, "_stream", None)
        if stream is not None:
            stream.cancel_nowait()
