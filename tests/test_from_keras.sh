#!/usr/bin/env bash
# test_from_keras.sh BIN — tools/from-keras on small files written here in Keras's download formats by real numpy
# (Debian's python3-numpy): CIFAR-10's batch pickles, reuters.npz (an object array of ragged sequences), mnist.npz and
# the Fashion-MNIST IDX files. The outputs are held to what keras.datasets would return, recomputed here with numpy
# itself (RandomState(113)'s shuffle, start/oov/index_from, num_words, pad_sequences' pre-padding and pre-truncation),
# and towertrain trains on each. Hostile files: a pickle that names os.system, a truncated batch, an .npy header
# claiming a huge shape, a member that is not .npy, a directory where a file should be; zips written byte by byte by
# tests/from_keras_hostile.py (640 MiB bombs of deflated zeros under a 400 MB address-space limit, a corrupt deflate
# stream, a member or a header cut short) and a pickle naming an escape sequence: each one escaped line and exit 1;
# symbolic links in the Keras directory (refused, named) and in DIR (at the old tool's predictable temporary name and
# at an output's name: nothing written outside DIR); bad options. The tool runs with the first python3 on PATH (it
# needs no numpy). Skips (77) without numpy in /usr/bin/python3.
set -uo pipefail
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tool="$root/tools/from-keras"
NP=/usr/bin/python3
$NP -c 'import numpy' 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no numpy (apt-get install python3-numpy)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
kd="$tmp/keras"

$NP - "$kd" <<'PY' || { echo "FAIL: could not write the Keras-format files"; exit 1; }
import gzip, os, pickle, struct, sys
import numpy as np
kd = sys.argv[1]
rng = np.random.RandomState(5)
os.makedirs(kd + "/cifar-10-batches-py")
for name in ["data_batch_%d" % k for k in range(1, 6)] + ["test_batch"]:
    n = 6
    d = {b"batch_label": b"batch", b"labels": [int(v) for v in rng.randint(0, 10, n)],
         b"data": rng.randint(0, 256, (n, 3072)).astype(np.uint8), b"filenames": [b"f.png"] * n}
    with open("%s/cifar-10-batches-py/%s" % (kd, name), "wb") as f:
        pickle.dump(d, f, protocol=2 if name == "data_batch_1" else 3)  # protocol 2: bytes through _codecs.encode
seqs = [[int(w) for w in rng.randint(1, 60, rng.randint(1, 350))] for _ in range(50)]
np.savez(kd + "/reuters.npz", x=np.array(seqs, dtype=object), y=rng.randint(0, 46, 50))
np.savez_compressed(kd + "/mnist.npz", x_train=rng.randint(0, 256, (12, 28, 28)).astype(np.uint8),
         y_train=rng.randint(0, 10, 12).astype(np.uint8), x_test=rng.randint(0, 256, (4, 28, 28)).astype(np.uint8),
         y_test=rng.randint(0, 10, 4).astype(np.uint8))
os.makedirs(kd + "/fashion-mnist")
for split, n in (("train", 12), ("t10k", 4)):
    with gzip.open("%s/fashion-mnist/%s-images-idx3-ubyte.gz" % (kd, split), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(rng.randint(0, 256, n * 784).astype(np.uint8)))
    with gzip.open("%s/fashion-mnist/%s-labels-idx1-ubyte.gz" % (kd, split), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(rng.randint(0, 10, n).astype(np.uint8)))
PY

for name in cifar10 reuters mnist fashion-mnist; do
  "$tool" "$name" "$tmp/out-$name" --keras-dir "$kd" >"$tmp/log" 2>&1 || bad "$name: $(cat "$tmp/log")"
done
"$tool" reuters "$tmp/out-r20" --keras-dir "$kd" --num-words 20 --maxlen 40 >/dev/null 2>&1 || bad "reuters --num-words 20"

# what keras.datasets would return, recomputed with numpy
$NP - "$kd" "$tmp" <<'PY' || fail=1
import pickle, sys
import numpy as np
kd, tmp = sys.argv[1], sys.argv[2]
def keras_reuters(num_words, maxlen):  # keras.datasets.reuters.load_data's steps, then pad_sequences(maxlen)
    f = np.load(kd + "/reuters.npz", allow_pickle=True)
    xs, labels = f["x"], f["y"]
    idx = np.arange(len(xs))
    np.random.RandomState(113).shuffle(idx)
    xs, labels = xs[idx], labels[idx]
    xs = [[1] + [w + 3 for w in x] for x in xs]
    num_words = num_words or max(max(x) for x in xs)
    xs = [[w if w < num_words else 2 for w in x] for x in xs]
    cut = int(len(xs) * 0.8)
    def pad(rows):
        out = np.zeros((len(rows), maxlen), dtype=np.int32)
        for i, r in enumerate(rows):
            r = r[-maxlen:]
            out[i, maxlen - len(r):] = r
        return out
    return pad(xs[:cut]), labels[:cut], pad(xs[cut:]), labels[cut:]
for out, nw, L in (("out-reuters", None, 300), ("out-r20", 20, 40)):
    want = keras_reuters(nw, L)
    for arr, name in zip(want, ("x_train", "y_train", "x_test", "y_test")):
        got = np.load("%s/%s/%s.npy" % (tmp, out, name))
        assert np.array_equal(got, arr), "%s/%s differs from keras.datasets.reuters" % (out, name)
for name in ["data_batch_%d" % k for k in range(1, 6)] + ["test_batch"]:
    with open("%s/cifar-10-batches-py/%s" % (kd, name), "rb") as f:
        d = pickle.load(f, encoding="bytes")
    b = open("%s/out-cifar10/%s.bin" % (tmp, name), "rb").read()
    assert len(b) == 3073 * len(d[b"labels"]), name
    for i, lab in enumerate(d[b"labels"]):
        assert b[3073 * i] == lab and b[3073 * i + 1:3073 * (i + 1)] == d[b"data"][i].tobytes(), (name, i)
m = np.load(kd + "/mnist.npz")
for k in ("x_train", "y_train", "x_test", "y_test"):
    assert np.array_equal(np.load("%s/out-mnist/%s.npy" % (tmp, k)), m[k]), k
print("ok: cifar10, reuters (two settings), mnist as keras.datasets gives them")
PY
cmp -s "$kd/fashion-mnist/train-images-idx3-ubyte.gz" "$tmp/out-fashion-mnist/train-images-idx3-ubyte.gz" ||
  bad "fashion-mnist: not copied"

# towertrain trains on each
"$bin" train --device cpu --data "cifar10:$tmp/out-cifar10" --model cnn --val-samples 6 --epochs 1 --batch 8 \
  --progress quiet >/dev/null 2>"$tmp/err" || bad "towertrain on cifar10: $(cat "$tmp/err")"
"$bin" train --device cpu --data "npy:$tmp/out-reuters" --model textcnn --val-samples 8 --epochs 1 --batch 8 \
  --progress quiet >/dev/null 2>"$tmp/err" || bad "towertrain on reuters: $(cat "$tmp/err")"
"$bin" train --device cpu --data "npy:$tmp/out-mnist" --val-samples 2 --epochs 1 --batch 4 --progress quiet \
  >/dev/null 2>"$tmp/err" || bad "towertrain on mnist: $(cat "$tmp/err")"
"$bin" train --device cpu --data "$tmp/out-fashion-mnist" --val-samples 2 --epochs 1 --batch 4 --progress quiet \
  >/dev/null 2>"$tmp/err" || bad "towertrain on fashion-mnist: $(cat "$tmp/err")"

# hostile and broken files: one line, exit 1, nothing executed
expect1() { # WHAT FRAGMENT ARGS... (with mem_kb=N set: under ulimit -v N)
  local what=$1 frag=$2
  shift 2
  if [ -n "${mem_kb:-}" ]; then (ulimit -v "$mem_kb" && exec "$tool" "$@"); else "$tool" "$@"; fi \
    >/dev/null 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 1 ] || bad "$what: exit $rc, want 1 ($(cat "$tmp/err"))"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || bad "$what: stderr is not one line: $(cat "$tmp/err")"
  grep -q -F -- "$frag" "$tmp/err" || bad "$what: stderr lacks '$frag': $(cat "$tmp/err")"
  LC_ALL=C grep -q '[^ -~]' "$tmp/err" && bad "$what: stderr is not printable ASCII: $(od -c <"$tmp/err")"
  true
}
evil="$tmp/evil"
mkdir -p "$evil/cifar-10-batches-py"
cp "$kd"/cifar-10-batches-py/* "$evil/cifar-10-batches-py/"
$NP - "$evil/cifar-10-batches-py/data_batch_3" "$tmp/pwned" <<'PY'
import os, pickle, sys
class Evil:
    def __reduce__(self):
        return (os.system, ("touch %s" % sys.argv[2],))
with open(sys.argv[1], "wb") as f:
    pickle.dump({b"data": Evil(), b"labels": []}, f, protocol=2)
PY
expect1 "a pickle naming os.system" "refused" cifar10 "$tmp/o1" --keras-dir "$evil"
[ -e "$tmp/pwned" ] && bad "the evil pickle ran its command"
head -c 3000 "$kd/cifar-10-batches-py/test_batch" >"$evil/cifar-10-batches-py/data_batch_3"
expect1 "a truncated batch" "data_batch_3" cifar10 "$tmp/o2" --keras-dir "$evil"
$NP - "$evil/mnist.npz" <<'PY'
import sys, zipfile
hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (100000000000, 28, 28), }"
hdr = (hdr + " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n").encode()
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("x_train.npy", b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr + b"\0" * 100)
    for k in ("y_train", "x_test", "y_test"):
        z.writestr(k + ".npy", b"not an npy file")
PY
expect1 "an .npy header claiming 78 TB" "bytes of data" mnist "$tmp/o3" --keras-dir "$evil"
$NP - "$evil/reuters.npz" <<'PY'
import struct, sys, zipfile
def npy(descr, shape, payload):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, shape)
    h = (h + " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n").encode()
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + payload
with zipfile.ZipFile(sys.argv[1], "w") as z:  # a 9-byte pickle whose memo index would make CPython allocate GBs
    z.writestr("x.npy", npy("|O", (1,), b"\x80\x03]r" + struct.pack("<I", 0x0FFFFFFF) + b"."))
    z.writestr("y.npy", npy("<i8", (1,), struct.pack("<q", 1)))
PY
expect1 "a pickle memo index of 268435455" "memo index" reuters "$tmp/o7" --keras-dir "$evil"
rm -f "$evil/reuters.npz"
mkdir -p "$evil/reuters.npz"
expect1 "a directory for reuters.npz" "not a regular file" reuters "$tmp/o4" --keras-dir "$evil"
expect1 "a missing download" "fashion-mnist" fashion-mnist "$tmp/o5" --keras-dir "$tmp/nowhere"
# Damaged and hostile zips, written byte by byte by from_keras_hostile.py: refused from the zip entry's and the .npy
# header's sizes before anything is inflated (the old reader inflated a 640 MiB bomb whole: 10 s and 1.3 GB, so the
# bombs run under a 400 MB address-space limit), and every zipfile/zlib/struct failure is one line, not a traceback.
hostile="$root/tests/from_keras_hostile.py"
hz() { # KIND NAME: d, a directory holding NAME made by KIND
  d="$tmp/hz-$1"
  mkdir -p "$d"
  $NP "$hostile" "$1" "$d/$2" || bad "from_keras_hostile.py $1 failed"
}
hz bomb-mnist mnist.npz
t0=$(date +%s%N)
mem_kb=400000 expect1 "a 640 MiB zip bomb in mnist.npz" "x_train.npy: 671088768 bytes uncompressed" mnist "$tmp/o8" \
  --keras-dir "$d"
echo "a 640 MiB deflated member refused in $((($(date +%s%N) - t0) / 1000000)) ms under ulimit -v 400000"
hz bomb-reuters reuters.npz
mem_kb=400000 expect1 "a 640 MiB zip bomb in reuters.npz" "x.npy: 671088768 bytes uncompressed" reuters "$tmp/o8" \
  --keras-dir "$d"
hz bad-deflate mnist.npz
expect1 "a corrupt deflate stream" "x_train.npy: a damaged deflate stream" mnist "$tmp/o8" --keras-dir "$d"
hz cut-member mnist.npz
expect1 "a member cut short" "x_train.npy: cut short" mnist "$tmp/o8" --keras-dir "$d"
hz tiny-header mnist.npz # header length 0 in a 64 MiB member: refused from the length, nothing inflated
mem_kb=400000 expect1 "an .npy header of 0 bytes" "a header of 0 bytes" mnist "$tmp/o8" --keras-dir "$d"
hz cut-header mnist.npz
expect1 "an .npy cut in its header" "cut short inside its header" mnist "$tmp/o8" --keras-dir "$d"
mkdir -p "$tmp/hz-pickle/cifar-10-batches-py"
$NP "$hostile" pickle-name "$tmp/hz-pickle/cifar-10-batches-py/data_batch_1" || bad "from_keras_hostile.py pickle-name"
expect1 "a pickle naming an escape sequence and a newline" 'names \x1b[2J\x1b]0;owned\x07os\x0aevil.system' \
  cifar10 "$tmp/o8" --keras-dir "$tmp/hz-pickle"
[ -e "$tmp/o8" ] && bad "a refused input left $tmp/o8 behind"

# Symbolic links in the Keras directory are refused, named, never followed: not a word index, a batch, a subdirectory
# or an archive that points elsewhere (the old tool copied a linked word index, /proc/self/environ included).
lk="$tmp/links"
mkdir -p "$lk/cifar-10-batches-py" "$lk/fashion-mnist"
cp "$kd"/cifar-10-batches-py/* "$lk/cifar-10-batches-py/"
cp "$kd/reuters.npz" "$lk/"
echo '{"the": 1, "of": 2}' >"$lk/reuters_word_index.json"
"$tool" reuters "$tmp/o9" --keras-dir "$lk" >/dev/null 2>"$tmp/err" ||
  bad "reuters with a word index: $(cat "$tmp/err")"
cmp -s "$lk/reuters_word_index.json" "$tmp/o9/reuters_word_index.json" || bad "reuters_word_index.json: not copied"
echo secret >"$tmp/secret"
ln -sf "$tmp/secret" "$lk/reuters_word_index.json"
expect1 "a linked reuters_word_index.json" "$lk/reuters_word_index.json: a symbolic link" reuters "$tmp/o10" \
  --keras-dir "$lk"
[ -e "$tmp/o10/reuters_word_index.json" ] && bad "a linked reuters_word_index.json was copied"
ln -sf "$kd/cifar-10-batches-py/data_batch_2" "$lk/cifar-10-batches-py/data_batch_2"
expect1 "a linked data_batch_2" "data_batch_2: a symbolic link" cifar10 "$tmp/o10" --keras-dir "$lk"
rmdir "$lk/fashion-mnist" && ln -s "$kd/fashion-mnist" "$lk/fashion-mnist"
expect1 "a linked fashion-mnist directory" "$lk/fashion-mnist: a symbolic link" fashion-mnist "$tmp/o10" \
  --keras-dir "$lk"
ln -s "$kd/mnist.npz" "$lk/mnist.npz"
expect1 "a linked mnist.npz" "mnist.npz: a symbolic link" mnist "$tmp/o10" --keras-dir "$lk"

# Outputs: created exclusively inside DIR, no link followed. A link planted at the old tool's predictable temporary
# (DIR/.x_train.npy.tmp.PID: the shell execs the tool as that pid) is never opened; a link at a final name is refused
# before anything is written; the file outside DIR stays as it was.
echo precious >"$tmp/outside"
cp "$tmp/outside" "$tmp/outside.orig"
mkdir -p "$tmp/o11"
sh -c 'ln -s "$1" "$2/.x_train.npy.tmp.$$" && exec "$3" mnist "$2" --keras-dir "$4"' _ "$tmp/outside" "$tmp/o11" \
  "$tool" "$kd" >/dev/null 2>"$tmp/err" || bad "mnist beside a planted temporary link: $(cat "$tmp/err")"
cmp -s "$tmp/outside" "$tmp/outside.orig" || bad "a link at the temporary name made the tool write outside DIR"
[ -L "$tmp/o11/x_train.npy" ] && bad "DIR/x_train.npy was left a symbolic link"
cmp -s "$tmp/o11/x_train.npy" "$tmp/out-mnist/x_train.npy" || bad "x_train.npy beside a planted link differs"
mkdir -p "$tmp/o12"
ln -s "$tmp/outside" "$tmp/o12/y_test.npy"
expect1 "a link at DIR/y_test.npy" "$tmp/o12/y_test.npy: a symbolic link" mnist "$tmp/o12" --keras-dir "$kd"
cmp -s "$tmp/outside" "$tmp/outside.orig" || bad "a link at an output's name made the tool write outside DIR"
[ -L "$tmp/o12/y_test.npy" ] || bad "the link at DIR/y_test.npy was replaced, not refused"
[ "$(find "$tmp/o12" -mindepth 1 | wc -l)" -eq 1 ] || bad "files written before a refused output: $(ls -A "$tmp/o12")"

for args in "imagenet $tmp/o6" "reuters $tmp/o6 --maxlen 0" "reuters"; do
  # shellcheck disable=SC2086
  "$tool" $args --keras-dir "$kd" >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] || bad "$args: exit $rc, want 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || bad "$args: stderr is not one line: $(cat "$tmp/err")"
done

[ $fail -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
