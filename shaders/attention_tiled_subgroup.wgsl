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

// A thread's scores: rows r0 .. r3 against keys tx (x) and tx + 16 (y).
struct RowScores {
    r0: vec2<f32>,
    r1: vec2<f32>,
    r2: vec2<f32>,
    r3: vec2<f32>,
}

// One quad of the head's dims: the four rows' quads against the two keys' quads. The loop passes
// call it with the tiles' values, read in `main`: naga can't compile a helper that indexes them.
fn score_quad(s: ptr<function, RowScores>, q0: vec4<f32>, q1: vec4<f32>, q2: vec4<f32>, q3: vec4<f32>,
              k_lo: vec4<f32>, k_hi: vec4<f32>) {
    (*s).r0 += scores(q0, k_lo, k_hi);
    (*s).r1 += scores(q1, k_lo, k_hi);
    (*s).r2 += scores(q2, k_lo, k_hi);
    (*s).r3 += scores(q3, k_lo, k_hi);
}

// What a thread of output quad tx sums over a key block: each row's p (sum) and p-weighted V (b).
struct RowSums {
    sum0: vec4<f32>,
    sum1: vec4<f32>,
    sum2: vec4<f32>,
    sum3: vec4<f32>,
    b0: vec4<f32>,
    b1: vec4<f32>,
    b2: vec4<f32>,
    b3: vec4<f32>,
}

// Four keys: the rows' p of them (p0 .. p3, one key a component) and the keys' V quads (va .. vd).
fn weigh_keys(w: ptr<function, RowSums>, p0: vec4<f32>, p1: vec4<f32>, p2: vec4<f32>, p3: vec4<f32>,
              va: vec4<f32>, vb: vec4<f32>, vc: vec4<f32>, vd: vec4<f32>) {
    (*w).sum0 += p0;
    (*w).sum1 += p1;
    (*w).sum2 += p2;
    (*w).sum3 += p3;
    (*w).b0 += p0.x * va + p0.y * vb + p0.z * vc + p0.w * vd;
    (*w).b1 += p1.x * va + p1.y * vb + p1.z * vc + p1.w * vd;
    (*w).b2 += p2.x * va + p2.y * vb + p2.z * vc + p2.w * vd;
    (*w).b3 += p3.x * va + p3.y * vb + p3.z * vc + p3.w * vd;
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
    let qa = r0 * QUADS; // the rows' first quads in q_tile, the keys' in k_tile, the rows' p in p_tile
    let qb = r1 * QUADS;
    let qc = r2 * QUADS;
    let qd = r3 * QUADS;
    let ka = tx * K_STRIDE;
    let kb16 = (tx + 16u) * K_STRIDE;
    let pa = r0 * PQ;
    let pb = r1 * PQ;
    let pc = r2 * PQ;
    let pd = r3 * PQ;
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

        var s = RowScores();
        // Four quads a pass, then the rest one by one: drivers don't unroll naga's loops, and a pass
        // per quad spent as much on the loop as on the products. The sums keep their order.
        var c = 0u;
        for (; c + 3u < QUADS; c += 4u) {
            let c1 = c + 1u;
            let c2 = c + 2u;
            let c3 = c + 3u;
            score_quad(&s, q_tile[qa + c], q_tile[qb + c], q_tile[qc + c], q_tile[qd + c],
                       k_tile[ka + c], k_tile[kb16 + c]);
            score_quad(&s, q_tile[qa + c1], q_tile[qb + c1], q_tile[qc + c1], q_tile[qd + c1],
                       k_tile[ka + c1], k_tile[kb16 + c1]);
            score_quad(&s, q_tile[qa + c2], q_tile[qb + c2], q_tile[qc + c2], q_tile[qd + c2],
                       k_tile[ka + c2], k_tile[kb16 + c2]);
            score_quad(&s, q_tile[qa + c3], q_tile[qb + c3], q_tile[qc + c3], q_tile[qd + c3],
                       k_tile[ka + c3], k_tile[kb16 + c3]);
        }
        for (; c < QUADS; c++) {
            score_quad(&s, q_tile[qa + c], q_tile[qb + c], q_tile[qc + c], q_tile[qd + c],
                       k_tile[ka + c], k_tile[kb16 + c]);
        }
        let valid = vec2<bool>(kb + tx < p.tk, kb + tx + 16u < p.tk);
        let s0 = select(vec2<f32>(NEG), s.r0 * p.scale, valid);
        let s1 = select(vec2<f32>(NEG), s.r1 * p.scale, valid);
        let s2 = select(vec2<f32>(NEG), s.r2 * p.scale, valid);
        let s3 = select(vec2<f32>(NEG), s.r3 * p.scale, valid);
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
            var w = RowSums();
            for (var i = 0u; i < PQ; i += 2u) {  // two quads of keys a pass, for the same reason
                let i1 = i + 1u;
                let va = 4u * i * QUADS + tx;  // V of key 4i, this thread's quad
                let vb = va + 4u * QUADS;  // of key 4i + 4
                weigh_keys(&w, p_tile[pa + i], p_tile[pb + i], p_tile[pc + i], p_tile[pd + i],
                           v_tile[va], v_tile[va + QUADS], v_tile[va + 2u * QUADS], v_tile[va + 3u * QUADS]);
                weigh_keys(&w, p_tile[pa + i1], p_tile[pb + i1], p_tile[pc + i1], p_tile[pd + i1],
                           v_tile[vb], v_tile[vb + QUADS], v_tile[vb + 2u * QUADS], v_tile[vb + 3u * QUADS]);
            }
            l = l * correction + vec4<f32>(sum4(w.sum0), sum4(w.sum1), sum4(w.sum2), sum4(w.sum3));
            acc0 = acc0 * correction.x + w.b0;
            acc1 = acc1 * correction.y + w.b1;
            acc2 = acc2 * correction.z + w.b2;
            acc3 = acc3 * correction.w + w.b3;
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
