/* The core of aircc.Attention on the oneDNN backend, for small heads: from the [Q | K | V]
 * product (oneDNN's matmul) to the context, softmax(Q K^T * scale + M) V, in one pass per
 * (batch, head), with no intermediate tensor.
 *
 * Why: oneDNN 3.2 runs that core as three primitives (scores, softmax, context), each
 * about 3-5 us of fixed cost however small the heads; a BERT-style encoder at batch 1
 * and 16 tokens spent some 15 us a layer there for a few thousand multiply-adds.
 *
 * Layout.  Q, K and V of (batch b, position i, head h) start at
 * qkv + b * sb + i * si + {0, 1, 2} * H * D + h * D; the context of (b, i, h) at
 * out + b * ob + i * oi + h * D; the mask (optional) of (b, h, i, j) at
 * mask + b * mb + h * mh + i * mi + j * mj (strides 0 where it broadcasts).  All strides
 * in floats.
 *
 * Numerics.  Scores are accumulated in float32, scaled, the mask added, and the softmax
 * taken with the row's maximum subtracted; exp is a Cody-Waite reduction and a degree-6
 * polynomial (relative error under 2e-7) on vectors of 16.  A row with a NaN or +inf
 * score, or only -inf ones (a mask that hides every key), has NaN probabilities, as the
 * exact softmax does, so a NaN context; with `nan_guard` they count as 0 (PyTorch's SDPA
 * exports do that), and the context is 0 V (0, or NaN where V has one).
 *
 * Scratch: per thread Sp * D + Sp floats, Sp the keys rounded up to 16 (K transposed, a
 * row of scores).
 * Called through ctypes; the module is built with the package (optional: without it the
 * backend runs oneDNN's three primitives).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* Vectors of 16 floats (GCC's vector extension): one AVX-512 register, two AVX2 ones or
 * four SSE ones, as the clone running has. */
#define LANES 16
typedef float vf __attribute__((vector_size(4 * LANES)));
typedef int32_t vi __attribute__((vector_size(4 * LANES)));
typedef float vf_unaligned __attribute__((vector_size(4 * LANES), aligned(4)));

static inline __attribute__((always_inline)) vf load(const float *p) {
    return *(const vf_unaligned *)p;
}

static inline __attribute__((always_inline)) void store(float *p, vf v) {
    *(vf_unaligned *)p = v;
}

static inline __attribute__((always_inline)) vf splat(float x) {
    return (vf){0} + x;
}

static inline __attribute__((always_inline)) vf pick(vi mask, vf yes, vf no) {
    return (vf)(((vi)yes & mask) | ((vi)no & ~mask));
}

/* exp(x) for x <= 0 (the softmax's shifted scores); 0 below -87 (and for -inf). */
static inline __attribute__((always_inline)) vf exp_nonpositive(vf x) {
    const vf lo = splat(-87.0f);
    vi under = x < lo;
    vf xc = pick(under, lo, x);
    vf t = xc * 1.44269504088896341f;
    vf n = (t + 12582912.0f) - 12582912.0f;              /* round to nearest */
    vf r = xc - n * 0.693145751953125f;                   /* ln 2, high part */
    r = r - n * 1.42860682030941723e-6f;                  /* ln 2, low part */
    vf p = splat(1.0f / 720.0f);
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    vi two_n = (__builtin_convertvector(n, vi) + 127) << 23;
    return pick(under, splat(0.0f), p * (vf)two_n);
}

/* Horizontal max and sum, halving the vector each step. */
#define HALVE(v, op)                                                                       \
    do {                                                                                   \
        v = op(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15,              \
                                          0, 1, 2, 3, 4, 5, 6, 7));                        \
        v = op(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3,                    \
                                          12, 13, 14, 15, 8, 9, 10, 11));                  \
        v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5,                    \
                                          10, 11, 8, 9, 14, 15, 12, 13));                  \
        v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6,                    \
                                          9, 8, 11, 10, 13, 12, 15, 14));                  \
    } while (0)
#define ADD(a, b) ((a) + (b))
#define MAX(a, b) pick((a) > (b), (a), (b))

static inline __attribute__((always_inline)) float hmax(vf v) {
    HALVE(v, MAX);
    return v[0];
}

static inline __attribute__((always_inline)) float hsum(vf v) {
    HALVE(v, ADD);
    return v[0];
}

static void fill(float *row, int D, float value) {
    for (int d = 0; d < D; d++)
        row[d] = value;
}

/* One (batch, head): kt holds K^T as [D][Sp] (Sp: S rounded up to LANES, the keys past S
 * zero), z a row of Sp scores. */
static inline __attribute__((always_inline)) void one_head(
        const float *restrict qkv, long sb, long si, int S, int H, int D,
        const float *restrict mask, long mb, long mh, long mi, long mj, float scale,
        int nan_guard, float *restrict out, long ob, long oi, int b, int h,
        float *restrict kt, float *restrict z) {
    const int Sp = (S + LANES - 1) / LANES * LANES;
    const float *base = qkv + (long)b * sb + (long)h * D;
    const float *q0 = base, *k0 = base + (long)H * D, *v0 = base + 2L * H * D;
    for (int d = 0; d < D; d++) {
        float *row = kt + (long)d * Sp;
        for (int j = 0; j < S; j++)
            row[j] = k0[(long)j * si + d];
        for (int j = S; j < Sp; j++)
            row[j] = 0.0f;
    }
    const float *mrow0 = mask ? mask + (long)b * mb + (long)h * mh : NULL;
    for (int i = 0; i < S; i++) {
        const float *q = q0 + (long)i * si;
        int c = 0;
        for (; c + 4 * LANES <= Sp; c += 4 * LANES) {     /* scores, four vectors of keys */
            vf a0 = splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < D; d++) {
                const float *row = kt + (long)d * Sp + c;
                const float qd = q[d];
                a0 += qd * load(row);
                a1 += qd * load(row + LANES);
                a2 += qd * load(row + 2 * LANES);
                a3 += qd * load(row + 3 * LANES);
            }
            store(z + c, a0 * scale);
            store(z + c + LANES, a1 * scale);
            store(z + c + 2 * LANES, a2 * scale);
            store(z + c + 3 * LANES, a3 * scale);
        }
        for (; c < Sp; c += LANES) {                      /* ... and one at a time */
            vf a0 = splat(0.0f), a1 = a0;
            int d = 0;
            for (; d + 2 <= D; d += 2) {
                a0 += q[d] * load(kt + (long)d * Sp + c);
                a1 += q[d + 1] * load(kt + (long)(d + 1) * Sp + c);
            }
            if (d < D)
                a0 += q[d] * load(kt + (long)d * Sp + c);
            store(z + c, (a0 + a1) * scale);
        }
        if (mrow0) {
            const float *mrow = mrow0 + (long)i * mi;
            for (int j = 0; j < S; j++)
                z[j] += mrow[(long)j * mj];
        }
        for (int j = S; j < Sp; j++)
            z[j] = -INFINITY;
        vf top = splat(-INFINITY);
        for (int c = 0; c < Sp; c += LANES) {
            vf v = load(z + c);
            top = pick(v > top, v, top);                  /* a NaN never wins... */
        }
        const float m = hmax(top);
        float *o = out + (long)b * ob + (long)i * oi + (long)h * D;
        float inv = NAN;
        if (m != INFINITY && m != -INFINITY) {
            vf total = splat(0.0f);
            for (int c = 0; c < Sp; c += LANES) {
                vf p = exp_nonpositive(load(z + c) - m);
                store(z + c, p);
                total += p;
            }
            inv = 1.0f / hsum(total);                     /* a NaN score makes it NaN */
        }
        if (inv != inv) {                                 /* every probability NaN */
            if (!nan_guard) {
                fill(o, D, NAN);
                continue;
            }
            for (int k = 0; k < S; k++)                   /* the guard: 0 each, so that */
                z[k] = 0.0f;                              /* the context is 0 V */
            inv = 1.0f;
        }
        int d0 = 0;
        for (; d0 + LANES <= D; d0 += LANES) {            /* four keys at a time */
            vf a0 = splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
            const float *v = v0 + d0;
            int k = 0;
            for (; k + 4 <= S; k += 4) {
                a0 += z[k] * load(v + (long)k * si);
                a1 += z[k + 1] * load(v + (long)(k + 1) * si);
                a2 += z[k + 2] * load(v + (long)(k + 2) * si);
                a3 += z[k + 3] * load(v + (long)(k + 3) * si);
            }
            for (; k < S; k++)
                a0 += z[k] * load(v + (long)k * si);
            store(o + d0, ((a0 + a1) + (a2 + a3)) * inv);
        }
        for (; d0 < D; d0++) {                           /* the last columns */
            float acc = 0.0f;
            for (int k = 0; k < S; k++)
                acc += z[k] * v0[(long)k * si + d0];
            o[d0] = acc * inv;
        }
    }
}

/* The call's operands (one struct, so that a ctypes call passes one pointer). */
typedef struct {
    const float *qkv;
    long sb, si;
    int B, S, H, D;
    const float *mask;                  /* NULL: none */
    long mb, mh, mi, mj;
    float scale;                        /* ln 2 when the scores are in units of log2 */
    int nan_guard;
    float *out;
    long ob, oi;
    float *scratch;                     /* threads x (Sp * D + Sp) floats */
    int threads;
} Params;

CLONES
void aircc_attention_core(const Params *p) {
    const int S = p->S, D = p->D, H = p->H;
    const int Sp = (S + LANES - 1) / LANES * LANES;
    const long per_thread = (long)Sp * D + Sp;
    const int tasks = p->B * H;
    if (p->threads <= 1 || tasks <= 1) {                 /* no parallel region at all */
        for (int t = 0; t < tasks; t++)
            one_head(p->qkv, p->sb, p->si, S, H, D, p->mask, p->mb, p->mh, p->mi, p->mj,
                     p->scale, p->nan_guard, p->out, p->ob, p->oi, t / H, t % H, p->scratch,
                     p->scratch + (long)Sp * D);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int t = 0; t < tasks; t++) {
        float *kt = p->scratch + (long)omp_get_thread_num() * per_thread;
        one_head(p->qkv, p->sb, p->si, S, H, D, p->mask, p->mb, p->mh, p->mi, p->mj, p->scale,
                 p->nan_guard, p->out, p->ob, p->oi, t / H, t % H, kt, kt + (long)Sp * D);
    }
}

/* The softmax step of the primitives' path (heads too big for the core), in place over
 * the scores [B][H][S][S] oneDNN's matmul wrote: each row scaled, the mask added (as
 * above), then softmax.  oneDNN 3.2 takes 0.9 ns an element for its softmax on AVX-512,
 * and adds a broadcast mask as a post-op of the scores matmul in a pass of its own; this
 * does both in one pass per row, at about a quarter of that.  Rows with no finite
 * maximum, or a NaN, get NaN probabilities, or 0 with nan_guard (as the core). */
typedef struct {
    float *scores;
    int B, H, S;
    const float *mask;                  /* NULL: none */
    long mb, mh, mi, mj;
    float scale;
    int nan_guard;
    int threads;
} SoftmaxParams;

/* A row's score j, scaled and masked. */
static inline __attribute__((always_inline)) vf masked(const float *restrict z,
                                                      const float *restrict mrow, long mj,
                                                      float scale, int c) {
    vf v = load(z + c) * scale;
    if (mrow) {
        if (mj == 1)
            v += load(mrow + c);
        else
            for (int l = 0; l < LANES; l++)
                v[l] += mrow[(long)(c + l) * mj];
    }
    return v;
}

/* Three passes over the row (in the L1 cache after the first): the maximum, the
 * exponentials and their sum, the division; the scaled, masked scores are made again
 * in the second pass rather than stored by the first. */
static inline __attribute__((always_inline)) void softmax_row(
        float *restrict z, int S, const float *restrict mrow, long mj, float scale,
        int nan_guard) {
    const int full = S / LANES * LANES;
    float tail[LANES];
    vf top = splat(-INFINITY);
    int c = 0;
    for (; c < full; c += LANES) {
        vf v = masked(z, mrow, mj, scale, c);
        top = pick(v > top, v, top);                      /* a NaN never wins... */
    }
    for (int l = 0; l < LANES; l++)                       /* the tail, padded with -inf */
        tail[l] = c + l < S ? z[c + l] * scale + (mrow ? mrow[(long)(c + l) * mj] : 0.0f)
                            : -INFINITY;
    vf t = load(tail);
    top = pick(t > top, t, top);
    const float m = hmax(top);
    float inv = NAN;
    vf total = splat(0.0f);
    if (m != INFINITY && m != -INFINITY) {
        for (c = 0; c < full; c += LANES) {
            vf p = exp_nonpositive(masked(z, mrow, mj, scale, c) - m);
            store(z + c, p);
            total += p;
        }
        t = exp_nonpositive(t - m);
        total += t;
        inv = 1.0f / hsum(total);                         /* ...but makes this NaN */
    }
    if (inv != inv) {
        fill(z, S, nan_guard ? 0.0f : NAN);
        return;
    }
    for (c = 0; c < full; c += LANES)
        store(z + c, load(z + c) * inv);
    for (int l = 0; c + l < S; l++)
        z[c + l] = t[l] * inv;
}

CLONES
void aircc_attention_softmax(const SoftmaxParams *p) {
    const int S = p->S, H = p->H;
    const long rows = (long)p->B * H * S;
#pragma omp parallel for schedule(static) num_threads(p->threads) if (p->threads > 1)
    for (long r = 0; r < rows; r++) {
        const long bh = r / S, i = r % S;
        const float *mrow = p->mask ? p->mask + (bh / H) * p->mb + (bh % H) * p->mh + i * p->mi
                                    : NULL;
        softmax_row(p->scores + r * S, S, mrow, p->mj, p->scale, p->nan_guard);
    }
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "attention_core",
    "The attention core (scores, softmax, context) for aircc's oneDNN backend, called "
    "through ctypes.", -1, NULL,
};

PyMODINIT_FUNC PyInit_attention_core(void) { return PyModule_Create(&module); }
