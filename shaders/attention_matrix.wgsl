// Flash attention on subgroup matrices, for encoders (the fast tier, through Dawn's
// chromium_experimental_subgroup_matrix): no mask, no relative positions, head_dim 64 (Whisper's;
// engine/gpu/ops/attention.py picks it). Parameters, bindings and each workgroup's query block come
// from attention_blocks.wgsl, before this file in a module.
//
// A workgroup of 128 invocations, four subgroups of 32 (the probe checks the size and that lane is
// invocation % 32), takes 64 query rows of one head, 16 a subgroup, and walks the keys in blocks of
// 32 staged in workgroup memory as f16. A subgroup's 16 rows stay loaded as four left matrices (q
// times the scale, rounded to f16); per block it
//   1. scores its rows against the block's keys (QKᵀ: two 16x16 results, f32),
//   2. takes each row's running softmax, two lanes a row (16 keys each, the pair met by a shuffle),
//      writing the block's weights P as f16 and rescaling the row's output by exp(m_old - m_new),
//   3. adds P·V (four 16x16 results) to the output that each lane keeps for half a row.
// The rescaling is why the output stays in the lanes' registers and P·V goes through a scratch: a
// subgroup matrix has no per-row scaling.
// With every parameter 0 (the fast tier's probe) each invocation writes its subgroup size and lane
// to out[invocation] instead.

enable f16;
enable chromium_experimental_subgroup_matrix;
// Each subgroup loads and stores its own tiles, at offsets that differ between subgroups but not within
// one; Tint's uniformity analysis can only see that they differ across the workgroup.
diagnostic(off, chromium.subgroup_matrix_uniformity);

const QUADS: u32 = 16u;  // head_dim / 4, as attention_blocks.wgsl reads it
const DH: u32 = 64u;
const QROWS: u32 = 64u;  // query rows a workgroup, 16 a subgroup
const KEYS: u32 = 32u;  // keys a block
const V_AT: u32 = 2048u;  // where the block's V starts in kv
const NEG: f32 = -3.0e38;  // below any score: exp(NEG - m) is exactly 0 for any finite row max m

var<workgroup> kv: array<f16, 4096>;  // the block's K [32 keys][64] then V [32][64]; first, the block's Q [64][64]
var<workgroup> scratch: array<f32, 4096>;  // 1024 a subgroup: its scores [16][32], then its P·V [16][64]
var<workgroup> weights: array<f16, 2048>;  // 512 a subgroup: its P [16][32]

alias AttLeft = subgroup_matrix_left<f16, 16, 16>;
alias AttRight = subgroup_matrix_right<f16, 16, 16>;
alias AttResult = subgroup_matrix_result<f32, 16, 16>;

fn put_half4(at: u32, v: vec4<f32>) {
    let h = vec4<f16>(v);
    kv[at] = h.x;
    kv[at + 1u] = h.y;
    kv[at + 2u] = h.z;
    kv[at + 3u] = h.w;
}

fn scratch4(at: u32) -> vec4<f32> {
    return vec4<f32>(scratch[at], scratch[at + 1u], scratch[at + 2u], scratch[at + 3u]);
}

@compute @workgroup_size(128)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    if (p.groups == 0u) {  // the probe
        out[tid / 2u][2u * (tid % 2u)] = f32(sg_size);
        out[tid / 2u][2u * (tid % 2u) + 1u] = f32(lane);
        return;
    }
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.groups) {
        return;  // the grid's last row may be partly empty; uniform for the whole workgroup
    }
    let block = query_block(group, QROWS);
    let sg = tid / 32u;
    let row = lane / 2u;  // the lane's row of the subgroup's 16
    let side = lane % 2u;  // and which half of that row: keys side*16.. of a block, output columns side*32..

    for (var i = 0u; i < 8u; i++) {  // Q: 64 rows of 16 quads, eight quads an invocation
        let e = tid + i * 128u;
        let r = block.q0 + e / QUADS;
        let at = block.q_base + min(r, p.tq - 1u) * block.row_quads + e % QUADS;
        put_half4(4u * e, select(vec4<f32>(0.0), q[at] * p.scale, r < p.tq));
    }
    workgroupBarrier();
    let q_at = sg * 16u * DH;
    let q0 = subgroupMatrixLoad<AttLeft>(&kv, q_at, false, DH);
    let q1 = subgroupMatrixLoad<AttLeft>(&kv, q_at + 16u, false, DH);
    let q2 = subgroupMatrixLoad<AttLeft>(&kv, q_at + 32u, false, DH);
    let q3 = subgroupMatrixLoad<AttLeft>(&kv, q_at + 48u, false, DH);

    let mine = sg * 1024u;  // the subgroup's scratch
    let my_weights = sg * 512u;
    var m = NEG;
    var l = 0.0;
    var o: array<vec4<f32>, 8>;  // the lane's half row of the output: columns side*32 .. +31
    for (var kb = 0u; kb < p.tk; kb += KEYS) {
        workgroupBarrier();  // kv (Q, or the last block) and the scratch are no longer read
        for (var i = 0u; i < 4u; i++) {  // K and V: 32 keys of 16 quads, four quads of each an invocation
            let e = tid + i * 128u;
            let key = min(kb + e / QUADS, p.tk - 1u);  // a key past Tk is staged as the last one and weighted 0
            let at = block.k_base + key * block.row_quads + e % QUADS;
            put_half4(4u * e, k[at]);
            put_half4(V_AT + 4u * e, v[at]);
        }
        workgroupBarrier();

        // 1. Scores: K's rows [key][d] read column-major are Kᵀ.
        var s0: AttResult;
        var s1: AttResult;
        s0 = subgroupMatrixMultiplyAccumulate(q0, subgroupMatrixLoad<AttRight>(&kv, 0u, true, DH), s0);
        s0 = subgroupMatrixMultiplyAccumulate(q1, subgroupMatrixLoad<AttRight>(&kv, 16u, true, DH), s0);
        s0 = subgroupMatrixMultiplyAccumulate(q2, subgroupMatrixLoad<AttRight>(&kv, 32u, true, DH), s0);
        s0 = subgroupMatrixMultiplyAccumulate(q3, subgroupMatrixLoad<AttRight>(&kv, 48u, true, DH), s0);
        s1 = subgroupMatrixMultiplyAccumulate(q0, subgroupMatrixLoad<AttRight>(&kv, 16u * DH, true, DH), s1);
        s1 = subgroupMatrixMultiplyAccumulate(q1, subgroupMatrixLoad<AttRight>(&kv, 16u * DH + 16u, true, DH), s1);
        s1 = subgroupMatrixMultiplyAccumulate(q2, subgroupMatrixLoad<AttRight>(&kv, 16u * DH + 32u, true, DH), s1);
        s1 = subgroupMatrixMultiplyAccumulate(q3, subgroupMatrixLoad<AttRight>(&kv, 16u * DH + 48u, true, DH), s1);
        subgroupMatrixStore(&scratch, mine, s0, false, KEYS);
        subgroupMatrixStore(&scratch, mine + 16u, s1, false, KEYS);
        workgroupBarrier();

        // 2. The running softmax of the lane's row, over its 16 keys and its partner's.
        let scores = mine + row * KEYS + side * 16u;
        let first = kb + side * 16u;
        var block_max = NEG;
        for (var j = 0u; j < 16u; j++) {
            block_max = max(block_max, select(NEG, scratch[scores + j], first + j < p.tk));
        }
        let m_new = max(m, max(block_max, subgroupShuffleXor(block_max, 1u)));  // finite: key kb < Tk
        let rescale = exp(m - m_new);
        var sum = 0.0;
        for (var j = 0u; j < 16u; j++) {
            let w = select(0.0, exp(scratch[scores + j] - m_new), first + j < p.tk);
            sum += w;
            weights[my_weights + row * KEYS + side * 16u + j] = f16(w);
        }
        l = l * rescale + sum + subgroupShuffleXor(sum, 1u);
        m = m_new;
        for (var c = 0u; c < 8u; c++) {
            o[c] *= rescale;
        }
        workgroupBarrier();

        // 3. P·V: V's rows [key][d] read row-major, one 16x16 result per 16 output columns.
        let p0 = subgroupMatrixLoad<AttLeft>(&weights, my_weights, false, KEYS);
        let p1 = subgroupMatrixLoad<AttLeft>(&weights, my_weights + 16u, false, KEYS);
        for (var t = 0u; t < 4u; t++) {
            var pv: AttResult;
            pv = subgroupMatrixMultiplyAccumulate(p0, subgroupMatrixLoad<AttRight>(&kv, V_AT + 16u * t, false, DH), pv);
            pv = subgroupMatrixMultiplyAccumulate(p1, subgroupMatrixLoad<AttRight>(&kv, V_AT + 16u * DH + 16u * t, false, DH),
                                                  pv);
            subgroupMatrixStore(&scratch, mine + 16u * t, pv, false, DH);
        }
        workgroupBarrier();
        let sums = mine + row * DH + side * 32u;
        for (var c = 0u; c < 8u; c++) {
            o[c] += scratch4(sums + 4u * c);
        }
    }

    let r = block.q0 + sg * 16u + row;
    if (r < p.tq) {
        for (var c = 0u; c < 8u; c++) {
            out[block.q_base + r * block.row_quads + side * 8u + c] = o[c] / l;
        }
    }
}
