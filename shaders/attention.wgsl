// Flash attention over whole sequences (encoders, prompt prefill): engine/gpu/ops/attention.py.
//
// q: [Tq, H*dh], k and v: [Tk, H*dh], out: [Tq, H*dh]; head h owns columns h*dh .. (h+1)*dh.
// One workgroup per (head, block of Q_ROWS query rows). It walks the keys in blocks of BK, staged in
// workgroup memory, and keeps a running softmax per row (max m, sum l, unnormalised output acc), so
// the [Tq, Tk] score matrix never exists in memory and K/V are read once per query block, not once
// per query.
//
// Thread layout: ROW_THREADS threads per query row. Thread t of row r scores keys t, t+8, t+16, ...
// of the block and owns output dims t, t+8, t+16, ... of its row, so any head_dim up to
// ROW_THREADS * MAX_DIMS_PER_THREAD (= 128) works, including the odd ones (36, 52) of Moonshine.
//
// Masking: a masked score is stored as NEG and contributes exactly zero (not exp(NEG - m), which is
// 1 when every score of a row is masked). A row that sees no key at all (causal with Tk < Tq) ends
// with l = 0 and writes zeros.

override HEAD_DIM: u32 = 64u;
override BK: u32 = 32u; // keys per block; the host picks 16 for head_dim > 64 to fit workgroup memory

const Q_ROWS: u32 = 16u;
const ROW_THREADS: u32 = 8u;
const THREADS: u32 = 128u; // Q_ROWS * ROW_THREADS
const MAX_DIMS_PER_THREAD: u32 = 16u; // 128 / ROW_THREADS
const NEG: f32 = -3.0e38;

struct Params {
    tq: u32,
    tk: u32,
    heads: u32,
    causal: u32,   // 1: query i sees keys j <= i + (tk - tq)
    has_rel: u32,  // 1: add rel[h, i, (tq - 1) + j - i] to the scaled score
    scale: f32,
    groups: u32,   // heads * ceil(tq / Q_ROWS): the grid may hold more workgroups than that
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> rel: array<f32>; // [H, tq, tq + tk - 1]; any buffer when has_rel = 0
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

var<workgroup> q_tile: array<f32, Q_ROWS * HEAD_DIM>;
// k_tile rows are HEAD_DIM + 1 apart: the 8 threads of a row read 8 key rows at once, and an odd
// stride puts them in 8 different banks.
var<workgroup> k_tile: array<f32, BK * (HEAD_DIM + 1u)>;
var<workgroup> v_tile: array<f32, BK * HEAD_DIM>;
var<workgroup> s_tile: array<f32, Q_ROWS * BK>;

@compute @workgroup_size(THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.groups) {
        return; // the grid's last row may be partly empty; uniform for the whole workgroup
    }
    let h = group % p.heads;
    let q0 = (group / p.heads) * Q_ROWS;
    let row_len = p.heads * HEAD_DIM;
    let col0 = h * HEAD_DIM;
    let k_stride = HEAD_DIM + 1u;
    let dims = (HEAD_DIM + ROW_THREADS - 1u) / ROW_THREADS; // output dims per thread

    for (var e = tid; e < Q_ROWS * HEAD_DIM; e += THREADS) {
        let i = q0 + e / HEAD_DIM;
        q_tile[e] = select(0.0, q[i * row_len + col0 + e % HEAD_DIM], i < p.tq);
    }

    let r = tid / ROW_THREADS;
    let t = tid % ROW_THREADS;
    let i = q0 + r;
    let offset = i32(p.tk) - i32(p.tq);
    let rel_len = p.tq + p.tk - 1u;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, MAX_DIMS_PER_THREAD>;

    // Causal: keys past what the block's last row sees are masked for every row; skip them.
    var k_end = p.tk;
    if (p.causal == 1u) {
        k_end = u32(clamp(i32(q0 + Q_ROWS - 1u) + offset + 1, 0, i32(p.tk)));
    }

    for (var kb = 0u; kb < k_end; kb += BK) {
        workgroupBarrier(); // the previous block's tiles are no longer read
        for (var e = tid; e < BK * HEAD_DIM; e += THREADS) {
            let j = e / HEAD_DIM;
            let d = e % HEAD_DIM;
            let key = kb + j;
            var kv = 0.0;
            var vv = 0.0;
            if (key < p.tk) {
                kv = k[key * row_len + col0 + d];
                vv = v[key * row_len + col0 + d];
            }
            k_tile[j * k_stride + d] = kv;
            v_tile[e] = vv;
        }
        workgroupBarrier();

        for (var j = t; j < BK; j += ROW_THREADS) {
            let key = kb + j;
            var s = 0.0;
            for (var d = 0u; d < HEAD_DIM; d++) {
                s += q_tile[r * HEAD_DIM + d] * k_tile[j * k_stride + d];
            }
            s *= p.scale;
            if (p.has_rel == 1u && i < p.tq && key < p.tk) {
                s += rel[(h * p.tq + i) * rel_len + (p.tq - 1u) + key - i];
            }
            let hidden = key >= p.tk || (p.causal == 1u && i32(key) > i32(i) + offset);
            s_tile[r * BK + j] = select(s, NEG, hidden);
        }
        workgroupBarrier();

        // Every thread of the row redoes the row's max and exps (BK of them) rather than pay one
        // more barrier to share them: barriers cost more than exps, on lavapipe especially.
        var m_block = NEG;
        for (var j = 0u; j < BK; j++) {
            m_block = max(m_block, s_tile[r * BK + j]);
        }
        let m_new = max(m, m_block);
        let correction = exp(m - m_new);
        l *= correction;
        for (var e = 0u; e < dims; e++) {
            acc[e] *= correction;
        }
        for (var j = 0u; j < BK; j++) {
            let s = s_tile[r * BK + j];
            let w = select(exp(s - m_new), 0.0, s == NEG);
            l += w;
            for (var e = 0u; e < dims; e++) {
                let d = t + e * ROW_THREADS;
                if (d < HEAD_DIM) {
                    acc[e] += w * v_tile[j * HEAD_DIM + d];
                }
            }
        }
        m = m_new;
    }

    if (i < p.tq) {
        let inv = select(0.0, 1.0 / l, l > 0.0);
        for (var e = 0u; e < dims; e++) {
            let d = t + e * ROW_THREADS;
            if (d < HEAD_DIM) {
                out[i * row_len + col0 + d] = acc[e] * inv;
            }
        }
    }
}
