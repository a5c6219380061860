#!/usr/bin/env python3
"""from_keras_hostile.py KIND PATH — hostile .npz and pickle files for tests/test_from_keras.sh, written byte by byte.

Python's zipfile writes only honest archives, so the zips here are built by hand (local headers, central directory,
end record) from the ZIP specification (APPNOTE.TXT 4.3.7, 4.3.12, 4.3.16): each one is a way a download can be
damaged or made to hurt the reader. Standard library only (no numpy), so the files do not depend on the numpy that
checks the tool's good outputs. Not for anything but those tests.

    bomb-mnist PATH       mnist.npz whose x_train.npy declares, honestly, a (671088640,) uint8 array: 640 MiB of
                          deflated zeros in about 650 KB (a zip bomb: the tool must refuse it from the sizes)
    bomb-reuters PATH     reuters.npz whose x.npy is an object array followed by 640 MiB of deflated zeros
    bad-deflate PATH      mnist.npz whose x_train.npy is a deflate stream that is not one (zlib.error)
    cut-member PATH       mnist.npz whose stored x_train.npy ends before the size its entry declares (EOFError)
    cut-header PATH       mnist.npz whose x_train.npy is a version 2 .npy cut inside its header length (struct.error)
    pickle-name PATH      a CIFAR-10 batch pickle naming a module whose name holds an escape sequence and a newline
"""
import struct
import sys
import zlib

MIB = 1 << 20


def npy_header(descr, shape, version=1):
    """An .npy file's magic, version, header length and header, as numpy writes them (padded to 64 bytes)."""
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    at = 10 if version == 1 else 12
    h = (h + " " * ((64 - (at + len(h) + 1) % 64) % 64) + "\n").encode("latin1")
    size = len(h).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes((version, 0)) + size + h


def write_zip(path, members):
    """members: (name, method, crc, uncompressed size, data as stored, declared compressed size or None)."""
    out, central = bytearray(), bytearray()
    for name, method, crc, usize, data, csize in members:
        n = name.encode("ascii")
        csize = len(data) if csize is None else csize
        # 0x21: 1 January 1980, the zip epoch; version 2.0 needed; no flags, no extra fields
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, method, 0, 0x21, crc, csize, usize,
                               len(n), 0, 0, 0, 0, 0, len(out)) + n
        out += struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, method, 0, 0x21, crc, csize, usize, len(n), 0) + n
        out += data
    k = len(members)
    end = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, k, k, len(central), len(out), 0)
    with open(path, "wb") as f:
        f.write(bytes(out + central + end))


def stored(name, blob):
    return (name, 0, zlib.crc32(blob), len(blob), blob, None)


def deflated(name, blob):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return (name, 8, zlib.crc32(blob), len(blob), c.compress(blob) + c.flush(), None)


def zeros_bomb(name, head, n_mib):
    """head, then n_mib MiB of zeros, deflated without ever holding them: after a full flush the compressor starts
    afresh, so every MiB of zeros deflates to the same bytes, repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    zero = bytes(MIB)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(zero) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zero) + c.flush(zlib.Z_FULL_FLUSH)
    assert block == again, "zlib's full flush did not repeat itself"
    data = first + block * n_mib + c.flush()
    crc = zlib.crc32(head)
    for _ in range(n_mib):
        crc = zlib.crc32(zero, crc)
    return (name, 8, crc, len(head) + n_mib * MIB, data, None)


def small_npy(descr, values):
    return npy_header(descr, (len(values),)) + bytes(values)


def main(kind, path):
    labels = [stored(k + ".npy", small_npy("|u1", [1, 2])) for k in ("y_train", "x_test", "y_test")]
    if kind == "bomb-mnist":
        write_zip(path, [zeros_bomb("x_train.npy", npy_header("|u1", (640 * MIB,)), 640)] + labels)
    elif kind == "bomb-reuters":
        write_zip(path, [zeros_bomb("x.npy", npy_header("|O", (1,)), 640), stored("y.npy", small_npy("|u1", [1]))])
    elif kind == "bad-deflate":  # first byte 0xff: a final block of the reserved type 3 ("invalid block type")
        blob = npy_header("|u1", (1000,)) + bytes(1000)
        write_zip(path, [("x_train.npy", 8, zlib.crc32(blob), len(blob), b"\xff" * 64, None)] + labels)
    elif kind == "cut-member":  # the entry declares 1000 more bytes than the file holds after it
        blob = npy_header("|u1", (1000,)) + bytes(10)
        write_zip(path, [("x_train.npy", 0, 0, len(blob) + 990, blob, len(blob) + 990)] + labels)
    elif kind == "tiny-header":  # version 1, header length 0: the rest (deflated zeros) must not be read as header
        head = b"\x93NUMPY\x01\x00\x00\x00"
        write_zip(path, [zeros_bomb("x_train.npy", head, 64)] + labels)
    elif kind == "cut-header":
        write_zip(path, [stored("x_train.npy", b"\x93NUMPY\x02\x00\x10\x00")] + labels)
    elif kind == "pickle-name":  # protocol 4: SHORT_BINUNICODE module, SHORT_BINUNICODE name, STACK_GLOBAL, STOP
        module, name = "\x1b[2J\x1b]0;owned\x07os\nevil".encode(), b"system"
        with open(path, "wb") as f:
            f.write(b"\x80\x04\x8c" + bytes((len(module),)) + module + b"\x8c" + bytes((len(name),)) + name + b"\x93.")
    else:
        sys.exit("from_keras_hostile.py: unknown kind %r" % kind)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: from_keras_hostile.py KIND PATH")
    main(sys.argv[1], sys.argv[2])
