/* tt_rng.h — the one random number generator (SplitMix64): weight initialisation and epoch shuffles derive from
 * --seed through it, so runs with the same seed are bit-identical on every machine. */
#ifndef TT_RNG_H
#define TT_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct tt_rng {
    uint64_t state;
} tt_rng;

static inline void tt_rng_seed(tt_rng *r, uint64_t seed, uint64_t stream)
{
    r->state = seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
}

static inline uint64_t tt_rng_next(tt_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 random bits (exactly representable in float). */
static inline float tt_rng_uniform(tt_rng *r) { return (float)(tt_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

/* Uniform integer in [0, n), n > 0, without modulo bias (Lemire's multiply-shift with rejection). */
static inline uint64_t tt_rng_below(tt_rng *r, uint64_t n)
{
    uint64_t threshold = (0 - n) % n;
    for (;;) {
        uint64_t x = tt_rng_next(r);
        unsigned __int128 m = (unsigned __int128)x * n;
        if ((uint64_t)m >= threshold) return (uint64_t)(m >> 64);
    }
}

/* Fisher–Yates shuffle of idx[0..n). */
static inline void tt_rng_shuffle(tt_rng *r, uint32_t *idx, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tt_rng_below(r, i);
        uint32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

#endif
