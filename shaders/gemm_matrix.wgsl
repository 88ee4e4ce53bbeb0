// GEMM on subgroup matrices (the tensor cores, through Dawn's chromium_experimental_subgroup_matrix):
// c = act(a·Wᵀ + bias), then residual + alpha·c, as `gemm` in gemm.wgsl, after which this file comes in
// a module (its weight decoding `w_raw16` / `decode16`, its guarded `a_quad` and its epilogue `finish`).
//
// A workgroup of 128 invocations, four subgroups of 32 (the probe checks the size and that lane is
// invocation % 32), computes a 128x128 tile of c: each subgroup a 64x64 quarter as 4x4 result matrices
// of 16x16, f16 x f16 products accumulated in f32. K goes in steps of 32 (one Q8_0 block): all 128
// invocations decode a step's A rows and W rows to f16 in workgroup memory, then each subgroup loads
// its left matrices (A, row-major) and right ones (W's rows read column-major: Wᵀ) from there. More
// result matrices a subgroup reuse each loaded matrix (4 products a load), and four subgroups share a
// step's decoding.
// Results leave through a 16x16 f32 scratch per subgroup, from which its lanes apply the epilogue and
// keep c's bounds; a and W are read guarded as in `gemm_large`, so any M, N and K are right.
// With every parameter 0 (the fast tier's probe) each invocation writes its subgroup size and lane
// to c[invocation] instead.

enable f16;
enable chromium_experimental_subgroup_matrix;
// Each subgroup loads and stores its own tiles, at offsets that differ between subgroups but not within
// one; Tint's uniformity analysis can only see that they differ across the workgroup.
diagnostic(off, chromium.subgroup_matrix_uniformity);

const MX_TILE = 128u;
const MX_K = 32u;
var<workgroup> mx_a: array<f16, 4096>;    // the step's A tile, [128 rows][32 k]
var<workgroup> mx_w: array<f16, 4096>;    // the step's W tile, [128 rows of W][32 k]
var<workgroup> mx_out: array<f32, 1024>;  // one 16x16 result a subgroup, on its way to c

alias MxLeft = subgroup_matrix_left<f16, 16, 16>;
alias MxRight = subgroup_matrix_right<f16, 16, 16>;
alias MxResult = subgroup_matrix_result<f32, 16, 16>;

// A[m0 .. m0+127, k0 .. k0+31] into mx_a: 1024 quads, eight an invocation, consecutive invocations
// on consecutive quads of a row (contiguous reads, and writes that don't collide in banks).
fn mx_stage_a(t: u32, m0: u32, k0: u32) {
    for (var i = 0u; i < 8u; i++) {
        let quad = t + i * 128u;
        let row = quad / 8u;
        let k = (quad % 8u) * 4u;
        let v = vec4<f16>(a_quad(m0 + row, k0 + k));
        let at = row * MX_K + k;
        mx_a[at] = v.x;
        mx_a[at + 1u] = v.y;
        mx_a[at + 2u] = v.z;
        mx_a[at + 3u] = v.w;
    }
}

// W[n0 .. n0+127, k0 .. k0+31] into mx_w: 256 runs of 16 weights, two an invocation.
fn mx_stage_w(t: u32, n0: u32, k0: u32) {
    for (var i = 0u; i < 2u; i++) {
        let run = t + i * 128u;
        let row = run / 2u;
        let k = (run % 2u) * 16u;
        let e = decode16(k0 + k, w_raw16(n0 + row, k0 + k));
        let at = row * MX_K + k;
        mx_put4(at, vec4<f16>(e.e0));
        mx_put4(at + 4u, vec4<f16>(e.e1));
        mx_put4(at + 8u, vec4<f16>(e.e2));
        mx_put4(at + 12u, vec4<f16>(e.e3));
    }
}

fn mx_put4(at: u32, v: vec4<f16>) {
    mx_w[at] = v.x;
    mx_w[at + 1u] = v.y;
    mx_w[at + 2u] = v.z;
    mx_w[at + 3u] = v.w;
}

// The 16x16 result in the subgroup's scratch, for rows m .. m+15 and columns n .. n+15 of c: lane
// `lane` takes half a row (eight values) through the epilogue.
fn mx_finish(sg: u32, lane: u32, m: u32, n: u32) {
    let row = m + lane / 2u;
    let first = n + (lane % 2u) * 8u;
    let start = sg * 256u + (lane / 2u) * 16u + (lane % 2u) * 8u;
    for (var e = 0u; e < 8u; e++) {
        if (row < p.m && first + e < p.n) {
            c[row * p.n + first + e] = finish(mx_out[start + e], row, first + e);
        }
    }
}

@compute @workgroup_size(128)
fn gemm_matrix(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
               @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
    if (p.m == 0u) {  // the probe
        c[2u * t] = f32(sg_size);
        c[2u * t + 1u] = f32(lane);
        return;
    }
    let n0 = wid.x * MX_TILE;
    let m0 = wid.y * MX_TILE;
    let sg = t / 32u;
    let a_at = (sg / 2u) * 64u * MX_K;  // the subgroup's first A row in mx_a
    let w_at = (sg % 2u) * 64u * MX_K;  // and its first W row in mx_w
    var r00: MxResult;
    var r01: MxResult;
    var r02: MxResult;
    var r03: MxResult;
    var r10: MxResult;
    var r11: MxResult;
    var r12: MxResult;
    var r13: MxResult;
    var r20: MxResult;
    var r21: MxResult;
    var r22: MxResult;
    var r23: MxResult;
    var r30: MxResult;
    var r31: MxResult;
    var r32: MxResult;
    var r33: MxResult;
    for (var k0 = 0u; k0 < p.k; k0 += MX_K) {
        mx_stage_a(t, m0, k0);
        mx_stage_w(t, n0, k0);
        workgroupBarrier();
        for (var kk = 0u; kk < MX_K; kk += 16u) {
            let l0 = subgroupMatrixLoad<MxLeft>(&mx_a, a_at + kk, false, MX_K);
            let l1 = subgroupMatrixLoad<MxLeft>(&mx_a, a_at + 16u * MX_K + kk, false, MX_K);
            let l2 = subgroupMatrixLoad<MxLeft>(&mx_a, a_at + 32u * MX_K + kk, false, MX_K);
            let l3 = subgroupMatrixLoad<MxLeft>(&mx_a, a_at + 48u * MX_K + kk, false, MX_K);
            let q0 = subgroupMatrixLoad<MxRight>(&mx_w, w_at + kk, true, MX_K);
            let q1 = subgroupMatrixLoad<MxRight>(&mx_w, w_at + 16u * MX_K + kk, true, MX_K);
            let q2 = subgroupMatrixLoad<MxRight>(&mx_w, w_at + 32u * MX_K + kk, true, MX_K);
            let q3 = subgroupMatrixLoad<MxRight>(&mx_w, w_at + 48u * MX_K + kk, true, MX_K);
            r00 = subgroupMatrixMultiplyAccumulate(l0, q0, r00);
            r01 = subgroupMatrixMultiplyAccumulate(l0, q1, r01);
            r02 = subgroupMatrixMultiplyAccumulate(l0, q2, r02);
            r03 = subgroupMatrixMultiplyAccumulate(l0, q3, r03);
            r10 = subgroupMatrixMultiplyAccumulate(l1, q0, r10);
            r11 = subgroupMatrixMultiplyAccumulate(l1, q1, r11);
            r12 = subgroupMatrixMultiplyAccumulate(l1, q2, r12);
            r13 = subgroupMatrixMultiplyAccumulate(l1, q3, r13);
            r20 = subgroupMatrixMultiplyAccumulate(l2, q0, r20);
            r21 = subgroupMatrixMultiplyAccumulate(l2, q1, r21);
            r22 = subgroupMatrixMultiplyAccumulate(l2, q2, r22);
            r23 = subgroupMatrixMultiplyAccumulate(l2, q3, r23);
            r30 = subgroupMatrixMultiplyAccumulate(l3, q0, r30);
            r31 = subgroupMatrixMultiplyAccumulate(l3, q1, r31);
            r32 = subgroupMatrixMultiplyAccumulate(l3, q2, r32);
            r33 = subgroupMatrixMultiplyAccumulate(l3, q3, r33);
        }
        workgroupBarrier();
    }

    // Each result through the scratch: stored by the subgroup, then read back by its lanes.
    let m = m0 + (sg / 2u) * 64u;
    let n = n0 + (sg % 2u) * 64u;
    let out = sg * 256u;
    subgroupMatrixStore(&mx_out, out, r00, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m, n);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r01, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m, n + 16u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r02, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m, n + 32u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r03, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m, n + 48u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r10, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 16u, n);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r11, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 16u, n + 16u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r12, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 16u, n + 32u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r13, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 16u, n + 48u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r20, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 32u, n);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r21, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 32u, n + 16u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r22, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 32u, n + 32u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r23, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 32u, n + 48u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r30, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 48u, n);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r31, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 48u, n + 16u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r32, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 48u, n + 32u);
    workgroupBarrier();
    subgroupMatrixStore(&mx_out, out, r33, false, 16u);
    workgroupBarrier();
    mx_finish(sg, lane, m + 48u, n + 48u);
}
