#!/usr/bin/env python3
"""tests/gpu_bundle_hostile.py GOOD OUT CASE — a hostile bundle for tests/test_gpu_bundle.sh (stand-in mode).

Writes into OUT (which must not exist) a bundle folder that tools/gpu-check --bundle must refuse: a manifest.json that
is no manifest (made from GOOD's, the payload copied), or a payload that disagrees with a manifest that is well formed
(tiny stand-in files: bin/towertrain, build.json, suites.json). Not for anything but the test.
"""
import hashlib
import io
import json
import lzma
import os
import shutil
import sys
import tarfile


def sha(b):
    return hashlib.sha256(b).hexdigest()


def manifest_case(good, out, case):
    m = json.load(open(os.path.join(good, "manifest.json")))
    shutil.copyfile(os.path.join(good, "payload.tar.xz"), os.path.join(out, "payload.tar.xz"))
    if case == "dotdot":
        m["files"][0]["path"] = "bin/../../escaped"
    elif case == "absolute":
        m["files"][0]["path"] = "/etc/hostname"
    elif case == "twice":
        m["files"].append(dict(m["files"][0]))
    elif case == "files-not-list":
        m["files"] = "bin/towertrain"
    elif case == "no-payload":
        del m["payload"]
    elif case == "huge-size":
        m["payload"]["bytes"] = 2 ** 70
    elif case == "no-binary":
        m["files"] = [e for e in m["files"] if e["path"] != "bin/towertrain"]
    text = json.dumps(m)
    if case == "manifest-link":
        open(os.path.join(out, "real-manifest.json"), "w").write(text)
        os.symlink("real-manifest.json", os.path.join(out, "manifest.json"))
    elif case == "manifest-fifo":
        os.mkfifo(os.path.join(out, "manifest.json"))
    else:
        open(os.path.join(out, "manifest.json"), "w").write(text)


def header(name, size, kind=tarfile.REGTYPE, link=""):
    ti = tarfile.TarInfo(name)
    ti.size, ti.type, ti.linkname, ti.mode = size, kind, link, 0o644
    return ti.tobuf(format=tarfile.USTAR_FORMAT)


def payload_case(out, case):
    """The payload is written a MiB at a time: a member of 64 MiB of zeros costs this script no memory."""
    files = [("bin/towertrain", b"#!/bin/sh\n"), ("build.json", b"{}"), ("suites.json", b"[]")]
    if case == "suite-outside":
        files[2] = ("suites.json", json.dumps([{"name": "s", "binary": "/bin/echo", "args": [], "env": [],
                                                "timeout": 5}]).encode())
    listed = [{"path": n, "bytes": len(d), "sha256": sha(d), "kind": "record"} for n, d in files]
    z = lzma.LZMACompressor(preset=0)
    raw = io.BytesIO()
    w = lambda b: raw.write(z.compress(b))
    for n, d in files:
        w(header(n, len(d)) + d + bytes(-len(d) % 512))
    if case == "symlink":  # a link out of the folder, then a file written through it
        w(header("data/link", 0, tarfile.SYMTYPE, os.path.join(os.path.dirname(out), "h-escaped")))
        w(header("data/link/x", 1) + b"x" + bytes(511))
        listed.append({"path": "data/link", "bytes": 0, "sha256": sha(b""), "kind": "data"})
    elif case in ("size-lie", "pax-bomb"):  # 64 MiB of zeros: a member the manifest says is 10 bytes, a pax header
        big = 64 << 20
        if case == "size-lie":
            w(header("data/big", big))
            listed.append({"path": "data/big", "bytes": 10, "sha256": "0" * 64, "kind": "data"})
        else:
            w(header("././@PaxHeader", big, tarfile.XHDTYPE))
        for _ in range(big >> 20):
            w(bytes(1 << 20))
        if case == "pax-bomb":
            w(header("data/after", 1) + b"a" + bytes(511))
            listed.append({"path": "data/after", "bytes": 1, "sha256": sha(b"a"), "kind": "data"})
    w(bytes(1024))
    raw.write(z.flush())
    p = raw.getvalue()
    if case == "truncated":
        p = p[: len(p) // 2]
    open(os.path.join(out, "payload.tar.xz"), "wb").write(p)
    m = {"tool": "towertrain gpu-bundle", "version": 1, "stand_in": True, "commit": "hostile", "files": listed,
         "payload": {"path": "payload.tar.xz", "bytes": len(p), "sha256": sha(p)}, "suites": ["s"]}
    open(os.path.join(out, "manifest.json"), "w").write(json.dumps(m))


def main():
    good, out, case = sys.argv[1:4]
    os.mkdir(out)
    if case in ("symlink", "size-lie", "pax-bomb", "truncated", "suite-outside"):
        payload_case(out, case)
    elif case in ("dotdot", "absolute", "twice", "files-not-list", "no-payload", "huge-size", "no-binary",
                  "manifest-link", "manifest-fifo"):
        manifest_case(good, out, case)
    else:
        sys.exit("gpu_bundle_hostile.py: no case '%s'" % case)


if __name__ == "__main__":
    main()
