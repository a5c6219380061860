/* tt_check.h — Check (<check.h>) with one change, for every suite (C, and the stand-in's C++ one).
 *
 * Check's ck_assert_msg (and every ck_assert_* built on it) calls _mark_point on each assertion that passes, and that
 * writes the file and line into the runner's message file: a write(2) per passing check. The suites check every
 * element of their outputs in loops, so that was most of their time — `test_backend_ops cpu` 30.3 s wall (19.8 s of
 * it in the kernel) against 0.66 s without it, Release build on 2 cores (docs/testing.md, "The suite's time"). Here
 * a passing assertion does nothing and a failing one fails as Check's does: the same message, file and line. What is
 * lost is Check's "last checkpoint" for a test that crashes, exits early or runs past its timeout: its report names
 * the test's START_TEST line instead. The sanitizers print a crash's stack; for a hang, mark_point() still marks a
 * place by hand (CK_FORK=no and gdb find it otherwise). */
#ifndef TT_CHECK_H
#define TT_CHECK_H

#include <check.h>

#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                                                                       \
    ((expr) ? (void)0 : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

#endif
