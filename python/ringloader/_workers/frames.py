# SPDX-License-Identifier: BSD-3-Clause
"""Length-prefixed frames on a stream socket: how the trainer, a zygote, a
loader server and its spares pass headers and payloads."""
import struct


def send_frame(sock, data):
    sock.sendall(struct.pack("<Q", len(data)) + data)


def recv_exact(sock, size):
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("ringloader: connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock):
    (size,) = struct.unpack("<Q", recv_exact(sock, 8))
    return recv_exact(sock, size)
