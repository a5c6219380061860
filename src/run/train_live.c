/* train_live.c — --progress towers: the live view of a step, one lane per tower and one for the host, redrawn a
 * few times a second while the steps run (docs/tutorial.md, "Watching the towers").
 *
 * Each lane is a bar of the last steps' wall time (up to LIVE_STEPS of them) split by where it went: a tower's phases
 * from the ledger's table (pull, data, compute, its reduce, push, wait, its update on a device), the rest of the step
 * being "other" (the wake-up, the host's sum and optimizer) — and the host lane's reduce, update and the cross-node
 * combine, the rest being the towers'. Beside it: the lane's largest share, and the phase its thread is in right now
 * (tt_trainer_live_phase). A frame is built whole and written in one write, cursor moves and line clears included, so
 * it never flickers; no line is wider than the terminal, so none wraps; the cursor is hidden while it shows, and shown
 * again when the steps end, however they end (a signal's immediate exit writes the sequence too: tt_signal_restore).
 * The size is read at every frame: after a resize the old frame is erased as the terminal now lays it out, and a
 * terminal too narrow or too short for the lanes gets the Keras bar instead. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tt_ledger.h"
#include "tt_signal.h"
#include "train_run.h"

enum { LIVE_STEPS = 20, LIVE_MIN_COLS = 72, LIVE_MAX_COLS = 200, LIVE_HZ = 5, LIVE_LANE_BYTES = 640 };

/* A lane's segment: a character and a colour (SGR) each. */
typedef struct seg {
    const char *name;
    char ch;
    const char *sgr;
} seg;
/* the ledger's tower phases, in tt_tower_phase_fields' order, then the rest of the step */
static const seg TOWER_SEGS[TT_TOWER_PHASES + 1] = {
    {"pull", 'p', "34"},   {"data", 'd', "36"}, {"compute", 'C', "32"}, {"reduce", 'r', "33"},
    {"push", 'u', "35"},   {"push_sum", 's', "95"}, {"wait", 'w', "31"}, {"update", 'U', "93"}, {"other", '.', "90"}};
static const seg HOST_SEGS[] = {{"reduce", 'r', "33"}, {"update", 'U', "93"}, {"towers", '.', "90"},
                                {"combine", 'k', "94"}}; /* combine: K ranks only, last */
enum { HOST_N = sizeof HOST_SEGS / sizeof HOST_SEGS[0] };

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

static int fits(const run_state *rs, int cols, int rows)
{
    return cols >= LIVE_MIN_COLS && rows >= 0 && (size_t)rows >= rs->c->towers + 5;
}

int live_fits(run_state *rs)
{
    int cols, rows;
    term_size(rs->out, &cols, &rows);
    return fits(rs, cols, rows);
}

tt_status live_open(run_state *rs, tt_error *err)
{
    rs->report.live_cap = (rs->c->towers + 6) * LIVE_LANE_BYTES;
    rs->report.live_buf = (char *)tt_malloc(rs->report.live_cap);
    rs->report.live_width = (int *)tt_calloc(rs->c->towers + 6, sizeof(int));
    return rs->report.live_buf && rs->report.live_width ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "out of memory");
}

/* Appends text to the frame (bounded: a frame that would not fit is cut, never overrun). */
static void put(run_state *rs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(run_state *rs, const char *fmt, ...)
{
    run_report *r = &rs->report;
    if (r->live_len >= r->live_cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(r->live_buf + r->live_len, r->live_cap - r->live_len, fmt, ap);
    va_end(ap);
    if (n > 0) r->live_len += (size_t)n;
    if (r->live_len > r->live_cap) r->live_len = r->live_cap;
}

/* Ends a frame line of `width` visible characters (recorded: a resize must know what wraps). */
static void end_line(run_state *rs, int width)
{
    put(rs, "\033[K\n");
    rs->report.live_width[rs->report.live_lines++] = width;
}

/* A line of plain text, cut to the terminal's width. */
static void text_line(run_state *rs, int cols, const char *text)
{
    const int n = (int)strlen(text) < cols - 1 ? (int)strlen(text) : cols - 1;
    put(rs, "\r%.*s", n, text);
    end_line(rs, n);
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
    put(rs, "  %-8s %3.0f%%", s[big].name, total > 0 ? 100 * v[big] / total : 0);
    if (now >= 0) put(rs, "  now: %-7s", LIVE_NAMES[now]);
    end_line(rs, 12 + w + 15 + (now >= 0 ? 14 : 0));
}

/* The frame for steps [begin, done) of the epoch, for a terminal of `cols` columns. */
static void frame(run_state *rs, int cols, size_t begin, size_t done, double elapsed, double loss, double acc)
{
    if (cols > LIVE_MAX_COLS) cols = LIVE_MAX_COLS;
    const int w = cols - 12 - 15 - 14 - 1; /* the label; the largest share; "now: compute"; the last column free */
    const size_t T = rs->c->towers, from = done > begin + LIVE_STEPS ? done - LIVE_STEPS : begin;
    char text[256];
    const double rate = elapsed > 0 ? (double)(done - begin) / elapsed : 0;
    snprintf(text, sizeof text, "%zu/%zu steps  %.1fs  %.0f steps/s  ETA %.0fs  loss: %.4f - accuracy: %.4f", done,
             rs->steps, elapsed, rate, rate > 0 ? (double)(rs->steps - done) / rate : 0, loss, acc);
    text_line(rs, cols, text);
    snprintf(text, sizeof text, "  %-9s share of the last %zu steps' wall time", "", done - from);
    text_line(rs, cols, text);
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
        double v[TT_TOWER_PHASES + 1] = {0};
        for (size_t k = from; k < done; k++)
            for (size_t e = 0; e < T; e++) { /* ssp, async: the shards tower t took, whichever steps they were in */
                const tt_tower_ledger *l = &rs->ledger[k * T + e];
                if (l->tower != t) continue;
                const tt_tower_phases ph = tt_tower_phases_of(l);
                for (int p = 0; p < TT_TOWER_PHASES; p++) v[p] += tt_phase_value(&ph, &tt_tower_phase_fields[p]);
            }
        v[TT_TOWER_PHASES] = sum_total;
        for (int p = 0; p < TT_TOWER_PHASES; p++) v[TT_TOWER_PHASES] -= v[p];
        if (v[TT_TOWER_PHASES] < 0) v[TT_TOWER_PHASES] = 0; /* async: a fast tower ran more shards than steps */
        char label[32];
        snprintf(label, sizeof label, "tower %zu", t);
        lane(rs, label, TOWER_SEGS, v, TT_TOWER_PHASES + 1, w, tt_trainer_live_phase(rs->tr, t));
    }
    lane(rs, "host", HOST_SEGS, host, rs->ranks.K > 1 ? HOST_N : HOST_N - 1, w, -1);
    /* the legend: each segment coloured, as far as the width allows */
    put(rs, "\r  %-9s ", "");
    int used = 12;
    const seg *all[TT_TOWER_PHASES + 1 + HOST_N];
    int n = 0;
    for (int k = 0; k <= TT_TOWER_PHASES; k++) all[n++] = &TOWER_SEGS[k];
    for (int k = 0; k < 2; k++) all[n++] = &HOST_SEGS[k];
    for (int k = 0; k < n; k++) {
        const int len = 2 + (int)strlen(all[k]->name) + 1 + (k == TT_TOWER_PHASES + 1 ? 8 : 0);
        if (used + len >= cols) break;
        put(rs, "%s\033[%sm%c\033[0m %s ", k == TT_TOWER_PHASES + 1 ? "| host: " : "", all[k]->sgr, all[k]->ch,
            all[k]->name);
        used += len;
    }
    end_line(rs, used);
}

/* Rows the last frame takes now, on a terminal of `cols` columns (a line wider than the terminal wraps). */
static int frame_rows(const run_state *rs, int cols)
{
    int rows = 0;
    for (int i = 0; i < rs->report.live_lines; i++)
        rows += rs->report.live_width[i] > cols ? (rs->report.live_width[i] + cols - 1) / cols : 1;
    return rows;
}

/* Hands the signal handlers the sequence that erases the frame now on screen and shows the cursor (two buffers in
 * turn: a handler reading the old one while this one is written sees a whole string). */
static void arm_restore(run_state *rs, int cols)
{
    const int k = rs->report.live_restore_k ^= 1;
    const int rows = rs->report.live_lines ? frame_rows(rs, cols > 0 ? cols : 1) : 0;
    if (rows)
        snprintf(rs->report.live_restore[k], sizeof rs->report.live_restore[k], "\033[%dA\r\033[J%s", rows, RESTORE);
    else
        snprintf(rs->report.live_restore[k], sizeof rs->report.live_restore[k], "%s", RESTORE);
    tt_signal_restore(fileno(rs->out), rs->report.live_restore[k]);
}

/* Writes the frame in one write; a console that fails is the run's failure, as for the bar. */
static void flush_frame(run_state *rs)
{
    if (rs->report.live_len) fwrite(rs->report.live_buf, 1, rs->report.live_len, rs->out);
    rs->report.live_len = 0;
    print_flush(rs);
}

/* Back to the first line of the frame on screen, erasing it and everything below. */
static void erase(run_state *rs, int cols)
{
    const int rows = frame_rows(rs, cols > 0 ? cols : 1);
    if (rows) put(rs, "\033[%dA", rows);
    put(rs, "\r\033[J");
    rs->report.live_lines = 0;
}

int live_draw(run_state *rs, size_t begin, size_t done, double e0, double loss, double acc)
{
    const double now = tt_now();
    if (rs->report.live_lines && now - rs->report.live_t < 1.0 / LIVE_HZ) return 1;
    rs->report.live_t = now;
    int cols, rows;
    term_size(rs->out, &cols, &rows);
    const int cont = tt_signal_continued();
    if (cont != rs->report.live_cont) { /* stopped (Ctrl-Z) and continued: the handler erased the frame and showed
                                         * the cursor */
        rs->report.live_cont = cont;
        rs->report.live_lines = 0;
    }
    if (!rs->report.live_lines) { /* the first frame of this run of steps: hide the cursor, and say how to show it
                                   * again */
        arm_restore(rs, cols);
        put(rs, "\033[?25l");
    } else {
        erase(rs, cols);
    }
    if (!fits(rs, cols, rows)) { /* resized too small: the frame gone, the cursor back, the bar from now on */
        put(rs, "%s", RESTORE);
        flush_frame(rs);
        tt_signal_restore(-1, NULL);
        return 0;
    }
    frame(rs, cols, begin, done, now - e0, loss, acc);
    arm_restore(rs, cols); /* before the frame goes out: a signal after it erases it whole */
    flush_frame(rs);
    return 1;
}

void live_end(run_state *rs)
{
    if (tt_signal_continued() != rs->report.live_cont) rs->report.live_lines = 0; /* a stop erased it already */
    if (!rs->report.live_lines) return;
    int cols, rows;
    term_size(rs->out, &cols, &rows);
    erase(rs, cols);
    put(rs, "%s", RESTORE);
    flush_frame(rs);
    tt_signal_restore(-1, NULL);
}
