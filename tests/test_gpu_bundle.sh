#!/usr/bin/env bash
# test_gpu_bundle.sh ldd|stand-in BUILD — tools/gpu-bundle and tools/gpu-check --bundle without a GPU.
#   ldd:      a bundle of BUILD (a CUDA or stand-in build): unpacked by hand, every file as its manifest says
#             (sha256sum), and every library ldd names for every binary — with the bundle's lib/ first, as on the GPU
#             machine — inside the bundle or one of the libraries a GPU machine has of its own (the list below, written
#             here independently of the tool's); the bundle within what the device tool carries; refusals: an --out
#             that is a link, a folder of something else (left untouched), a bad --arch, a --from-build that is no
#             build; a second bundle into the same --out replaces the first.
#   stand-in: a bundle of the stand-in build (BUILD is one: -DTT_CUDA_SIM=ON) run by tools/gpu-check --bundle
#             --stand-in --smoke: the report's shape (every step in order, report.md's sections, report.json's
#             records: a suite, designs, epochs, compare's max |dw| 0, the targets); a budget too small for the steps
#             leaves a complete report of steps not run; a SIGTERM leaves one too; refusals: a report folder that
#             exists, a payload altered after the manifest (one line, exit 1), a manifest of something else, a
#             stand-in bundle without --stand-in, a budget out of range.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
build=${2:-}
[ -n "$build" ] && [ -f "$build/CMakeCache.txt" ] || { echo "usage: $0 ldd|stand-in BUILD" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() {
  echo "FAIL: $*"
  fail=1
}
# expect CODE FRAGMENT CMD...: exit CODE, and FRAGMENT in its stderr's last line
expect() {
  local code=$1 fragment=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || bad "$*: exit $rc, want $code: $(tail -n 2 "$tmp/err")"
  [ -z "$fragment" ] || grep -qF -- "$fragment" "$tmp/err" || bad "$*: stderr lacks '$fragment': $(tail -n 2 "$tmp/err")"
  if [ "$code" -eq 2 ] && [ "$(grep -c . "$tmp/err")" -ne 1 ]; then bad "$*: not one line on stderr: $(cat "$tmp/err")"; fi
}

bundle=$tmp/bundle
"$root/tools/gpu-bundle" --from-build "$build" --out "$bundle" --no-data --xz-level 0 >"$tmp/bundle.log" 2>&1 ||
  { cat "$tmp/bundle.log"; echo "FAIL: tools/gpu-bundle --from-build $build"; exit 1; }

case $mode in
  ldd)
    u=$tmp/u
    mkdir "$u"
    tar -xJf "$bundle/payload.tar.xz" -C "$u" || bad "the payload does not unpack with tar"
    # every file as the manifest says, and nothing else
    python3 - "$bundle/manifest.json" "$u" <<'EOF' || bad "the manifest and the payload disagree"
import hashlib, json, os, sys
m = json.load(open(sys.argv[1]))
u = sys.argv[2]
want = {e["path"]: e for e in m["files"]}
have = {os.path.relpath(os.path.join(d, f), u) for d, _, fs in os.walk(u) for f in fs}
assert have == set(want), (sorted(have ^ set(want)))
for p, e in want.items():
    b = open(os.path.join(u, p), "rb").read()
    assert len(b) == e["bytes"] and hashlib.sha256(b).hexdigest() == e["sha256"], p
assert m["bundle_bytes"] + (m["tree_bytes"] or 0) <= 64 << 20, "over 64 MiB"
assert hashlib.sha256(open(os.path.join(os.path.dirname(sys.argv[1]), "payload.tar.xz"), "rb").read()).hexdigest() == m["payload"]["sha256"]
EOF
    [ -x "$u/bin/towertrain" ] || bad "no bin/towertrain in the payload"
    n=$(find "$u/bin/tests" -type f | wc -l)
    [ "$n" -ge 5 ] || bad "only $n suites in the payload"
    # the libraries a GPU machine has of its own: the C/C++ runtime, the driver's and the toolkit's
    allowed='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|lib(c|m|dl|pthread|rt|gcc_s|stdc\+\+)\.so\.[0-9]+|lib(cuda|cudart|cublas|cublasLt|nccl)\.so\.[0-9]+)$'
    for b in "$u"/bin/towertrain "$u"/bin/tests/*; do
      while read -r soname arrow path _; do
        [ "$arrow" = "=>" ] || continue
        [ "$path" != "not" ] || { bad "$(basename "$b"): $soname not found with the bundle's lib/"; continue; }
        case $(readlink -f "$path") in
          "$u"/lib/*) ;;
          *) [[ $soname =~ $allowed ]] || bad "$(basename "$b") takes $soname from $path, outside the bundle" ;;
        esac
      done < <(LD_LIBRARY_PATH="$u/lib" ldd "$b")
    done
    grep -q 'of the 64 MiB the device tool carries' "$bundle/MANIFEST" || bad "MANIFEST does not state the size"
    # refusals, each one line and exit 2; the folder of something else is left as it was
    ln -s "$tmp/elsewhere" "$tmp/link"
    expect 2 "is a symbolic link" "$root/tools/gpu-bundle" --from-build "$build" --out "$tmp/link" --no-data
    [ ! -e "$tmp/elsewhere" ] || bad "a link as --out was followed"
    mkdir "$tmp/mine" && echo keep >"$tmp/mine/notes.txt"
    expect 2 "not a bundle this tool made" "$root/tools/gpu-bundle" --from-build "$build" --out "$tmp/mine" --no-data
    [ "$(cat "$tmp/mine/notes.txt")" = keep ] || bad "a folder of something else was touched"
    expect 2 "--arch 'sm90'" "$root/tools/gpu-bundle" --arch sm90 --out "$tmp/x"
    expect 2 "not a CMake build folder" "$root/tools/gpu-bundle" --from-build "$tmp" --out "$tmp/x" --no-data
    expect 2 "unrecognized arguments" "$root/tools/gpu-bundle" --bogus
    # a second bundle replaces the first, whole
    "$root/tools/gpu-bundle" --from-build "$build" --out "$bundle" --no-data --xz-level 0 >/dev/null 2>&1 || bad "a second bundle into the same --out failed"
    [ -f "$bundle/payload.tar.xz" ] && [ -f "$bundle/MANIFEST" ] || bad "the replaced bundle is incomplete"
    [ -z "$(find "$tmp" -maxdepth 1 -name '.gpu-bundle.*' -o -maxdepth 1 -name 'bundle.old.*')" ] ||
      bad "a temporary folder was left behind: $(ls -a "$tmp")"
    # a bundle folder that also holds what this tool did not make (a report, notes) is not replaced: kept whole
    mkdir "$bundle/my-report" && echo keep >"$bundle/my-report/report.md"
    expect 2 "holds my-report besides the bundle" "$root/tools/gpu-bundle" --from-build "$build" --out "$bundle" --no-data
    [ "$(cat "$bundle/my-report/report.md" 2>/dev/null)" = keep ] && [ -f "$bundle/payload.tar.xz" ] ||
      bad "a bundle folder holding a report was replaced"
    # an --out it cannot make: one line, exit 1, not a traceback
    touch "$tmp/plain-file"
    expect 1 "plain-file" "$root/tools/gpu-bundle" --from-build "$build" --out "$tmp/plain-file/b" --no-data
    grep -q Traceback "$tmp/err" && bad "an --out under a file: a traceback: $(cat "$tmp/err")"
    # two runs into one folder: the second is refused while the first writes; SIGTERM (twice) leaves nothing behind
    mkdir "$tmp/par"
    "$root/tools/gpu-bundle" --from-build "$build" --out "$tmp/par/b" --no-data --xz-level 0 >/dev/null 2>&1 &
    first=$!
    for _ in $(seq 1 100); do [ -n "$(find "$tmp/par" -maxdepth 1 -name '.gpu-bundle.*')" ] && break; sleep 0.05; done
    expect 1 "another tools/gpu-bundle is writing into" "$root/tools/gpu-bundle" --from-build "$build" --out "$tmp/par/b" --no-data
    kill -TERM "$first"
    sleep 0.05
    kill -TERM "$first" 2>/dev/null
    wait "$first"
    rc=$?
    [ "$rc" -eq 1 ] || bad "gpu-bundle stopped by SIGTERM: exit $rc, want 1"
    [ -z "$(ls -A "$tmp/par")" ] || bad "gpu-bundle stopped by SIGTERM left $(ls -A "$tmp/par")"
    ;;
  stand-in)
    check() { "$root/tools/gpu-check" --bundle "$bundle" --stand-in "$@"; }
    export TMPDIR=$tmp/t # where gpu-check unpacks: it must leave nothing there
    mkdir "$TMPDIR"
    rep=$tmp/report
    # the whole run (about a minute under ASan) beside the cases below, on the other core: an unpacking folder of its
    # own, so each run's cleanup is checked apart
    mkdir "$tmp/t-main"
    TMPDIR=$tmp/t-main check --smoke --suites '^test_reference_cuda$' --report "$rep" >"$tmp/run.log" 2>&1 &
    main=$!
    # a budget too small for anything after the bundle: every step recorded, not run, and the report complete
    check --smoke --budget 30 --report "$tmp/short" >/dev/null 2>&1 || bad "a short budget failed the check"
    python3 - "$tmp/short/report.json" <<'EOF' || bad "a short budget's report is incomplete"
import json, sys
r = json.load(open(sys.argv[1]))
st = {s["step"]: s["status"] for s in r["steps"]}
assert len(st) == 10 and st["suites"] == "not-run" and st["epochs"] == "not-run", st
EOF
    # SIGTERM mid-run: the report is still whole, and says so
    "$root/tools/gpu-check" --bundle "$bundle" --stand-in --smoke --report "$tmp/stopped" >/dev/null 2>&1 &
    pid=$! # gpu-check itself (it execs the Python runner): the signal goes to the runner, not to a subshell
    for _ in $(seq 1 100); do
      grep -q '"epochs"' "$tmp/stopped/report.json" 2>/dev/null && grep -q '"step": "designs"' "$tmp/stopped/report.json" && break
      sleep 0.2
    done
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    [ "$rc" -eq 1 ] || bad "SIGTERM: exit $rc, want 1"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["steps"][-1]["step"] == "stopped", r["steps"]' \
      "$tmp/stopped/report.json" || bad "SIGTERM: the report does not end with the stop"
    [ -z "$(ls -A "$TMPDIR")" ] || bad "unpacked bundles left behind in \$TMPDIR: $(ls -A "$TMPDIR")"
    wait "$main"
    rc=$?
    [ "$rc" -eq 0 ] || bad "gpu-check --bundle --stand-in --smoke: exit $rc: $(grep -E ': (fail|FAIL)' "$tmp/run.log" | head -n 5)"
    [ -z "$(ls -A "$tmp/t-main")" ] || bad "the whole run left $(ls -A "$tmp/t-main") in its \$TMPDIR"
    for f in report.md report.json log.txt; do [ -s "$rep/$f" ] || bad "no $f in the report folder"; done
    [ "$(find "$rep" -type f | wc -l)" -le 8 ] || bad "more than 8 files in the report folder"
    python3 - "$rep/report.json" <<'EOF' || bad "report.json is not the report's shape"
import json, sys
r = json.load(open(sys.argv[1]), parse_constant=lambda c: sys.exit("report.json holds %s: not JSON" % c))
steps = [s["step"] for s in r["steps"]]
assert steps == ["driver", "bundle", "suites", "designs", "epochs", "whatif", "peer", "kernels", "sanitizer",
                 "targets"], steps
st = {s["step"]: s["status"] for s in r["steps"]}
assert all(v in ("pass", "warn", "not-run") for v in st.values()), st
assert st["sanitizer"] == "not-run" and st["kernels"] == "not-run", st  # no compute-sanitizer, no ncu here
assert [s["name"] for s in r["suites"]] == ["test_reference_cuda"] and r["suites"][0]["checks"] > 0, r["suites"]
detail = {s["step"]: s["detail"] for s in r["steps"]}
models = {d["model"] for d in r["designs"]}
# both models' designs; under ASan on a loaded machine the cnn's probe may outrun the step's share of the budget,
# which the step must then say (a cut is "not measured", never a silent gap)
assert "mlp" in models and (models == {"mlp", "cnn"} or "cnn not measured (cut by the budget)" in detail["designs"]), \
    ("designs of both models", models, detail["designs"])
for d in r["designs"]:
    assert d["total_ms"] > 0 and d["reduce"] and d["update"], d
assert len(r["epochs"]) >= 3 and all(e.get("s_per_epoch", 0) > 0 for e in r["epochs"]), r["epochs"]
assert [(c["model"], c["max_abs_dw"]) for c in r["compare"]] == [("mlp", 0.0), ("cnn", 0.0)], r["compare"]
assert len(r["targets"]) == 5 and r["targets"][-1]["status"] == "met", r["targets"]
assert r["stand_in"] is True and r["seconds"] > 0
EOF
    for section in "## Steps" "## Targets (issue 30)" "## CUDA suites" "## Every design" "## Epochs (bench)" \
      "## compare"; do
      grep -qF "$section" "$rep/report.md" || bad "report.md has no '$section'"
    done
    grep -qF 'compare max \|dw\|' "$rep/report.md" || bad "report.md: a pipe inside a cell splits its row"
    # refusals
    expect 2 "exists: one run owns its report folder" check --report "$rep"
    expect 2 "is a stand-in build: give --stand-in" "$root/tools/gpu-check" --bundle "$bundle" --report "$tmp/r2"
    expect 2 "is a stand-in build: give --stand-in" "$root/tools/gpu-check" --bundle="$bundle" --report "$tmp/r2"
    [ ! -e "$tmp/r2" ] || bad "a refused run made its report folder"
    expect 2 "--budget 5 is not" check --budget 5 --report "$tmp/r3"
    expect 2 "the following arguments are required: --report" check
    mkdir "$tmp/other" && echo '{"tool": "something else", "version": 1}' >"$tmp/other/manifest.json"
    expect 2 "is not a tools/gpu-bundle manifest" "$root/tools/gpu-check" --bundle "$tmp/other" --report "$tmp/r4"
    # a payload altered after its manifest: the bundle step fails with one line naming it, exit 1
    cp -r "$bundle" "$tmp/tampered"
    # one byte flipped (every bit), never rewritten with what it held: an 'X' written there was no change when the
    # payload's byte 1000 was an 'X' already (1 build in 256: its bytes follow the commit)
    old=$(dd if="$tmp/tampered/payload.tar.xz" bs=1 skip=1000 count=1 status=none | od -An -tu1 | tr -d ' \n')
    printf "\\$(printf '%03o' $((old ^ 255)))" | dd of="$tmp/tampered/payload.tar.xz" bs=1 seek=1000 conv=notrunc status=none
    cmp -s "$bundle/payload.tar.xz" "$tmp/tampered/payload.tar.xz" && bad "the tampered payload is the payload"
    "$root/tools/gpu-check" --bundle "$tmp/tampered" --stand-in --smoke --report "$tmp/r5" >"$tmp/out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || bad "a tampered payload: exit $rc, want 1"
    grep -q "bundle: fail - .*does not match its manifest" "$tmp/out" || bad "a tampered payload: $(cat "$tmp/out")"
    # hostile bundles (tests/gpu_bundle_hostile.py): a manifest that is not one is refused before anything is
    # unpacked (one line, exit 2); a payload that disagrees with its manifest fails the bundle step before it writes
    # what the manifest does not hold (exit 1); nothing is written outside the unpacked folder, nothing is left there
    hostile() { python3 "$root/tests/gpu_bundle_hostile.py" "$bundle" "$tmp/h-$1" "$1"; }
    for case in "dotdot|is not a relative path inside the payload" "absolute|is not a relative path inside the payload" \
      "twice|is listed twice" "files-not-list|'files' is not a list" "no-payload|'payload' is not an object" \
      "huge-size|has no size in bytes" "manifest-link|a symbolic link" "manifest-fifo|manifest.json is not a regular file" \
      "no-binary|the payload lacks bin/towertrain"; do
      hostile "${case%%|*}" || { bad "tests/gpu_bundle_hostile.py ${case%%|*} failed"; continue; }
      expect 2 "${case#*|}" timeout 60 "$root/tools/gpu-check" --bundle "$tmp/h-${case%%|*}" --stand-in --report "$tmp/hr"
      [ ! -e "$tmp/hr" ] || { bad "${case%%|*}: a refused run made its report folder"; rm -rf "$tmp/hr"; }
    done
    for case in "symlink|is not one of the manifest's files (not a regular file)" "size-lie|the manifest says 10" \
      "pax-bomb|unpacks to more than its manifest's files" "truncated|is not a whole xz-compressed tar" \
      "suite-outside|suite 0 is not a name, a binary in bin/tests"; do
      hostile "${case%%|*}" || { bad "tests/gpu_bundle_hostile.py ${case%%|*} failed"; continue; }
      timeout 60 "$root/tools/gpu-check" --bundle "$tmp/h-${case%%|*}" --stand-in --smoke --report "$tmp/hr" >"$tmp/out" 2>&1
      rc=$?
      [ "$rc" -eq 1 ] && grep -qF "bundle: fail - " "$tmp/out" && grep -qF "${case#*|}" "$tmp/out" ||
        bad "${case%%|*}: exit $rc, want 1 and '${case#*|}': $(grep -E 'bundle:|Traceback|Error' "$tmp/out" | head -n 3)"
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r["steps"]) == 10, r["steps"]' \
        "$tmp/hr/report.json" || bad "${case%%|*}: the report does not list every step"
      rm -rf "$tmp/hr"
    done
    [ ! -e "$tmp/h-escaped" ] || bad "a hostile payload wrote outside its folder"
    [ -z "$(ls -A "$TMPDIR")" ] || bad "hostile bundles left $(ls -A "$TMPDIR") in \$TMPDIR"
    expect 2 "is inside the bundle" check --report "$bundle/report"
    [ ! -e "$bundle/report" ] || bad "a report inside the bundle was made"
    expect 2 "chooses none of the bundle's" check --suites '^no_such_suite$' --report "$tmp/r6"
    # a command that floods its output is held as its head and tail; one that leaves a grandchild holding its pipe in
    # a session of its own neither hangs the check nor outlives it
    python3 - "$root/tools/gpu-check-bundle" "$tmp/unit" <<'EOF' || bad "gpu-check-bundle's run(): flood or escape"
import importlib.machinery, importlib.util, os, resource, subprocess, sys, time, types
loader = importlib.machinery.SourceFileLoader("gcb", sys.argv[1])
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("gcb", loader))
loader.exec_module(m)
os.mkdir(sys.argv[2])
c = m.Check(types.SimpleNamespace(budget=60, report=sys.argv[2], stand_in=True, smoke=True))
m.adopt_orphans()
rc, out, _ = c.run(["sh", "-c", "head -c 300000000 /dev/zero | tr '\\0' x; echo; echo END"], 30)
assert rc == 0 and out.endswith("END\n") and len(out) < 5 << 20, (rc, len(out))
assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 150 << 10, "a flood of 300 MB was held in memory"
t = time.monotonic()
rc, out, _ = c.run(["sh", "-c", "setsid sh -c 'echo $$ >%s/escaped; exec sleep 600' & echo started" % sys.argv[2]], 30)
assert rc == 0 and time.monotonic() - t < 10, (rc, time.monotonic() - t)
pid = int(open(os.path.join(sys.argv[2], "escaped")).read())
time.sleep(0.2)
assert not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z", "the escapee lives"
EOF
    # ncu runs within the kernels step's cap (a CUDA bundle's run with a driver, an ncu and the stand-in's binaries)
    mkdir "$tmp/cuda-shaped" && cp "$bundle/payload.tar.xz" "$tmp/cuda-shaped/"
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["stand_in"]=False; json.dump(m, open(sys.argv[2], "w"))' \
      "$bundle/manifest.json" "$tmp/cuda-shaped/manifest.json"
    printf '#!/bin/sh\necho "580.65.06, NVIDIA H|200, 143771 MiB, 5, 16"\n' >"$tmp/smi" && chmod +x "$tmp/smi"
    printf '#!/bin/sh\necho \x27"ID","Kernel Name","gpu__time_duration.sum"\x27\necho \x27"0","gemm","1,500"\x27\n' >"$tmp/ncu"
    chmod +x "$tmp/ncu"
    # (--only kernels: the other steps recorded as not chosen, the report whole)
    NVIDIA_SMI=$tmp/smi NCU=$tmp/ncu "$root/tools/gpu-check" --bundle "$tmp/cuda-shaped" --smoke --only kernels \
      --report "$tmp/r7" >"$tmp/out" 2>&1
    grep -q "kernels: pass - 2 kernels by time" "$tmp/out" || bad "ncu did not run: $(grep kernels: "$tmp/out")"
    python3 - "$tmp/r7/report.json" <<'EOF' || bad "--only kernels: the report is wrong"
import json, sys
st = [(s["step"], s["status"], s["detail"]) for s in json.load(open(sys.argv[1]))["steps"]]
assert [s[0] for s in st] == ["driver", "bundle", "suites", "designs", "epochs", "whatif", "peer", "kernels",
                              "sanitizer", "targets"], st
assert all(s[1] == "not-run" and s[2] == "not chosen (--only kernels)" for s in st if s[0] not in
           ("driver", "bundle", "kernels", "targets")), st
assert st[7][1] == "pass", st
assert json.load(open(sys.argv[1]))["only"] == "kernels"
EOF
    expect 2 "--only: 'kernel' is not a step to choose" check --only suites,kernel --report "$tmp/r9"
    expect 2 "--only suites,suites names a step twice" check --only suites,suites --report "$tmp/r9"
    expect 2 "--only whatif: whatif reads the probes the designs step writes" check --only whatif --report "$tmp/r9"
    [ ! -e "$tmp/r9" ] || bad "a refused --only made its report folder"
    grep -qF '1 x NVIDIA H\|200' "$tmp/r7/report.md" || bad "report.md: a GPU's name with a pipe: $(sed -n 2p "$tmp/r7/report.md")"
    # SIGTERM, twice, while a command that left a grandchild in a session of its own runs (nvidia-smi, the first): the
    # step is recorded as cut short, every step is listed, no process of the run is left
    cat >"$tmp/smi-hangs" <<EOF
#!/bin/sh
echo \$\$ >>"$tmp/pids"
setsid sh -c 'echo \$\$ >>"$tmp/pids"; exec sleep 600' >/dev/null 2>&1 &
exec sleep 600
EOF
    chmod +x "$tmp/smi-hangs"
    : >"$tmp/pids"
    NVIDIA_SMI=$tmp/smi-hangs "$root/tools/gpu-check" --bundle "$tmp/cuda-shaped" --smoke --report "$tmp/r8" >"$tmp/out" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do [ "$(grep -c . "$tmp/pids")" -ge 2 ] && break; sleep 0.1; done
    kill -TERM "$pid"
    sleep 0.01
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    [ "$rc" -eq 1 ] && ! grep -q Traceback "$tmp/out" || bad "SIGTERM twice: exit $rc, want 1: $(tail -n 3 "$tmp/out")"
    python3 - "$tmp/r8/report.json" <<'EOF' || bad "SIGTERM during nvidia-smi: the report is wrong"
import json, sys
st = [(s["step"], s["status"], s["detail"]) for s in json.load(open(sys.argv[1]))["steps"]]
assert [s[0] for s in st] == ["driver", "bundle", "suites", "designs", "epochs", "whatif", "peer", "kernels",
                              "sanitizer", "targets", "stopped"], st
assert st[0][1] == "fail" and "cut short" in st[0][2] and all(s[1] == "not-run" for s in st[1:10]), st
EOF
    for p in $(cat "$tmp/pids"); do
      if [ -e "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat")" != Z ]; then bad "process $p outlived the run"; kill "$p"; fi
    done
    [ -z "$(ls -A "$TMPDIR")" ] || bad "the runs left $(ls -A "$TMPDIR") in \$TMPDIR"
    ;;
  *)
    echo "usage: $0 ldd|stand-in BUILD" >&2
    exit 2 ;;
esac
[ $fail -eq 0 ] && echo "gpu-bundle ${mode}: passed" || echo "gpu-bundle ${mode}: failed"
exit $fail
