"""Forked copies of the `arrayfield migrate` process that take a share of the
files, so that a large tree is parsed and analysed on every core.

Each process keeps what it made in its own `kept` dict (the `ast` parses of its
files), and later work on a file goes to the process that holds its parse: only
jobs and their results cross the pipes, never a syntax tree, which would take
longer to pickle than to parse again. A helper is a fork of this process, so
it starts with the files' bytes and the imported modules, and costs about a
millisecond to start (a spawned interpreter would import everything afresh).

Where `os.fork` is missing (Windows) or fails, or this process runs other
threads, everything runs in this process.

A helper never outlives the run: an interrupted run (Ctrl-C, SIGTERM) kills
its helpers as it unwinds, and a helper whose parent was killed outright
(SIGKILL, which nothing can catch) sees it within `_ORPHAN_POLL_SECONDS` and
exits, instead of finishing a share of the work nobody will read.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

# A job's function: `function(kept, *job)`, with `kept` the dict of the process
# it runs in.
Job = Callable[..., Any]
# How often a helper checks that its parent is alive.
_ORPHAN_POLL_SECONDS = 0.2


class Workers:
    """This process and up to `size - 1` forked helpers.

    `place` gives each file a home process, and `map` runs each job in the home
    of its file, all processes at once. Helpers start at the first `map` with
    work for them and stay until `close`.
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.kept: dict[Any, Any] = {}
        # Key -> the process (0: this one) whose `kept` holds its state.
        self.homes: dict[Any, int] = {}
        self._load = [0] * self.size
        self._helpers: list[_Helper] | None = None

    def place(self, keys: Sequence[Any], sizes: Sequence[int], start: int) -> None:
        """Give each new key a home: the process with the least work so far,
        largest first, once there are `start` units of work (counting what
        was placed before) to be worth a helper; until then, this process."""
        new = [
            (size, key)
            for key, size in zip(keys, sizes, strict=True)
            if key not in self.homes
        ]
        total = sum(self._load) + sum(size for size, _ in new)
        spread = self.size > 1 and total >= start
        order = sorted(new, key=lambda pair: -pair[0]) if spread else new
        for size, key in order:
            home = self._load.index(min(self._load)) if spread else 0
            self.homes[key] = home
            self._load[home] += size

    def map(self, function: Job, jobs: Sequence[tuple], keys: Sequence[Any]) -> list:
        """`function(kept, *job)` for each job, in the home of its key; the
        results in the order of the jobs."""
        shares: list[list[int]] = [[] for _ in range(self.size)]
        for number, key in enumerate(keys):
            shares[self.homes.get(key, 0)].append(number)
        if any(shares[1:]) and self._helpers is None:
            self._helpers = _start(self.size - 1)
        helpers: list[_Helper | None] = [*(self._helpers or [])]
        helpers += [None] * (self.size - 1 - len(helpers))  # forks that failed
        sent = [
            bool(share)
            and helper is not None
            and helper.send(function, [jobs[n] for n in share])
            for helper, share in zip(helpers, shares[1:], strict=True)
        ]
        results: list = [None] * len(jobs)
        pending = [h for h, went in zip(helpers, sent, strict=True) if went and h]
        try:
            for number in shares[0]:
                results[number] = function(self.kept, *jobs[number])
            for helper, share, went in zip(helpers, shares[1:], sent, strict=True):
                done = None
                if went and helper is not None:
                    pending.remove(helper)
                    done = helper.receive()
                if done is None:
                    # Not sent, or the helper failed: the jobs run here, where an
                    # error they raise is reported as it would be without helpers.
                    done = [function(self.kept, *jobs[n]) for n in share]
                for number, result in zip(share, done, strict=True):
                    results[number] = result
        finally:
            # A job here raised: a reply left unread would answer the next batch.
            for helper in pending:
                helper.abandon()
        return results

    def close(self, *, kill: bool = False) -> None:
        """Stop the helpers: at the end of their work, or now (`kill`)."""
        for helper in self._helpers or []:
            if kill:
                helper.kill()
            helper.stop()
        self._helpers = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # Unwinding (an interrupt, an error): nobody will read their results.
        self.close(kill=kind is not None)


def _start(count: int) -> list[_Helper]:
    """Fork `count` helpers; as many as could be started."""
    helpers: list[_Helper] = []
    if not hasattr(os, "fork") or threads() > 1:
        return helpers
    # Buffered output would otherwise be written twice, once by each process.
    sys.stdout.flush()
    sys.stderr.flush()
    for _ in range(count):
        try:
            helpers.append(_Helper())
        except OSError:
            break
    return helpers


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def threads() -> int:
    """How many threads this process runs. Only the forking thread lives on
    in a fork, and a lock that another one held (JAX's, the allocator's)
    stays locked there for ever: a process with threads, such as one that
    imported JAX, runs everything itself."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: the threads Python knows of
        import threading

        return threading.active_count()


class _Helper:
    """One forked process, and the two pipes to it."""

    def __init__(self) -> None:
        helper_reads, parent_writes = os.pipe()
        parent_reads, helper_writes = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            for descriptor in (
                helper_reads,
                parent_writes,
                parent_reads,
                helper_writes,
            ):
                os.close(descriptor)
            raise
        if pid == 0:  # the helper: never returns into the parent's code
            try:
                _exit_when_orphaned(parent)
                os.close(parent_writes)
                os.close(parent_reads)
                # Every other helper (of any `Workers`) must see the end of its
                # input when the parent closes it, not wait for a copy here.
                for other in list(_open):
                    other.close_files()
                _serve(os.fdopen(helper_reads, "rb"), os.fdopen(helper_writes, "wb"))
            finally:
                os._exit(1)
        os.close(helper_reads)
        os.close(helper_writes)
        self.pid = pid
        self._requests: BinaryIO | None = os.fdopen(parent_writes, "wb")
        self._replies = os.fdopen(parent_reads, "rb")
        _open.add(self)

    def send(self, function: Job, jobs: Sequence[tuple]) -> bool:
        """Whether the jobs reached the helper."""
        if self._requests is None:
            return False
        try:
            pickle.dump((function, jobs), self._requests, pickle.HIGHEST_PROTOCOL)
            self._requests.flush()
        except (OSError, pickle.PicklingError):
            self.abandon()
            return False
        return True

    def receive(self) -> list | None:
        """The results of the jobs last sent, or None if the helper failed."""
        try:
            reply = pickle.load(self._replies)
        except (OSError, EOFError, pickle.UnpicklingError):
            reply = None
        if reply is None:
            self.abandon()
        return reply

    def abandon(self) -> None:
        """Give it no more work: its input ends, so it exits."""
        if self._requests is not None:
            with contextlib.suppress(OSError):
                self._requests.close()
            self._requests = None

    def close_files(self) -> None:
        self.abandon()
        self._replies.close()

    def kill(self) -> None:
        with contextlib.suppress(OSError):  # it has exited already
            os.kill(self.pid, signal.SIGKILL)

    def stop(self) -> None:
        self.close_files()  # end of input: the helper exits
        _open.discard(self)
        os.waitpid(self.pid, 0)


def _exit_when_orphaned(parent: int) -> None:
    """In a helper: exit as soon as `parent` is gone (a parent killed by
    SIGKILL closes no pipe until the helper's batch is done, and Linux's
    PR_SET_PDEATHSIG is not in the standard library, nor on macOS)."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_ORPHAN_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


# The helpers this process has started and not yet stopped.
_open: set[_Helper] = set()


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """The helper's life: run each batch of jobs it is sent, reply with the
    results (None when a job raised: the parent runs that batch again and
    reports the error), and exit at the end of its input."""
    status = 0
    kept: dict[Any, Any] = {}
    try:
        while True:
            try:
                function, jobs = pickle.load(requests)
            except EOFError:
                break
            try:
                results: list | None = [function(kept, *job) for job in jobs]
            except Exception:
                results = None
            pickle.dump(results, replies, pickle.HIGHEST_PROTOCOL)
            replies.flush()
    except BaseException:  # Ctrl-C, a broken pipe: the parent sees EOF
        status = 1
    # No atexit handlers, no flushing of the parent's buffers.
    os._exit(status)
