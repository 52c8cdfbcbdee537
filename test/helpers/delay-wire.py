"""A userspace delay line between two TAP devices, for kernels built without tc netem (test/helpers/netns.ts).

Usage: delay-wire.py TAP_A TAP_B A_TO_B_MS B_TO_A_MS. Creates both TAP devices, prints "ready", then forwards every
Ethernet frame from one to the other after the given delay (frames keep their order per direction). The caller moves
each device into its network namespace; the file descriptors stay attached, so this process is the wire between them.
TAP devices hand frames to userspace with complete checksums (no offload), so they can be written out as they are.
"""
import fcntl
import heapq
import os
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def main():
    a_name, b_name = sys.argv[1], sys.argv[2]
    a_to_b, b_to_a = float(sys.argv[3]) / 1000, float(sys.argv[4]) / 1000
    a, b = open_tap(a_name), open_tap(b_name)
    route = {a: (b, a_to_b), b: (a, b_to_a)}
    print("ready", flush=True)
    queue, seq = [], 0
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else None
        readable, _, _ = select.select([a, b], [], [], timeout)
        now = time.monotonic()
        for fd in readable:
            frame = os.read(fd, 65536)
            out, delay = route[fd]
            seq += 1
            heapq.heappush(queue, (now + delay, seq, out, frame))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, out, frame = heapq.heappop(queue)
            try:
                os.write(out, frame)
            except OSError:
                pass  # the device went down with its namespace: the test is over


main()
