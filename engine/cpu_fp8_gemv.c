/* One decode GEMV over a resident block-FP8 weight, dequantising in registers.
 *
 * y[r] = sum_c w(r, c) * x[c] for rows r0..r1-1, where w(r, c) is exactly the value the
 * engine's dequantisation gives (engine/fp8.py): float32(e4m3(q[r, c])) * scale[r/bo][c/bi],
 * rounded to bfloat16 (round to nearest even) when the engine runs in bfloat16. The bytes are
 * read once; nothing is written but y. Built by engine/cpu_fp8_kernel.py with the machine's
 * own compiler flags; without AVX-512 it reports so and the engine keeps its torch path.
 *
 * e4m3 -> float32: the byte, sign-extended to 16 bits, shifted left by 7 and masked to bits
 * 15 and 13..7, is the float16 of the value times 2**-8, subnormals included; the scale is
 * passed times 2**8, so the float32 product is the same real number rounded once.
 */
#include <stdint.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__F16C__)
#include <immintrin.h>

int fp8_gemv_simd(void) { return 1; }

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
void NAME(const uint8_t *q, int64_t cols, const float *scale, int64_t grid_cols, int64_t bo, \
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

#define DEQUANTIZE(NAME, OT, STORE, ONE, BF16)                                                \
void NAME(const uint8_t *q, int64_t cols, const float *scale, int64_t grid_cols, int64_t bo, \
          int64_t bi, OT *out, int64_t r0, int64_t r1) {                                     \
    for (int64_t r = r0; r < r1; r++) {                                                      \
        const uint8_t *row = q + r * cols;                                                   \
        const float *tiles = scale + (r / bo) * grid_cols;                                   \
        OT *dest = out + r * cols;                                                           \
        for (int64_t c0 = 0; c0 < cols; c0 += bi) {                                          \
            const float s = tiles[c0 / bi];                                                  \
            const __m512 sv = _mm512_set1_ps(s);                                             \
            const int64_t end = c0 + bi < cols ? c0 + bi : cols;                             \
            int64_t c = c0;                                                                  \
            for (; c + 16 <= end; c += 16) STORE(dest + c, decode16(row + c, sv));           \
            for (; c < end; c++) dest[c] = ONE(decode1(row[c], s, BF16));                    \
        }                                                                                    \
    }                                                                                        \
}

DEQUANTIZE(fp8_dequantize_bf16, uint16_t, store_bf16, one_bf16, 1)
DEQUANTIZE(fp8_dequantize_f32, float, store_f32, one_f32, 0)

#if defined(__AVX512BF16__)
int bf16_gemv_simd(void) { return 1; }

/* A bfloat16 weight [rows, cols] (row-major) times a bfloat16 x: y[r0..r1-1], float32 sums
 * (VDPBF16PS: each product exact), each rounded once to bfloat16 as torch's GEMV rounds. */
void bf16_gemv(const uint16_t *w, int64_t cols, const uint16_t *x, uint16_t *y, int64_t r0,
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
#else
int bf16_gemv_simd(void) { return 0; }
#endif

#else

int fp8_gemv_simd(void) { return 0; }

int bf16_gemv_simd(void) { return 0; }

#endif
