"""MappingCache: the read-write mappings of the daemon's memory files that a
Client keeps between uploads written in place (placement._inplace) and
downloads read in place (placement._inplace_read: the writable shards an
ExportShards for_copy hands over are the same files, so a tensor uploaded
in place is read back through the upload's mapping).

Why: on the CPU platform a shard's device memory is a block of one of the
daemon's memory files (memfds), and the daemon hands a tenant's freed blocks
to that tenant's next reservations. Mapping a 256 MiB file afresh and
writing it costs ~5x a copy into memory already mapped (every page faults
in, 4 KiB at a time); a mapping kept from the previous upload of the same
file is written at copy speed. So a mapping is keyed by the identity of its
file (`os.fstat`: st_dev, st_ino), not by the fd the daemon handed over
(each redemption is a new fd of the same file), and covers the whole file.

Bound: at most `limit_bytes` of mappings are kept, least recently used
unmapped first (on acquire and release); a mapping in use by an upload is
never unmapped under it (`acquire` pins, `release` unpins), so uploads in
flight may hold more for their duration. 0 keeps none. A file
the daemon gave up stays alive as long as a mapping of it does, which is
what the bound limits. close() unmaps everything (Client.close()).

Thread-safe. Nothing here talks to the daemon.
"""
from __future__ import annotations

import collections
import ctypes
import dataclasses
import mmap
import os
import threading
from typing import List, Optional, Tuple

import numpy as np

from placement import _region_pool, errors

DEFAULT_LIMIT_BYTES = 2 << 30


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """Counters since the cache was made, and what it maps now."""

    hits: int  # a redeemed fd was a file already mapped: no new mapping
    misses: int  # a new mapping was made
    evictions: int  # mappings unmapped for the bound (not counting close())
    mapped_bytes: int  # now, in use or kept
    mappings: int  # now


class Mapping:
    """One whole-file MAP_SHARED read-write mapping. `bytes` is every byte
    of it as a writable uint8 array."""

    def __init__(self, key: Tuple[int, int], mm: mmap.mmap, size: int) -> None:
        self.key = key
        self.size = size
        self._mmap: Optional[mmap.mmap] = mm
        self.bytes: np.ndarray = np.frombuffer(mm, dtype=np.uint8)
        self._pins = 0
        self._dropped = False  # out of the cache; unmapped once unpinned
        self._populated: List[Tuple[int, int]] = []  # page ranges, sorted, disjoint
        self._populate_lock = threading.Lock()

    def populate(self, start: int, stop: int) -> None:
        """Maps the pages of [start, stop) not mapped here yet before they
        are written: one madvise instead of a page fault per 4 KiB page (on
        a file whose pages exist, ~2x faster than faulting them in by
        writing). Pages an earlier upload through this mapping populated
        are skipped (asking again costs ~15 ms per 256 MiB). Kernels before
        5.14 lack MADV_POPULATE_READ: the writes fault the pages in."""
        page = mmap.PAGESIZE
        start = start // page * page
        stop = min(self.size, -(-stop // page) * page)
        with self._populate_lock:
            mm = self._mmap
            if mm is None or stop <= start:
                return
            base = self.bytes.ctypes.data
            for gap_start, gap_stop in _gaps(self._populated, start, stop):
                if not _populate(mm, base, gap_start, gap_stop):
                    return  # the writes fault the pages in
            self._populated = _merged(self._populated, start, stop)

    def fill_fresh(self, fd: int, offset: int, src: np.ndarray) -> None:
        """Writes `src` (a 1-D contiguous uint8 array) to [offset, offset +
        len(src)) of the file `fd`, which this mapping maps and which has no
        pages yet (has_no_pages) -- the C++ client's FillFreshFile:
        os.pwrite allocates a page and copies into it without zeroing or
        mapping it, the cheapest way to fill shared memory in 4 KiB pages,
        but the kernel runs one writer per file at a time. So from 16 MiB
        the first part goes through pwrite on this thread while the copy
        threads populate (MADV_POPULATE_WRITE) and copy the rest through the
        mapping, sized so both end together (on a 2-core VM ~2.4 GB/s for
        pwrite against ~1.5 GB/s for a thread populating and copying). Only
        the rest is mapped here afterwards; populate() maps the first part
        when the file is written again. Anything pwrite refuses is copied
        through the mapping."""
        n = len(src)
        helpers = max(1, _region_pool.copy_threads())
        if n < _FILL_SPLIT_BYTES or _madvise is None:
            head = n
        else:
            head = (offset + int(n / (1.0 + 0.625 * helpers))) // _HUGE_PAGE * _HUGE_PAGE - offset
            head = min(n, max(0, head))
        futures = []
        if head < n:
            base = self.bytes.ctypes.data
            tail = n - head
            step = (-(-tail // helpers) + 4095) // 4096 * 4096

            def fill(a: int, b: int) -> None:
                _madvise(base + offset + head + a, b - a, _MADV_POPULATE_WRITE)
                np.copyto(self.bytes[offset + head + a:offset + head + b], src[head + a:head + b])

            executor = _region_pool.copy_executor()
            futures = [executor.submit(fill, a, min(tail, a + step)) for a in range(0, tail, step)]
        try:
            view = memoryview(src)
            done = 0
            while done < head:
                try:
                    wrote = os.pwrite(fd, view[done:min(head, done + (64 << 20))], offset + done)
                except OSError:
                    wrote = 0
                if wrote <= 0:  # sealed since it was handed over: through the mapping
                    np.copyto(self.bytes[offset + done:offset + head], src[done:head])
                    break
                done += wrote
        finally:
            for f in futures:
                f.exception()  # waits
        for f in futures:
            f.result()
        if head < n:
            page = mmap.PAGESIZE
            with self._populate_lock:
                self._populated = _merged(self._populated, offset + head,
                                          min(self.size, -(-(offset + n) // page) * page))

    def _unmap(self) -> None:
        mm, self._mmap = self._mmap, None
        self.bytes = np.empty(0, np.uint8)
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # an array of it is still alive: the mapping ends with it


def _gaps(ranges: List[Tuple[int, int]], start: int, stop: int) -> List[Tuple[int, int]]:
    """The parts of [start, stop) no range of sorted disjoint `ranges` covers."""
    out = []
    at = start
    for a, b in ranges:
        if b <= at:
            continue
        if a >= stop:
            break
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < stop:
        out.append((at, stop))
    return out


def _merged(ranges: List[Tuple[int, int]], start: int, stop: int) -> List[Tuple[int, int]]:
    """Sorted disjoint `ranges` with [start, stop) added."""
    out: List[Tuple[int, int]] = []
    for a, b in sorted(ranges + [(start, stop)]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux 5.14
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
_FILL_SPLIT_BYTES = 16 << 20
_HUGE_PAGE = 2 << 20


def has_no_pages(fd: int) -> bool:
    """Whether the file `fd` holds no pages yet (st_blocks 0): a fresh
    memory file the daemon left for its writer to fill (Mapping.fill_fresh)."""
    try:
        return os.fstat(fd).st_blocks == 0
    except OSError:
        return False

# Large ranges are populated on the copy threads (_region_pool.for_each_slice):
# mapping a 256 MiB file's pages took 25-34 ms on one thread of a 2-core VM
# and 15-20 ms on two. mmap's own madvise holds the GIL, so the slices call
# libc's through ctypes, which releases it.
def _libc_madvise():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


_madvise = _libc_madvise()


def _populate(mm: mmap.mmap, base: int, start: int, stop: int) -> bool:
    """MADV_POPULATE_READ over [start, stop) of `mm` (mapped at `base`),
    page-aligned, in slices on threads when large. False when the kernel
    refuses (before 5.14): the writes then fault the pages in."""
    if _madvise is None:
        try:
            mm.madvise(_MADV_POPULATE_READ, start, stop - start)
            return True
        except (OSError, ValueError):
            return False
    failed: List[int] = []

    def populate(a: int, b: int) -> None:
        if _madvise(base + start + a, b - a, _MADV_POPULATE_READ) != 0:
            failed.append(a)

    _region_pool.for_each_slice(stop - start, populate)
    return not failed


class MappingCache:
    """See module docstring."""

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        if limit_bytes < 0:
            raise errors.InvalidArgumentError(
                f"inplace_mapping_bytes is {limit_bytes}; must be >= 0")
        self._limit = limit_bytes
        self._lock = threading.Lock()
        # key -> Mapping, least recently used first.
        self._entries: "collections.OrderedDict[Tuple[int, int], Mapping]" = \
            collections.OrderedDict()
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._closed = False

    @property
    def limit_bytes(self) -> int:
        return self._limit

    def acquire(self, fd: int, size: int) -> Mapping:
        """A pinned read-write mapping of the file behind `fd`, at least
        `size` bytes: the one kept for that file when there is one (the fd
        is not used then; the caller closes it either way), else a new one
        of `size` bytes. InternalError when the file is smaller than `size`
        (the daemon's reservation and its file disagree);
        ResourceExhaustedError when it cannot be mapped."""
        st = os.fstat(fd)
        if size <= 0 or st.st_size < size:
            raise errors.InternalError(
                f"the daemon names {size} bytes of a memory file of {st.st_size} bytes (an "
                f"upload slot or a shard view)")
        key = (st.st_dev, st.st_ino)
        stale: List[Mapping] = []
        with self._lock:
            if self._closed:
                raise errors.FailedPreconditionError("the client was closed")
            found = self._entries.get(key)
            if found is not None and found.size >= size:
                self._entries.move_to_end(key)
                found._pins += 1
                self._hits += 1
                return found
            if found is not None:  # the file grew past the mapping: map it anew
                del self._entries[key]
                found._dropped = True
                if found._pins == 0:
                    stale.append(found)
            try:
                mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED,
                               prot=mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as e:
                raise errors.ResourceExhaustedError(
                    f"cannot map a {size}-byte memory file of the daemon: {e.strerror}") from None
            mapping = Mapping(key, mm, size)
            mapping._pins = 1
            self._entries[key] = mapping
            self._misses += 1
            stale.extend(self._over_bound())
        for m in stale:
            m._unmap()
        return mapping

    def release(self, mapping: Mapping) -> None:
        """Unpins; past the bound, unmaps the least recently used mappings no
        upload is using."""
        doomed: List[Mapping] = []
        with self._lock:
            mapping._pins -= 1
            if mapping._dropped and mapping._pins == 0:
                doomed.append(mapping)
            doomed.extend(self._over_bound())
        for m in doomed:
            m._unmap()

    def _over_bound(self) -> List[Mapping]:
        """Takes unpinned mappings out, oldest first, until the cache holds
        at most the bound (or only pinned ones). REQUIRES: the lock held."""
        total = sum(m.size for m in self._entries.values())
        out: List[Mapping] = []
        for key in list(self._entries):
            if total <= self._limit:
                break
            m = self._entries[key]
            if m._pins:
                continue
            del self._entries[key]
            m._dropped = True
            total -= m.size
            self._evictions += 1
            out.append(m)
        return out

    def clear(self) -> None:
        """Unmaps every mapping no upload uses now; those in use go when
        released (the daemon restarted: its old files are never handed out
        again)."""
        doomed: List[Mapping] = []
        with self._lock:
            for key in list(self._entries):
                m = self._entries.pop(key)
                m._dropped = True
                if m._pins == 0:
                    doomed.append(m)
        for m in doomed:
            m._unmap()

    def close(self) -> None:
        """clear(), and no mapping is made any more. Idempotent."""
        with self._lock:
            self._closed = True
        self.clear()

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions,
                              sum(m.size for m in self._entries.values()), len(self._entries))
