/* measure.c — what the measuring subcommands share (measure.h): a run's backend, data sets and model opened as tt_run
 * opens them (bench and compare run tt_run_on over them, row after row), and their exit on a failure.
 * Not for: the commands themselves (bench.c, probe.c, compare.c) or the measurements (tt_probe.h). */
#include <string.h>

#include "measure.h"

tt_status measure_open(const tt_run_config *c, measure_setup *m, tt_error *err)
{
    memset(m, 0, sizeof *m);
    tt_status s = tt_backend_open(c->device, c->gpus, &m->be, err);
    if (s) return s;
    m->ops = m->be.ops;
    if (m->be.notice[0]) tt_report_notice(m->be.notice);
    m->model = (tt_model *)tt_calloc(1, sizeof *m->model);
    m->res = (tt_run_result *)tt_calloc(1, sizeof *m->res);
    if (!m->model || !m->res) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    s = tt_run_load(c, &m->train, &m->val, &m->test, err);
    return s ? s : tt_run_model(c, &m->train, &m->val, &m->test, m->model, err);
}

void measure_close(measure_setup *m)
{
    tt_dataset_free(&m->train);
    tt_dataset_free(&m->val);
    tt_dataset_free(&m->test);
    tt_free(m->model);
    tt_free(m->res);
}

int measure_fail(tt_status s, const tt_error *err)
{
    fflush(stdout);
    tt_report_error(err->msg);
    return tt_status_exit_code(s);
}
