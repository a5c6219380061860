/* tt_blas.h — getting OpenBLAS's fast kernels by default, and saying which ones run.
 *
 * OpenBLAS with DYNAMIC_ARCH picks its kernels when the library loads, before main(). Some builds (0.3.21 on
 * Debian 12) misdetect recent CPUs and fall back to a generic core (Prescott: ~30 vs ~140 GFLOP/s per core on an
 * AVX-512 Xeon). tt_blas_autoselect, called first thing in main(), compares the core OpenBLAS chose with what the
 * CPU supports and, if OpenBLAS chose worse and the user did not set OPENBLAS_CORETYPE, sets it and re-executes
 * the program once so the library loads again with the right kernels. Not for: libraries (only the CLI calls it). */
#ifndef TT_BLAS_H
#define TT_BLAS_H

#ifdef __cplusplus
extern "C" {
#endif

/* May not return (re-exec). argv must be main's. */
void tt_blas_autoselect(char **argv);

/* Single-threaded BLAS calls: the towers are the parallelism. The CPU backend calls it when its first tower starts
 * (src/dev/dev_cpu.c), so every caller of the library gets it; main() calls it first thing too. */
void tt_blas_single_thread(void);

/* One line: library, configuration, kernel core and why that core ("detected", "auto-selected", ...). */
const char *tt_blas_describe(void);

#ifdef __cplusplus
}
#endif
#endif
