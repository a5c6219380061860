#!/usr/bin/env bash
# test_make_langid.sh — tools/make-langid on a tiny generated dictionary directory (four languages, one of them a
# Latin-1 list, with affix flags, capitals, duplicates, blanks, NFD spellings, non-letters, 24/25-byte words and
# words shared between lists): the .npy headers byte for byte, shapes, padding, labels, the hash split, the balance
# and the selection (recomputed here from the expected word sets), the per-language counts it prints, the same bytes
# on a second run, a changed order with another seed, and the refusals (exit 1 or 2, one line). Standard library
# Python only; about 2 s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tool="$root/tools/make-langid"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- the dictionaries, and the words each language should keep after rules 1-5 (expected.json) ----------------------
mkdir "$tmp/dict"
python3 - "$tmp" <<'EOF'
import json, random, sys, unicodedata
tmp = sys.argv[1]
rng = random.Random(7)
alphabets = {"english": "abcdefghijklmnopqrstuvwxyz", "german": "abcdefghiklmnoprstuwzäöüß",
             "swedish": "abdefghijklmnoprstuvyåäö", "polish": "abcdeghijklmnoprstuwyząćęłńóśźż"}
files = {"english": "american-english", "german": "ngerman", "swedish": "swedish", "polish": "polish"}
# (line as written in the list, the word it must become, or None when a rule drops it)
special = {
    "english": [("Apple/SM", "apple"), ("APPLE", "apple"), ("  banana \t", "banana"), ("don't", None),
                ("abc123", None), ("e.g", None), ("x" * 25, None), ("y" * 24, "y" * 24), ("shared", None),
                ("", None), ("co-op", None)],
    "german": [("shared", None), ("Straße/N", "straße"), ("ä" * 12, "ä" * 12), ("ä" * 13, None), ("Haus", "haus"),
               ("haus", "haus"), (unicodedata.normalize("NFD", "Äpfel"), "äpfel"), ("Über", "über")],
    "swedish": [("smörgåsbord", "smörgåsbord"), ("Sverige/A", "sverige"), ("shared2", None), ("år", "år")],
    "polish": [("shared2", None), ("zażółć", "zażółć"), ("Łódź", "łódź"), ("x2", None)],
}
expected, lines_of = {}, {}
for lang, alpha in alphabets.items():
    words = set()
    while len(words) < 240:
        words.add("".join(rng.choice(alpha) for _ in range(rng.randint(3, 9))))
    lines = sorted(words) + [line for line, _ in special[lang]]
    rng.shuffle(lines)
    lines_of[lang] = lines
    expected[lang] = words | {w for _, w in special[lang] if w}
# "shared" is in english and german, "shared2" in swedish and polish: dropped everywhere; random words that two
# alphabets happen to share are ambiguous too
everywhere = {}
for lang in expected:
    for w in expected[lang]:
        everywhere[w] = everywhere.get(w, 0) + 1
for lang in expected:
    expected[lang] = sorted(w for w in expected[lang] if everywhere[w] == 1)
for lang, lines in lines_of.items():
    enc = "latin-1" if lang == "swedish" else "utf-8"  # Debian's swedish list is ISO-8859-1
    with open("%s/dict/%s" % (tmp, files[lang]), "wb") as f:
        f.write("".join(l + "\n" for l in lines).encode(enc))
json.dump({"usable": expected, "lines": {k: len(v) for k, v in lines_of.items()}},
          open(tmp + "/expected.json", "w"), ensure_ascii=False)
EOF
langs=english,german,swedish,polish

# ---- a run, checked ----------------------------------------------------------------------------------------------
run() { "$tool" "$@" --dict-dir "$tmp/dict" --langs "$langs"; }
run "$tmp/a" --k-train 1000 --k-test 1000 >"$tmp/a.out" || bad "run a: exit $?"
run "$tmp/b" --k-train 1000 --k-test 1000 >/dev/null || bad "run b: exit $?"
run "$tmp/c" --k-train 40 --k-test 5 >"$tmp/c.out" || bad "run c: exit $?"
run "$tmp/d" --k-train 1000 --k-test 1000 --seed 2 >/dev/null || bad "run d: exit $?"
for f in x_train.npy y_train.npy x_test.npy y_test.npy languages.txt README.txt; do
  cmp -s "$tmp/a/$f" "$tmp/b/$f" || bad "$f differs between two identical runs"
done
[ -z "$(find "$tmp/a" -name '.*')" ] || bad "temporary files left in DIR"
cmp -s "$tmp/a/y_train.npy" "$tmp/d/y_train.npy" && bad "--seed 2 gives the same training order as --seed 1"

python3 - "$tmp" "$langs" <<'EOF' || fail=1
import hashlib, json, sys, unicodedata
tmp, langs = sys.argv[1], sys.argv[2].split(",")
L = 24
exp = json.load(open(tmp + "/expected.json"))
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def load_npy(path, ndim):
    """Checks the v1.0 header byte for byte; returns the shape and the int32 values."""
    data = open(path, "rb").read()
    check(data[:8] == b"\x93NUMPY\x01\x00", "%s: magic/version %r" % (path, data[:8]))
    hlen = int.from_bytes(data[8:10], "little")
    header = data[10:10 + hlen].decode("latin1")
    check((10 + hlen) % 64 == 0, "%s: header ends at %d, not a multiple of 64" % (path, 10 + hlen))
    check(header.endswith("\n") and set(header[header.index("}") + 1:-1]) <= {" "}, "%s: padding %r" % (path, header))
    d = eval(header)  # a Python literal dict, as numpy writes it
    check(d["descr"] == "<i4" and d["fortran_order"] is False and len(d["shape"]) == ndim, "%s: %r" % (path, d))
    want = "{'descr': '<i4', 'fortran_order': False, 'shape': %s, }" % (
        "(%d,)" % d["shape"][0] if ndim == 1 else "(%d, %d)" % d["shape"])
    check(header.rstrip(" \n") == want, "%s: header %r, want %r" % (path, header, want))
    body = data[10 + hlen:]
    n = 1
    for s in d["shape"]:
        n *= s
    check(len(body) == 4 * n, "%s: %d data bytes for shape %r" % (path, len(body), d["shape"]))
    return d["shape"], [int.from_bytes(body[i:i + 4], "little", signed=True) for i in range(0, len(body), 4)]


def h(lang, w):
    return int.from_bytes(hashlib.sha1(("%s\t%s" % (lang, w)).encode()).digest()[:4], "big")


def rows_of(d, split):
    (n, width), x = load_npy("%s/%s/x_%s.npy" % (tmp, d, split), 2)
    (ny,), y = load_npy("%s/%s/y_%s.npy" % (tmp, d, split), 1)
    check(width == L and ny == n, "%s %s: shapes (%d, %d) and (%d,)" % (d, split, n, width, ny))
    rows = []
    for i in range(n):
        toks = x[i * L:(i + 1) * L]
        k = toks.index(0) if 0 in toks else L
        check(k >= 1 and all(1 <= t <= 255 for t in toks[:k]) and all(t == 0 for t in toks[k:]),
              "%s %s row %d: tokens %r" % (d, split, i, toks))
        w = bytes(toks[:k]).decode("utf-8")
        check(0 <= y[i] < len(langs), "%s %s row %d: label %d" % (d, split, i, y[i]))
        check(w == unicodedata.normalize("NFC", w).lower() and w.isalpha(), "%s: %r" % (d, w))
        rows.append((y[i], w))
    return rows


check(open(tmp + "/a/languages.txt").read() == "".join("%d\t%s\n" % kv for kv in enumerate(langs)), "languages.txt")
for d, k_train, k_test in (("a", 1000, 1000), ("c", 40, 5)):
    for split, k in (("train", k_train), ("test", k_test)):
        rows = rows_of(d, split)
        # the split and the selection, recomputed from the expected word sets
        pools = [[w for w in exp["usable"][lang] if (h(lang, w) % 10 == 0) == (split == "test")] for lang in langs]
        n = min(k, min(len(p) for p in pools))
        check(n > 0, "the tiny lists leave no %s words" % split)
        for label, (lang, pool) in enumerate(zip(langs, pools)):
            want = sorted(pool, key=lambda w: (h(lang, w), w.encode()))[:n]
            got = sorted((w for y, w in rows if y == label), key=lambda w: (h(lang, w), w.encode()))
            check(got == want, "%s %s %s: %d words %r..., want %d %r..." % (d, split, lang, len(got), got[:3],
                                                                            len(want), want[:3]))
        check(len(rows) == n * len(langs), "%s %s: %d rows, want %d" % (d, split, len(rows), n * len(langs)))
        check([y for y, _ in rows] != sorted(y for y, _ in rows), "%s %s: not shuffled (grouped by label)" % (d, split))
# the printed counts: lines read and usable words per language (every word through rules 1-5, selected or not)
table = {l.split()[0]: l.split() for l in open(tmp + "/a.out") if l.split() and l.split()[0] in langs}
for lang in langs:
    check(int(table[lang][1]) == exp["lines"][lang],
          "%s: %s lines, want %d" % (lang, table[lang][1], exp["lines"][lang]))
    check(int(table[lang][5]) == len(exp["usable"][lang]),
          "%s: %s usable, want %d" % (lang, table[lang][5], len(exp["usable"][lang])))
check("ISO-8859-1" in open(tmp + "/a/README.txt").read(), "README.txt does not say the swedish list is Latin-1")
for e in errors[:20]:
    print("FAIL:", e)
print("npy check: %d problems" % len(errors))
sys.exit(1 if errors else 0)
EOF

# ---- refusals: exit code and one line on stderr ------------------------------------------------------------------
refuse() { # refuse CODE FRAGMENT ARGS...
  local code=$1 frag=$2 rc=0
  shift 2
  "$tool" "$@" >/dev/null 2>"$tmp/err" || rc=$?
  [ "$rc" -eq "$code" ] || bad "make-langid $*: exit $rc, want $code"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || bad "make-langid $*: $(wc -l <"$tmp/err") lines on stderr"
  grep -qF -- "$frag" "$tmp/err" || bad "make-langid $*: '$(cat "$tmp/err")' does not say '$frag'"
}
refuse 1 "not empty" "$tmp/a" --dict-dir "$tmp/dict" --langs "$langs"
refuse 1 "french missing" "$tmp/e" --dict-dir "$tmp/dict" --langs english,french
[ ! -e "$tmp/e" ] || bad "a missing list still created DIR"
touch "$tmp/file"
refuse 1 "not a directory" "$tmp/file" --dict-dir "$tmp/dict" --langs "$langs"
refuse 1 "cannot create" "$tmp/file/sub" --dict-dir "$tmp/dict" --langs "$langs"
refuse 2 "klingon" "$tmp/f" --langs english,klingon
refuse 2 "--k-test" "$tmp/f" --k-test 0
refuse 2 "unrecognized" "$tmp/f" --bogus
"$tool" "$tmp/a" --force --dict-dir "$tmp/dict" --langs "$langs" --k-train 1000 --k-test 1000 >/dev/null ||
  bad "--force: exit $?"
cmp -s "$tmp/a/x_train.npy" "$tmp/b/x_train.npy" || bad "--force run differs"
"$tool" --help | grep -q "Rules, in order" || bad "--help does not give the rules"

[ $fail -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
