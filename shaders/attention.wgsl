// Flash attention over whole sequences (encoders, prompt prefill): engine/gpu/ops/attention.py.
//
// q: [Tq, H*dh], k and v: [Tk, H*dh], out: [Tq, H*dh]; head h owns columns h*dh .. (h+1)*dh.
// One workgroup per (head, block of Q_ROWS query rows). It walks the keys in blocks of BK, staged in
// workgroup memory, and keeps a running softmax per row (max m, sum l, unnormalised output acc), so
// the [Tq, Tk] score matrix never exists in memory and K/V are read once per query block, not once
// per query.
//
// Thread layout: ROW_THREADS threads per query row. Thread t of row r scores keys t, t+8, t+16, ...
// of the block and owns the output quads (4 dims) t, t+8, ... of its row. Tiles hold vec4 quads,
// the head zero-padded to QUADS * 4 dims, so each shared-memory read feeds 4 multiply-adds; any
// head_dim up to ROW_THREADS * MAX_QUADS_PER_THREAD * 4 (= 128) works, including Moonshine's 36, 52.
//
// Masking: a masked score is stored as NEG and contributes exactly zero (not exp(NEG - m), which is
// 1 when every score of a row is masked). A row that sees no key at all (causal with Tk < Tq) ends
// with l = 0 and writes zeros.

override HEAD_DIM: u32 = 64u;
override BK: u32 = 32u; // keys per block (a multiple of ROW_THREADS); the host picks 16 when 32 would not fit workgroup memory
override QUADS: u32 = (HEAD_DIM + 3u) / 4u; // derived, never set by the host
// k_tile rows are K_STRIDE quads apart: an odd stride puts the key rows that the 8 threads of a
// row read at once in different banks.
override K_STRIDE: u32 = QUADS | 1u; // derived

const Q_ROWS: u32 = 16u;
const ROW_THREADS: u32 = 8u;
const THREADS: u32 = 128u; // Q_ROWS * ROW_THREADS
const MAX_QUADS_PER_THREAD: u32 = 4u; // 128 dims / 4 / ROW_THREADS
const MAX_KEYS_PER_THREAD: u32 = 4u; // BK / ROW_THREADS with BK <= 32
const NEG: f32 = -3.0e38;

struct Params {
    tq: u32,
    tk: u32,
    heads: u32,
    causal: u32,   // 1: query i sees keys j <= i + (tk - tq)
    has_rel: u32,  // 1: add rel[h, i, (tq - 1) + j - i] to the scaled score
    scale: f32,
    groups: u32,   // batch * heads * ceil(tq / Q_ROWS): the grid may hold more workgroups than that
    batch: u32,    // sequences of tq queries and tk keys one after the other, each its own (no causal, no rel)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> rel: array<f32>; // [H, tq, tq + tk - 1]; any buffer when has_rel = 0
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

var<workgroup> q_tile: array<vec4<f32>, Q_ROWS * QUADS>;
var<workgroup> k_tile: array<vec4<f32>, BK * K_STRIDE>;
var<workgroup> v_tile: array<vec4<f32>, BK * QUADS>;
var<workgroup> s_tile: array<f32, Q_ROWS * BK>;

const Q: u32 = 0u;
const K: u32 = 1u;
const V: u32 = 2u;

// Element `index` of q, k or v: WGSL can't pass storage pointers to functions; the selector is a
// constant at every call, so the compiler folds the switch away.
fn element(tensor: u32, index: u32) -> f32 {
    switch (tensor) {
        case Q: { return q[index]; }
        case K: { return k[index]; }
        default: { return v[index]; }
    }
}

// Quad `c` (dims 4c .. 4c+3) of row `row` of q, k or v at column `col0`, counted from element
// `start` (a sequence's first), zero past the head or past `rows`. Element reads: a head's columns
// need not be 16-byte aligned (dh = 33).
fn load_quad(tensor: u32, start: u32, row: u32, rows: u32, col0: u32, c: u32) -> vec4<f32> {
    var quad = vec4<f32>(0.0);
    if (row < rows) {
        let base = start + row * p.heads * HEAD_DIM + col0 + 4u * c;
        for (var e = 0u; e < 4u; e++) {
            if (4u * c + e < HEAD_DIM) {
                quad[e] = element(tensor, base + e);
            }
        }
    }
    return quad;
}

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
    let per_sequence = p.groups / p.batch;
    let local = group % per_sequence;
    let h = local % p.heads;
    let q0 = (local / p.heads) * Q_ROWS;
    let col0 = h * HEAD_DIM;
    let sequence = group / per_sequence;
    let q_start = sequence * p.tq * p.heads * HEAD_DIM; // the sequence's first element of q and out
    let k_start = sequence * p.tk * p.heads * HEAD_DIM; // and of k and v

    for (var e = tid; e < Q_ROWS * QUADS; e += THREADS) {
        q_tile[e] = load_quad(Q, q_start, q0 + e / QUADS, p.tq, col0, e % QUADS);
    }

    let r = tid / ROW_THREADS;
    let t = tid % ROW_THREADS;
    let i = q0 + r;
    let offset = i32(p.tk) - i32(p.tq);
    let rel_len = p.tq + p.tk - 1u;
    var m = NEG;
    var l = 0.0;
    var acc: array<vec4<f32>, MAX_QUADS_PER_THREAD>;

    // Causal: keys past what the block's last row sees are masked for every row; skip them.
    var k_end = p.tk;
    if (p.causal == 1u) {
        k_end = u32(clamp(i32(q0 + Q_ROWS - 1u) + offset + 1, 0, i32(p.tk)));
    }

    for (var kb = 0u; kb < k_end; kb += BK) {
        workgroupBarrier(); // the previous block's tiles are no longer read
        for (var e = tid; e < BK * QUADS; e += THREADS) {
            let j = e / QUADS;
            let c = e % QUADS;
            k_tile[j * K_STRIDE + c] = load_quad(K, k_start, kb + j, p.tk, col0, c);
            v_tile[e] = load_quad(V, k_start, kb + j, p.tk, col0, c);
        }
        workgroupBarrier();

        // Scores of this thread's keys, the q quad read once for all of them.
        // Explicitly zeroed: naga zero-fills a variable once per call, not at each loop iteration.
        var s = array<f32, MAX_KEYS_PER_THREAD>();
        for (var c = 0u; c < QUADS; c++) {
            let qc = q_tile[r * QUADS + c];
            for (var n = 0u; n < BK / ROW_THREADS; n++) {
                s[n] += dot(qc, k_tile[(t + n * ROW_THREADS) * K_STRIDE + c]);
            }
        }
        for (var n = 0u; n < BK / ROW_THREADS; n++) {
            let j = t + n * ROW_THREADS;
            let key = kb + j;
            var score = s[n] * p.scale;
            if (p.has_rel == 1u && i < p.tq && key < p.tk) {
                score += rel[(h * p.tq + i) * rel_len + (p.tq - 1u) + key - i];
            }
            let hidden = key >= p.tk || (p.causal == 1u && i32(key) > i32(i) + offset);
            s_tile[r * BK + j] = select(score, NEG, hidden);
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
        for (var n = 0u; n < MAX_QUADS_PER_THREAD; n++) {
            acc[n] *= correction;
        }
        for (var j = 0u; j < BK; j++) {
            let score = s_tile[r * BK + j];
            let w = select(exp(score - m_new), 0.0, score == NEG);
            l += w;
            for (var n = 0u; n < MAX_QUADS_PER_THREAD; n++) {
                let c = t + n * ROW_THREADS;
                if (c < QUADS) {
                    acc[n] += w * v_tile[j * QUADS + c];
                }
            }
        }
        m = m_new;
    }

    if (i < p.tq) {
        let inv = select(0.0, 1.0 / l, l > 0.0);
        for (var n = 0u; n < MAX_QUADS_PER_THREAD; n++) {
            let c = t + n * ROW_THREADS;
            for (var e = 0u; e < 4u; e++) {
                if (c < QUADS && 4u * c + e < HEAD_DIM) {
                    out[q_start + i * p.heads * HEAD_DIM + col0 + 4u * c + e] = acc[n][e] * inv;
                }
            }
        }
    }
}

// ---- relative-position scores (Parakeet, engine/conformer/attention.py) ------------------------------
// Every head's Transformer-XL position scores in one dispatch, for `main`'s `rel`: q [T, H*dh] at 1,
// positions [R, H*dh] (R = 2T - 1, pre-scaled) at 2, bias [H, R] at 3 ->
// rel_out[h, i, r] = q[i, head h] · positions[r, head h] + bias[h, r] at 4. One thread per score.

struct RelParams { t: u32, heads: u32, head_dim: u32, r: u32 }
@group(0) @binding(0) var<uniform> rp: RelParams;
@group(0) @binding(2) var<storage, read> positions: array<f32>;
@group(0) @binding(3) var<storage, read> rel_bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> rel_out: array<f32>;

@compute @workgroup_size(256)
fn rel_scores(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let index = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (index >= rp.heads * rp.t * rp.r) { return; }
    let r = index % rp.r;
    let i = (index / rp.r) % rp.t;
    let h = index / (rp.r * rp.t);
    let width = rp.heads * rp.head_dim;
    let q_row = i * width + h * rp.head_dim;
    let p_row = r * width + h * rp.head_dim;
    var acc = rel_bias[h * rp.r + r];
    for (var d = 0u; d < rp.head_dim; d++) {
        acc += q[q_row + d] * positions[p_row + d];
    }
    rel_out[index] = acc;
}
