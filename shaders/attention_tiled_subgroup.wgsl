// The fast tier's encoder attention (engine/gpu/entry_points.py: ATTENTION_TILED_SUBGROUP): what
// attention_tiled.wgsl computes, for the same inputs and Params, with twice its query rows per
// workgroup and each row's max found in registers.
//
// One workgroup of 16 x 16 threads per (head, block of 64 query rows). Thread (ty, tx) scores rows
// ty, ty + 16, ty + 32 and ty + 48 against keys tx and tx + 16 of a block of BK = 32, so each K quad
// and V quad read from workgroup memory serves 4 rows, not 2, and K and V are staged once per 64
// rows. The 16 threads of a row group are 16 consecutive lanes of one subgroup, so subgroupShuffleXor
// with masks 1, 2, 4 and 8 gives each the row max with no score tile and no barrier; each thread
// then exponentiates only its own 8 scores and writes them to p_tile, and thread tx < QUADS owns output
// quad tx of its 4 rows. Three barriers per key block.
//
// It needs subgroups of 16 or more invocations with lane = local_invocation_index % size: the probe
// (engine/gpu/fast.py) checks that, and an empty problem (groups = 0) writes what it saw into `out`.
// Workgroup memory at head_dim 64: 41472 bytes (attention.py checks the device has them; a device
// with less runs attention_tiled.wgsl).

override HEAD_DIM: u32 = 16u; // set by every dispatch; the probe's default fits any device
override QUADS: u32 = HEAD_DIM / 4u;
override K_STRIDE: u32 = QUADS | 1u;

const BK: u32 = 32u; // keys per block: tx and tx + 16
const ROWS_WG: u32 = 64u; // query rows per workgroup: ty + 16a, a = 0..3
const PQ: u32 = BK / 4u; // vec4s per row of scores or p
const THREADS: u32 = 256u;
const NEG: f32 = -3.0e38;

var<workgroup> q_tile: array<vec4<f32>, ROWS_WG * QUADS>;
var<workgroup> k_tile: array<vec4<f32>, BK * K_STRIDE>;
var<workgroup> v_tile: array<vec4<f32>, BK * QUADS>;
var<workgroup> p_tile: array<vec4<f32>, ROWS_WG * PQ>; // p (r, j) at [r * PQ + j / 4][j % 4]

fn sum4(x: vec4<f32>) -> f32 {
    return (x.x + x.y) + (x.z + x.w);
}

// The max of x over the 16 lanes of this thread's row group (all of them call it: uniform flow).
fn group_max(x: f32) -> f32 {
    var y = max(x, subgroupShuffleXor(x, 1u));
    y = max(y, subgroupShuffleXor(y, 2u));
    y = max(y, subgroupShuffleXor(y, 4u));
    return max(y, subgroupShuffleXor(y, 8u));
}

fn row_max(x: vec2<f32>) -> f32 {
    return group_max(max(x.x, x.y));
}

fn put_p(r: u32, lo: u32, comp: u32, x: vec2<f32>) {
    p_tile[r * PQ + lo][comp] = x.x;
    p_tile[r * PQ + lo + 4u][comp] = x.y;
}

fn scores(qa: vec4<f32>, k_lo: vec4<f32>, k_hi: vec4<f32>) -> vec2<f32> {
    return vec2<f32>(dot(qa, k_lo), dot(qa, k_hi));
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_size) subgroup_size: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    if (p.groups == 0u) {  // the probe: (subgroup size, lane) of each invocation
        out[tid / 2u][2u * (tid % 2u)] = f32(subgroup_size);
        out[tid / 2u][2u * (tid % 2u) + 1u] = f32(lane);
        return;
    }
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.groups) {
        return; // the grid's last row may be partly empty; uniform for the whole workgroup
    }
    let block = query_block(group, ROWS_WG);
    let tx = tid % 16u;
    let ty = tid / 16u;

    for (var e = tid; e < ROWS_WG * QUADS; e += THREADS) {
        let row = block.q0 + e / QUADS;
        let at = block.q_base + min(row, p.tq - 1u) * block.row_quads + e % QUADS;
        q_tile[e] = select(vec4<f32>(0.0), q[at], row < p.tq);
    }

    let r0 = ty;
    let r1 = ty + 16u;
    let r2 = ty + 32u;
    let r3 = ty + 48u;
    let lo = tx / 4u; // keys tx and tx + 16 in a row: [lo][comp] and [lo + 4][comp]
    let comp = tx % 4u;

    var m = vec4<f32>(NEG); // running max of rows r0 .. r3 (x .. w)
    var l = vec4<f32>(0.0);
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);

    for (var kb = 0u; kb < p.tk; kb += BK) {
        workgroupBarrier(); // the previous block's p_tile and v_tile are no longer read
        for (var e = tid; e < BK * QUADS; e += THREADS) {
            let j = e / QUADS;
            let c = e % QUADS;
            let key = min(kb + j, p.tk - 1u);
            k_tile[j * K_STRIDE + c] = k[block.k_base + key * block.row_quads + c];
            v_tile[e] = v[block.k_base + key * block.row_quads + c];
        }
        workgroupBarrier();

        var s0 = vec2<f32>(0.0); // row r0, keys tx (x) and tx + 16 (y)
        var s1 = vec2<f32>(0.0);
        var s2 = vec2<f32>(0.0);
        var s3 = vec2<f32>(0.0);
        // Four quads a pass, then the rest one by one: drivers don't unroll naga's loops, and a pass
        // per quad spent as much on the loop as on the products. The sums keep their order.
        var c = 0u;
        for (; c + 3u < QUADS; c += 4u) {
            var k_lo: vec4<f32>;
            var k_hi: vec4<f32>;
            k_lo = k_tile[tx * K_STRIDE + c + 0u];
            k_hi = k_tile[(tx + 16u) * K_STRIDE + c + 0u];
            s0 += scores(q_tile[r0 * QUADS + c + 0u], k_lo, k_hi);
            s1 += scores(q_tile[r1 * QUADS + c + 0u], k_lo, k_hi);
            s2 += scores(q_tile[r2 * QUADS + c + 0u], k_lo, k_hi);
            s3 += scores(q_tile[r3 * QUADS + c + 0u], k_lo, k_hi);
            k_lo = k_tile[tx * K_STRIDE + c + 1u];
            k_hi = k_tile[(tx + 16u) * K_STRIDE + c + 1u];
            s0 += scores(q_tile[r0 * QUADS + c + 1u], k_lo, k_hi);
            s1 += scores(q_tile[r1 * QUADS + c + 1u], k_lo, k_hi);
            s2 += scores(q_tile[r2 * QUADS + c + 1u], k_lo, k_hi);
            s3 += scores(q_tile[r3 * QUADS + c + 1u], k_lo, k_hi);
            k_lo = k_tile[tx * K_STRIDE + c + 2u];
            k_hi = k_tile[(tx + 16u) * K_STRIDE + c + 2u];
            s0 += scores(q_tile[r0 * QUADS + c + 2u], k_lo, k_hi);
            s1 += scores(q_tile[r1 * QUADS + c + 2u], k_lo, k_hi);
            s2 += scores(q_tile[r2 * QUADS + c + 2u], k_lo, k_hi);
            s3 += scores(q_tile[r3 * QUADS + c + 2u], k_lo, k_hi);
            k_lo = k_tile[tx * K_STRIDE + c + 3u];
            k_hi = k_tile[(tx + 16u) * K_STRIDE + c + 3u];
            s0 += scores(q_tile[r0 * QUADS + c + 3u], k_lo, k_hi);
            s1 += scores(q_tile[r1 * QUADS + c + 3u], k_lo, k_hi);
            s2 += scores(q_tile[r2 * QUADS + c + 3u], k_lo, k_hi);
            s3 += scores(q_tile[r3 * QUADS + c + 3u], k_lo, k_hi);
        }
        for (; c < QUADS; c++) {
            let k_lo = k_tile[tx * K_STRIDE + c];
            let k_hi = k_tile[(tx + 16u) * K_STRIDE + c];
            s0 += scores(q_tile[r0 * QUADS + c], k_lo, k_hi);
            s1 += scores(q_tile[r1 * QUADS + c], k_lo, k_hi);
            s2 += scores(q_tile[r2 * QUADS + c], k_lo, k_hi);
            s3 += scores(q_tile[r3 * QUADS + c], k_lo, k_hi);
        }
        let valid = vec2<bool>(kb + tx < p.tk, kb + tx + 16u < p.tk);
        s0 = select(vec2<f32>(NEG), s0 * p.scale, valid);
        s1 = select(vec2<f32>(NEG), s1 * p.scale, valid);
        s2 = select(vec2<f32>(NEG), s2 * p.scale, valid);
        s3 = select(vec2<f32>(NEG), s3 * p.scale, valid);
        // no barrier: the row max comes from the row group's lanes, in registers
        let m_new = max(m, vec4<f32>(row_max(s0), row_max(s1), row_max(s2), row_max(s3)));
        let correction = exp(m - m_new);
        m = m_new;
        put_p(r0, lo, comp, exp(s0 - m_new.x));
        put_p(r1, lo, comp, exp(s1 - m_new.y));
        put_p(r2, lo, comp, exp(s2 - m_new.z));
        put_p(r3, lo, comp, exp(s3 - m_new.w));
        workgroupBarrier(); // p written (and K no longer read)

        if (tx < QUADS) {
            var sum0 = vec4<f32>(0.0);
            var sum1 = vec4<f32>(0.0);
            var sum2 = vec4<f32>(0.0);
            var sum3 = vec4<f32>(0.0);
            var b0 = vec4<f32>(0.0);
            var b1 = vec4<f32>(0.0);
            var b2 = vec4<f32>(0.0);
            var b3 = vec4<f32>(0.0);
            for (var i = 0u; i < PQ; i += 2u) {  // two quads of keys a pass, for the same reason
                var va: vec4<f32>;
                var vb: vec4<f32>;
                var vc: vec4<f32>;
                var vd: vec4<f32>;
                var p0: vec4<f32>;
                var p1: vec4<f32>;
                var p2: vec4<f32>;
                var p3: vec4<f32>;
                va = v_tile[(4u * i + 0u) * QUADS + tx];
                vb = v_tile[(4u * i + 1u) * QUADS + tx];
                vc = v_tile[(4u * i + 2u) * QUADS + tx];
                vd = v_tile[(4u * i + 3u) * QUADS + tx];
                p0 = p_tile[r0 * PQ + i + 0u]; // p of keys 4(i + 0) .. 4(i + 0) + 3
                p1 = p_tile[r1 * PQ + i + 0u];
                p2 = p_tile[r2 * PQ + i + 0u];
                p3 = p_tile[r3 * PQ + i + 0u];
                sum0 += p0;
                sum1 += p1;
                sum2 += p2;
                sum3 += p3;
                b0 += p0.x * va + p0.y * vb + p0.z * vc + p0.w * vd;
                b1 += p1.x * va + p1.y * vb + p1.z * vc + p1.w * vd;
                b2 += p2.x * va + p2.y * vb + p2.z * vc + p2.w * vd;
                b3 += p3.x * va + p3.y * vb + p3.z * vc + p3.w * vd;
                va = v_tile[(4u * i + 4u) * QUADS + tx];
                vb = v_tile[(4u * i + 5u) * QUADS + tx];
                vc = v_tile[(4u * i + 6u) * QUADS + tx];
                vd = v_tile[(4u * i + 7u) * QUADS + tx];
                p0 = p_tile[r0 * PQ + i + 1u]; // p of keys 4(i + 1) .. 4(i + 1) + 3
                p1 = p_tile[r1 * PQ + i + 1u];
                p2 = p_tile[r2 * PQ + i + 1u];
                p3 = p_tile[r3 * PQ + i + 1u];
                sum0 += p0;
                sum1 += p1;
                sum2 += p2;
                sum3 += p3;
                b0 += p0.x * va + p0.y * vb + p0.z * vc + p0.w * vd;
                b1 += p1.x * va + p1.y * vb + p1.z * vc + p1.w * vd;
                b2 += p2.x * va + p2.y * vb + p2.z * vc + p2.w * vd;
                b3 += p3.x * va + p3.y * vb + p3.z * vc + p3.w * vd;
            }
            l = l * correction + vec4<f32>(sum4(sum0), sum4(sum1), sum4(sum2), sum4(sum3));
            acc0 = acc0 * correction.x + b0;
            acc1 = acc1 * correction.y + b1;
            acc2 = acc2 * correction.z + b2;
            acc3 = acc3 * correction.w + b3;
        }
    }

    if (tx < QUADS) {
        let base = block.q_base + block.q0 * block.row_quads + tx;
        if (block.q0 + r0 < p.tq) {
            out[base + r0 * block.row_quads] = acc0 / l.x;
        }
        if (block.q0 + r1 < p.tq) {
            out[base + r1 * block.row_quads] = acc1 / l.y;
        }
        if (block.q0 + r2 < p.tq) {
            out[base + r2 * block.row_quads] = acc2 / l.z;
        }
        if (block.q0 + r3 < p.tq) {
            out[base + r3 * block.row_quads] = acc3 / l.w;
        }
    }
}
