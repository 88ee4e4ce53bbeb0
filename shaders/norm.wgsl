// Normalisations: LayerNorm and softmax over rows, GroupNorm over time-major [T, C] (see
// engine/gpu/ops/norm.py). Row kernels give each row one workgroup and reduce with reduce_workgroup.wgsl
// or, in the fast tier, reduce_subgroup.wgsl, one of which comes before this file in a module;
// statistics are taken in two passes (mean, then squared deviations) like numpy, because a
// one-pass E[x²] - E[x]² loses digits on rows with a large mean.
// Entry points reuse binding numbers for different buffers; each kernel's comment lists its own.

override WG: u32 = 256u;      // threads per workgroup, a power of two
override HAS_W: bool = true;  // layer_norm: scale by w (else binding 2 is a dummy)
override HAS_B: bool = true;  // layer_norm: add b (else binding 3 is a dummy)

// The lowest finite f32 rather than -inf: WGSL has no infinity literal. A row of -inf still gives NaN,
// as in numpy. Written in hex, exactly: a decimal rounded up past it (-3.4028235e38) is no f32 to Tint.
const LOWEST: f32 = -0x1.fffffep+127f;

// The linear workgroup index of a dispatch spread over x and y by recorder.grid().
fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// ---- row kernels: layer_norm, softmax ------------------------------------------------------------

// layer_norm: x [rows, cols] at 1, w [cols] at 2, b [cols] at 3, out at 4.
// softmax: x at 1, out at 2.
struct RowParams { rows: u32, cols: u32, eps: f32 }
@group(0) @binding(0) var<uniform> rp: RowParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> ln_out: array<f32>;
@group(0) @binding(2) var<storage, read_write> sm_out: array<f32>;

@compute @workgroup_size(WG)
fn layer_norm(inv: Invocation) {
    let lid = inv.lid;
    if (rp.rows == 0u) {  // an empty problem is the fast tier's probe (engine/gpu/fast.py)
        let seen = subgroup_layout(inv);
        ln_out[2u * lid] = seen.x;
        ln_out[2u * lid + 1u] = seen.y;
        return;
    }
    let row = workgroup_index(inv);
    if (row >= rp.rows) { return; }  // workgroup-uniform, so the barriers below stay uniform
    let start = row * rp.cols;
    var sum = 0.0;
    for (var i = lid; i < rp.cols; i += WG) { sum += x[start + i]; }
    let mean = reduce_sum(sum, inv) / f32(rp.cols);
    var squares = 0.0;
    for (var i = lid; i < rp.cols; i += WG) {
        let d = x[start + i] - mean;
        squares += d * d;
    }
    let rstd = inverseSqrt(reduce_sum(squares, inv) / f32(rp.cols) + rp.eps);
    for (var i = lid; i < rp.cols; i += WG) {
        var y = (x[start + i] - mean) * rstd;
        if (HAS_W) { y *= w[i]; }
        if (HAS_B) { y += b[i]; }
        ln_out[start + i] = y;
    }
}

@compute @workgroup_size(WG)
fn softmax(inv: Invocation) {
    let lid = inv.lid;
    if (rp.rows == 0u) {  // the probe, as in layer_norm
        let seen = subgroup_layout(inv);
        sm_out[2u * lid] = seen.x;
        sm_out[2u * lid + 1u] = seen.y;
        return;
    }
    let row = workgroup_index(inv);
    if (row >= rp.rows) { return; }
    let start = row * rp.cols;
    var top = LOWEST;
    for (var i = lid; i < rp.cols; i += WG) { top = max(top, x[start + i]); }
    top = reduce_max(top, inv);  // subtracting the row max keeps exp() from overflowing
    var sum = 0.0;
    for (var i = lid; i < rp.cols; i += WG) { sum += exp(x[start + i] - top); }
    let scale = 1.0 / reduce_sum(sum, inv);
    for (var i = lid; i < rp.cols; i += WG) {
        sm_out[start + i] = exp(x[start + i] - top) * scale;
    }
}

// ---- group_norm -----------------------------------------------------------------------------------
// A group of x [T, C] is the T×Cg block of columns g*Cg .. (g+1)*Cg: up to T*Cg values (624k for
// Moonshine's stem), too many for one workgroup to fill a GPU. So the group is cut into chunks:
// group_stats reduces each chunk to (count, mean, M2) with the two-pass method, group_combine
// merges a group's chunks with Chan's pairwise formula (as accurate as one long two-pass) into
// (mean, 1/std), and group_apply normalises every element with its channel's affine.

struct GroupParams {
    t: u32,       // rows of x
    c: u32,       // channels of x
    groups: u32,
    cg: u32,      // channels per group
    n: u32,       // values per group: t * cg
    chunk: u32,   // values per chunk
    chunks: u32,  // chunks per group
    eps: f32,
}
@group(0) @binding(0) var<uniform> gp: GroupParams;
// group_stats: x at 1, partials [groups * chunks, 4] (count, mean, M2, unused) at 2.
@group(0) @binding(2) var<storage, read_write> partials_out: array<vec4<f32>>;
// group_combine: partials at 1, stats [groups, 2] (mean, 1/std) at 2.
@group(0) @binding(1) var<storage, read> partials: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> stats_out: array<vec2<f32>>;
// group_apply: x at 1, stats at 2, w [C] at 3, b [C] at 4, out [T, C] at 5.
@group(0) @binding(2) var<storage, read> stats: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> gw: array<f32>;
@group(0) @binding(4) var<storage, read> gb: array<f32>;
@group(0) @binding(5) var<storage, read_write> gn_out: array<f32>;

// Where value i (row-major within the group's T×Cg block) of group g sits in x.
fn group_value(g: u32, i: u32) -> f32 {
    return x[(i / gp.cg) * gp.c + g * gp.cg + i % gp.cg];
}

@compute @workgroup_size(WG)
fn group_stats(inv: Invocation) {
    let lid = inv.lid;
    let index = workgroup_index(inv);
    if (index >= gp.groups * gp.chunks) { return; }
    let g = index / gp.chunks;
    let first = (index % gp.chunks) * gp.chunk;
    let end = min(first + gp.chunk, gp.n);
    let count = f32(end - first);
    var sum = 0.0;
    for (var i = first + lid; i < end; i += WG) { sum += group_value(g, i); }
    let mean = reduce_sum(sum, inv) / count;
    var squares = 0.0;
    for (var i = first + lid; i < end; i += WG) {
        let d = group_value(g, i) - mean;
        squares += d * d;
    }
    let m2 = reduce_sum(squares, inv);
    if (lid == 0u) {
        partials_out[index] = vec4<f32>(count, mean, m2, 0.0);
    }
}

@compute @workgroup_size(64)
fn group_combine(@builtin(global_invocation_id) gid: vec3<u32>) {
    let g = gid.x;
    if (g >= gp.groups) { return; }
    var count = 0.0;
    var mean = 0.0;
    var m2 = 0.0;
    for (var s = 0u; s < gp.chunks; s++) {
        let part = partials[g * gp.chunks + s];
        let total = count + part.x;
        let delta = part.y - mean;
        mean += delta * (part.x / total);
        m2 += part.z + delta * delta * (count * part.x / total);
        count = total;
    }
    stats_out[g] = vec2<f32>(mean, inverseSqrt(m2 / count + gp.eps));
}

@compute @workgroup_size(WG)
fn group_apply(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wid, nwg) * WG + lid;
    if (i >= gp.t * gp.c) { return; }
    let ch = i % gp.c;
    let s = stats[ch / gp.cg];
    gn_out[i] = (x[i] - s.x) * s.y * gw[ch] + gb[ch];
}
