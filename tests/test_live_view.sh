#!/usr/bin/env bash
# test_live_view.sh BIN — --progress towers in a real terminal (tmux): a lane per tower and the host's, redrawn while
# the steps run, the cursor hidden meanwhile; the view erased and the cursor shown again when the epoch ends, on
# SIGINT (the stop line, exit 130) and on a second signal's immediate exit; a narrow terminal gets the Keras bar; not
# a terminal gets lines. Skips (77) without tmux or the data set. Trains the mlp on --device cpu with every tower
# sleeping 60 ms a step (--slow-tower, drawn as compute): steps slow enough to watch, 100 of them in about 6 s, at
# almost no CPU — the cnn at its own pace took 210 s of two cores under ASan.
set -uo pipefail
bin=$1
command -v tmux >/dev/null || { echo "SKIP: tmux missing"; exit 77; }
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist missing"; exit 77; }
tmp=$(mktemp -d)
n=0
sock="$tmp/tmux0.sock"
t() { tmux -S "$sock" "$@" 2>/dev/null; }
trap 'for s in "$tmp"/tmux*.sock; do tmux -S "$s" kill-server 2>/dev/null; done; rm -rf "$tmp"' EXIT
run="$bin train --device cpu --towers 2 --batch 128 --train-samples 12800 --val-samples 500 --test-samples 500 --epochs 1 --progress towers --slow-tower 0:60,1:60"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
screen() { t capture-pane -p -t tv; }
cursor() { t display -p -t tv '#{cursor_flag}'; }
# start CMD in a fresh WxH terminal; the pane stays after CMD ends (its status then readable)
start() { # a server of its own each time: a new session right after kill-server can race its exit
  t kill-server
  n=$((n + 1))
  sock="$tmp/tmux$n.sock"
  t new-session -d -s tv -x "$1" -y "$2" "sleep 600"
  t set-option -t tv remain-on-exit on
  t respawn-pane -k -t tv "$3"
}
wait_for() { # TEXT SECONDS: until the screen shows TEXT
  for _ in $(seq 1 $((10 * $2))); do screen | grep -q -- "$1" && return 0; sleep 0.1; done
  return 1
}
pid_of_run() { pgrep -f -n -- "--progress towers" || true; }

# 1. the view while training, then gone at the epoch's end, the cursor back (the pane's shell keeps it alive)
start 130 40 "$run; echo RUN-ENDED; sleep 600"
wait_for "tower 1 " 120 || bad "no lane for tower 1 within 120 s: $(screen | tail -5)"
s=$(screen)
for want in "tower 0 " "host " "now: " "steps/s" "share of the last" "C compute"; do
  grep -q -- "$want" <<<"$s" || bad "the view lacks '$want'"
done
[ "$(cursor)" = 0 ] || bad "the cursor shows while the view is drawn"
wait_for RUN-ENDED 300 || bad "the run did not end"
s=$(screen)
grep -q "tower 0 " <<<"$s" && bad "the view was left on the screen after the epoch"
grep -q "100/100 - " <<<"$s" || bad "no epoch line after the view"
[ "$(cursor)" = 1 ] || bad "the cursor stays hidden after the run"

# 1b. 80 columns, three epochs of the mlp: no line of the view wraps, so no frame is left behind in the scrollback
start 80 30 "$bin train --device cpu --towers 2 --epochs 3 --batch 128 --train-samples 6400 --val-samples 500 --test-samples 500 --progress towers --slow-tower 0:20,1:20; echo RUN-ENDED; sleep 600"
wait_for RUN-ENDED 300 || bad "80 columns: the run did not end"
left=$(t capture-pane -p -S - -t tv | grep -c "steps/s")
[ "$left" -eq 0 ] || bad "80 columns: $left frames left in the scrollback"

# 1c. resized while the view shows: narrower (still fits) keeps one frame on screen; 60 columns turns it into the bar
start 120 40 "$run; echo RUN-ENDED; sleep 600"
wait_for "tower 1 " 120 || bad "resize case: no view"
t resize-window -t tv -x 76
sleep 1.2
n=$(screen | grep -c "steps/s")
[ "$n" -eq 1 ] || bad "resized to 76 columns: $n status lines on the screen, want 1: $(screen | tail -8)"
t resize-window -t tv -x 60
sleep 1.2
screen | grep -q "tower 0 " && bad "resized to 60 columns: the lanes are still drawn"
wait_for "\[=" 30 || bad "resized to 60 columns: no bar: $(screen | tail -3)"
p=$(pid_of_run)
[ -z "$p" ] || kill -INT "$p"
wait_for RUN-ENDED 60 || bad "resize case: the run did not end"
[ "$(cursor)" = 1 ] || bad "resize case: the cursor stays hidden"

# 1d. Ctrl-Z in an interactive shell, then fg: the view erased and the cursor shown while stopped; drawn afresh after
#     fg, and nothing left behind when the run ends
start 120 40 "bash --norc --noprofile -i"
sleep 0.5
t send-keys -t tv "$run" Enter
wait_for "tower 1 " 120 || bad "Ctrl-Z case: no view"
p=$(pid_of_run)
t send-keys -t tv C-z
sleep 1
[ "$(ps -o stat= -p "$p" | cut -c1)" = T ] || bad "Ctrl-Z: the run did not stop"
[ "$(cursor)" = 1 ] || bad "Ctrl-Z: the cursor stays hidden while stopped"
[ "$(screen | grep -c "steps/s")" -eq 0 ] || bad "Ctrl-Z: the frame stays on the screen while stopped"
t send-keys -t tv "fg" Enter
sleep 1.5
[ "$(screen | grep -c "steps/s")" -eq 1 ] || bad "after fg: want one frame: $(screen | tail -6)"
for _ in $(seq 1 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
sleep 0.3
[ "$(t capture-pane -p -S - -t tv | grep -c "steps/s")" -eq 0 ] || bad "Ctrl-Z case: a frame left in the scrollback"
[ "$(cursor)" = 1 ] || bad "Ctrl-Z case: the cursor stays hidden after the run"

# 1e. SIGHUP (the terminal gone) keeps its default action, the end, but puts the cursor back first
start 120 40 "$run; echo STATUS=\$?; sleep 600"
wait_for "tower 1 " 120 || bad "SIGHUP case: no view"
kill -HUP "$(pid_of_run)"
wait_for "STATUS=" 60 || bad "SIGHUP: the run did not end"
screen | grep -q "STATUS=129" || bad "SIGHUP: want the default action's status 129: $(screen | grep STATUS)"
[ "$(cursor)" = 1 ] || bad "SIGHUP: the cursor stays hidden"

# 2. SIGINT: the view erased, the stop line, exit 130, the cursor back
start 130 40 "$run; echo STATUS=\$?; sleep 600"
wait_for "tower 1 " 120 || bad "SIGINT case: no view"
kill -INT "$(pid_of_run)"
wait_for "STATUS=" 60 || bad "SIGINT case: the run did not end"
s=$(screen)
grep -q "STATUS=130" <<<"$s" || bad "SIGINT: want exit 130: $(grep STATUS <<<"$s")"
grep -q "stopped by SIGINT" <<<"$s" || bad "SIGINT: no stop line"
grep -q "tower 0 " <<<"$s" && bad "SIGINT: the view was left on the screen"
[ "$(cursor)" = 1 ] || bad "SIGINT: the cursor stays hidden"

# 3. two signals: the immediate exit shows the cursor too
start 130 40 "$run; echo STATUS=\$?; sleep 600"
wait_for "tower 1 " 120 || bad "two-signal case: no view"
p=$(pid_of_run)
kill -INT "$p"
kill -TERM "$p"
wait_for "STATUS=" 60 || bad "two signals: the run did not end"
[ "$(cursor)" = 1 ] || bad "two signals: the cursor stays hidden"

# 4. a narrow terminal: the Keras bar, no lanes
start 60 40 "$run; echo RUN-ENDED; sleep 600"
wait_for "\[=" 120 || bad "narrow: no bar: $(screen | tail -3)"
screen | grep -q "tower 0 " && bad "narrow: lanes drawn in 60 columns"
p=$(pid_of_run)
[ -z "$p" ] || kill -INT "$p"

# 5. not a terminal: lines, no escape sequences
"$bin" train --device cpu --towers 2 --epochs 1 --train-samples 2000 --val-samples 500 --test-samples 500 \
  --progress towers >"$tmp/out.txt" 2>&1 || bad "not a terminal: the run failed"
grep -q $'\033' "$tmp/out.txt" && bad "not a terminal: escape sequences in the output"
grep -q "8/8 - " "$tmp/out.txt" || bad "not a terminal: no epoch line: $(tail -3 "$tmp/out.txt")"

[ $fail -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
