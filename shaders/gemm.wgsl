// Linear layers: c = act(a·Wᵀ + bias), then c = residual + alpha·c when a residual is given.
//
// Four entry points share the weight decoding and the epilogue: `gemm` (tiled, for M > 1),
// `gemm_short` (fewer rows a tile, for small M), `gemm_large` (larger tiles, for large M) and `gemv`
// (one input row: the decoder's case, memory bound). Override constants pick the variant,
// so the compiler drops the branches a pipeline does not use:
//   WTYPE         0 F32, 1 F16, 2 Q8_0 (engine/gpu/tensors.py: GpuWeight's layouts)
//   ACT           0 none, 1 GELU (erf), 2 SiLU, 3 ReLU, 4 tanh, 5 square
//   HAS_BIAS      read `bias` [N]
//   HAS_RESIDUAL  read `residual` [M, N] and scale by alpha
//   NORM          gemv only: 0 none, 1 LayerNorm of the row with `norm_w` and `norm_b` first, 2 the
//                 same without a bias (a decoder step's norm then needs no dispatch of its own)
//   SPLITS        gemm_short and gemm_splits_sum: K in this many parts, one per workgroup z (below)
// `gemv` reduces with reduce_workgroup.wgsl or, in the fast tier, reduce_subgroup.wgsl, one of which
// comes before this file in a module (engine/gpu/entry_points.py).
// Bindings the variant does not read are still bound (the caller passes any buffer there), so every
// variant has the same layout.
//
// a is [M, K] unpadded: reads are bounds-checked. W is [n_pad, k_pad], zero-padded to 64 rows and
// 32 columns, so its reads need no checks; padded columns meet zeros from the guarded a reads.
// `gemv` and `gemm_large` read a through `a_vec`, the same binding as vec4s (WGSL lets two variables
// share a binding when no entry point uses both): a starts its buffer, so it is vec4-aligned.

struct Params {
    m: u32,
    n: u32,
    k: u32,
    k_pad: u32,         // W's row stride in values
    scale_stride: u32,  // Q8_0: u32 words of f16 scales per W row
    alpha: f32,
    eps: f32,           // NORM's
}

override WTYPE: u32 = 0u;
override ACT: u32 = 0u;
override HAS_BIAS: bool = false;
override HAS_RESIDUAL: bool = false;
override NORM: u32 = 0u;
override SPLITS: u32 = 1u;
override WG: u32 = 256u;  // gemv's threads: GEMV_ROWS rows of GEMV_LANES (the reductions' workgroup size)

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> a_vec: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> c: array<f32>;
@group(0) @binding(7) var<storage, read> norm_w: array<vec4<f32>>; // gemv only, [K]
@group(0) @binding(8) var<storage, read> norm_b: array<vec4<f32>>;

// ---- weights ----------------------------------------------------------------------------------

struct Eight {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

// Four int8 packed little-endian in a u32, sign-extended by shifting each byte to the top and back.
fn int8x4(word: u32) -> vec4<f32> {
    let v = bitcast<i32>(word);
    return vec4<f32>(vec4<i32>(v << 24u, v << 16u, v << 8u, v) >> vec4<u32>(24u));
}

// W[n, k .. k+7] as f32, k a multiple of 8. Q8_0 is f32(scale) * f32(q), exactly numpy's
// dequantisation (the product of an f16 and an int8 is exact in f32).
fn weights8(n: u32, k: u32) -> Eight {
    let at = n * p.k_pad + k;
    if (WTYPE == 0u) {
        return Eight(bitcast<vec4<f32>>(w[at / 4u]), bitcast<vec4<f32>>(w[at / 4u + 1u]));
    }
    if (WTYPE == 1u) {
        let h = w[at / 8u];
        return Eight(vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y)),
                     vec4<f32>(unpack2x16float(h.z), unpack2x16float(h.w)));
    }
    let quad = w[at / 16u];
    let q = select(quad.xy, quad.zw, (at & 8u) != 0u);
    let pair = scales[n * p.scale_stride + k / 64u];
    let s = unpack2x16float(select(pair, pair >> 16u, ((k / 32u) & 1u) != 0u)).x;
    return Eight(s * int8x4(q.x), s * int8x4(q.y));
}

// ---- epilogue ---------------------------------------------------------------------------------

// erfc(|x|) with fractional error below 1.2e-7 everywhere (the Chebyshev fit of Numerical Recipes'
// erfcc). Working with erfc keeps GELU's relative accuracy for large negative inputs, where
// 1 + erf(x) would cancel.
fn erfc_abs(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(poly - z * z);
}

fn gelu(x: f32) -> f32 {
    let tail = erfc_abs(x * 0.70710678118654752);  // 1 - erf(|x|/sqrt(2))
    return 0.5 * x * select(2.0 - tail, tail, x < 0.0);
}

fn activate(x: f32) -> f32 {
    switch ACT {
        case 1u: { return gelu(x); }
        case 2u: { return x / (1.0 + exp(-x)); }
        case 3u: { return max(x, 0.0); }
        // tanh is exactly ±1 in f32 past |x| = 9; clamping keeps drivers that compute it through
        // exp from overflowing to NaN.
        case 4u: { return tanh(clamp(x, -9.0, 9.0)); }
        case 5u: { return x * x; }
        default: { return x; }
    }
}

fn finish(sum: f32, m: u32, n: u32) -> f32 {
    var v = sum;
    if (HAS_BIAS) {
        v += bias[n];
    }
    v = activate(v);
    if (HAS_RESIDUAL) {
        v = residual[m * p.n + n] + p.alpha * v;
    }
    return v;
}

// ---- GEMM -------------------------------------------------------------------------------------

// A workgroup computes a 64x64 tile of c; each of its 256 threads a 4x4 micro-tile. K goes in
// steps of 32 (one Q8_0 block, so a row of the W tile has one scale) through shared tiles stored
// k-major, so the inner loop reads a vec4 of A rows and a vec4 of W rows per k.
const TILE = 64u;
const TILE_K = 32u;
const VEC_PER_K = 16u;  // TILE / 4: vec4s per k in a shared tile

// The A tile then the W tile, each [TILE_K][TILE/4] vec4s: A[m0 + m, k0 + k] at tiles[k*16 + m/4][m%4],
// W[n0 + n, k0 + k] at tiles[W_TILE + k*16 + n/4][n%4]. (One array: naga can't pass workgroup
// pointers to functions.)
const W_TILE = 512u;
var<workgroup> tiles: array<vec4<f32>, 1024>;

// The guarded a[m, k .. k+7]: zero outside [M, K] (a is not padded).
fn a8(m: u32, k: u32) -> Eight {
    let at = m * p.k + k;
    let inside = m < p.m;
    return Eight(
        vec4<f32>(select(0.0, a[at], inside && k < p.k), select(0.0, a[at + 1u], inside && k + 1u < p.k),
                  select(0.0, a[at + 2u], inside && k + 2u < p.k), select(0.0, a[at + 3u], inside && k + 3u < p.k)),
        vec4<f32>(select(0.0, a[at + 4u], inside && k + 4u < p.k), select(0.0, a[at + 5u], inside && k + 5u < p.k),
                  select(0.0, a[at + 6u], inside && k + 6u < p.k), select(0.0, a[at + 7u], inside && k + 7u < p.k)));
}

// Eight values of tile row `row` at k offsets ks .. ks+7 into the shared tile starting at `tile`,
// `stride` vec4s per k. Written out rather than looped so the values stay in registers.
fn put8(tile: u32, stride: u32, ks: u32, row: u32, e: Eight) {
    let at = tile + ks * stride + row / 4u;
    let lane = row % 4u;
    tiles[at][lane] = e.lo.x;
    tiles[at + stride][lane] = e.lo.y;
    tiles[at + 2u * stride][lane] = e.lo.z;
    tiles[at + 3u * stride][lane] = e.lo.w;
    tiles[at + 4u * stride][lane] = e.hi.x;
    tiles[at + 5u * stride][lane] = e.hi.y;
    tiles[at + 6u * stride][lane] = e.hi.z;
    tiles[at + 7u * stride][lane] = e.hi.w;
}

// c[m, n .. n+3] from a row of a micro-tile, skipping what lies outside [M, N]; `base`: where in c
// the [M, N] matrix starts (a split's part of `gemm_short`'s, else 0).
fn store4(base: u32, m: u32, n: u32, v: vec4<f32>) {
    if (m >= p.m) {
        return;
    }
    let at = base + m * p.n;
    if (n < p.n) { c[at + n] = finish(v.x, m, n); }
    if (n + 1u < p.n) { c[at + n + 1u] = finish(v.y, m, n + 1u); }
    if (n + 2u < p.n) { c[at + n + 2u] = finish(v.z, m, n + 2u); }
    if (n + 3u < p.n) { c[at + n + 3u] = finish(v.w, m, n + 3u); }
}

// A thread's 4x4 micro-tile (`gemm`, `gemm_short`): rows r0..r3, columns as one vec4 each. A struct
// of named vectors rather than an array, so no compiler puts it in local memory.
struct MicroTile4 {
    r0: vec4<f32>,
    r1: vec4<f32>,
    r2: vec4<f32>,
    r3: vec4<f32>,
}

// One k step of a 4x4 micro-tile: rows from tiles[a], columns from tiles[b].
fn mma4(acc: ptr<function, MicroTile4>, a: u32, b: u32) {
    let av = tiles[a];
    let bv = tiles[b];
    (*acc).r0 += av.x * bv;
    (*acc).r1 += av.y * bv;
    (*acc).r2 += av.z * bv;
    (*acc).r3 += av.w * bv;
}

// The micro-tile's rows m .. m+3, columns n .. n+3, into c from `base` (see `store4`).
fn store_tile4(base: u32, m: u32, n: u32, acc: MicroTile4) {
    store4(base, m, n, acc.r0);
    store4(base, m + 1u, n, acc.r1);
    store4(base, m + 2u, n, acc.r2);
    store4(base, m + 3u, n, acc.r3);
}

@compute @workgroup_size(256)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n0 = wid.x * TILE;
    let m0 = wid.y * TILE;
    // Loading: thread t fills row t%64 of both tiles at k offsets 8*(t/64) .. +7. Consecutive
    // threads take consecutive rows, so their stores into the k-major tiles hit distinct banks.
    let row = t % TILE;
    let ks = (t / TILE) * 8u;
    // Computing: rows 4*ty .. +3 and columns 4*tx .. +3 of the output tile.
    let tx = t % VEC_PER_K;
    let ty = t / VEC_PER_K;
    var acc: MicroTile4;

    for (var k0 = 0u; k0 < p.k; k0 += TILE_K) {
        put8(0u, VEC_PER_K, ks, row, a8(m0 + row, k0 + ks));
        put8(W_TILE, VEC_PER_K, ks, row, weights8(n0 + row, k0 + ks));
        workgroupBarrier();
        for (var k = 0u; k < TILE_K; k++) {
            mma4(&acc, k * VEC_PER_K + ty, W_TILE + k * VEC_PER_K + tx);
        }
        workgroupBarrier();
    }
    store_tile4(0u, m0 + ty * 4u, n0 + tx * 4u, acc);
}

// ---- GEMM, few rows -----------------------------------------------------------------------------

// `gemm_short`: the same product for small M (a few seconds of a conformer: 138 rows for 11 s of
// Parakeet), where `gemm`'s 64-row tiles leave most of a large GPU idle (3 row tiles, 48 workgroups
// at N = 1024) and each workgroup walks all of K alone. A workgroup takes 16 rows x 64 columns, so
// there are 4x as many, and its 256 threads are 4 groups of 64 that share each K step of 32: group g
// multiplies k 8g .. 8g+7 of the step into 4x4 micro-tiles, and the groups' sums meet at the end (in
// group order, so every run gives the same bits). The tiles live in `gemm`'s `tiles`: A at 0 (4 vec4s
// per k), W at W_TILE as in `gemm`.
// With SPLITS > 1 even those workgroups are too few to fill the GPU (16 x 64 tiles of 138 x 1024
// outputs are 144 workgroups), so K is cut too: workgroup z sums its part of K (whole steps) and
// writes the plain sums to part z of c, [SPLITS, M, N] (the pipeline has no bias, activation or
// residual), and `gemm_splits_sum` adds the parts and applies the epilogue.
const SHORT_ROWS = 16u;
const SHORT_VEC_PER_K = 4u;  // SHORT_ROWS / 4

@compute @workgroup_size(256)
fn gemm_short(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n0 = wid.x * TILE;
    let m0 = wid.y * SHORT_ROWS;
    let group = t / 64u;
    let tx = t % 16u;  // columns 4*tx .. +3
    let ty = (t % 64u) / 16u;  // rows 4*ty .. +3
    var acc: MicroTile4;
    let part = (p.k + SPLITS * TILE_K - 1u) / (SPLITS * TILE_K) * TILE_K;  // K per split, in whole steps
    let k_end = min(p.k, (wid.z + 1u) * part);
    for (var k0 = wid.z * part; k0 < k_end; k0 += TILE_K) {
        // A: thread t < 64 loads row t%16 at k offsets 8*(t/16) .. +7; W: every thread row t%64 at
        // 8*(t/64) .. +7, as in `gemm`.
        if (t < 64u) {
            put8(0u, SHORT_VEC_PER_K, 8u * (t / 16u), t % 16u, a8(m0 + t % 16u, k0 + 8u * (t / 16u)));
        }
        put8(W_TILE, VEC_PER_K, 8u * group, t % 64u, weights8(n0 + t % 64u, k0 + 8u * group));
        workgroupBarrier();
        let k = 8u * group;  // this group's 8 k steps, written out
        mma4(&acc, k * SHORT_VEC_PER_K + ty, W_TILE + k * VEC_PER_K + tx);
        mma4(&acc, (k + 1u) * SHORT_VEC_PER_K + ty, W_TILE + (k + 1u) * VEC_PER_K + tx);
        mma4(&acc, (k + 2u) * SHORT_VEC_PER_K + ty, W_TILE + (k + 2u) * VEC_PER_K + tx);
        mma4(&acc, (k + 3u) * SHORT_VEC_PER_K + ty, W_TILE + (k + 3u) * VEC_PER_K + tx);
        mma4(&acc, (k + 4u) * SHORT_VEC_PER_K + ty, W_TILE + (k + 4u) * VEC_PER_K + tx);
        mma4(&acc, (k + 5u) * SHORT_VEC_PER_K + ty, W_TILE + (k + 5u) * VEC_PER_K + tx);
        mma4(&acc, (k + 6u) * SHORT_VEC_PER_K + ty, W_TILE + (k + 6u) * VEC_PER_K + tx);
        mma4(&acc, (k + 7u) * SHORT_VEC_PER_K + ty, W_TILE + (k + 7u) * VEC_PER_K + tx);
        workgroupBarrier();
    }
    // Groups 1..3 leave their sums in `tiles` (free now); group 0 adds them in group order.
    if (group != 0u) {
        let at = ((group - 1u) * 64u + t % 64u) * 4u;
        tiles[at] = acc.r0;
        tiles[at + 1u] = acc.r1;
        tiles[at + 2u] = acc.r2;
        tiles[at + 3u] = acc.r3;
    }
    workgroupBarrier();
    if (group == 0u) {
        for (var g = 0u; g < 3u; g++) {
            let at = (g * 64u + t) * 4u;
            acc.r0 += tiles[at];
            acc.r1 += tiles[at + 1u];
            acc.r2 += tiles[at + 2u];
            acc.r3 += tiles[at + 3u];
        }
        store_tile4(wid.z * p.m * p.n, m0 + ty * 4u, n0 + tx * 4u, acc);
    }
}

// `gemm_splits_sum`: c = the epilogue of the sum of `gemm_short`'s SPLITS parts, bound as `a`
// ([SPLITS, M, N]), added in split order (every run gives the same bits); a thread per output.
@compute @workgroup_size(256)
fn gemm_splits_sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
                   @builtin(local_invocation_index) l: u32) {
    let i = (wid.x + wid.y * groups.x) * 256u + l;
    let size = p.m * p.n;
    if (i >= size) {
        return;
    }
    var sum = a[i];
    for (var z = 1u; z < SPLITS; z++) {
        sum += a[z * size + i];
    }
    c[i] = finish(sum, i / p.n, i % p.n);
}

// ---- GEMM, 128x128 tiles ------------------------------------------------------------------------

// `gemm_large`: the same product for large M (engine/gpu/ops/linear.py picks it), where there are
// enough output tiles to fill the GPU with 4x fewer, 4x larger workgroups. Each thread holds an 8x8
// micro-tile (rows 4*ty .. +3 and 64 + 4*ty .. +3, columns likewise from tx), so per k it reads 4
// vec4s of shared memory for 64 FMAs, against `gemm`'s 2 for 16, and every value loaded from global
// memory serves twice as many products. On top of that:
// * The next K step is read into registers before this step's products, W still as stored (a Q8_0
//   step is a vec4<u32> and a scale word per thread) and decoded when it is put in shared memory, so
//   the loads' latency overlaps the arithmetic.
// * A is read as vec4s through `a_vec` when K % 4 == 0 (every model's widths): a warp takes 16 rows x
//   2 vec4s, whole 32-byte sectors. W is read by pairs of threads per row, 32 contiguous bytes each.
// * Those stores would put two threads of a warp on one bank (same row, k 16 apart): the vec4 slot of
//   a row is XORed with 4 in the k ranges that collide (A: k % 8 >= 4, W: k >= 16), and the products
//   undo it with per-thread constants (ty ^ 4, tx ^ 4).
// * The 32 products of a K step are 32 calls of `mma` with literal offsets, not a loop: naga's loop
//   form keeps drivers from unrolling it (docs/PERFORMANCE.md: K steps written out).
// Each output still sums over k in the same order as `gemm`, so both give the same bits.
const LARGE_TILE = 128u;
const LARGE_VEC_PER_K = 32u;  // LARGE_TILE / 4
const LARGE_W_TILE = 1024u;   // TILE_K * LARGE_VEC_PER_K: the W tile's first vec4
var<workgroup> large_tiles: array<vec4<f32>, 2048>;  // the A tile then the W tile: 32 KiB

// A thread's 8x8 micro-tile: accumulators for rows r0..r7, columns 0..3 (a) and 64..67 (b) of its
// quads. A struct of named vectors rather than an array, so no compiler puts it in local memory.
struct MicroTile {
    r0a: vec4<f32>,
    r0b: vec4<f32>,
    r1a: vec4<f32>,
    r1b: vec4<f32>,
    r2a: vec4<f32>,
    r2b: vec4<f32>,
    r3a: vec4<f32>,
    r3b: vec4<f32>,
    r4a: vec4<f32>,
    r4b: vec4<f32>,
    r5a: vec4<f32>,
    r5b: vec4<f32>,
    r6a: vec4<f32>,
    r6b: vec4<f32>,
    r7a: vec4<f32>,
    r7b: vec4<f32>,
}

// One k step of a micro-tile: rows from large_tiles[a] and [a + 16], columns from [b] and [b + 16].
fn mma(acc: ptr<function, MicroTile>, a: u32, b: u32) {
    let a_lo = large_tiles[a];
    let a_hi = large_tiles[a + 16u];
    let b_lo = large_tiles[b];
    let b_hi = large_tiles[b + 16u];
    (*acc).r0a += a_lo.x * b_lo;
    (*acc).r0b += a_lo.x * b_hi;
    (*acc).r1a += a_lo.y * b_lo;
    (*acc).r1b += a_lo.y * b_hi;
    (*acc).r2a += a_lo.z * b_lo;
    (*acc).r2b += a_lo.z * b_hi;
    (*acc).r3a += a_lo.w * b_lo;
    (*acc).r3b += a_lo.w * b_hi;
    (*acc).r4a += a_hi.x * b_lo;
    (*acc).r4b += a_hi.x * b_hi;
    (*acc).r5a += a_hi.y * b_lo;
    (*acc).r5b += a_hi.y * b_hi;
    (*acc).r6a += a_hi.z * b_lo;
    (*acc).r6b += a_hi.z * b_hi;
    (*acc).r7a += a_hi.w * b_lo;
    (*acc).r7b += a_hi.w * b_hi;
}

// a[m, k .. k+3], zero outside [M, K]; k a multiple of 4.
fn a_quad(m: u32, k: u32) -> vec4<f32> {
    let inside = m < p.m;
    let at = m * p.k + k;
    if (p.k % 4u == 0u) {  // uniform: a vec4 lies wholly inside or outside the row
        return select(vec4<f32>(0.0), a_vec[at / 4u], inside && k < p.k);
    }
    return vec4<f32>(select(0.0, a_vec[at / 4u][at % 4u], inside && k < p.k),
                     select(0.0, a_vec[(at + 1u) / 4u][(at + 1u) % 4u], inside && k + 1u < p.k),
                     select(0.0, a_vec[(at + 2u) / 4u][(at + 2u) % 4u], inside && k + 2u < p.k),
                     select(0.0, a_vec[(at + 3u) / 4u][(at + 3u) % 4u], inside && k + 3u < p.k));
}

// Row m of a micro-tile: its columns n .. n+3 (lo) and n+64 .. n+67 (hi).
fn store_row(m: u32, n: u32, lo: vec4<f32>, hi: vec4<f32>) {
    store4(0u, m, n, lo);
    store4(0u, m, n + 64u, hi);
}

// Sixteen weights as stored: F32 q0..q3, F16 q0..q1, Q8_0 q0 and the u32 holding its scale.
struct Raw16 {
    q0: vec4<u32>,
    q1: vec4<u32>,
    q2: vec4<u32>,
    q3: vec4<u32>,
    scale: u32,
}

// W[n, k .. k+15] undecoded; k a multiple of 16. Rows past W's padding (a 128-row tile over rows
// padded to 64) read the last padded row instead: their outputs are never stored.
fn w_raw16(n: u32, k: u32) -> Raw16 {
    let row = min(n, (p.n + 63u) / 64u * 64u - 1u);
    let at = row * p.k_pad + k;
    if (WTYPE == 0u) {
        let i = at / 4u;
        return Raw16(w[i], w[i + 1u], w[i + 2u], w[i + 3u], 0u);
    }
    if (WTYPE == 1u) {
        return Raw16(w[at / 8u], w[at / 8u + 1u], vec4<u32>(0u), vec4<u32>(0u), 0u);
    }
    return Raw16(w[at / 16u], vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), scales[row * p.scale_stride + k / 64u]);
}

// v.x .. v.w into lane `lane` of large_tiles[at], [at + stride], [at + 2 stride], [at + 3 stride].
fn put4(at: u32, stride: u32, lane: u32, v: vec4<f32>) {
    large_tiles[at][lane] = v.x;
    large_tiles[at + stride][lane] = v.y;
    large_tiles[at + 2u * stride][lane] = v.z;
    large_tiles[at + 3u * stride][lane] = v.w;
}

// The sixteen weights of `r` (read at k) as f32, in k order.
struct Sixteen {
    e0: vec4<f32>,
    e1: vec4<f32>,
    e2: vec4<f32>,
    e3: vec4<f32>,
}

fn decode16(k: u32, r: Raw16) -> Sixteen {
    if (WTYPE == 0u) {
        return Sixteen(bitcast<vec4<f32>>(r.q0), bitcast<vec4<f32>>(r.q1), bitcast<vec4<f32>>(r.q2),
                       bitcast<vec4<f32>>(r.q3));
    }
    if (WTYPE == 1u) {
        return Sixteen(vec4<f32>(unpack2x16float(r.q0.x), unpack2x16float(r.q0.y)),
                       vec4<f32>(unpack2x16float(r.q0.z), unpack2x16float(r.q0.w)),
                       vec4<f32>(unpack2x16float(r.q1.x), unpack2x16float(r.q1.y)),
                       vec4<f32>(unpack2x16float(r.q1.z), unpack2x16float(r.q1.w)));
    }
    let s = unpack2x16float(select(r.scale, r.scale >> 16u, ((k / 32u) & 1u) != 0u)).x;
    return Sixteen(s * int8x4(r.q0.x), s * int8x4(r.q0.y), s * int8x4(r.q0.z), s * int8x4(r.q0.w));
}

// Decode `r` (read at k) into the W tile from vec4 `at`, lane `lane`: its 16 values at 16 k steps.
fn put_w16(at: u32, lane: u32, k: u32, r: Raw16) {
    let e = decode16(k, r);
    put4(at, LARGE_VEC_PER_K, lane, e.e0);
    put4(at + 4u * LARGE_VEC_PER_K, LARGE_VEC_PER_K, lane, e.e1);
    put4(at + 8u * LARGE_VEC_PER_K, LARGE_VEC_PER_K, lane, e.e2);
    put4(at + 12u * LARGE_VEC_PER_K, LARGE_VEC_PER_K, lane, e.e3);
}

@compute @workgroup_size(256)
fn gemm_large(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n0 = wid.x * LARGE_TILE;
    let m0 = wid.y * LARGE_TILE;
    // A loading: row 16*(t/32) + t%16, k quads a_kq, +2, +4, +6 (a_kq = (t/16)%2); k-major tile,
    // vec4 slot (row/4) ^ (4*a_kq).
    let a_row = (t / 32u) * 16u + t % 16u;
    let a_kq = (t / 16u) % 2u;
    let a_at = a_kq * 4u * LARGE_VEC_PER_K + ((a_row / 4u) ^ (a_kq * 4u));
    let a_lane = a_row % 4u;
    // W loading: row t/2, k offsets 16*(t%2) .. +15; vec4 slot (row/4) ^ (4*(t%2)).
    let w_row = t / 2u;
    let w_ks = (t % 2u) * 16u;
    let w_at = LARGE_W_TILE + w_ks * LARGE_VEC_PER_K + ((w_row / 4u) ^ ((t % 2u) * 4u));
    let w_lane = w_row % 4u;
    // Computing: the micro-tile's quads of rows (ty) and columns (tx), and their swizzled slots.
    let tx = t % 16u;
    let ty = t / 16u;
    let tx4 = tx ^ 4u;
    let ty4 = ty ^ 4u;
    var acc: MicroTile;

    var next_a0 = a_quad(m0 + a_row, 4u * a_kq);
    var next_a1 = a_quad(m0 + a_row, 4u * a_kq + 8u);
    var next_a2 = a_quad(m0 + a_row, 4u * a_kq + 16u);
    var next_a3 = a_quad(m0 + a_row, 4u * a_kq + 24u);
    var next_w = w_raw16(n0 + w_row, w_ks);
    for (var k0 = 0u; k0 < p.k; k0 += TILE_K) {
        put4(a_at, LARGE_VEC_PER_K, a_lane, next_a0);
        put4(a_at + 8u * LARGE_VEC_PER_K, LARGE_VEC_PER_K, a_lane, next_a1);
        put4(a_at + 16u * LARGE_VEC_PER_K, LARGE_VEC_PER_K, a_lane, next_a2);
        put4(a_at + 24u * LARGE_VEC_PER_K, LARGE_VEC_PER_K, a_lane, next_a3);
        put_w16(w_at, w_lane, k0, next_w);
        workgroupBarrier();
        if (k0 + TILE_K < p.k) {
            let k1 = k0 + TILE_K;
            next_a0 = a_quad(m0 + a_row, k1 + 4u * a_kq);
            next_a1 = a_quad(m0 + a_row, k1 + 4u * a_kq + 8u);
            next_a2 = a_quad(m0 + a_row, k1 + 4u * a_kq + 16u);
            next_a3 = a_quad(m0 + a_row, k1 + 4u * a_kq + 24u);
            next_w = w_raw16(n0 + w_row, k1 + w_ks);
        }
        // Step k reads A at k*32 (+16) and W at 1024 + k*32 (+16), in the swizzled slot where its
        // k range was swizzled.
        mma(&acc, 0u + ty, 1024u + tx);
        mma(&acc, 32u + ty, 1056u + tx);
        mma(&acc, 64u + ty, 1088u + tx);
        mma(&acc, 96u + ty, 1120u + tx);
        mma(&acc, 128u + ty4, 1152u + tx);
        mma(&acc, 160u + ty4, 1184u + tx);
        mma(&acc, 192u + ty4, 1216u + tx);
        mma(&acc, 224u + ty4, 1248u + tx);
        mma(&acc, 256u + ty, 1280u + tx);
        mma(&acc, 288u + ty, 1312u + tx);
        mma(&acc, 320u + ty, 1344u + tx);
        mma(&acc, 352u + ty, 1376u + tx);
        mma(&acc, 384u + ty4, 1408u + tx);
        mma(&acc, 416u + ty4, 1440u + tx);
        mma(&acc, 448u + ty4, 1472u + tx);
        mma(&acc, 480u + ty4, 1504u + tx);
        mma(&acc, 512u + ty, 1536u + tx4);
        mma(&acc, 544u + ty, 1568u + tx4);
        mma(&acc, 576u + ty, 1600u + tx4);
        mma(&acc, 608u + ty, 1632u + tx4);
        mma(&acc, 640u + ty4, 1664u + tx4);
        mma(&acc, 672u + ty4, 1696u + tx4);
        mma(&acc, 704u + ty4, 1728u + tx4);
        mma(&acc, 736u + ty4, 1760u + tx4);
        mma(&acc, 768u + ty, 1792u + tx4);
        mma(&acc, 800u + ty, 1824u + tx4);
        mma(&acc, 832u + ty, 1856u + tx4);
        mma(&acc, 864u + ty, 1888u + tx4);
        mma(&acc, 896u + ty4, 1920u + tx4);
        mma(&acc, 928u + ty4, 1952u + tx4);
        mma(&acc, 960u + ty4, 1984u + tx4);
        mma(&acc, 992u + ty4, 2016u + tx4);
        workgroupBarrier();
    }

    let m = m0 + ty * 4u;
    let n = n0 + tx * 4u;
    store_row(m + 0u, n, acc.r0a, acc.r0b);
    store_row(m + 1u, n, acc.r1a, acc.r1b);
    store_row(m + 2u, n, acc.r2a, acc.r2b);
    store_row(m + 3u, n, acc.r3a, acc.r3b);
    store_row(m + 64u, n, acc.r4a, acc.r4b);
    store_row(m + 65u, n, acc.r5a, acc.r5b);
    store_row(m + 66u, n, acc.r6a, acc.r6b);
    store_row(m + 67u, n, acc.r7a, acc.r7b);
}

// ---- GEMV -------------------------------------------------------------------------------------

// One input row: each output value is a dot product over K, so a workgroup takes 8 outputs and
// 32 threads split each one's K, eight weights per thread per step (a 16-byte read for F16, so a
// row's reads are contiguous across its threads). Each output's partial sums meet in `reduce_lanes`.
// A thread takes four steps at a time, their four loads issued before any product: a row has only
// K / 256 steps, and a loop that waits on each step's load leaves the GPU idle (drivers don't unroll
// naga's loops). The sum still runs over the steps in order, so the result is the same.
const GEMV_ROWS = 8u;
const GEMV_LANES = 32u;
const GEMV_STEP = 256u;  // GEMV_LANES * 8: the k a row's threads cover in one step

// Which of k .. k+3 lie inside the row (k < K).
fn in_row(k: u32) -> vec4<bool> {
    return vec4<u32>(k) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.k);
}

// a[k .. k+3], k a multiple of 4; values past K (the buffer holds whatever was there) become 0.
fn a4(k: u32) -> vec4<f32> {
    return select(vec4<f32>(0.0), a_vec[k / 4u], in_row(k));
}

// The row's mean and 1 / standard deviation (NORM), each workgroup computing them for itself:
// K values are little to read next to a workgroup's 8 rows of W. Two passes, as norm.wgsl does.
fn row_stats(inv: Invocation) -> vec2<f32> {
    var sum = vec4<f32>(0.0);
    for (var k = inv.lid * 4u; k < p.k; k += 1024u) {
        sum += a4(k);
    }
    let mean = reduce_sum(dot(sum, vec4<f32>(1.0)), inv) / f32(p.k);
    var squares = 0.0;
    for (var k = inv.lid * 4u; k < p.k; k += 1024u) {
        let d = select(vec4<f32>(0.0), a4(k) - mean, in_row(k));
        squares += dot(d, d);
    }
    return vec2<f32>(mean, inverseSqrt(reduce_sum(squares, inv) / f32(p.k) + p.eps));
}

// a4 after NORM: (a - mean) * rstd * w + b; zero past K.
fn normed4(k: u32, stats: vec2<f32>) -> vec4<f32> {
    if (NORM == 0u) {
        return a4(k);
    }
    var v = (a4(k) - stats.x) * stats.y * norm_w[k / 4u];
    if (NORM == 1u) {
        v += norm_b[k / 4u];
    }
    return select(vec4<f32>(0.0), v, in_row(k));
}

// One thread's step at k: its eight inputs (normalised as NORM says) times its eight weights.
fn gemv_step(k: u32, wv: Eight, stats: vec2<f32>) -> f32 {
    return dot(normed4(k, stats), wv.lo) + dot(normed4(k + 4u, stats), wv.hi);
}

@compute @workgroup_size(WG)
fn gemv(inv: Invocation) {
    let t = inv.lid;
    if (p.n == 0u) {  // an empty problem is the fast tier's probe (engine/gpu/fast.py)
        let seen = subgroup_layout(inv);
        c[2u * t] = seen.x;
        c[2u * t + 1u] = seen.y;
        return;
    }
    let lane = t % GEMV_LANES;
    let n = (inv.wid.x + inv.wid.y * inv.nwg.x) * GEMV_ROWS + t / GEMV_LANES;
    var stats = vec2<f32>(0.0);
    if (NORM != 0u) {
        stats = row_stats(inv);
    }
    var sum = 0.0;
    if (n < p.n) {
        var k = lane * 8u;
        for (; k + 3u * GEMV_STEP < p.k; k += 4u * GEMV_STEP) {
            let w0 = weights8(n, k);
            let w1 = weights8(n, k + GEMV_STEP);
            let w2 = weights8(n, k + 2u * GEMV_STEP);
            let w3 = weights8(n, k + 3u * GEMV_STEP);
            sum += gemv_step(k, w0, stats);
            sum += gemv_step(k + GEMV_STEP, w1, stats);
            sum += gemv_step(k + 2u * GEMV_STEP, w2, stats);
            sum += gemv_step(k + 3u * GEMV_STEP, w3, stats);
        }
        for (; k < p.k; k += GEMV_STEP) {
            sum += gemv_step(k, weights8(n, k), stats);
        }
    }
    let total = reduce_lanes(sum, GEMV_LANES, inv);
    if (lane == 0u && n < p.n) {
        c[n] = finish(total, 0u, n);
    }
}
