/* The two transforms of a Winograd convolution F(m x m, 3 x 3) on channels-last data,
 * for aircc's oneDNN backend (executor/kernels/dnnl_backend/winograd.py), which runs the
 * products in between as one batched oneDNN matmul.
 *
 *   input:  x (N, H, W, C)  ->  V (a*a, T, C)      V[f] = B^T d B per tile d (a x a);
 *           returns 0 when x holds NaN or an infinity (then the caller runs the direct
 *           convolution: the transforms add and subtract a tile's inputs, so one infinity
 *           would make NaN of the whole tile, where the direct sums give +-inf or keep
 *           finite outputs beside it)
 *   output: Mo (a*a, T, K)  ->  y (N, Ho, Wo, K)   y = A^T Mo A + bias (+ residual) (Relu)
 *
 * with a = m + 2 and T = N * th * tw tiles of m x m outputs.  The a*a planes of V and Mo
 * lie ``v_plane`` / ``mo_plane`` floats apart (the caller pads them a cache line past a
 * multiple of the page, so that a tile's a*a rows do not all fall into the same cache
 * sets).  Tiles are shared out among ``threads`` OpenMP threads: the calling thread's
 * team, the one libgomp keeps for the oneDNN primitives it runs (the same libgomp, loaded
 * once), so no other pool starts and the team never idles between the steps.  The matrices come from the
 * caller (B^T: a x a, A^T: m x a), so they are defined once, in Python.  Every loop runs
 * over a block of channels, contiguous in memory on both sides, which the compiler
 * vectorises; the tile's input lies outside the image where it reads zeros (the padding).
 *
 * Built as the extension module aircc.executor.kernels.dnnl_backend.winograd_transforms, called
 * through ctypes: the module itself has no Python functions.
 */
#include <Python.h>

#define CB 64 /* channels per block: a 6 x 6 tile's block stays in L1 (two 9 KiB buffers) */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

#define INPUT_TRANSFORM(NAME, A, M)                                                         \
    CLONES int NAME(const float *restrict x, int n_img, int h_in, int w_in, int c_in,      \
                    int pad_top, int pad_left, int th, int tw, const float *restrict bt,   \
                    long v_plane, float *restrict v, int threads)                           \
    {                                                                                       \
        int nonfinite = 0;                                                                  \
        _Pragma("omp parallel for collapse(3) schedule(static) num_threads(threads) if(threads > 1) reduction(|:nonfinite)") \
        for (int n = 0; n < n_img; n++)                                                     \
            for (int i = 0; i < th; i++)                                                    \
                for (int j = 0; j < tw; j++) {                                              \
                    float d[A][A][CB], t[A][A][CB], z[CB] = {0.f};                          \
                    const long tile = ((long)n * th + i) * tw + j;                          \
                    for (int c0 = 0; c0 < c_in; c0 += CB) {                                 \
                        const int cb = c_in - c0 < CB ? c_in - c0 : CB;                     \
                        for (int a = 0; a < A; a++) {                                       \
                            const int h = i * M - pad_top + a;                              \
                            for (int b = 0; b < A; b++) {                                   \
                                const int w = j * M - pad_left + b;                         \
                                float *dst = d[a][b];                                       \
                                if (h < 0 || h >= h_in || w < 0 || w >= w_in) {             \
                                    for (int c = 0; c < cb; c++) dst[c] = 0.f;              \
                                } else {                                                    \
                                    const float *src =                                      \
                                        x + (((long)n * h_in + h) * w_in + w) * c_in + c0;  \
                                    for (int c = 0; c < cb; c++) {  /* x - x: 0 or NaN */   \
                                        dst[c] = src[c];                                    \
                                        z[c] += src[c] - src[c];                            \
                                    }                                                       \
                                }                                                           \
                            }                                                               \
                        }                                                                   \
                        for (int a = 0; a < A; a++)            /* rows: B^T d */            \
                            for (int b = 0; b < A; b++) {                                   \
                                float *dst = t[a][b];                                       \
                                for (int c = 0; c < cb; c++) {                              \
                                    float s = 0.f;                                          \
                                    for (int k = 0; k < A; k++) s += bt[a * A + k] * d[k][b][c]; \
                                    dst[c] = s;                                             \
                                }                                                           \
                            }                                                               \
                        for (int a = 0; a < A; a++)            /* columns: (B^T d) B */     \
                            for (int b = 0; b < A; b++) {                                   \
                                float *dst = v + (a * A + b) * v_plane + tile * c_in + c0;  \
                                for (int c = 0; c < cb; c++) {                              \
                                    float s = 0.f;                                          \
                                    for (int k = 0; k < A; k++) s += t[a][k][c] * bt[b * A + k]; \
                                    dst[c] = s;                                             \
                                }                                                           \
                            }                                                               \
                    }                                                                       \
                    for (int c = 0; c < CB; c++) nonfinite |= z[c] != 0.f;                  \
                }                                                                           \
        return !nonfinite;                                                                  \
    }

#define OUTPUT_TRANSFORM(NAME, A, M)                                                        \
    CLONES void NAME(const float *restrict mo, int n_img, int h_out, int w_out, int k_out,  \
                     int th, int tw, long mo_plane, const float *restrict at,              \
                     const float *restrict bias, const float *restrict residual, int relu, \
                     float *restrict y, int threads)                                        \
    {                                                                                       \
        _Pragma("omp parallel for collapse(3) schedule(static) num_threads(threads) if(threads > 1)") \
        for (int n = 0; n < n_img; n++)                                                     \
            for (int i = 0; i < th; i++)                                                    \
                for (int j = 0; j < tw; j++) {                                              \
                    float p[A][A][CB], s[M][A][CB];                                         \
                    const long tile = ((long)n * th + i) * tw + j;                          \
                    for (int k0 = 0; k0 < k_out; k0 += CB) {                                \
                        const int kb = k_out - k0 < CB ? k_out - k0 : CB;                   \
                        for (int a = 0; a < A; a++)                                         \
                            for (int b = 0; b < A; b++) {                                   \
                                const float *src = mo + (a * A + b) * mo_plane + tile * k_out + k0; \
                                for (int c = 0; c < kb; c++) p[a][b][c] = src[c];           \
                            }                                                               \
                        for (int r = 0; r < M; r++)            /* rows: A^T p */            \
                            for (int b = 0; b < A; b++) {                                   \
                                float *dst = s[r][b];                                       \
                                for (int c = 0; c < kb; c++) {                              \
                                    float acc = 0.f;                                        \
                                    for (int a = 0; a < A; a++) acc += at[r * A + a] * p[a][b][c]; \
                                    dst[c] = acc;                                           \
                                }                                                           \
                            }                                                               \
                        for (int r = 0; r < M; r++) {          /* columns, then epilogue */ \
                            const int h = i * M + r;                                        \
                            if (h >= h_out) break;                                          \
                            for (int q = 0; q < M; q++) {                                   \
                                const int w = j * M + q;                                    \
                                if (w >= w_out) break;                                      \
                                const long at_y = (((long)n * h_out + h) * w_out + w) * k_out + k0; \
                                float *dst = y + at_y;                                      \
                                for (int c = 0; c < kb; c++) {                              \
                                    float acc = bias ? bias[k0 + c] : 0.f;                  \
                                    for (int b = 0; b < A; b++) acc += s[r][b][c] * at[q * A + b]; \
                                    if (residual) acc += residual[at_y + c];                \
                                    if (relu && acc < 0.f) acc = 0.f;                       \
                                    dst[c] = acc;                                           \
                                }                                                           \
                            }                                                               \
                        }                                                                   \
                    }                                                                       \
                }                                                                           \
    }

INPUT_TRANSFORM(aircc_winograd_input_f2, 4, 2)
INPUT_TRANSFORM(aircc_winograd_input_f4, 6, 4)
OUTPUT_TRANSFORM(aircc_winograd_output_f2, 4, 2)
OUTPUT_TRANSFORM(aircc_winograd_output_f4, 6, 4)

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "winograd_transforms",
    "Winograd transforms for aircc's oneDNN backend, called through ctypes.", -1, NULL,
};

PyMODINIT_FUNC PyInit_winograd_transforms(void) { return PyModule_Create(&module); }
