/* data/cifar10.c — placeholder until the reader lands (replaced wholesale by its branch). */
#include "tt_data.h"

tt_status tt_dataset_load_cifar10(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    (void)train;
    (void)test;
    return tt_fail(err, TT_ERR_ARG, "--data cifar10:%s: this build has no CIFAR-10 reader yet", dir);
}
