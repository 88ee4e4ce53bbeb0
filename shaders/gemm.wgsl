// Linear layers: c = act(a·Wᵀ + bias), then c = residual + alpha·c when a residual is given.
//
// Two entry points share the weight decoding and the epilogue: `gemm` (tiled, for M > 1) and
// `gemv` (one input row: the decoder's case, memory bound). Override constants pick the variant,
// so the compiler drops the branches a pipeline does not use:
//   WTYPE         0 F32, 1 F16, 2 Q8_0 (engine/gpu/tensors.py: GpuWeight's layouts)
//   ACT           0 none, 1 GELU (erf), 2 SiLU, 3 ReLU, 4 tanh, 5 square
//   HAS_BIAS      read `bias` [N]
//   HAS_RESIDUAL  read `residual` [M, N] and scale by alpha
//   NORM          gemv only: 0 none, 1 LayerNorm of the row with `norm_w` and `norm_b` first, 2 the
//                 same without a bias (a decoder step's norm then needs no dispatch of its own)
// `gemv` reduces with reduce_workgroup.wgsl or, in the fast tier, reduce_subgroup.wgsl, one of which
// comes before this file in a module (engine/gpu/entry_points.py).
// Bindings the variant does not read are still bound (the caller passes any buffer there), so every
// variant has the same layout.
//
// a is [M, K] unpadded: reads are bounds-checked. W is [n_pad, k_pad], zero-padded to 64 rows and
// 32 columns, so its reads need no checks; padded columns meet zeros from the guarded a reads.
// `gemv` reads a through `a_vec`, the same binding as vec4s (WGSL lets two variables share a
// binding when no entry point uses both): a [1, K] starts its buffer, so it is vec4-aligned.

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

// Eight values of tile row `row` at k offsets ks .. ks+7 into the shared tile starting at `tile`.
// Written out rather than looped so the values stay in registers.
fn put8(tile: u32, ks: u32, row: u32, e: Eight) {
    let at = tile + ks * VEC_PER_K + row / 4u;
    let lane = row % 4u;
    tiles[at][lane] = e.lo.x;
    tiles[at + VEC_PER_K][lane] = e.lo.y;
    tiles[at + 2u * VEC_PER_K][lane] = e.lo.z;
    tiles[at + 3u * VEC_PER_K][lane] = e.lo.w;
    tiles[at + 4u * VEC_PER_K][lane] = e.hi.x;
    tiles[at + 5u * VEC_PER_K][lane] = e.hi.y;
    tiles[at + 6u * VEC_PER_K][lane] = e.hi.z;
    tiles[at + 7u * VEC_PER_K][lane] = e.hi.w;
}

// c[m, n .. n+3] from a row of a micro-tile, skipping what lies outside [M, N].
fn store4(m: u32, n: u32, v: vec4<f32>) {
    if (m >= p.m) {
        return;
    }
    let at = m * p.n;
    if (n < p.n) { c[at + n] = finish(v.x, m, n); }
    if (n + 1u < p.n) { c[at + n + 1u] = finish(v.y, m, n + 1u); }
    if (n + 2u < p.n) { c[at + n + 2u] = finish(v.z, m, n + 2u); }
    if (n + 3u < p.n) { c[at + n + 3u] = finish(v.w, m, n + 3u); }
}

@compute @workgroup_size(256)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n0 = wid.x * TILE;
    let m0 = wid.y * TILE;
    // Loading: thread t fills row t%64 of both tiles at k offsets 8*(t/64) .. +7. Consecutive
    // threads take consecutive rows, so their stores into the k-major tiles hit distinct banks.
    let row = t % TILE;
    let ks = (t / TILE) * 8u;
    // Computing: rows 4*ty .. +3 and columns 4*tx .. +3 of the output tile, one accumulator per
    // row (separate variables, not an array, so no compiler puts them in local memory).
    let tx = t % VEC_PER_K;
    let ty = t / VEC_PER_K;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);

    for (var k0 = 0u; k0 < p.k; k0 += TILE_K) {
        put8(0u, ks, row, a8(m0 + row, k0 + ks));
        put8(W_TILE, ks, row, weights8(n0 + row, k0 + ks));
        workgroupBarrier();
        for (var k = 0u; k < TILE_K; k++) {
            let av = tiles[k * VEC_PER_K + ty];
            let bv = tiles[W_TILE + k * VEC_PER_K + tx];
            acc0 += av.x * bv;
            acc1 += av.y * bv;
            acc2 += av.z * bv;
            acc3 += av.w * bv;
        }
        workgroupBarrier();
    }

    let m = m0 + ty * 4u;
    let n = n0 + tx * 4u;
    store4(m, n, acc0);
    store4(m + 1u, n, acc1);
    store4(m + 2u, n, acc2);
    store4(m + 3u, n, acc3);
}

// ---- GEMV -------------------------------------------------------------------------------------

// One input row: each output value is a dot product over K, so a workgroup takes 8 outputs and
// 32 threads split each one's K, eight weights per thread per step (a 16-byte read for F16, so a
// row's reads are contiguous across its threads). Each output's partial sums meet in `reduce_lanes`.
const GEMV_ROWS = 8u;
const GEMV_LANES = 32u;

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
        for (var k = lane * 8u; k < p.k; k += GEMV_LANES * 8u) {
            let wv = weights8(n, k);
            sum += dot(normed4(k, stats), wv.lo) + dot(normed4(k + 4u, stats), wv.hi);
        }
    }
    let total = reduce_lanes(sum, GEMV_LANES, inv);
    if (lane == 0u && n < p.n) {
        c[n] = finish(total, 0u, n);
    }
}
