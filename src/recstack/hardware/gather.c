/* recstack's own random-gather kernel: a pooled (summed) row gather.
 *
 *   out[b, :] = sum over j in [offsets[b], offsets[b+1]) of table[idx[j], :]
 *
 * This is the memory access pattern of a sum-pooled embedding lookup, written
 * independently of the operators recstack profiles (aten::embedding_bag,
 * FBGEMM TBE), so that the machine's gather roof is not the operator under
 * study measuring itself. What it does to reach the memory system's limit:
 *
 *   - software read-ahead: while row j is summed, the cache lines of row
 *     j + distance are prefetched (each column block prefetches its own
 *     columns, so the prefetches interleave with the loads), so `distance` misses are in flight per
 *     thread instead of the few the hardware finds on its own in a random
 *     stream (the hardware prefetchers cannot predict random rows);
 *   - the row is summed in blocks of up to 128 floats whose accumulators stay
 *     in vector registers (GCC/Clang vector extensions, -O3 -march=native),
 *     so the loop costs a few cycles per row and the memory system, not the
 *     arithmetic, sets the pace on large tables;
 *   - threads split the bags into contiguous ranges: OpenMP where the
 *     compiler has it (its own pool, persistent between calls), else one
 *     POSIX thread per range and call.
 *
 * Built at first use by recstack.hardware.gather_kernel with the host's C
 * compiler and loaded through ctypes.
 */
#include <pthread.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define LINE 64
#define MAX_THREADS 256

typedef struct {
    const float *table;
    int64_t dim;
    const int64_t *idx;
    int64_t n_idx;
    const int64_t *offsets;
    int64_t bag_begin, bag_end;
    float *out;
    int64_t distance;
} job_t;

static inline void prefetch_row(const float *row, int64_t row_bytes) {
    const char *p = (const char *)row;
    for (int64_t b = 0; b < row_bytes; b += LINE) __builtin_prefetch(p + b, 0, 3);
}

/* 8 floats; aligned(4) so that loads from any row offset are legal (unaligned vector loads). */
typedef float v8 __attribute__((vector_size(32), aligned(4)));
#define MAX_NV 16 /* a block is up to 16 vectors (128 floats, a 512 B row) of accumulators, kept in registers */

/* Sum rows idx[s..e) over columns [col, col + 8 * NV) into o; prefetch the same columns `distance` indices ahead. */
#define DEFINE_BLOCK(NV)                                                                                  \
    static void block_##NV(const float *t, int64_t dim, const int64_t *idx, int64_t s, int64_t e,       \
                           int64_t last, int64_t distance, int prefetch, float *o, int64_t col) {       \
        v8 acc[NV];                                                                                       \
        for (int v = 0; v < NV; ++v) acc[v] = (v8){0, 0, 0, 0, 0, 0, 0, 0};                              \
        for (int64_t k = s; k < e; ++k) {                                                                 \
            if (prefetch && k + distance < last)                                                          \
                prefetch_row(t + idx[k + distance] * dim + col, 32 * NV);                                 \
            const float *r = t + idx[k] * dim + col;                                                      \
            for (int v = 0; v < NV; ++v) acc[v] += *(const v8 *)(r + 8 * v);                              \
        }                                                                                                 \
        for (int v = 0; v < NV; ++v) *(v8 *)(o + col + 8 * v) = acc[v];                                   \
    }
DEFINE_BLOCK(1)
DEFINE_BLOCK(2)
DEFINE_BLOCK(3)
DEFINE_BLOCK(4)
DEFINE_BLOCK(5)
DEFINE_BLOCK(6)
DEFINE_BLOCK(7)
DEFINE_BLOCK(8)
DEFINE_BLOCK(9)
DEFINE_BLOCK(10)
DEFINE_BLOCK(11)
DEFINE_BLOCK(12)
DEFINE_BLOCK(13)
DEFINE_BLOCK(14)
DEFINE_BLOCK(15)
DEFINE_BLOCK(16)

typedef void (*block_fn)(const float *, int64_t, const int64_t *, int64_t, int64_t, int64_t, int64_t, int, float *,
                         int64_t);
static const block_fn BLOCKS[MAX_NV + 1] = {0,        block_1,  block_2,  block_3,  block_4,  block_5,
                                            block_6,  block_7,  block_8,  block_9,  block_10, block_11,
                                            block_12, block_13, block_14, block_15, block_16};

static void *run(void *arg) {
    const job_t *j = (const job_t *)arg;
    const int64_t dim = j->dim, row_bytes = dim * (int64_t)sizeof(float);
    const int64_t first = j->offsets[j->bag_begin], last = j->offsets[j->bag_end];
    /* prime the read-ahead window */
    for (int64_t p = first; p < first + j->distance && p < last; ++p)
        prefetch_row(j->table + j->idx[p] * dim, row_bytes);
    const int64_t vec_cols = dim / 8 * 8;
    for (int64_t b = j->bag_begin; b < j->bag_end; ++b) {
        float *o = j->out + b * dim;
        const int64_t s = j->offsets[b], e = j->offsets[b + 1];
        const int prefetch = j->distance > 0;
        for (int64_t col = 0; col < vec_cols; col += 8 * MAX_NV) {
            int64_t nv = (vec_cols - col) / 8;
            if (nv > MAX_NV) nv = MAX_NV;
            BLOCKS[nv](j->table, dim, j->idx, s, e, last, j->distance, prefetch, o, col);
        }
        for (int64_t d = vec_cols; d < dim; ++d) { /* columns past the last multiple of 8 */
            float acc = 0.0f;
            for (int64_t k = s; k < e; ++k) acc += j->table[j->idx[k] * dim + d];
            o[d] = acc;
        }
    }
    return 0;
}

/* Returns 0 on success, or the index + 1 of a thread that could not be started. */
int recstack_gather_sum_f32(const float *table, int64_t dim, const int64_t *idx, const int64_t *offsets,
                            int64_t n_bags, float *out, int64_t distance, int threads) {
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > n_bags) threads = n_bags > 0 ? (int)n_bags : 1;
#ifdef _OPENMP
    /* OpenMP's worker threads persist between calls and are already running on
       the other cores; threads created per call start on the caller's core and
       migrate late, which cost up to a quarter of the bandwidth on 2 cores. */
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        job_t job = {table, dim, idx, offsets[n_bags], offsets, n_bags * t / n, n_bags * (t + 1) / n, out, distance};
        run(&job);
    }
    return 0;
#else
    job_t jobs[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    for (int t = 0; t < threads; ++t) {
        jobs[t] = (job_t){table, dim, idx, offsets[n_bags], offsets,
                          n_bags * t / threads, n_bags * (t + 1) / threads, out, distance};
    }
    int started = 0, failed = 0;
    for (int t = 1; t < threads; ++t) {
        if (pthread_create(&tids[t], 0, run, &jobs[t]) != 0) { failed = t + 1; break; }
        ++started;
    }
    run(&jobs[0]);
    for (int t = 1; t <= started; ++t) pthread_join(tids[t], 0);
    if (failed) {
        for (int t = started + 1; t < threads; ++t) run(&jobs[t]); /* finish the work on this thread */
    }
    return failed;
#endif
}

/* 1 when built with OpenMP (persistent worker threads), 0 with a thread per call. */
int recstack_gather_openmp(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* Memory latency: walk a dependent chain `p = next[p]` for `steps` loads.
 *
 * `next` holds one random cyclic permutation over cache lines (entry 8 * line
 * is the index of the next line's entry), so every load's address depends on
 * the previous load's value: the core cannot overlap them and the hardware
 * prefetchers cannot predict them. Unrolled by 8 to keep the loop overhead
 * far below one load. Returns the final position (so the walk cannot be
 * optimised away, and the next walk can continue from it). */
int64_t recstack_chase(const int64_t *next, int64_t start, int64_t steps) {
    int64_t p = start;
    int64_t n = steps / 8;
    for (int64_t i = 0; i < n; ++i) {
        p = next[p]; p = next[p]; p = next[p]; p = next[p];
        p = next[p]; p = next[p]; p = next[p]; p = next[p];
    }
    for (int64_t i = n * 8; i < steps; ++i) p = next[p];
    return p;
}
