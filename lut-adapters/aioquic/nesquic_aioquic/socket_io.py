"""The UDP socket handed to asyncio: buffer options applied before use, and the `io` report line
(asyncio's datagram transport makes one sendto / recvfrom per datagram)."""

import platform
import socket
import sys
import sysconfig

import aioquic

from .options import Options
from .report import emit

# Linux's values (asm-generic/socket.h); Python's socket module does not name them.
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def _interpreter() -> str:
    """Which CPython runs aioquic, and whether the sampling profile can name Python functions: its
    stack walk needs an interpreter built with frame pointers, the names need perf trampolines (3.12+)."""
    fp = "-fno-omit-frame-pointer" in (sysconfig.get_config_var("CFLAGS") or "")
    named = fp and hasattr(sys, "activate_stack_trampoline")
    return (
        f"CPython {platform.python_version()} {'with' if fp else 'without'} frame pointers: "
        f"--probe profile {'names' if named else 'cannot name'} Python functions"
    )


STACK = (
    f"aioquic {aioquic.__version__} on {_interpreter()} "
    "(asyncio datagram transport: one sendto / recvfrom per datagram, no GSO/GRO)"
)


def _set_buffer(sock: socket.socket, force: int, plain: int, size: int) -> None:
    if size == 0:
        return
    try:
        # As root the FORCE variant ignores net.core.[rw]mem_max: the kernel grants twice the request.
        sock.setsockopt(socket.SOL_SOCKET, force, size)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, plain, size)


def open_socket(family: int, bind: tuple, options: Options, report: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    _set_buffer(sock, SO_RCVBUFFORCE, socket.SO_RCVBUF, options.rcvbuf)
    _set_buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF, options.sndbuf)
    sock.bind(bind)
    sock.setblocking(False)
    if report:
        emit(
            "io",
            stack=STACK,
            gso_max_segments=1,
            gro_segments=1,
            send_mmsg=False,
            recv_mmsg=False,
            recv_buffer=sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
            send_buffer=sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        )
    return sock


def family_of(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
