"""The thread a gradscope.ddp.State exchanges its buckets on."""

import queue
import threading
import weakref

from . import _gradscope


class HookThread:
    """Owns a state's thread, the queue of its tasks and the count of those not done yet: the
    tasks run one after the other, in the order queued. The thread starts with the first task
    and ends when its owner is collected, at the latest at exit: a daemon thread still alive
    when Python finalizes is unwound through C++ frames that cannot be, which aborts."""

    def __init__(self):
        self._tasks = queue.SimpleQueue()
        self._thread = None
        self._busy = threading.Condition()
        self._queued = 0

    def put(self, run, arg):
        """Queues run(arg)."""
        if self._thread is None:
            self._thread = threading.Thread(target=_run_tasks, args=(self._tasks,), daemon=True, name="gradscope-ddp")
            self._thread.start()
            weakref.finalize(self, _stop_tasks, self._tasks, self._thread)
        with self._busy:
            self._queued += 1
        self._tasks.put((run, arg, self._done_one))

    def _done_one(self):
        with self._busy:
            self._queued -= 1
            self._busy.notify_all()

    def drain(self, timeout_s=600.0):
        """Waits until every queued task is done (a checkpoint is taken between steps)."""
        with self._busy:
            if not self._busy.wait_for(lambda: self._queued == 0, timeout=timeout_s):
                raise _gradscope.Error(
                    f"{self._queued} bucket(s) still queued after {timeout_s:g} s: " "take the state between steps"
                )


def _run_tasks(tasks):
    """The thread: runs each queued task in order. It holds the queue and, per task, strong
    references to the task's owners only while the task runs, so a state nobody uses any more is
    collected (and its HookThread's finalizer, _stop_tasks, ends the thread)."""
    while True:
        item = tasks.get()
        if item is None:
            return
        run, arg, done = item  # run: a bound method of the state's bucket exchange
        try:
            run(arg)
        finally:
            done()
        del run, arg, done, item


def _stop_tasks(tasks, thread, timeout_s=30.0):
    """Ends the thread once its queued tasks are done (waiting at most timeout_s: a collective
    stuck on a dead peer ends by its own timeout, not here)."""
    tasks.put(None)
    if thread is not threading.current_thread():
        thread.join(timeout_s)
