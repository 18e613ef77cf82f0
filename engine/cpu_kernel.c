/* The CPU decode GEMVs (float32, bfloat16 and resident block-FP8 weights, one row of x; one
 * weight or a stack of them), a one-row RMSNorm, a decode step's attention (RoPE, the KV
 * cache write and one query over the cache: about forty torch ops in one call), and the
 * one-pass FP8 copy and dequantisation for loads, with a small thread pool of their own.
 *
 * A decode step is a chain of GEMVs that each stream a weight once; one core reads about half
 * of what the memory system gives (per-core latency bound), so each GEMV is cut into row
 * blocks run on every core at once. The hand-off goes through spinning workers (no Python, no
 * GIL: about a microsecond) that sleep on a condition variable once idle for SPIN_NS, so an
 * idle engine burns no core. One caller at a time uses the pool; a second one meanwhile runs
 * its GEMV alone. A forked child starts without workers and makes its own.
 *
 * FP8: y[r] = sum_c w(r, c) * x[c], where w(r, c) is exactly the value the engine's
 * dequantisation gives (engine/fp8.py): float32(e4m3(q[r, c])) * scale[r/bo][c/bi], rounded
 * to bfloat16 (round to nearest even) when the engine runs in bfloat16. The bytes are read
 * once; nothing is written but y. Built by engine/cpu_kernel.py with the machine's own
 * compiler flags; without AVX-512 it reports so and the engine keeps its torch path.
 *
 * e4m3 -> float32: the byte, sign-extended to 16 bits, shifted left by 7 and masked to bits
 * 15 and 13..7, is the float16 of the value times 2**-8, subnormals included; the scale is
 * passed times 2**8, so the float32 product is the same real number rounded once.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What x and w are, for cpu_rows (engine/cpu_kernel.py passes the same numbers). */
enum {
    FP8_F32 = 0, FP8_BF16 = 1, BF16 = 2, F32 = 3, DEQUANTIZE_F32 = 4, DEQUANTIZE_BF16 = 5,
    COPY_FP8 = 6
};

/* One weight of a stack (cpu_stack): weights of one kind and width multiplied by the same x
 * as if their rows were one weight's (q, k and v; gate and up). */
typedef struct {
    const void *w;
    const float *scale;
    int64_t grid_cols, bo, bi, rows;
} seg_t;

typedef struct {
    int kind;
    const void *w; /* the weight: uint8 FP8 bytes, bfloat16 bits or float32, [rows, cols] */
    int64_t cols;
    const float *scale; /* FP8 only: [ceil(rows/bo), grid_cols], times 2**8 */
    int64_t grid_cols, bo, bi;
    const void *x; /* [cols], float32 or bfloat16 bits (unused by the dequantisers) */
    void *y;       /* [rows], or the dequantised weight [rows, cols] */
    const seg_t *segs; /* a stack's weights (w, scale and blocks above unused), or NULL */
    int64_t n_segs;
} job_t;

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__F16C__)
#include <immintrin.h>
#define HAVE_SIMD 1

/* FP8 GEMVs prefetch the rows this many ahead: decoding keeps a core busy enough that the
 * hardware prefetcher alone left the reads behind (SmolLM2-shaped 1536x576 experts streamed
 * from DRAM on a 2-core Xeon VM: 85 us a GEMV without, 58 us with, bfloat16 dequantised 60). */
#define FP8_AHEAD 8

static inline __m512 decode16(const uint8_t *q, __m512 scale) {
    __m256i h = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q));
    h = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16((short)0xBF80));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), scale);
}

static inline __m512 round_bf16(__m512 v) {
    __m512i bits = _mm512_castps_si512(v);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    bits = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
    return _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32((int)0xFFFF0000u)));
}

static inline float decode1(uint8_t byte, float scale, int bf16) {
    uint16_t wide = (uint16_t)(int16_t)(int8_t)byte; /* sign-extended */
    uint16_t half = (uint16_t)((wide << 7) & 0xBF80);
    float v = _cvtsh_ss(half) * scale;
    if (bf16) {
        union { float f; uint32_t u; } bits = {v};
        bits.u = (bits.u + 0x7FFFu + ((bits.u >> 16) & 1u)) & 0xFFFF0000u;
        v = bits.f;
    }
    return v;
}

static inline __m512 load_x(const float *x) { return _mm512_loadu_ps(x); }

static inline __attribute__((unused)) __m512 load_x_bf16(const uint16_t *x) {
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)x));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

static inline float x_at(const float *x, int64_t c) { return x[c]; }

static inline float x_at_bf16(const uint16_t *x, int64_t c) {
    union { uint32_t u; float f; } bits = {(uint32_t)x[c] << 16};
    return bits.f;
}

/* Rows r..r+n-1 (n <= 4, one tile row) against x; XT is float or uint16_t (bfloat16 bits).
 * BF16 rounds each weight to bfloat16 as the bfloat16 engine's weights are. */
#define ROWS_DOT(NAME, XT, LOADX, XAT, BF16)                                                  \
static void NAME(const uint8_t *q, int64_t n, const float *scale, int64_t cols, int64_t bi,  \
                 const XT *x, float *y) {                                                    \
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),          \
                     _mm512_setzero_ps()};                                                   \
    float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                                \
    for (int64_t c0 = 0; c0 < cols; c0 += bi) {                                              \
        const float s = scale[c0 / bi];                                                      \
        const __m512 sv = _mm512_set1_ps(s);                                                 \
        const int64_t end = c0 + bi < cols ? c0 + bi : cols;                                 \
        int64_t c = c0;                                                                      \
        for (; c + 16 <= end; c += 16) {                                                     \
            const __m512 xv = LOADX(x + c);                                                  \
            for (int64_t i = 0; i < n; i++) {                                                \
                _mm_prefetch((const char *)(q + (i + FP8_AHEAD) * cols + c), _MM_HINT_T0);  \
                __m512 w = decode16(q + i * cols + c, sv);                                   \
                if (BF16) w = round_bf16(w);                                                 \
                acc[i] = _mm512_fmadd_ps(w, xv, acc[i]);                                     \
            }                                                                                \
        }                                                                                    \
        for (; c < end; c++)                                                                 \
            for (int64_t i = 0; i < n; i++)                                                  \
                tail[i] += decode1(q[i * cols + c], s, BF16) * XAT(x, c);                    \
    }                                                                                        \
    for (int64_t i = 0; i < n; i++) y[i] = _mm512_reduce_add_ps(acc[i]) + tail[i];           \
}

ROWS_DOT(rows_dot_f32, float, load_x, x_at, 0)
#if !defined(__AVX512BF16__)
ROWS_DOT(rows_dot_bf16, uint16_t, load_x_bf16, x_at_bf16, 1)
#endif

#if defined(__AVX512BF16__)
/* bfloat16 weights and x: VDPBF16PS multiplies pairs exactly and adds them in float32. */
static void rows_dot_dpbf16(const uint8_t *q, int64_t n, const float *scale, int64_t cols,
                            int64_t bi, const uint16_t *x, float *y) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t c0 = 0; c0 < cols; c0 += bi) {
        const float s = scale[c0 / bi];
        const __m512 sv = _mm512_set1_ps(s);
        const int64_t end = c0 + bi < cols ? c0 + bi : cols;
        int64_t c = c0;
        for (; c + 32 <= end; c += 32) {
            const __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x + c));
            for (int64_t i = 0; i < n; i++) {
                const uint8_t *row = q + i * cols + c;
                _mm_prefetch((const char *)(row + FP8_AHEAD * cols), _MM_HINT_T0);
                __m512bh w = _mm512_cvtne2ps_pbh(decode16(row + 16, sv), decode16(row, sv));
                acc[i] = _mm512_dpbf16_ps(acc[i], w, xv);
            }
        }
        for (; c < end; c++)
            for (int64_t i = 0; i < n; i++)
                tail[i] += decode1(q[i * cols + c], s, 1) * x_at_bf16(x, c);
    }
    for (int64_t i = 0; i < n; i++) y[i] = _mm512_reduce_add_ps(acc[i]) + tail[i];
}
#define ROWS_DOT_BF16 rows_dot_dpbf16
#else
#define ROWS_DOT_BF16 rows_dot_bf16
#endif

static inline uint16_t to_bf16(float v) {
    union { float f; uint32_t u; } bits = {v};
    return (uint16_t)((bits.u + 0x7FFFu + ((bits.u >> 16) & 1u)) >> 16);
}

/* q: uint8 [rows, cols] row-major; scale: float32 [ceil(rows/bo), grid_cols], each already
 * times 2**8. Rows r0..r1-1 of y are written, four rows of one tile row at a time. */
#define GEMV(NAME, XT, YT, DOT, STORE)                                                        \
static void NAME(const uint8_t *q, int64_t cols, const float *scale, int64_t grid_cols, int64_t bo, \
          int64_t bi, const XT *x, YT *y, int64_t r0, int64_t r1) {                          \
    float sums[4];                                                                           \
    for (int64_t r = r0; r < r1;) {                                                          \
        int64_t tile_end = (r / bo + 1) * bo;                                                \
        int64_t n = r1 - r < 4 ? r1 - r : 4;                                                 \
        if (r + n > tile_end) n = tile_end - r;                                              \
        DOT(q + r * cols, n, scale + (r / bo) * grid_cols, cols, bi, x, sums);               \
        for (int64_t i = 0; i < n; i++) y[r + i] = STORE(sums[i]);                           \
        r += n;                                                                              \
    }                                                                                        \
}

static inline float keep(float v) { return v; }

GEMV(fp8_gemv_f32, float, float, rows_dot_f32, keep)
GEMV(fp8_gemv_bf16, uint16_t, uint16_t, ROWS_DOT_BF16, to_bf16)

/* The weight itself, rows r0..r1-1 of out [rows, cols]: the same values the GEMVs multiply
 * by (a dequantised checkpoint loads through here on the CPU: one pass instead of four). */
static inline void store_bf16(uint16_t *out, __m512 w) {
    __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(round_bf16(w)), 16);
    _mm256_storeu_si256((__m256i *)out, _mm512_cvtepi32_epi16(bits));
}

static inline void store_f32(float *out, __m512 w) { _mm512_storeu_ps(out, w); }

static inline uint16_t one_bf16(float v) { return to_bf16(v); }

static inline float one_f32(float v) { return v; }

/* NaN codes (0x7F, 0xFF: quantisers never write them) among 16 bytes. */
static inline int64_t nan_codes16(const uint8_t *q) {
    const __m128i low7 = _mm_and_si128(_mm_loadu_si128((const __m128i *)q), _mm_set1_epi8(0x7F));
    return __builtin_popcount(_mm_cmpeq_epi8_mask(low7, _mm_set1_epi8(0x7F)));
}

/* Returns how many NaN codes it met (their values are not NaN here: the caller redoes such a
 * weight on the torch path, which keeps them NaN). */
#define DEQUANTIZE(NAME, OT, STORE, ONE, BF16)                                                \
static int64_t NAME(const uint8_t *q, int64_t cols, const float *scale, int64_t grid_cols,  \
                    int64_t bo, int64_t bi, OT *out, int64_t r0, int64_t r1) {              \
    int64_t nans = 0;                                                                        \
    for (int64_t r = r0; r < r1; r++) {                                                      \
        const uint8_t *row = q + r * cols;                                                   \
        const float *tiles = scale + (r / bo) * grid_cols;                                   \
        OT *dest = out + r * cols;                                                           \
        for (int64_t c0 = 0; c0 < cols; c0 += bi) {                                          \
            const float s = tiles[c0 / bi];                                                  \
            const __m512 sv = _mm512_set1_ps(s);                                             \
            const int64_t end = c0 + bi < cols ? c0 + bi : cols;                             \
            int64_t c = c0;                                                                  \
            for (; c + 16 <= end; c += 16) {                                                 \
                nans += nan_codes16(row + c);                                                \
                STORE(dest + c, decode16(row + c, sv));                                      \
            }                                                                                \
            for (; c < end; c++) {                                                           \
                nans += (row[c] & 0x7F) == 0x7F;                                             \
                dest[c] = ONE(decode1(row[c], s, BF16));                                     \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    return nans;                                                                             \
}

DEQUANTIZE(fp8_dequantize_bf16, uint16_t, store_bf16, one_bf16, 1)
DEQUANTIZE(fp8_dequantize_f32, float, store_f32, one_f32, 0)

/* A float32 weight [rows, cols] (row-major, as checkpoints store it) times a float32 x: eight
 * rows at a time, so eight streams are in flight on each core, and the eight after them
 * prefetched (rows of a few KiB end before the hardware prefetcher has ramped up: 8.6
 * against 7.3 GB/s on SmolLM2's projections, one core of a Xeon VM). */
static void f32_gemv(const float *w, int64_t cols, const float *x, float *y, int64_t r0,
                     int64_t r1) {
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r1 - r < 8 ? r1 - r : 8;
        __m512 acc[8];
        for (int64_t i = 0; i < 8; i++) acc[i] = _mm512_setzero_ps();
        int64_t c = 0;
        for (; c + 16 <= cols; c += 16) {
            const __m512 xv = _mm512_loadu_ps(x + c);
            for (int64_t i = 0; i < n; i++) {
                const float *at = w + (r + i) * cols + c;
                _mm_prefetch((const char *)(at + 8 * cols), _MM_HINT_T0);
                acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(at), xv, acc[i]);
            }
        }
        for (int64_t i = 0; i < n; i++) {
            float sum = _mm512_reduce_add_ps(acc[i]);
            for (int64_t t = c; t < cols; t++) sum += w[(r + i) * cols + t] * x[t];
            y[r + i] = sum;
        }
        r += n;
    }
}

#if defined(__AVX512BF16__)
#define HAVE_BF16 1

/* A bfloat16 weight [rows, cols] (row-major) times a bfloat16 x: y[r0..r1-1], float32 sums
 * (VDPBF16PS: each product exact), each rounded once to bfloat16 as torch's GEMV rounds. */
static void bf16_gemv(const uint16_t *w, int64_t cols, const uint16_t *x, uint16_t *y, int64_t r0,
               int64_t r1) {
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r1 - r < 4 ? r1 - r : 4;
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int64_t c = 0;
        for (; c + 32 <= cols; c += 32) {
            const __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x + c));
            for (int64_t i = 0; i < n; i++) {
                const uint16_t *at = w + (r + i) * cols + c;
                /* the rows eight ahead: a vocabulary projection streams from DRAM */
                _mm_prefetch((const char *)(at + 8 * cols), _MM_HINT_T0);
                acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_loadu_si512(at), xv);
            }
        }
        for (; c < cols; c++)
            for (int64_t i = 0; i < n; i++)
                tail[i] += x_at_bf16(w + (r + i) * cols, c) * x_at_bf16(x, c);
        for (int64_t i = 0; i < n; i++) y[r + i] = to_bf16(_mm512_reduce_add_ps(acc[i]) + tail[i]);
        r += n;
    }
}
#endif

/* RMSNorm of one row as engine/layers.py rms_norm computes it: in float32, x times
 * 1 / sqrt(mean(x^2) + eps), rounded to x's dtype, then times the weight in that dtype (a
 * bfloat16 product rounded once). Only the order of the float32 sum of squares differs. */
static void rms_norm_row(int bf16, const void *x, const void *w, void *y, int64_t cols,
                         float eps) {
    __m512 acc = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16) {
        const __m512 v = bf16 ? load_x_bf16((const uint16_t *)x + c) : load_x((const float *)x + c);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    float sum = _mm512_reduce_add_ps(acc);
    for (int64_t t = c; t < cols; t++) {
        const float v = bf16 ? x_at_bf16(x, t) : ((const float *)x)[t];
        sum += v * v;
    }
    const float r = 1.0f / sqrtf(sum / (float)cols + eps);
    for (int64_t t = 0; t < cols; t++) {
        if (bf16) {
            const float scaled = x_at_bf16(x, t) * r;
            const uint16_t rounded = to_bf16(scaled);
            ((uint16_t *)y)[t] = to_bf16(x_at_bf16(w, t) * x_at_bf16(&rounded, 0));
        } else {
            ((float *)y)[t] = ((const float *)w)[t] * (((const float *)x)[t] * r);
        }
    }
}

/* --- one decode step's attention ----------------------------------------------------------- */

#define ATTEND_MAX_DIM 512

static inline float elem(int bf16, const void *p, int64_t i) {
    return bf16 ? x_at_bf16(p, i) : ((const float *)p)[i];
}

static inline float bf16_value(float v) {
    const uint16_t bits = to_bf16(v);
    return x_at_bf16(&bits, 0);
}

/* engine/layers.py apply_rotary on one head: x * cos + swap_halves(x) * signed_sin over the
 * first `rot` dims, each product and the sum rounded to the dtype as torch rounds them (the
 * file is built with -ffp-contract=off: no fused multiply-add here); the rest copied. */
static void rope_head(int bf16, const void *x, const void *cos, const void *sin, int64_t rot,
                      int64_t dim, void *y) {
    const int64_t half = rot / 2;
    for (int64_t i = 0; i < dim; i++) {
        float v = elem(bf16, x, i);
        if (i < rot) {
            const float turned = elem(bf16, x, i < half ? i + half : i - half);
            float a = v * elem(bf16, cos, i), b = turned * elem(bf16, sin, i);
            if (bf16) a = bf16_value(a), b = bf16_value(b);
            v = a + b;
        }
        if (bf16) ((uint16_t *)y)[i] = to_bf16(v);
        else ((float *)y)[i] = v;
    }
}

static inline __m512 load16(int bf16, const void *p, int64_t i) {
    return bf16 ? load_x_bf16((const uint16_t *)p + i) : load_x((const float *)p + i);
}

/* Four dot products q . k[i] (float32 q, float32 or bfloat16 rows `stride` bytes apart,
 * dim a multiple of 16), summed in float32: four independent chains of multiply-adds. */
static inline void dot4(int bf16, const float *q, const char *k, int64_t stride, int64_t dim,
                        float *out) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t d = 0; d < dim; d += 16) {
        const __m512 qv = load_x(q + d);
        a0 = _mm512_fmadd_ps(qv, load16(bf16, k, d), a0);
        a1 = _mm512_fmadd_ps(qv, load16(bf16, k + stride, d), a1);
        a2 = _mm512_fmadd_ps(qv, load16(bf16, k + 2 * stride, d), a2);
        a3 = _mm512_fmadd_ps(qv, load16(bf16, k + 3 * stride, d), a3);
    }
    out[0] = _mm512_reduce_add_ps(a0);
    out[1] = _mm512_reduce_add_ps(a1);
    out[2] = _mm512_reduce_add_ps(a2);
    out[3] = _mm512_reduce_add_ps(a3);
}

static inline float dot1(int bf16, const float *q, const char *k, int64_t dim) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t d = 0; d < dim; d += 16)
        acc = _mm512_fmadd_ps(load_x(q + d), load16(bf16, k, d), acc);
    return _mm512_reduce_add_ps(acc);
}

/* exp(x) for x <= 0 (scores minus their maximum), 16 at a time: x = n ln2 + r with
 * |r| <= ln2 / 2, exp(r) by its Taylor series to r^7 (truncation below 1e-8 relative), times
 * 2^n exactly (VSCALEFPS). Below -104 the result is 0, as float32's exp rounds it. */
static inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x); /* ln2, high bits */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);     /* ln2, the rest */
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* softmax(scores * scale) in place, in float32. */
static void softmax_row(float *scores, int64_t n, float scale) {
    const __m512 scale16 = _mm512_set1_ps(scale);
    __m512 top16 = _mm512_set1_ps(-INFINITY);
    int64_t t = 0;
    for (; t + 16 <= n; t += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(scores + t), scale16);
        _mm512_storeu_ps(scores + t, v);
        top16 = _mm512_max_ps(top16, v);
    }
    float top = _mm512_reduce_max_ps(top16);
    for (; t < n; t++) {
        scores[t] *= scale;
        if (scores[t] > top) top = scores[t];
    }
    const __m512 top_v = _mm512_set1_ps(top);
    __m512 sum16 = _mm512_setzero_ps();
    for (t = 0; t + 16 <= n; t += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(scores + t), top_v));
        _mm512_storeu_ps(scores + t, e);
        sum16 = _mm512_add_ps(sum16, e);
    }
    if (t < n) {
        const __mmask16 tail = (__mmask16)((1u << (n - t)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(tail, scores + t);
        const __m512 e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(x, top_v)));
        _mm512_mask_storeu_ps(scores + t, tail, e);
        sum16 = _mm512_add_ps(sum16, e);
    }
    const __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum16));
    for (t = 0; t + 16 <= n; t += 16)
        _mm512_storeu_ps(scores + t, _mm512_mul_ps(_mm512_loadu_ps(scores + t), inverse));
    for (; t < n; t++) scores[t] *= inverse[0];
}

/* acc (float32, dim) = sum over t of p[t] times a row of values (`stride` bytes apart), 64
 * columns at a time in registers. */
static void weighted_rows(int bf16, const float *p, const char *v, int64_t n, int64_t stride,
                          int64_t dim, float *acc) {
    int64_t d = 0;
    for (; d + 64 <= dim; d += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t t = 0; t < n; t++) {
            const __m512 pt = _mm512_set1_ps(p[t]);
            const char *row = v + t * stride;
            a0 = _mm512_fmadd_ps(pt, load16(bf16, row, d), a0);
            a1 = _mm512_fmadd_ps(pt, load16(bf16, row, d + 16), a1);
            a2 = _mm512_fmadd_ps(pt, load16(bf16, row, d + 32), a2);
            a3 = _mm512_fmadd_ps(pt, load16(bf16, row, d + 48), a3);
        }
        _mm512_storeu_ps(acc + d, a0);
        _mm512_storeu_ps(acc + d + 16, a1);
        _mm512_storeu_ps(acc + d + 32, a2);
        _mm512_storeu_ps(acc + d + 48, a3);
    }
    for (; d < dim; d += 16) {
        __m512 a = _mm512_setzero_ps();
        for (int64_t t = 0; t < n; t++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(p[t]), load16(bf16, v + t * stride, d), a);
        _mm512_storeu_ps(acc + d, a);
    }
}

/* The `group` query heads of one KV head (q [group, dim], float32) over its cached
 * positions 0..n-1 (rows `stride` bytes apart): softmax(q.K * scale) . V in float32 (as
 * engine/cpu_decode.py decode_attention computes it, the sums in another order), into acc
 * [group, dim]. Keys four positions at a time for the whole group (each row read once). */
static void attend_group(int bf16, const float *q, int64_t group, const char *keys,
                         const char *values, int64_t n, int64_t stride, int64_t dim, float scale,
                         float *scores, float *acc) {
    int64_t t = 0;
    for (; t + 4 <= n; t += 4)
        for (int64_t h = 0; h < group; h++)
            dot4(bf16, q + h * dim, keys + t * stride, stride, dim, scores + h * n + t);
    for (; t < n; t++)
        for (int64_t h = 0; h < group; h++)
            scores[h * n + t] = dot1(bf16, q + h * dim, keys + t * stride, dim);
    for (int64_t h = 0; h < group; h++) {
        softmax_row(scores + h * n, n, scale);
        weighted_rows(bf16, scores + h * n, values, n, stride, dim, acc + h * dim);
    }
}

/* Heads the attention below takes: whole 16-float vectors, at most ATTEND_MAX_DIM wide. */
static int attend_shape_ok(int64_t heads, int64_t kv_heads, int64_t dim, int64_t rot) {
    return dim >= 16 && dim <= ATTEND_MAX_DIM && dim % 16 == 0 && rot >= 0 && rot <= dim
           && rot % 2 == 0 && kv_heads >= 1 && heads >= kv_heads && heads % kv_heads == 0;
}

/* A decode step's attention for one sequence: RoPE on q [heads, dim] and k [kv_heads, dim],
 * k and v written to the cache rows at `pos` (keys and values [max positions, kv_heads, dim]),
 * then each query head attends over positions 0..pos of its KV head. out [heads, dim]. */
static int64_t rope_attend(int bf16, const void *q, const void *k, const void *v,
                           const void *cos, const void *sin, int64_t rot, int64_t heads,
                           int64_t kv_heads, int64_t dim, void *keys, void *values, int64_t pos,
                           float scale, void *out) {
    const int64_t size = bf16 ? 2 : 4, head_bytes = dim * size, row_bytes = kv_heads * head_bytes;
    const int64_t group = heads / kv_heads, n = pos + 1;
    char *key_row = (char *)keys + pos * row_bytes, *value_row = (char *)values + pos * row_bytes;
    for (int64_t g = 0; g < kv_heads; g++) {
        rope_head(bf16, (const char *)k + g * head_bytes, cos, sin, rot, dim,
                  key_row + g * head_bytes);
        memcpy(value_row + g * head_bytes, (const char *)v + g * head_bytes, (size_t)head_bytes);
    }
    /* scores [group, n], then the group's rotated queries and sums, float32 [group, dim] */
    float *scratch = malloc((size_t)(group * (n + 2 * dim)) * sizeof(float));
    if (!scratch) return -1;
    float *scores = scratch, *query = scratch + group * n, *acc = query + group * dim;
    uint32_t turned[ATTEND_MAX_DIM]; /* one rotated query head in the dtype */
    for (int64_t g = 0; g < kv_heads; g++) {
        for (int64_t h = 0; h < group; h++) {
            rope_head(bf16, (const char *)q + (g * group + h) * head_bytes, cos, sin, rot, dim,
                      turned);
            for (int64_t d = 0; d < dim; d++) query[h * dim + d] = elem(bf16, turned, d);
        }
        attend_group(bf16, query, group, (const char *)keys + g * head_bytes,
                     (const char *)values + g * head_bytes, n, row_bytes, dim, scale, scores,
                     acc);
        for (int64_t i = 0; i < group * dim; i++) {
            if (bf16) ((uint16_t *)out)[g * group * dim + i] = to_bf16(acc[i]);
            else ((float *)out)[g * group * dim + i] = acc[i];
        }
    }
    free(scratch);
    return 0;
}

/* A copy of n FP8 bytes; returns how many NaN codes it met. */
static int64_t fp8_copy(const uint8_t *src, uint8_t *dst, int64_t n) {
    int64_t nans = 0, i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i v = _mm512_loadu_si512((const void *)(src + i));
        _mm512_storeu_si512((void *)(dst + i), v);
        const __m512i low7 = _mm512_and_si512(v, _mm512_set1_epi8(0x7F));
        nans += __builtin_popcountll(_mm512_cmpeq_epi8_mask(low7, _mm512_set1_epi8(0x7F)));
    }
    for (; i < n; i++) {
        dst[i] = src[i];
        nans += (src[i] & 0x7F) == 0x7F;
    }
    return nans;
}

/* Rows r0..r1-1 of the job; the dequantisers and the copy return the NaN codes they met,
 * GEMVs 0. */
static int64_t run_rows(const job_t *j, int64_t r0, int64_t r1) {
    switch (j->kind) {
    case FP8_F32:
        fp8_gemv_f32(j->w, j->cols, j->scale, j->grid_cols, j->bo, j->bi, j->x, j->y, r0, r1);
        break;
    case FP8_BF16:
        fp8_gemv_bf16(j->w, j->cols, j->scale, j->grid_cols, j->bo, j->bi, j->x, j->y, r0, r1);
        break;
#if defined(HAVE_BF16)
    case BF16: bf16_gemv(j->w, j->cols, j->x, j->y, r0, r1); break;
#endif
    case F32: f32_gemv(j->w, j->cols, j->x, j->y, r0, r1); break;
    case DEQUANTIZE_F32:
        return fp8_dequantize_f32(j->w, j->cols, j->scale, j->grid_cols, j->bo, j->bi, j->y,
                                  r0, r1);
    case COPY_FP8:
        return fp8_copy((const uint8_t *)j->w + r0 * j->cols, (uint8_t *)j->y + r0 * j->cols,
                        (r1 - r0) * j->cols);
    case DEQUANTIZE_BF16:
        return fp8_dequantize_bf16(j->w, j->cols, j->scale, j->grid_cols, j->bo, j->bi, j->y,
                                   r0, r1);
    default: break;
    }
    return 0;
}

#define pause() _mm_pause()
#else
static int64_t run_rows(const job_t *j, int64_t r0, int64_t r1) {
    (void)j; (void)r0; (void)r1;
    return 0;
}

#define pause() ((void)0)
#endif

/* RMSNorm of `rows` rows of `cols` (float32, or bfloat16 bits: kind F32 or BF16) into y.
 * Returns 0, or -1 for another kind or a build without AVX-512. */
int64_t cpu_rms_norm(int kind, const void *x, const void *w, void *y, int64_t rows,
                     int64_t cols, float eps) {
#if defined(HAVE_SIMD)
    if (kind != F32 && kind != BF16) return -1;
    const int64_t size = kind == F32 ? 4 : 2;
    for (int64_t r = 0; r < rows; r++)
        rms_norm_row(kind == BF16, (const char *)x + r * cols * size, w,
                     (char *)y + r * cols * size, cols, eps);
    return 0;
#else
    (void)kind; (void)x; (void)w; (void)y; (void)rows; (void)cols; (void)eps;
    return -1;
#endif
}

/* A decode step's attention (rope_attend above) on the calling thread, float32 or bfloat16
 * (kind F32 or BF16). Returns 0, or -1 for another kind, a head width that is not a multiple
 * of 16 or is wider than ATTEND_MAX_DIM,
 * a rotary width that is odd or wider than a head, heads not a multiple of kv_heads, or a
 * build without AVX-512. */
int64_t cpu_rope_attend(int kind, const void *q, const void *k, const void *v, const void *cos,
                        const void *sin, int64_t rot, int64_t heads, int64_t kv_heads,
                        int64_t dim, void *keys, void *values, int64_t pos, float scale,
                        void *out) {
#if defined(HAVE_SIMD)
    if ((kind != F32 && kind != BF16) || !attend_shape_ok(heads, kv_heads, dim, rot) || pos < 0)
        return -1;
    return rope_attend(kind == BF16, q, k, v, cos, sin, rot, heads, kv_heads, dim, keys, values,
                       pos, scale, out);
#else
    (void)kind; (void)q; (void)k; (void)v; (void)cos; (void)sin; (void)rot; (void)heads;
    (void)kv_heads; (void)dim; (void)keys; (void)values; (void)pos; (void)scale; (void)out;
    return -1;
#endif
}

/* 1: AVX-512 (FP8 and float32 GEMVs, the dequantisers); 2: also AVX512_BF16 (bfloat16). */
int cpu_kernel_simd(void) {
#if defined(HAVE_BF16)
    return 2;
#elif defined(HAVE_SIMD)
    return 1;
#else
    return 0;
#endif
}

/* Rows r0..r1-1 of a job: of its one weight, or of its stack's weights counted in order
 * (each segment's rows are computed exactly as they are alone). */
static int64_t run_job(const job_t *j, int64_t r0, int64_t r1) {
    if (!j->segs) return run_rows(j, r0, r1);
    const int64_t y_bytes = j->kind == F32 || j->kind == FP8_F32 ? 4 : 2;
    int64_t start = 0;
    for (int64_t s = 0; s < j->n_segs && start < r1; s++) {
        const seg_t *g = &j->segs[s];
        const int64_t end = start + g->rows;
        if (end > r0) {
            const job_t one = {j->kind, g->w, j->cols, g->scale, g->grid_cols, g->bo, g->bi,
                               j->x, (char *)j->y + start * y_bytes, 0, 0};
            run_rows(&one, (r0 > start ? r0 : start) - start, (r1 < end ? r1 : end) - start);
        }
        start = end;
    }
    return 0;
}

/* --- the thread pool ---------------------------------------------------------------------- */

#define MAX_PARTS 8
#define SPIN_NS 2000000LL /* a worker idle this long sleeps (a decode step's gaps are shorter) */

typedef struct {
    pthread_t thread;
    atomic_int ticket; /* raised by the caller when it has a part for this worker */
    atomic_int done;   /* set to the ticket by the worker when that part is done */
    const job_t *job;
    int64_t r0, r1;
    int64_t found; /* what run_rows returned for the part */
} worker_t;

static struct {
    pthread_mutex_t busy; /* held by the one caller using the workers */
    pthread_mutex_t sleep_lock;
    pthread_cond_t wake;
    atomic_int sleepers;
    int started;
    worker_t workers[MAX_PARTS - 1];
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .sleep_lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Spin until the worker's ticket moves past `seen`, sleeping once idle for SPIN_NS. The
 * caller raises the ticket and then reads `sleepers`; a worker counts itself in `sleepers`
 * and then reads its ticket under the lock: one of the two sees the other (seq_cst). */
static int next_ticket(worker_t *me, int seen) {
    int64_t since = now_ns();
    for (int spins = 1;; spins++) {
        int ticket = atomic_load(&me->ticket);
        if (ticket != seen) return ticket;
        pause();
        if ((spins & 255) == 0 && now_ns() - since > SPIN_NS) break;
    }
    atomic_fetch_add(&pool.sleepers, 1);
    pthread_mutex_lock(&pool.sleep_lock);
    while (atomic_load(&me->ticket) == seen) pthread_cond_wait(&pool.wake, &pool.sleep_lock);
    pthread_mutex_unlock(&pool.sleep_lock);
    atomic_fetch_sub(&pool.sleepers, 1);
    return atomic_load(&me->ticket);
}

static void *work(void *arg) {
    worker_t *me = arg;
    int seen = 0; /* the ticket it was started with: the caller may have raised it already */
    for (;;) {
        seen = next_ticket(me, seen);
        me->found = run_job(me->job, me->r0, me->r1);
        atomic_store(&me->done, seen); /* release: `found` is visible to the caller */
    }
    return 0;
}

/* Workers started so far, up to `count`; fewer when the system refuses a thread. */
static int start_workers(int count) {
    while (pool.started < count) {
        worker_t *w = &pool.workers[pool.started];
        atomic_store(&w->ticket, 0);
        atomic_store(&w->done, 0);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&w->thread, &attr, work, w);
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.started++;
    }
    return pool.started;
}

/* In a forked child only the forking thread exists: no workers, and the locks may have been
 * held by threads the child lacks. */
static void after_fork_in_child(void) {
    pthread_mutex_init(&pool.busy, 0);
    pthread_mutex_init(&pool.sleep_lock, 0);
    pthread_cond_init(&pool.wake, 0);
    atomic_store(&pool.sleepers, 0);
    pool.started = 0;
}

__attribute__((constructor)) static void register_fork_handler(void) {
    pthread_atfork(0, 0, after_fork_in_child);
}

/* Rows r0..r1-1 of the job, cut into `parts` blocks starting on multiples of `align` rows:
 * the first block here, the others on workers at once. Returns the sum of what the parts
 * returned. */
static int64_t run_parts(const job_t *job, int64_t r0, int64_t r1, int64_t parts,
                         int64_t align) {
    if (parts > MAX_PARTS) parts = MAX_PARTS;
    if (align < 1) align = 1;
    int64_t step = (r1 - r0 + parts - 1) / (parts > 0 ? parts : 1);
    step = (step + align - 1) / align * align;
    if (parts <= 1 || step >= r1 - r0 || pthread_mutex_trylock(&pool.busy) != 0)
        return run_job(job, r0, r1);
    int helpers = start_workers((int)((r1 - r0 + step - 1) / step) - 1);
    int given = 0;
    for (int64_t a = r0 + step; a < r1 && given < helpers; a += step, given++) {
        worker_t *w = &pool.workers[given];
        w->job = job;
        w->r0 = a;
        w->r1 = given + 1 == helpers ? r1 : (a + step < r1 ? a + step : r1);
        atomic_fetch_add(&w->ticket, 1);
    }
    if (given && atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.sleep_lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.sleep_lock);
    }
    int64_t found = run_job(job, r0, given ? r0 + step : r1);
    for (int i = 0; i < given; i++) {
        worker_t *w = &pool.workers[i];
        int want = atomic_load(&w->ticket);
        for (int spins = 1; atomic_load(&w->done) != want; spins++) {
            pause();
            if ((spins & 1023) == 0) sched_yield(); /* more parts than free cores */
        }
        found += w->found;
    }
    pthread_mutex_unlock(&pool.busy);
    return found;
}

/* The one entry point: rows r0..r1-1 of a GEMV (y = W x) or of a dequantisation (y = W), on
 * up to `parts` threads. Returns 0 for a GEMV, the NaN codes met for a dequantisation, or -1
 * for a kind this build has no kernel for. */
int64_t cpu_rows(int kind, const void *w, int64_t cols, const float *scale, int64_t grid_cols,
             int64_t bo, int64_t bi, const void *x, void *y, int64_t r0, int64_t r1,
             int64_t parts, int64_t align) {
    int simd = cpu_kernel_simd();
    if (simd == 0 || kind < FP8_F32 || kind > COPY_FP8 || (kind == BF16 && simd < 2))
        return -1;
    job_t job = {kind, w, cols, scale, grid_cols, bo, bi, x, y, 0, 0};
    return run_parts(&job, r0, r1, parts, align);
}

/* One copy or dequantisation of a load (cpu_load_passes): `rows` rows of `cols` from w into
 * y, as cpu_rows runs kind DEQUANTIZE_F32, DEQUANTIZE_BF16 or COPY_FP8 over them. */
typedef struct {
    int kind;
    const void *w;
    int64_t cols;
    const float *scale;
    int64_t grid_cols, bo, bi;
    void *y;
    int64_t rows;
    int64_t found; /* set: the NaN codes met (a byte copy of other data: meaningless) */
} load_pass_t;

/* Every pass of a load in one call, each on up to `parts` threads: the caller's thread holds
 * no GIL for the whole of it. Returns 0, or -1 (nothing done) for a kind not a load's. */
int64_t cpu_load_passes(load_pass_t *passes, int64_t n, int64_t parts, int64_t align) {
    if (cpu_kernel_simd() == 0) return -1;
    for (int64_t i = 0; i < n; i++)
        if (passes[i].kind < DEQUANTIZE_F32 || passes[i].kind > COPY_FP8) return -1;
    for (int64_t i = 0; i < n; i++) {
        load_pass_t *p = &passes[i];
        job_t job = {p->kind, p->w, p->cols, p->scale, p->grid_cols, p->bo, p->bi, 0, p->y, 0, 0};
        p->found = run_parts(&job, 0, p->rows, parts, align);
    }
    return 0;
}

/* y = the stack's weights times x, their outputs one after another in y, on up to `parts`
 * threads (GEMV kinds only). Returns 0, or -1 for a kind this build has no kernel for. */
int64_t cpu_stack(int kind, const seg_t *segs, int64_t n_segs, int64_t cols, const void *x,
                  void *y, int64_t parts, int64_t align) {
    int simd = cpu_kernel_simd();
    if (simd == 0 || kind < FP8_F32 || kind > F32 || (kind == BF16 && simd < 2)) return -1;
    int64_t rows = 0;
    for (int64_t s = 0; s < n_segs; s++) rows += segs[s].rows;
    job_t job = {kind, 0, cols, 0, 0, 0, 0, x, y, segs, n_segs};
    return run_parts(&job, 0, rows, parts, align);
}

/* --- one decoder layer's decode step -------------------------------------------------------
 * engine/model.py Decoder.forward for one token of a dense pre-norm layer, as its torch path
 * computes it op by op (each add and product rounded to the activations' dtype where torch
 * rounds it), in one call where Python dispatched about a hundred and fifty: the attention
 * half (RMSNorm, q/k/v, q/k RMSNorm, RoPE, the cache write, attention, o, the residual add)
 * and the MLP half (RMSNorm, gate/up, SiLU(gate) * up, down, the residual add). */

typedef struct { /* one GEMV of a layer: one weight or a stack, as cpu_stack takes it */
    int kind;
    const seg_t *segs;
    int64_t n_segs, rows, cols, nbytes;
} gemv_t;

typedef struct {
    int bf16; /* activations in bfloat16, else float32 */
    int64_t hidden, heads, kv_heads, dim, rot, inter;
    float eps, scale;
    const void *attn_norm, *mlp_norm, *q_norm, *k_norm; /* q_norm and k_norm NULL: none */
    gemv_t qkv, o, gate_up, down;
} layer_t;

#if defined(HAVE_SIMD)
static void layer_gemv(const gemv_t *g, const void *x, void *y, int64_t parts,
                       int64_t min_split_bytes, int64_t align) {
    const job_t job = {g->kind, 0, g->cols, 0, 0, 0, 0, x, y, g->segs, g->n_segs};
    run_parts(&job, 0, g->rows, g->nbytes >= min_split_bytes ? parts : 1, align);
}

/* h += d, rounded to the dtype (torch's bfloat16 add: a float32 sum rounded once). */
static void add_into(int bf16, void *h, const void *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (bf16) ((uint16_t *)h)[i] = to_bf16(x_at_bf16(h, i) + x_at_bf16(d, i));
        else ((float *)h)[i] += ((const float *)d)[i];
    }
}

/* out = silu(gate) * up for gu = [gate | up] (inter each): silu(x) = x / (1 + exp(-x)) in
 * float32, rounded to the dtype, then the product rounded to the dtype. */
static void silu_mul(int bf16, const void *gu, int64_t inter, void *out) {
    float gate[16];
    for (int64_t i = 0; i < inter; i += 16) {
        const int64_t n = inter - i < 16 ? inter - i : 16;
        for (int64_t j = 0; j < 16; j++) gate[j] = j < n ? elem(bf16, gu, i + j) : 0.0f;
        const __m512 x = _mm512_loadu_ps(gate);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        _mm512_storeu_ps(gate, _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
        for (int64_t j = 0; j < n; j++) {
            const float up = elem(bf16, gu, inter + i + j);
            if (bf16) ((uint16_t *)out)[i + j] = to_bf16(bf16_value(gate[j]) * up);
            else ((float *)out)[i + j] = gate[j] * up;
        }
    }
}

/* down(silu(gate(x)) * up(x)) into y [down rows]; buf holds 3 x inter activations. */
static void swiglu_gemvs(int bf16, const gemv_t *gate_up, const gemv_t *down, int64_t inter,
                         const void *x, char *buf, void *y, int64_t parts,
                         int64_t min_split_bytes, int64_t align) {
    char *gu = buf, *act = gu + 2 * inter * (bf16 ? 2 : 4);
    layer_gemv(gate_up, x, gu, parts, min_split_bytes, align);
    silu_mul(bf16, gu, inter, act);
    layer_gemv(down, act, y, parts, min_split_bytes, align);
}

static int attention_ok(const layer_t *L) {
    return attend_shape_ok(L->heads, L->kv_heads, L->dim, L->rot) && L->hidden > 0;
}

static int mlp_ok(const layer_t *L) {
    return L->hidden > 0 && L->inter > 0 && L->gate_up.segs && L->down.segs;
}
#endif

/* The attention half of a layer's decode step for one token: h [hidden] updated in place;
 * keys / values [positions, kv_heads, dim] get row `pos`. Returns 0, or -1 (nothing
 * written) where the build or the layer's shapes are not taken. */
int64_t cpu_layer_attention(const layer_t *L, void *h, const void *cos, const void *sin,
                            void *keys, void *values, int64_t pos, int64_t parts,
                            int64_t min_split_bytes, int64_t align) {
#if defined(HAVE_SIMD)
    if (!attention_ok(L) || pos < 0) return -1;
    const int64_t size = L->bf16 ? 2 : 4, q_n = L->heads * L->dim, kv_n = L->kv_heads * L->dim;
    char *buf = malloc((size_t)((2 * L->hidden + 3 * q_n + 3 * kv_n) * size));
    if (!buf) return -1;
    char *x = buf, *qkv = x + L->hidden * size, *q = qkv, *k = q + q_n * size;
    char *v = k + kv_n * size, *q_normed = v + kv_n * size, *k_normed = q_normed + q_n * size;
    char *attended = k_normed + kv_n * size, *o = attended + q_n * size;
    rms_norm_row(L->bf16, h, L->attn_norm, x, L->hidden, L->eps);
    layer_gemv(&L->qkv, x, qkv, parts, min_split_bytes, align);
    if (L->q_norm && L->k_norm) {
        for (int64_t i = 0; i < L->heads; i++)
            rms_norm_row(L->bf16, q + i * L->dim * size, L->q_norm, q_normed + i * L->dim * size,
                         L->dim, L->eps);
        for (int64_t i = 0; i < L->kv_heads; i++)
            rms_norm_row(L->bf16, k + i * L->dim * size, L->k_norm, k_normed + i * L->dim * size,
                         L->dim, L->eps);
        q = q_normed;
        k = k_normed;
    }
    int64_t done = rope_attend(L->bf16, q, k, v, cos, sin, L->rot, L->heads, L->kv_heads, L->dim,
                               keys, values, pos, L->scale, attended);
    if (done == 0) {
        layer_gemv(&L->o, attended, o, parts, min_split_bytes, align);
        add_into(L->bf16, h, o, L->hidden);
    }
    free(buf);
    return done;
#else
    (void)L; (void)h; (void)cos; (void)sin; (void)keys; (void)values; (void)pos; (void)parts;
    (void)min_split_bytes; (void)align;
    return -1;
#endif
}

/* The MLP half of a layer's decode step for one token: h [hidden] updated in place. Returns
 * 0, or -1 (nothing written) where the build does not take it or the layer has no dense MLP
 * (a mixture of experts stays in Python). */
int64_t cpu_layer_mlp(const layer_t *L, void *h, int64_t parts, int64_t min_split_bytes,
                      int64_t align) {
#if defined(HAVE_SIMD)
    if (!mlp_ok(L)) return -1;
    const int64_t size = L->bf16 ? 2 : 4;
    char *buf = malloc((size_t)((2 * L->hidden + 3 * L->inter) * size));
    if (!buf) return -1;
    char *x = buf, *down = x + L->hidden * size, *activations = down + L->hidden * size;
    rms_norm_row(L->bf16, h, L->mlp_norm, x, L->hidden, L->eps);
    swiglu_gemvs(L->bf16, &L->gate_up, &L->down, L->inter, x, activations, down, parts,
                 min_split_bytes, align);
    add_into(L->bf16, h, down, L->hidden);
    free(buf);
    return 0;
#else
    (void)L; (void)h; (void)parts; (void)min_split_bytes; (void)align;
    return -1;
#endif
}

/* --- a mixture of experts' decode step ------------------------------------------------------
 * engine/moe.py SparseMoe for one token without a shared expert, as its torch path computes
 * it: RMSNorm, the router GEMV, the route (float32 softmax, top-k, ties to the lower expert,
 * the weights renormalised where the model says so, cast to the activations' dtype for
 * softmax_topk and kept in float32 for topk_softmax), each picked expert in ascending order
 * (gate/up, SiLU(gate) x up, down, times its weight, added to a zeroed sum in the dtype), then
 * the residual add. */

#define MOE_MAX_EXPERTS 1024
#define MOE_MAX_TOP_K 64

typedef struct {
    int bf16, topk_softmax, norm_topk;
    int64_t hidden, experts, top_k, inter;
    float eps;
    const void *norm;
    gemv_t router;
    const gemv_t *gate_up, *down; /* [experts] each */
} moe_t;

#if defined(HAVE_SIMD)
/* The top-k entries of probs [n] in descending order (ties: the lower index first). */
static void top_k(const float *probs, int64_t n, int64_t k, int64_t *ids, float *values) {
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < n; e++) {
            int taken = 0;
            for (int64_t i = 0; i < j; i++) taken |= ids[i] == e;
            if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
        }
        ids[j] = best;
        values[j] = probs[best];
    }
}

/* One expert's output times its weight, added to sum (all in the activations' dtype). */
static void add_expert(const moe_t *M, int64_t e, float weight, const void *x, char *buf,
                       void *sum, int64_t parts, int64_t min_split_bytes, int64_t align) {
    char *y = buf + 3 * M->inter * (M->bf16 ? 2 : 4);
    swiglu_gemvs(M->bf16, &M->gate_up[e], &M->down[e], M->inter, x, buf, y, parts,
                 min_split_bytes, align);
    const float w = M->bf16 ? bf16_value(weight) : weight; /* torch casts it to y's dtype */
    for (int64_t i = 0; i < M->hidden; i++) {
        if (M->bf16) {
            const float scaled = bf16_value(elem(1, y, i) * w);
            ((uint16_t *)sum)[i] = to_bf16(x_at_bf16(sum, i) + scaled);
        } else {
            ((float *)sum)[i] += ((float *)y)[i] * w;
        }
    }
}
#endif

/* The mixture of experts' decode step for one token: h [hidden] updated in place. Returns 0,
 * or -1 (nothing written) where the build or the shapes are not taken. */
int64_t cpu_layer_moe(const moe_t *M, void *h, int64_t parts, int64_t min_split_bytes,
                      int64_t align) {
#if defined(HAVE_SIMD)
    if (M->hidden < 1 || M->inter < 1 || M->experts < 1 || M->experts > MOE_MAX_EXPERTS
        || M->top_k < 1 || M->top_k > M->experts || M->top_k > MOE_MAX_TOP_K)
        return -1;
    const int64_t size = M->bf16 ? 2 : 4;
    char *buf = malloc((size_t)((2 * M->hidden + M->experts + 3 * M->inter + M->hidden) * size));
    if (!buf) return -1;
    char *x = buf, *sum = x + M->hidden * size, *logits = sum + M->hidden * size;
    char *expert_buf = logits + M->experts * size;
    float probs[MOE_MAX_EXPERTS], weights[MOE_MAX_TOP_K];
    int64_t ids[MOE_MAX_TOP_K];
    rms_norm_row(M->bf16, h, M->norm, x, M->hidden, M->eps);
    layer_gemv(&M->router, x, logits, 1, min_split_bytes, align);
    for (int64_t e = 0; e < M->experts; e++) probs[e] = elem(M->bf16, logits, e);
    softmax_row(probs, M->experts, 1.0f);
    top_k(probs, M->experts, M->top_k, ids, weights);
    if (M->norm_topk || M->topk_softmax) {
        float total = 0.0f;
        for (int64_t j = 0; j < M->top_k; j++) total += weights[j];
        for (int64_t j = 0; j < M->top_k; j++) weights[j] /= total;
    }
    if (!M->topk_softmax && M->bf16)
        for (int64_t j = 0; j < M->top_k; j++) weights[j] = bf16_value(weights[j]);
    memset(sum, 0, (size_t)(M->hidden * size));
    for (int64_t e = 0; e < M->experts; e++) /* ascending expert order */
        for (int64_t j = 0; j < M->top_k; j++)
            if (ids[j] == e)
                add_expert(M, e, weights[j], x, expert_buf, sum, parts, min_split_bytes, align);
    add_into(M->bf16, h, sum, M->hidden);
    free(buf);
    return 0;
#else
    (void)M; (void)h; (void)parts; (void)min_split_bytes; (void)align;
    return -1;
#endif
}
