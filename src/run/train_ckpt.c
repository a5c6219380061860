/* train_ckpt.c — the checkpoint side of a training run: the checkpoints' options (built once), a save (every rank
 * at the same point; rank 0 writes, says so and prunes to --keep), --save-every-epoch / --save-best after an epoch,
 * the save on a stop, and --resume: finding, reading and checking a checkpoint, then handing its state to the
 * trainer. Not for: when these happen (the run's flow, train.c) or the file format (checkpoint.c, ckpt_dir.c). */
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "train_run.h"

/* --resume DIR reads a directory without locking it: if another run is writing there now, one notice says that this
 * run forks it at its newest checkpoint as it stands. */
void resume_notice_busy(const char *dir)
{
    struct stat st;
    const long pid = stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? tt_ckpt_dir_holder(dir) : 0;
    if (!pid) return;
    char line[600], who[48] = "its pid unknown";
    if (pid > 0) snprintf(who, sizeof who, "pid %ld", pid);
    snprintf(line, sizeof line, "--resume %.400s: another run (%s) is writing there; resuming from its newest "
             "checkpoint as it stands now", dir, who);
    tt_report_notice(line);
}


void ckpt_init(run_state *rs)
{
    rs->ckpt.dir_lock = -1;
    rs->ckpt.best = NAN;
}

tt_status ckpt_open(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_status s;
    if (rs->ranks.K > 1 && rs->ranks.rank0 && c->checkpoint_dir && c->node_reduce == TT_NODE_PS) {
        const int n = (int)tt_optim_state_floats(&rs->tc.optim);
        for (int k = 0; k < n; k++)
            if (!(rs->ckpt.full[k] = (float *)tt_malloc(rs->model->n_params * sizeof(float))))
                return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    if (rs->ranks.rank0 && c->checkpoint_dir && ((s = tt_ckpt_dir_ready(c->checkpoint_dir, err)) ||
                                                 (s = tt_ckpt_dir_lock(c->checkpoint_dir, &rs->ckpt.dir_lock, err))))
        return s;
    return TT_OK;
}

void ckpt_close(run_state *rs)
{
    if (rs->ckpt.dir_lock >= 0) close(rs->ckpt.dir_lock); /* the directory is free for the next run */
    tt_free(rs->ckpt.options);
    tt_checkpoint_free(&rs->ckpt.resume_ck);
    for (int k = 0; k < TT_CKPT_MAX_SLOTS; k++) tt_free(rs->ckpt.full[k]);
}

/* The checkpoints' model description ("builtin:NAME" or "file:PATH") and options, built once for the run: what eval
 * and predict rebuild the model from (input shape, classes, vocabulary, a model file's text), which training data it
 * was (the resume check), the options table's rows at TT_AT_CKPT, and the options a resume must give again — each
 * key at its place. */
tt_status run_ckpt_options(run_state *rs, tt_error *err)
{
    enum { CKPT_FIELDS = 17 };
    const tt_run_config *c = rs->c;
    const char *file = tt_model_file(rs->model);
    snprintf(rs->ckpt.desc, sizeof rs->ckpt.desc, "%s:%s", file ? "file" : "builtin", file ? file : c->model);
    const char *text = rs->model_text;
    const tt_shape *in = &rs->model->input_shape;
    json_object *opt = json_object_new_object(), *shape = json_object_new_array();
    json_object *at[CKPT_FIELDS + 1] = {NULL}; /* the run's own fields, each at its place (NULL: an option's) */
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)rs->data_crc);
    if (opt && shape) {
        for (int i = 0; i < in->ndim; i++) json_object_array_add(shape, json_object_new_int64((int64_t)in->d[i]));
        at[1] = shape;
        shape = NULL; /* opt owns it */
        at[2] = json_object_new_int64((int64_t)rs->model->n_classes);
        at[3] = json_object_new_int64((int64_t)rs->model->token_vocab);
        at[4] = text ? json_object_new_string(text) : NULL; /* a model file's text */
        at[5] = tt_checkpoint_layers_json(rs->model); /* resume compares them */
        at[6] = json_object_new_int64((int64_t)rs->train->n);
        at[7] = json_object_new_int64((int64_t)rs->val->n);
        at[8] = json_object_new_string(crc);
        at[12] = json_object_new_double((double)c->optim.lr);
        json_object *same = json_object_new_array(); /* what a resume must give again (tt_run_config.resume_same) */
        for (const char *l = c->resume_same; same && *l;) {
            const size_t len = strcspn(l, "\n");
            json_object_array_add(same, json_object_new_string_len(l, (int)len));
            l += len + (l[len] == '\n');
        }
        at[13] = same;
        static const char *const keys[CKPT_FIELDS + 1] = {
            NULL, "input", "classes", "vocab", "model_text", "layers", "train_samples", "val_samples", "train_crc32",
            [12] = "base_lr", "same"};
        for (int p = 1; p <= CKPT_FIELDS; p++) {
            const tt_run_opt *o = tt_run_opt_at(TT_AT_CKPT, p);
            TT_ASSERT(!o != !keys[p]); /* every place is the run's or an option's */
            if (!o) {
                if (at[p]) json_object_object_add(opt, keys[p], at[p]);
                continue;
            }
            char key[48], words[TT_CALLBACK_WORDS];
            tt_run_opt_key(o, key, sizeof key);
            const uint64_t v = tt_run_opt_value(o, c);
            if (o->kind == TT_OPT_CALLBACK) { /* its canonical SPEC, which --resume compares ("off": not given) */
                tt_callback cb;
                memcpy(&cb, (const char *)c + o->field, sizeof cb);
                json_object_object_add(opt, key, json_object_new_string(tt_callback_words(&cb, words, sizeof words)));
                continue;
            }
            json_object_object_add(opt, key,
                                   tt_run_opt_is_number(o) ? json_object_new_int64((int64_t)v)
                                                           : json_object_new_string(tt_run_opt_words(o, v, words,
                                                                                                     sizeof words)));
        }
        const char *j = json_object_to_json_string_ext(opt, JSON_C_TO_STRING_PLAIN);
        if (j && (rs->ckpt.options = (char *)tt_malloc(strlen(j) + 1)) != NULL)
            memcpy(rs->ckpt.options, j, strlen(j) + 1);
    }
    json_object_put(opt);
    json_object_put(shape);
    return rs->ckpt.options ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "out of memory for the checkpoints' options");
}

/* Writes the run's state after `step` steps of epoch `epoch` (between steps: the trainer is idle, and its master
 * weights and optimizer state are written as they stand) to `path`, or to the periodic name when path is NULL (then
 * prunes to --keep); says so on the console and in the log. A failure is recorded (run_fail). */
static void run_save_here(run_state *rs, size_t epoch, size_t step, const char *path);

/* Every rank calls it at the same point: ps gathers the optimizer's shards to rank 0, rank 0 writes, and every rank
 * learns how that went (a failed write ends the whole job, with its line). */
tt_status run_save(run_state *rs, size_t epoch, size_t step, const char *path, tt_error *err)
{
    tt_status s = TT_OK;
    if (rs->ranks.K > 1 && rs->c->node_reduce == TT_NODE_PS) {
        tt_optim *o = tt_trainer_optim(rs->tr);
        tt_optim_slot sl[TT_CKPT_MAX_SLOTS];
        const int n = tt_optim_slots(o, sl);
        for (int k = 0; !s && k < n; k++)
            s = tt_node_gather_slices(rs->ranks.nd, sl[k].data, rs->ckpt.full[k], rs->model->n_params, err);
    }
    run_fail(rs, s, err);
    if (!rs->ranks.pending.s && rs->ranks.rank0) run_save_here(rs, epoch, step, path);
    if ((s = run_agree(rs, TT_OK, err))) return s;
    if (!path) { /* every rank: the end-of-training decision, and whether a stop must write */
        rs->ckpt.saved_step = (uint64_t)(epoch - 1) * rs->steps + step;
        rs->ckpt.written_epoch = epoch;
        rs->ckpt.written_step = step;
    }
    return TT_OK;
}

/* Rank 0's part of run_save: the file, its line and its record, and pruning. */
static void run_save_here(run_state *rs, size_t epoch, size_t step, const char *path)
{
    const tt_run_config *c = rs->c;
    char periodic[4096];
    if (!path) {
        tt_ckpt_path(periodic, sizeof periodic, c->checkpoint_dir, epoch, step);
        path = periodic;
    }
    const double t0 = tt_now();
    tt_optim *o = tt_trainer_optim(rs->tr);
    tt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.epoch = epoch;
    ck.step = step;
    ck.steps_per_epoch = rs->steps;
    ck.global_step = (uint64_t)(epoch - 1) * rs->steps + step; /* the training's position */
    ck.optim_steps = o->t; /* ssp, async: one per gradient applied alone; less the steps skipped (--loss-scale) */
    const tt_scaler_state sc = tt_trainer_scaler(rs->tr);
    if (rs->tc.precision || sc.skipped) { /* the scaler (and the skips a run before carried) */
        ck.loss_scale = sc.scale;
        ck.scale_good = sc.good;
        ck.scale_skipped = sc.skipped;
    }
    ck.seed = c->seed;
    ck.batch = rs->tc.batch;
    ck.optim = o->cfg;
    ck.optim.lr = rs->tc.optim.lr; /* the run's rate, which a resume must give again; the one in force is the
                                    * callbacks' (plateau_lr) */
    ck.u_product = o->u_product;
    cb_to_ckpt(rs, &ck);
    ck.best = rs->ckpt.best;
    ck.towers = c->towers * (size_t)rs->ranks.K; /* every tower of the job */
    snprintf(ck.backend, sizeof ck.backend, "%s", rs->ops->name);
    ck.model_desc = rs->ckpt.desc;
    ck.options = rs->ckpt.options;
    ck.n_params = rs->model->n_params;
    ck.params = (float *)tt_trainer_params(rs->tr); /* read only: the writer does not change a tensor */
    tt_optim_slot sl[TT_CKPT_MAX_SLOTS];
    ck.n_slots = tt_optim_slots(o, sl);
    for (int k = 0; k < ck.n_slots; k++) {
        snprintf(ck.slot_names[k], sizeof ck.slot_names[k], "%s", sl[k].name);
        ck.slots[k] = rs->ckpt.full[k] ? rs->ckpt.full[k] : sl[k].data; /* ps: the gathered vectors */
    }
    tt_error e;
    tt_status s = tt_checkpoint_write(path, rs->model, &ck, &e);
    if (s) {
        run_fail(rs, s, &e);
        return;
    }
    const double secs = tt_now() - t0, mb = (double)(1 + ck.n_slots) * (double)ck.n_params * sizeof(float) / 1e6;
    if (rs->out) {
        char esc[300];
        tt_escape(path, esc, sizeof esc);
        fprintf(rs->out, "checkpoint: %s (epoch %zu, step %zu/%zu; %.1f MB in %.0f ms)\n", esc, epoch, step, rs->steps,
                mb, 1e3 * secs);
        print_flush(rs);
    }
    if (rs->report.log.buf && !rs->ranks.pending.s) {
        tt_out_printf(&rs->report.log, "{\"event\":\"checkpoint\",\"epoch\":%zu,\"step\":%zu,", epoch, step);
        tt_out_json_str(&rs->report.log, "path", path, 1);
        tt_out_json_num(&rs->report.log, "megabytes", mb, 1);
        tt_out_json_num(&rs->report.log, "seconds", secs, 0);
        tt_out_printf(&rs->report.log, "}\n");
        run_fail(rs, tt_out_commit(&rs->report.log, &e), &e);
    }
    if (path == periodic && !rs->ranks.pending.s) run_fail(rs, tt_ckpt_prune(c->checkpoint_dir, c->keep, &e), &e);
}

/* After an epoch's validation: --save-every-epoch (or a --save-every-steps boundary at the epoch's end), and
 * --save-best when the metric improved. */
tt_status run_save_epoch(run_state *rs, size_t epoch, const tt_epoch_stats *es, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_status s = TT_OK;
    const uint64_t global = (uint64_t)epoch * rs->steps;
    int improved = 0;
    if (c->save_best && rs->val->n) { /* first: the periodic checkpoint must carry the new best, or a run resumed
                                       * from it overwrites best.safetensors with a worse epoch */
        const double v = c->save_best == TT_SAVE_BEST_VAL_LOSS ? es->val.loss : es->val.accuracy;
        double *best = &rs->ckpt.best;
        const int better = isnan(*best) || (c->save_best == TT_SAVE_BEST_VAL_LOSS ? v < *best : v > *best);
        if (better && isfinite(v)) {
            *best = v;
            improved = 1;
        }
    }
    if (c->save_every_epoch || (c->save_every_steps && global % c->save_every_steps == 0))
        s = run_save(rs, epoch, rs->steps, NULL, err);
    if (!s && improved) {
        char path[4096];
        snprintf(path, sizeof path, "%s/best.safetensors", c->checkpoint_dir);
        s = run_save(rs, epoch, rs->steps, path, err);
    }
    return s;
}

/* A stop by signal with --checkpoint-dir: the state at this step boundary, then the stop's line says where it is.
 * A failed write is said in the same line (the run is stopping anyway). */
void run_save_on_stop(run_state *rs, size_t epoch, size_t step, char *note, size_t len)
{
    note[0] = '\0';
    if (!rs->ckpt.options || epoch == 0) return; /* no --checkpoint-dir, or nothing trained yet: nothing to save */
    char path[4096];
    tt_ckpt_path(path, sizeof path, rs->c->checkpoint_dir, epoch, step);
    const run_ckpt *cp = &rs->ckpt;
    if (cp->written_epoch == epoch && cp->written_step == step) { /* this very state is on disk: left as it is */
        snprintf(note, len, "; checkpoint %.3000s (written before the stop)", path);
        return;
    }
    tt_error e;
    if (run_save(rs, epoch, step, NULL, &e) == TT_OK)
        snprintf(note, len, "; checkpoint %.3000s", path);
    else
        snprintf(note, len, "; no checkpoint: %.3000s", e.msg);
}

/* The checkpoint's training set (its options' train_samples, val_samples, train_crc32: required, typed) must be this
 * run's: the same sample order needs the same samples. */
static tt_status resume_same_data(const run_state *rs, const tt_checkpoint *ck, const char *what, tt_error *err)
{
    tt_ckpt_value tn, vn, crc;
    tt_status s = tt_checkpoint_option(ck, what, "train_samples", TT_CKPT_UINT, 1, &tn, err);
    if (!s) s = tt_checkpoint_option(ck, what, "val_samples", TT_CKPT_UINT, 1, &vn, err);
    if (!s) s = tt_checkpoint_option(ck, what, "train_crc32", TT_CKPT_STRING, 1, &crc, err);
    if (s) return s;
    char mine[16], q[32];
    snprintf(mine, sizeof mine, "%08x", (unsigned)rs->data_crc);
    if (tn.u != rs->train->n)
        return tt_fail(err, TT_ERR_ARG, "%s: trained on %llu training samples, this run has %zu (the same --data, "
                       "--val-samples and --train-samples?)", what, (unsigned long long)tn.u, rs->train->n);
    if (vn.u != rs->val->n)
        return tt_fail(err, TT_ERR_ARG, "%s: trained with %llu validation samples, this run has %zu (the same "
                       "--val-samples?)", what, (unsigned long long)vn.u, rs->val->n);
    tt_escape(crc.s, q, sizeof q);
    if (strcmp(crc.s, mine) != 0)
        return tt_fail(err, TT_ERR_ARG, "%s: trained on other training data (CRC-32 %s, this run's %s: the same "
                       "--data?)", what, q, mine);
    return TT_OK;
}

/* The options the checkpoint's run kept as "same" (tt_run_config.resume_same: "--sync bsp", ...) must be this run's:
 * each of its lines whose option this run also lists is compared, and the first that differs refused, naming both
 * values. Absent (a checkpoint from before the list) or a line of an option this build does not list: not compared. */
static tt_status resume_same_options(const run_state *rs, const tt_checkpoint *ck, const char *what, tt_error *err)
{
    const tt_run_config *c = rs->c;
    int has_bn = 0;
    for (size_t l = 0; l < rs->model->n_layers; l++) has_bn |= rs->model->layers[l].kind == &tt_layer_batchnorm;
    /* the towers may change — the host sums every tower's rows into the same step — except where a tower's own rows
     * set what it computes: batchnorm's statistics per tower (--bn-sync off) and --sync ssp/async's staleness */
    const size_t towers = c->towers * (size_t)rs->ranks.K;
    const int per_tower = (has_bn && !c->bn_sync) || tt_sync_takes_shards(c->sync.kind);
    if (per_tower && ck->towers != towers)
        return tt_fail(err, TT_ERR_ARG, "%s: trained with %zu towers, this run has %zu (give the same: %s a tower's own "
                       "rows set what it computes)", what, ck->towers, towers,
                       has_bn && !c->bn_sync ? "with batchnorm statistics per tower (--bn-sync off)" : "under --sync ssp "
                       "or async");
    tt_ckpt_value v;
    tt_status s = tt_checkpoint_option(ck, what, "same", TT_CKPT_STRINGS, 0, &v, err);
    if (s || !v.found) return s;
    for (size_t i = 0; i < v.n; i++) {
        const char *theirs = v.ss[i];
        const size_t name_len = strcspn(theirs, " ");
        if (!has_bn && name_len == strlen("--bn-sync") && strncmp(theirs, "--bn-sync", name_len) == 0)
            continue; /* a model without batchnorm computes the same either way */
        for (const char *l = rs->c->resume_same; *l;) {
            const size_t len = strcspn(l, "\n");
            if (len > name_len && l[name_len] == ' ' && strncmp(l, theirs, name_len) == 0 &&
                (strlen(theirs) != len || strncmp(l, theirs, len) != 0)) {
                char q[96];
                tt_escape(theirs + (theirs[name_len] ? name_len + 1 : name_len), q, sizeof q);
                return tt_fail(err, TT_ERR_ARG, "%s: trained with %.*s %s, this run has %.*s (give the same: a "
                               "resumed run continues exactly only with it; train --help lists what may change)",
                               what, (int)name_len, l, q, (int)(len - name_len - 1), l + name_len + 1);
            }
            l += len + (l[len] == '\n');
        }
    }
    return TT_OK;
}

/* --resume: rank 0 (or the one process) finds the checkpoint (a directory's newest valid one) and reads it; every rank
 * of a job gets its bytes (the other nodes need not see rank 0's disk) and parses them into rs->ckpt.resume_ck. */
static tt_status run_resume_bytes(run_state *rs, char *path, size_t len, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_checkpoint *ck = &rs->ckpt.resume_ck;
    struct stat st;
    uint8_t *buf = NULL;
    size_t n = 0;
    tt_status s = TT_OK;
    snprintf(path, len, "%s", c->resume);
    if (rs->ranks.rank0 && !rs->ranks.pending.s) { /* a failure recorded already (the banner): nothing read, agreed
                                                    * below */
        size_t skipped = 0;
        if (stat(c->resume, &st) == 0 && S_ISDIR(st.st_mode)) {
            s = tt_ckpt_newest(c->resume, rs->model, ck, path, len, &skipped, err);
            tt_checkpoint_free(ck);
            if (!s && skipped && rs->out)
                fprintf(rs->out, "resume: %zu newer checkpoint%s in %s did not read as valid; skipped\n", skipped,
                        skipped == 1 ? "" : "s", c->resume);
        }
        if (!s) s = tt_checkpoint_read_bytes(path, &buf, &n, err);
    }
    if ((s = run_agree(rs, s, err))) {
        tt_free(buf);
        return s;
    }
    uint64_t n64 = n;
    s = tt_node_bcast(rs->ranks.nd, &n64, sizeof n64, err);
    if (!s) s = tt_node_bcast(rs->ranks.nd, path, len, err);
    if (!s && !rs->ranks.rank0 && !(buf = (uint8_t *)tt_malloc(n64 ? (size_t)n64 : 1)))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory for the checkpoint's %llu bytes", (unsigned long long)n64);
    if ((s = run_agree(rs, s, err)) == TT_OK) s = tt_node_bcast(rs->ranks.nd, buf, (size_t)n64, err);
    path[len - 1] = '\0';
    if (!s) s = tt_checkpoint_parse(buf, (size_t)n64, path, rs->model, ck, err);
    tt_free(buf);
    return s;
}

/* --resume-weights-only: the checkpoint's weights (names and shapes checked by the reader, values finite), on purpose
 * and nothing else: another model with the same tensors, other options or data may take them. The optimizer starts
 * fresh (its state belonged to the other training) and the run from epoch 1, step 1, as a new run does. */
static tt_status resume_weights_only(run_state *rs, const char *what, tt_error *err)
{
    const tt_checkpoint *ck = &rs->ckpt.resume_ck;
    (void)err;
    memcpy(rs->h_init, ck->params, rs->model->n_params * sizeof(float));
    if (rs->out) {
        char esc[400];
        tt_escape(what, esc, sizeof esc);
        fprintf(rs->out, "resume: the weights of %s (epoch %llu, step %llu) only: its optimizer state, position and "
                "options are not used; a fresh optimizer, from epoch 1\n", esc + strlen("--resume-weights-only "),
                (unsigned long long)ck->epoch, (unsigned long long)ck->step);
    }
    return TT_OK;
}

/* --resume: the checkpoint (a file, or a directory's newest valid one), checked against this run: same model
 * (tensor by tensor), batch, seed, optimizer and steps per epoch. Sets the weights to start from (h_init), where to
 * begin, and keeps the optimizer's state for run_resume_optim. */
tt_status run_resume_load(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_checkpoint *ck = &rs->ckpt.resume_ck;
    char path[4096];
    tt_status s = run_resume_bytes(rs, path, sizeof path, err);
    if (s) return s;
    char what[300];
    snprintf(what, sizeof what, "%s %.200s", c->resume_weights_only ? "--resume-weights-only" : "--resume", path);
    if ((s = tt_checkpoint_check_finite(ck, rs->model, what, !c->resume_weights_only, NULL, err))) return s;
    if (c->resume_weights_only) return resume_weights_only(rs, what, err);
    if ((s = tt_checkpoint_same_model(ck, what, rs->model, rs->model->builtin ? c->model : NULL, err))) {
        const tt_error e = *err; /* the line, and what to do about it */
        return tt_fail(err, s, "%s (give the same --model, or --resume-weights-only to take only its weights)", e.msg);
    }
    char have[TT_OPTIM_WORDS], want[TT_OPTIM_WORDS];
    tt_optim_describe(&ck->optim, have, sizeof have);
    tt_optim_describe(&rs->tc.optim, want, sizeof want);
    const tt_optim_config *a = &ck->optim, *b = &rs->tc.optim;
    if (ck->batch != rs->tc.batch)
        return tt_fail(err, TT_ERR_ARG, "--resume %.200s: trained with --batch %zu, this run has %zu (give the same)",
                       path, ck->batch, rs->tc.batch);
    if (ck->seed != c->seed)
        return tt_fail(err, TT_ERR_ARG, "--resume %.200s: trained with --seed %llu, this run has %llu (give the same)",
                       path, (unsigned long long)ck->seed, (unsigned long long)c->seed);
    if (a->kind != b->kind || a->lr != b->lr || strcmp(have, want) != 0)
        return tt_fail(err, TT_ERR_ARG,
                       "--resume %.200s: trained with --optimizer %s, lr %g%s; this run has %s, lr %g%s (give the "
                       "same%s)",
                       path, tt_optim_kind_name(a->kind), (double)a->lr, have, tt_optim_kind_name(b->kind),
                       (double)b->lr, want,
                       c->lr_scaling == TT_LR_LINEAR ? "; --lr-scaling linear multiplies --lr by the towers" : "");
    if (ck->steps_per_epoch != rs->steps)
        return tt_fail(err, TT_ERR_ARG,
                       "--resume %.200s: its epochs have %llu steps, this run's have %zu (the same --data, "
                       "--val-samples and --train-samples?)",
                       path, (unsigned long long)ck->steps_per_epoch, rs->steps);
    int stopped;
    if ((s = resume_same_data(rs, ck, what, err)) || (s = resume_same_options(rs, ck, what, err)) ||
        (s = cb_resume(rs, ck, what, &stopped, err)))
        return s;
    const int done = ck->step >= ck->steps_per_epoch;
    rs->start_epoch = (size_t)ck->epoch + (done ? 1 : 0);
    rs->start_step = done ? 0 : (size_t)ck->step;
    if ((done && ck->epoch == c->epochs) || stopped) { /* a finished run: a clean no-op, said in one line (tt_run_on) */
        char esc[300];
        tt_escape(path, esc, sizeof esc);
        if (stopped) /* EarlyStopping ended it: finished, whatever --epochs says */
            snprintf(rs->ckpt.nothing_left, sizeof rs->ckpt.nothing_left, "resume: %s: nothing left to train (early "
                     "stopping ended it after epoch %llu)", esc, (unsigned long long)ck->epoch);
        else
            snprintf(rs->ckpt.nothing_left, sizeof rs->ckpt.nothing_left,
                     "resume: %s: nothing left to train (epochs %llu of %zu done)", esc, (unsigned long long)ck->epoch,
                     c->epochs);
        return TT_OK;
    }
    if (rs->start_epoch > c->epochs) /* beyond --epochs: the flag was meant otherwise */
        return tt_fail(err, TT_ERR_ARG,
                       "--resume %.200s: it has finished epoch %llu, and --epochs %zu counts the total (as Keras's "
                       "initial_epoch does): nothing to train",
                       path, (unsigned long long)ck->epoch, c->epochs);
    memcpy(rs->h_init, ck->params, rs->model->n_params * sizeof(float));
    rs->ckpt.best = ck->best;
    rs->ckpt.saved_step = ck->global_step;
    if (rs->out) {
        char esc[300];
        tt_escape(path, esc, sizeof esc);
        fprintf(rs->out, "resume: %s (epoch %llu, step %llu/%zu; written by %zu tower%s on %s) -> epoch %zu, step %zu\n",
                esc, (unsigned long long)ck->epoch, (unsigned long long)ck->step, rs->steps, ck->towers,
                ck->towers == 1 ? "" : "s", ck->backend, rs->start_epoch, rs->start_step + 1);
        if (rs->cb.st.plateau && rs->cb.st.lr != rs->tc.optim.lr)
            fprintf(rs->out, "resume: the rate in force is %g (ReduceLROnPlateau reduced it from %g)\n",
                    (double)rs->cb.st.lr, (double)rs->tc.optim.lr);
    }
    return TT_OK;
}

/* The checkpoint's run scaled its loss dynamically (its options' "loss_scale", "dynamic:..."; absent: it did not) in
 * the format `precision` (its options' "precision"): a scale grown in bf16 (up to 2^64) means nothing to fp16. */
static int run_ckpt_dynamic(const tt_checkpoint *ck, int precision)
{
    tt_ckpt_value v, p;
    tt_error e;
    return tt_checkpoint_option(ck, "--resume", "loss_scale", TT_CKPT_STRING, 0, &v, &e) == TT_OK && v.found &&
           strncmp(v.s, "dynamic", 7) == 0 &&
           tt_checkpoint_option(ck, "--resume", "precision", TT_CKPT_STRING, 0, &p, &e) == TT_OK && p.found &&
           strcmp(p.s, tt_precision_names[precision]) == 0;
}

/* --resume, once the trainer exists: the optimizer's vectors, step count and schedule term, and the loss scaler;
 * then the checkpoint's memory goes. */
void run_resume_optim(run_state *rs)
{
    tt_checkpoint *ck = &rs->ckpt.resume_ck;
    if (rs->c->resume_weights_only) { /* a fresh optimizer */
        tt_checkpoint_free(ck);
        return;
    }
    tt_optim *o = tt_trainer_optim(rs->tr);
    tt_optim_slot sl[TT_CKPT_MAX_SLOTS];
    const int n = tt_optim_slots(o, sl);
    const size_t off = tt_trainer_optim_offset(rs->tr); /* ps: this rank's slice of each vector */
    for (int k = 0; k < n; k++)
        for (int j = 0; j < ck->n_slots; j++)
            if (strcmp(sl[k].name, ck->slot_names[j]) == 0) memcpy(sl[k].data, ck->slots[j] + off, o->n * sizeof(float));
    o->t = ck->optim_steps;
    o->u_product = ck->u_product;
    cb_resume_trainer(rs, ck); /* the rate in force, the best epoch's weights */
    /* the loss scaler: its skips always (the next checkpoint's optim_steps needs them); its scale and run of finite
     * steps where both runs scale dynamically, else the run's own from its options */
    tt_scaler_state sc = tt_trainer_scaler(rs->tr);
    sc.skipped = ck->scale_skipped;
    if (rs->tc.loss_scale.dynamic && ck->loss_scale > 0 && run_ckpt_dynamic(ck, rs->tc.precision)) {
        if (rs->c->loss_scale.scale > 0 && rs->c->loss_scale.scale != ck->loss_scale && rs->ranks.rank0) {
            char line[200]; /* a --loss-scale dynamic:INIT given again starts nothing: the run goes on as it was */
            snprintf(line, sizeof line, "--resume: the dynamic loss scale goes on from the checkpoint's %.17g "
                     "(--loss-scale's initial scale is a fresh run's)", ck->loss_scale);
            tt_report_notice(line);
        }
        sc.scale = ck->loss_scale;
        sc.good = ck->scale_good;
    }
    tt_trainer_set_scaler(rs->tr, &sc);
    tt_checkpoint_free(ck);
}
