/* train_live.c — --progress towers: the live view of a step, one lane per tower and one for the host, redrawn a
 * few times a second while the steps run (docs/tutorial.md, "Watching the towers").
 *
 * Each lane is a bar of the last steps' wall time (up to LIVE_STEPS of them) split by where it went: a tower's pull,
 * data, compute, push and wait at the barrier, the rest of the step being the host's (sum, optimizer) — and the host
 * lane's reduce, update and the cross-node combine, the rest being the towers'. Beside it: the lane's largest share,
 * and the phase its thread is in right now (tt_trainer_live_phase). A frame is built whole and written in one write,
 * cursor moves and line clears included, so it never flickers; the cursor is hidden while it shows, and shown again
 * when the steps end, however they end (a signal's immediate exit writes the sequence too: tt_signal_restore). A
 * terminal too narrow or too short for the lanes gets the Keras bar instead. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tt_ledger.h"
#include "tt_signal.h"
#include "train_run.h"

enum { LIVE_STEPS = 20, LIVE_MIN_COLS = 72, LIVE_MAX_COLS = 200, LIVE_HZ = 5 };

/* The lanes' segments: a name, a character and a colour (SGR) each; the last is the step's remainder. */
typedef struct seg {
    const char *name;
    char ch;
    const char *sgr;
} seg;
static const seg TOWER_SEGS[] = {{"pull", 'p', "34"},   {"data", 'd', "36"}, {"compute", 'C', "32"},
                                 {"push", 'u', "35"},   {"wait", 'w', "31"}, {"other", '.', "90"}};
static const seg HOST_SEGS[] = {{"reduce", 'r', "33"}, {"update", 'U', "93"}, {"towers", '.', "90"},
                                {"combine", 'k', "94"}}; /* combine: K ranks only, last */
enum { TOWER_N = sizeof TOWER_SEGS / sizeof TOWER_SEGS[0], HOST_N = sizeof HOST_SEGS / sizeof HOST_SEGS[0] };

static const char *const LIVE_NAMES[TT_LIVE_PHASES] = {"-", "pull", "data", "compute", "push", "device",
                                                       "wait", "reduce", "host"};

static const char RESTORE[] = "\033[?25h"; /* show the cursor */

/* The terminal's columns and rows, or 0, 0. */
static void term_size(FILE *out, int *cols, int *rows)
{
    struct winsize w;
    *cols = *rows = 0;
    if (ioctl(fileno(out), TIOCGWINSZ, &w) == 0) {
        *cols = w.ws_col;
        *rows = w.ws_row;
    }
}

int live_fits(run_state *rs)
{
    int cols, rows;
    term_size(rs->out, &cols, &rows);
    return cols >= LIVE_MIN_COLS && (size_t)rows >= rs->c->towers + 5;
}

/* Appends text to the frame (bounded: a frame that would not fit is cut, never overrun). */
static void put(run_state *rs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(run_state *rs, const char *fmt, ...)
{
    if (rs->live_len >= sizeof rs->live_buf) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(rs->live_buf + rs->live_len, sizeof rs->live_buf - rs->live_len, fmt, ap);
    va_end(ap);
    if (n > 0) rs->live_len += (size_t)n;
    if (rs->live_len > sizeof rs->live_buf) rs->live_len = sizeof rs->live_buf;
}

/* One lane: the bar of width w from the shares v[0..n) (their sum is the whole), then the largest share. */
static void lane(run_state *rs, const char *label, const seg *s, const double *v, int n, int w, int now)
{
    double total = 0;
    for (int k = 0; k < n; k++) total += v[k] > 0 ? v[k] : 0;
    put(rs, "\r  %-9s ", label);
    int drawn = 0, big = 0;
    double acc = 0;
    for (int k = 0; k < n; k++) {
        if (v[k] > v[big]) big = k;
        acc += v[k] > 0 ? v[k] : 0;
        const int upto = total > 0 ? (int)(acc / total * w + 0.5) : 0;
        if (upto > drawn) {
            put(rs, "\033[%sm", s[k].sgr);
            for (; drawn < upto; drawn++) put(rs, "%c", s[k].ch);
            put(rs, "\033[0m");
        }
    }
    for (; drawn < w; drawn++) put(rs, " ");
    put(rs, "  %-7s %3.0f%%", s[big].name, total > 0 ? 100 * v[big] / total : 0);
    if (now >= 0) put(rs, "  now: %s", LIVE_NAMES[now]);
    put(rs, "\033[K\n");
}

/* The frame for steps [begin, done) of the epoch (steps before `first` ran in an earlier process). */
static void frame(run_state *rs, size_t begin, size_t done, double elapsed, double loss, double acc)
{
    int cols, rows;
    term_size(rs->out, &cols, &rows);
    if (cols > LIVE_MAX_COLS) cols = LIVE_MAX_COLS;
    const int w = cols - 48 > 10 ? cols - 48 : 10; /* the label, the largest share and "now: compute" beside it */
    const size_t T = rs->c->towers, from = done > begin + LIVE_STEPS ? done - LIVE_STEPS : begin;
    if (rs->live_lines) put(rs, "\033[%dA", rs->live_lines); /* back to the frame's first line */
    const double rate = elapsed > 0 ? (double)(done - begin) / elapsed : 0;
    put(rs, "\r%zu/%zu steps  %.1fs  %.0f steps/s  ETA %.0fs  loss: %.4f - accuracy: %.4f\033[K\n", done, rs->steps,
        elapsed, rate, rate > 0 ? (double)(rs->steps - done) / rate : 0, loss, acc);
    put(rs, "\r  %-9s share of the last %zu steps' wall time\033[K\n", "", done - from);
    double host[HOST_N] = {0}, sum_total = 0;
    for (size_t k = from; k < done; k++) {
        const tt_step_times *t = &rs->results[k].t;
        host[0] += t->reduce;
        host[1] += t->update;
        host[3] += t->combine;
        sum_total += t->total;
    }
    host[2] = sum_total - host[0] - host[1] - host[3];
    for (size_t t = 0; t < T; t++) {
        double v[TOWER_N] = {0};
        for (size_t k = from; k < done; k++) {
            const tt_tower_phases ph = tt_tower_phases_of(&rs->ledger[k * T + t]);
            v[0] += ph.pull;
            v[1] += ph.data;
            v[2] += ph.compute;
            v[3] += ph.push;
            v[4] += ph.wait;
        }
        v[5] = sum_total - v[0] - v[1] - v[2] - v[3] - v[4];
        char label[32];
        snprintf(label, sizeof label, "tower %zu", t);
        lane(rs, label, TOWER_SEGS, v, TOWER_N, w, tt_trainer_live_phase(&rs->tr, t));
    }
    lane(rs, "host", HOST_SEGS, host, rs->K > 1 ? HOST_N : HOST_N - 1, w, -1);
    put(rs, "\r  %-9s ", "");
    for (int k = 0; k < TOWER_N; k++) put(rs, "\033[%sm%c\033[0m %s  ", TOWER_SEGS[k].sgr, TOWER_SEGS[k].ch,
                                          TOWER_SEGS[k].name);
    put(rs, "| host: \033[%sm%c\033[0m reduce \033[%sm%c\033[0m update\033[K\n", HOST_SEGS[0].sgr, HOST_SEGS[0].ch,
        HOST_SEGS[1].sgr, HOST_SEGS[1].ch);
    rs->live_lines = (int)T + 4;
}

/* Writes the frame in one write; a console that fails is the run's failure, as for the bar. */
static void flush_frame(run_state *rs)
{
    if (rs->live_len) fwrite(rs->live_buf, 1, rs->live_len, rs->out);
    rs->live_len = 0;
    print_flush(rs);
}

void live_draw(run_state *rs, size_t begin, size_t done, double e0, double loss, double acc)
{
    const double now = tt_now();
    if (rs->live_lines && now - rs->live_t < 1.0 / LIVE_HZ) return;
    rs->live_t = now;
    if (!rs->live_lines) { /* the first frame of this run of steps: hide the cursor, and say how to show it again */
        tt_signal_restore(fileno(rs->out), RESTORE);
        put(rs, "\033[?25l");
    }
    frame(rs, begin, done, now - e0, loss, acc);
    flush_frame(rs);
}

void live_end(run_state *rs)
{
    if (!rs->live_lines) return;
    put(rs, "\033[%dA\r\033[J%s", rs->live_lines, RESTORE); /* the frame erased, the cursor back */
    rs->live_lines = 0;
    flush_frame(rs);
    tt_signal_restore(-1, NULL);
}
