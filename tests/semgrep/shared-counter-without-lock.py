import threading

_count = 0
_total = 0
_lock = threading.Lock()


def record():
    global _count
    # ruleid: global-updated-without-lock
    _count += 1


def add(n):
    global _total
    # ruleid: global-updated-without-lock
    _total = _total + n


def record_locked():
    global _count
    with _lock:
        # ok: global-updated-without-lock
        _count += 1


def local_only():
    count = 0
    # ok: global-updated-without-lock
    count += 1
    return count
