/* train_callbacks.c — the run's side of --early-stopping and --reduce-lr-on-plateau (tt_callbacks.h): the callbacks'
 * part of the run (their state, the best epoch's weights kept on the host), an epoch's decisions carried out — rank
 * 0's for the whole job, the rate set in the trainer, the weights kept, the lines in Keras's verbose words and the
 * log's records —, the end of training (the best weights put back), and the state a checkpoint keeps and --resume
 * takes back. Not for: the decisions themselves (callbacks.c), when the run calls in (train.c), or the checkpoint
 * file (checkpoint.c, ckpt_metadata.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_run.h"

tt_status tt_run_callbacks_check(const tt_run_config *c, size_t val_n, tt_error *err)
{
    const tt_callback *cbs[2] = {&c->early_stopping, &c->reduce_lr};
    const char *names[2] = {"--early-stopping", "--reduce-lr-on-plateau"};
    for (int i = 0; i < 2; i++)
        if (tt_callback_needs_val(cbs[i]) && !val_n)
            return tt_fail(err, TT_ERR_ARG, "%s: monitor=%s needs a validation set (--val-samples is 0): monitor "
                           "loss, accuracy or top5, or give --val-samples N", names[i],
                           tt_cb_metric_names[cbs[i]->monitor]);
    return TT_OK;
}

/* ---- the callbacks' part of the run ---------------------------------------------------------------------------- */

void cb_plan(const run_state *rs, tt_mem_plan *plan)
{
    const tt_run_config *c = rs->c;
    if (c->early_stopping.kind != TT_CB_EARLY_STOPPING || !c->early_stopping.restore_best_weights) return;
    const double P = (double)rs->model->n_params;
    tt_mem_add(plan, "--early-stopping restore_best_weights: the best epoch's weights", TT_MEM_HOST,
               P * sizeof(float), TT_MEM_BY_PARAMS);
    if (c->resume) /* and the checkpoint's copy of them, its bytes and its tensor */
        tt_mem_add(plan, "--resume checkpoint: the best epoch's weights", TT_MEM_HOST, 2 * P * sizeof(float),
                   TT_MEM_BY_PARAMS);
}

tt_status cb_open(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_status s = tt_run_callbacks_check(c, rs->val->n, err);
    if (s) return s;
    rs->cb.on = c->early_stopping.kind != TT_CB_NONE || c->reduce_lr.kind != TT_CB_NONE;
    tt_callbacks_begin(&rs->cb.st, &c->early_stopping, &c->reduce_lr, rs->tc.optim.lr); /* the rate in force */
    if (rs->cb.st.early && c->early_stopping.restore_best_weights &&
        !(rs->cb.h_best = (float *)tt_malloc(rs->model->n_params * sizeof(float))))
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    return TT_OK;
}

void cb_close(run_state *rs)
{
    tt_free(rs->cb.h_best);
    rs->cb.h_best = NULL;
}

size_t cb_last_epoch(const run_state *rs)
{
    return rs->cb.st.es_stopped_epoch ? (size_t)rs->cb.st.es_stopped_epoch : rs->c->epochs;
}

/* ---- an epoch's end, the end of training ----------------------------------------------------------------------- */

/* Rank 0's log: a decision's record, {"event":EVENT,"epoch":E,"monitor":M,"value":V,"best":B, then fields}. */
static void cb_record(run_state *rs, const char *event, size_t epoch, const tt_callback *cb, double value, int has_best,
                      double best, const char *fields)
{
    tt_out *log = &rs->report.log;
    if (!log->buf || rs->ranks.pending.s) return;
    tt_out_printf(log, "{\"event\":\"%s\",\"epoch\":%zu,\"monitor\":\"%s\",\"mode\":\"%s\",", event, epoch,
                  tt_cb_metric_names[cb->monitor], tt_callback_maximizes(cb) ? "max" : "min");
    tt_out_json_num(log, "value", value, 1);
    tt_out_json_num(log, "best", has_best ? best : NAN, 1);
    tt_out_printf(log, "%s}\n", fields);
    tt_error e;
    run_fail(rs, tt_out_commit(log, &e), &e);
}

void cb_epoch_end(run_state *rs, const tt_epoch_stats *es)
{
    const tt_run_config *c = rs->c;
    const tt_callback *esc = &c->early_stopping, *rl = &c->reduce_lr;
    run_cb *cb = &rs->cb;
    const double m[TT_CB_METRICS] = {es->loss, es->accuracy, es->top5, es->val.loss, es->val.accuracy, es->val.top5};
    struct {
        tt_callbacks_state st;
        tt_cb_decision d;
    } at = {cb->st, {0}};
    tt_callbacks_epoch_end(esc, rl, &at.st, es->epoch, m, &at.d);
    tt_error e;
    /* the ranks' metrics are the job's already (summed in rank order); rank 0's decision is taken all the same, so
     * that no rounding of another rank's can part the ranks' ways */
    if (rs->ranks.K > 1) run_fail(rs, tt_node_bcast(rs->ranks.nd, &at, sizeof at, &e), &e);
    cb->st = at.st;
    if (at.d.keep_weights) tt_trainer_get_params(rs->tr, cb->h_best);
    if (at.d.reduced) tt_trainer_set_lr(rs->tr, cb->st.lr);
    char lr[32], old[32], fields[160];
    if (rs->out && !rs->ranks.pending.s && (at.d.reduced || at.d.stop)) { /* Keras's verbose=1 lines */
        if (at.d.reduced) /* the rate as stored, in its shortest digits (Keras prints the float64 product before it is
                           * stored: 0.0005000000237487257) */
            fprintf(rs->out, "Epoch %zu: ReduceLROnPlateau reducing learning rate to %s.\n", es->epoch,
                    tt_float_str(cb->st.lr, lr, sizeof lr));
        if (at.d.stop) fprintf(rs->out, "Epoch %zu: early stopping\n", es->epoch);
        print_flush(rs);
    }
    if (at.d.reduced) {
        snprintf(fields, sizeof fields, "\"old_lr\":%s,\"lr\":%s,\"patience\":%zu,\"cooldown\":%zu",
                 tt_float_str(at.d.old_lr, old, sizeof old), tt_float_str(cb->st.lr, lr, sizeof lr), rl->patience,
                 rl->cooldown);
        cb_record(rs, "reduce_lr_on_plateau", es->epoch, rl, m[rl->monitor], cb->st.rl_has_best, cb->st.rl_best,
                  fields);
    }
    if (at.d.stop) {
        snprintf(fields, sizeof fields, "\"wait\":%llu,\"patience\":%zu,\"best_epoch\":%llu",
                 (unsigned long long)cb->st.es_wait, esc->patience, (unsigned long long)cb->st.es_best_epoch);
        cb_record(rs, "early_stopping", es->epoch, esc, m[esc->monitor], cb->st.es_has_best, cb->st.es_best, fields);
    }
}

int cb_train_end(run_state *rs)
{
    const tt_callback *es = &rs->c->early_stopping;
    const tt_callbacks_state *st = &rs->cb.st;
    if (!tt_callbacks_restores(es, st)) return 0;
    tt_trainer_set_params(rs->tr, rs->cb.h_best);
    rs->res->restored_epoch = (size_t)st->es_best_epoch;
    if (rs->out && !rs->ranks.pending.s) {
        fprintf(rs->out, "Restoring model weights from the end of the best epoch: %llu.\n",
                (unsigned long long)st->es_best_epoch);
        print_flush(rs);
    }
    char fields[96];
    snprintf(fields, sizeof fields, "\"best_epoch\":%llu,\"stopped\":%s", (unsigned long long)st->es_best_epoch,
             st->es_stopped_epoch ? "true" : "false");
    cb_record(rs, "restore_best_weights", (size_t)(st->es_stopped_epoch ? st->es_stopped_epoch : rs->c->epochs), es,
              st->es_best, st->es_has_best, st->es_best, fields);
    return 1;
}

/* ---- checkpoints ------------------------------------------------------------------------------------------------ */

void cb_to_ckpt(const run_state *rs, tt_checkpoint *ck)
{
    ck->cb = rs->cb.st;
    ck->best_params = rs->cb.st.es_kept ? rs->cb.h_best : NULL;
}

/* The callback's SPEC in the checkpoint's options (absent: "off", a run without it or before it) against this run's. */
static tt_status cb_same_spec(const tt_checkpoint *ck, const char *what, const char *key, const char *opt,
                              const tt_callback *mine, tt_error *err)
{
    tt_ckpt_value v;
    tt_status s = tt_checkpoint_option(ck, what, key, TT_CKPT_STRING, 0, &v, err);
    if (s) return s;
    char here[TT_CALLBACK_WORDS], q[TT_CALLBACK_WORDS];
    tt_callback_words(mine, here, sizeof here);
    const char *theirs = v.found ? v.s : "off";
    if (strcmp(theirs, here) == 0) return TT_OK;
    tt_escape(theirs, q, sizeof q);
    return tt_fail(err, TT_ERR_ARG, "%s: trained with %s %s, this run has %s %s (give the same: a resumed run decides "
                   "as the unbroken one only with it)", what, opt, q, opt, here);
}

tt_status cb_resume(run_state *rs, const tt_checkpoint *ck, const char *what, int *stopped, tt_error *err)
{
    const tt_run_config *c = rs->c;
    const tt_callbacks_state *t = &ck->cb;
    *stopped = 0;
    tt_status s = cb_same_spec(ck, what, "early_stopping", "--early-stopping", &c->early_stopping, err);
    if (!s) s = cb_same_spec(ck, what, "reduce_lr_on_plateau", "--reduce-lr-on-plateau", &c->reduce_lr, err);
    if (s) return s;
    /* the options say the same callbacks: the state must be theirs (a file that says otherwise was edited) */
    if (t->early != rs->cb.st.early || t->plateau != rs->cb.st.plateau ||
        (t->es_kept && !c->early_stopping.restore_best_weights))
        return tt_fail(err, TT_ERR_FORMAT, "%s: its callbacks' state (EarlyStopping %s%s, ReduceLROnPlateau %s) is not "
                       "what its options say", what, t->early ? "kept" : "none", t->es_kept ? ", best weights" : "",
                       t->plateau ? "kept" : "none");
    if (t->plateau && !(t->lr <= rs->tc.optim.lr))
        return tt_fail(err, TT_ERR_FORMAT, "%s: metadata: plateau_lr %g is above the run's rate %g (ReduceLROnPlateau "
                       "only reduces it)", what, (double)t->lr, (double)rs->tc.optim.lr);
    const float lr = rs->cb.st.lr;
    rs->cb.st = *t;
    if (!t->plateau) rs->cb.st.lr = lr; /* the run's own rate: nothing reduced it */
    *stopped = t->es_stopped_epoch != 0;
    return TT_OK;
}

void cb_resume_trainer(run_state *rs, const tt_checkpoint *ck)
{
    if (rs->cb.st.plateau) tt_trainer_set_lr(rs->tr, rs->cb.st.lr);
    if (rs->cb.st.es_kept && ck->best_params && rs->cb.h_best)
        memcpy(rs->cb.h_best, ck->best_params, rs->model->n_params * sizeof(float));
}
