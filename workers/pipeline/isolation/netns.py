"""A private network namespace with its loopback up, entered in a step's child before exec.

The fallback for machines without bwrap. ``unshare --net`` leaves the new namespace's
``lo`` down, so a suite that talks to itself over 127.0.0.1 (gloo, a c10d TCPStore, a
local HTTP fixture) fails as if the backend were broken. bwrap brings ``lo`` up; this does
the same: ``unshare(2)`` and one ``SIOCSIFFLAGS`` ioctl, in the forked child, where it
still holds the capabilities to do so (root, or the owner of a fresh user namespace).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys

# <sched.h>, <linux/sockios.h>, <net/if.h>
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sH14x"  # ifr_name, ifr_flags, the rest of the union

# Loaded in the parent: a forked child of a threaded worker must not dlopen.
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def enter(new_user_namespace: bool) -> None:
    """Move this process into a new network namespace (and a new user namespace when it is
    not root) whose only interface is an up loopback. Raises OSError when it cannot."""
    if _libc is None:
        raise OSError("network namespaces need Linux")
    flags = _CLONE_NEWNET | (_CLONE_NEWUSER if new_user_namespace else 0)
    if _libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        asked = fcntl.ioctl(sock, _SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0))
        name, flags_now = struct.unpack(_IFREQ, asked)
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, name, flags_now | _IFF_UP))
