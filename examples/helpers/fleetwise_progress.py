"""fleetwise task helpers for Python, in the spirit of Eva's iterator wrapper (EuroSys '25 §5).

    from fleetwise_progress import progress, checkpoint_dir, restoring, save_checkpoint, stop_requested

    for batch in progress(loader, start=resumed_iterations):   # appends "<unix s> <iterations>" lines
        train_step(batch)
        if stop_requested() or it_is_time:
            save_checkpoint(lambda d: torch.save(state, os.path.join(d, "model.pt")))
            if stop_requested(): sys.exit(0)

Contract (README "Checkpoints"): write state into FLEETWISE_CHECKPOINT_DIR, then the COMPLETE marker; do not touch
the directory while COMPLETE exists (the worker deletes it once the upload is durable). Exit after the checkpoint
signal (SIGTERM by default). FLEETWISE_RESTORE=1 means the directory holds the restored checkpoint.
"""
import os
import signal
import time

_stop = False


def _on_signal(signum, frame):  # noqa: ARG001
    global _stop
    _stop = True


signal.signal(signal.SIGTERM, _on_signal)


def stop_requested() -> bool:
    return _stop


def checkpoint_dir() -> str:
    return os.environ.get("FLEETWISE_CHECKPOINT_DIR", "./checkpoint")


def restoring() -> bool:
    return os.environ.get("FLEETWISE_RESTORE") == "1"


def report(iterations: int) -> None:
    path = os.environ.get("FLEETWISE_PROGRESS_FILE")
    if path:
        with open(path, "a") as f:  # one write per line: the worker tolerates a partial last line
            f.write(f"{int(time.time())} {iterations}\n")


def progress(iterable, start: int = 0, every_seconds: float = 1.0):
    """Yield from iterable, reporting the cumulative iteration count at most every `every_seconds`."""
    n, last = start, 0.0
    for item in iterable:
        yield item
        n += 1
        now = time.time()
        if now - last >= every_seconds:
            report(n)
            last = now
    report(n)


def save_checkpoint(write, wait_seconds: float = 30.0) -> bool:
    """Call write(dir) and mark the checkpoint complete; False if the previous one is still being uploaded."""
    d = checkpoint_dir()
    os.makedirs(d, exist_ok=True)
    marker = os.path.join(d, "COMPLETE")
    deadline = time.time() + wait_seconds
    while os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.1)
    if os.path.exists(marker):
        return False
    write(d)
    open(marker, "w").close()
    return True
