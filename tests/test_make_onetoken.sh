#!/usr/bin/env bash
# test_make_onetoken.sh BIN — tools/make-onetoken: the .npy headers and sizes, every sample holding its class's token
# exactly once among noise ids, the same bytes from the same seed and others from another, towertrain training the
# textcnn on the files, and the refusals (exit 2, one line). Standard-library Python only; a few seconds.
set -uo pipefail
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tool="$root/tools/make-onetoken"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$tool" "$tmp/a" --train 300 --test 50 --length 16 --vocab 50 --classes 3 >/dev/null || bad "the tool failed"
python3 - "$tmp/a" <<'PY' || fail=1
import struct, sys
d = sys.argv[1]
def load(name):
    b = open("%s/%s" % (d, name), "rb").read()
    assert b[:8] == b"\x93NUMPY\x01\x00", name
    n = int.from_bytes(b[8:10], "little")
    assert (10 + n) % 64 == 0, "%s: header not padded to 64" % name
    h = b[10:10 + n].decode("latin1")
    shape = tuple(int(v) for v in h.split("'shape': (")[1].split(")")[0].split(",") if v.strip())
    assert "'<i4'" in h and "'fortran_order': False" in h, h
    vals = struct.unpack("<%di" % ((len(b) - 10 - n) // 4), b[10 + n:])
    count = 1
    for s in shape: count *= s
    assert len(vals) == count, "%s: %d values for shape %s" % (name, len(vals), shape)
    return shape, vals
for split, n in (("train", 300), ("test", 50)):
    (xs, x), (ys, y) = load("x_%s.npy" % split), load("y_%s.npy" % split)
    assert xs == (n, 16) and ys == (n,), (xs, ys)
    for i in range(n):
        seq, c = x[16 * i:16 * i + 16], y[i]
        assert 0 <= c < 3, c
        assert seq.count(c + 1) == 1, "sample %d: its class token %d appears %d times" % (i, c + 1, seq.count(c + 1))
        assert all(t == c + 1 or 4 <= t < 50 for t in seq), "sample %d: an id outside the noise range" % i
print("ok: headers, shapes, one class token per sample")
PY
"$tool" "$tmp/b" --train 300 --test 50 --length 16 --vocab 50 --classes 3 >/dev/null
cmp -s "$tmp/a/x_train.npy" "$tmp/b/x_train.npy" || bad "the same seed gave other bytes"
"$tool" "$tmp/c" --train 300 --test 50 --length 16 --vocab 50 --classes 3 --seed 2 >/dev/null
cmp -s "$tmp/a/x_train.npy" "$tmp/c/x_train.npy" && bad "another seed gave the same bytes"
"$bin" train --device cpu --model textcnn --data "npy:$tmp/a" --val-samples 50 --epochs 1 --batch 32 \
  --progress quiet >/dev/null 2>"$tmp/err" || bad "towertrain could not train on the files: $(cat "$tmp/err")"
for args in "--vocab 4 --classes 3" "--length 8" "--train 0" "--classes x"; do
  # shellcheck disable=SC2086
  "$tool" "$tmp/d" $args 2>"$tmp/err" >/dev/null
  rc=$?
  [ $rc -eq 2 ] || bad "$args: exit $rc, want 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || bad "$args: stderr is not one line: $(cat "$tmp/err")"
done
touch "$tmp/file"
"$tool" "$tmp/file/sub" 2>"$tmp/err" >/dev/null
[ $? -eq 1 ] || bad "a directory under a file: want exit 1"
[ $fail -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
