/* data/npy.c — placeholder until the reader lands (replaced wholesale by its branch). */
#include "tt_data.h"

tt_status tt_dataset_load_npy(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    (void)train;
    (void)test;
    return tt_fail(err, TT_ERR_ARG, "--data npy:%s: this build has no .npy reader yet", dir);
}
