// Flash attention over whole sequences (encoders, prompt prefill): engine/gpu/ops/attention.py.
//
// q: [Tq, H*dh], k and v: [Tk, H*dh], out: [Tq, H*dh]; head h owns columns h*dh .. (h+1)*dh.
// One workgroup per (head, block of Q_ROWS query rows). It walks the keys in blocks of BK, staged in
// workgroup memory, and keeps a running softmax per row (max m, sum l, unnormalised output acc), so
// the [Tq, Tk] score matrix never exists in memory and K/V are read once per query block, not once
// per query. Two entry points share that walk: `main` (plain, causal or a batch of sequences) and
// `relative` (Transformer-XL relative positions, Parakeet), which adds each score's position term.
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
// Keys per block, a multiple of ROW_THREADS: the host picks the largest of 32, 16, 8 whose tiles fit
// workgroup memory. The default, for a pipeline built unset, fits `relative` in 32 KiB.
override BK: u32 = 16u;
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
    causal: u32,   // main: 1: query i sees keys j <= i + (tk - tq); relative: 0
    scale: f32,
    groups: u32,   // batch * heads * ceil(tq / Q_ROWS): the grid may hold more workgroups than that
    batch: u32,    // main: sequences of tq queries and tk keys one after the other, each its own; relative: 1
    span: u32,     // relative only: L >= tq, the length the position tables were made for
    left: u32,     // relative only: query i sees keys i - left .. i + right
    right: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
// relative only: [2L - 1, H*dh], row r is relative position (L - 1) - r (i - j)
@group(0) @binding(5) var<storage, read> positions: array<f32>;
// relative only: [2L - 1, H], added to the scaled score at the same row: (v - u)·P, pre-scaled
@group(0) @binding(6) var<storage, read> position_bias: array<f32>;

var<workgroup> q_tile: array<vec4<f32>, Q_ROWS * QUADS>;
var<workgroup> k_tile: array<vec4<f32>, BK * K_STRIDE>;
var<workgroup> v_tile: array<vec4<f32>, BK * QUADS>;
var<workgroup> s_tile: array<f32, Q_ROWS * BK>;
// relative only: the position rows a block of keys needs, (L-1) + j - i for its BK keys and Q_ROWS rows
var<workgroup> position_tile: array<vec4<f32>, (BK + Q_ROWS - 1u) * K_STRIDE>;

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

// What one workgroup attends: head h's columns from col0, query rows q0 .. q0 + Q_ROWS - 1 of a
// sequence whose first element of q and out is q_start, and of k and v k_start.
struct Work { h: u32, q0: u32, col0: u32, q_start: u32, k_start: u32 }

fn work_of(group: u32) -> Work {
    let per_sequence = p.groups / p.batch;
    let local = group % per_sequence;
    let h = local % p.heads;
    let sequence = group / per_sequence;
    return Work(h, (local / p.heads) * Q_ROWS, h * HEAD_DIM, sequence * p.tq * p.heads * HEAD_DIM,
                sequence * p.tk * p.heads * HEAD_DIM);
}

fn stage_queries(tid: u32, w: Work) {
    for (var e = tid; e < Q_ROWS * QUADS; e += THREADS) {
        q_tile[e] = load_quad(Q, w.q_start, w.q0 + e / QUADS, p.tq, w.col0, e % QUADS);
    }
}

// Keys kb .. kb + BK - 1 into k_tile and v_tile; the caller puts barriers around it.
fn stage_keys(tid: u32, w: Work, kb: u32) {
    for (var e = tid; e < BK * QUADS; e += THREADS) {
        let j = e / QUADS;
        let c = e % QUADS;
        k_tile[j * K_STRIDE + c] = load_quad(K, w.k_start, kb + j, p.tk, w.col0, c);
        v_tile[e] = load_quad(V, w.k_start, kb + j, p.tk, w.col0, c);
    }
}

// Unscaled q·k of row r with this thread's keys t, t + ROW_THREADS, ... of the staged block, the
// q quad read once for all of them. Explicitly zeroed: naga zero-fills a variable once per call,
// not at each loop iteration.
fn key_scores(r: u32, t: u32) -> array<f32, MAX_KEYS_PER_THREAD> {
    var s = array<f32, MAX_KEYS_PER_THREAD>();
    for (var c = 0u; c < QUADS; c++) {
        let qc = q_tile[r * QUADS + c];
        for (var n = 0u; n < BK / ROW_THREADS; n++) {
            s[n] += dot(qc, k_tile[(t + n * ROW_THREADS) * K_STRIDE + c]);
        }
    }
    return s;
}

// A query row's running softmax: max m, sum l, and this thread's quads of the unnormalised output.
struct Row { m: f32, l: f32, acc: array<vec4<f32>, MAX_QUADS_PER_THREAD> }

// `row` with the block's scores of row r (s_tile, NEG where hidden) taken in.
fn absorb(r: u32, t: u32, row: Row) -> Row {
    var next = row;
    // Every thread of the row redoes the row's max and exps (BK of them) rather than pay one
    // more barrier to share them: barriers cost more than exps, on lavapipe especially.
    var m_block = NEG;
    for (var j = 0u; j < BK; j++) {
        m_block = max(m_block, s_tile[r * BK + j]);
    }
    next.m = max(row.m, m_block);
    let correction = exp(row.m - next.m);
    next.l *= correction;
    for (var n = 0u; n < MAX_QUADS_PER_THREAD; n++) {
        next.acc[n] *= correction;
    }
    for (var j = 0u; j < BK; j++) {
        let score = s_tile[r * BK + j];
        let weight = select(exp(score - next.m), 0.0, score == NEG);
        next.l += weight;
        for (var n = 0u; n < MAX_QUADS_PER_THREAD; n++) {
            let c = t + n * ROW_THREADS;
            if (c < QUADS) {
                next.acc[n] += weight * v_tile[j * QUADS + c];
            }
        }
    }
    return next;
}

// Query row i's output: this thread's quads of acc / l.
fn finish(i: u32, t: u32, w: Work, row: Row) {
    if (i < p.tq) {
        let inv = select(0.0, 1.0 / row.l, row.l > 0.0);
        for (var n = 0u; n < MAX_QUADS_PER_THREAD; n++) {
            let c = t + n * ROW_THREADS;
            for (var e = 0u; e < 4u; e++) {
                if (c < QUADS && 4u * c + e < HEAD_DIM) {
                    out[w.q_start + i * p.heads * HEAD_DIM + w.col0 + 4u * c + e] = row.acc[n][e] * inv;
                }
            }
        }
    }
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
    let w = work_of(group);
    stage_queries(tid, w);

    let r = tid / ROW_THREADS;
    let t = tid % ROW_THREADS;
    let i = w.q0 + r;
    let offset = i32(p.tk) - i32(p.tq);
    var row = Row(NEG, 0.0, array<vec4<f32>, MAX_QUADS_PER_THREAD>());

    // Causal: keys past what the block's last row sees are masked for every row; skip them.
    var k_end = p.tk;
    if (p.causal == 1u) {
        k_end = u32(clamp(i32(w.q0 + Q_ROWS - 1u) + offset + 1, 0, i32(p.tk)));
    }

    for (var kb = 0u; kb < k_end; kb += BK) {
        workgroupBarrier(); // the previous block's tiles are no longer read
        stage_keys(tid, w, kb);
        workgroupBarrier();
        let s = key_scores(r, t);
        for (var n = 0u; n < BK / ROW_THREADS; n++) {
            let j = t + n * ROW_THREADS;
            let key = kb + j;
            let hidden = key >= p.tk || (p.causal == 1u && i32(key) > i32(i) + offset);
            s_tile[r * BK + j] = select(s[n] * p.scale, NEG, hidden);
        }
        workgroupBarrier();
        row = absorb(r, t, row);
    }
    finish(i, t, w, row);
}

// ---- relative positions (Parakeet, engine/conformer/attention.py) -----------------------------------
// Transformer-XL self-attention over T = tq = tk positions, the position term inside the key loop: with
// r = (L-1) + j - i, the score of query i and key j in head h is
//     (q_i·k_j + q_i·positions[r]) * scale + position_bias[r, h]
// (positions' head-h columns), so no [H, T, 2T-1] table of position scores is ever written. The tables
// may be made for a longer length L than T (a model keeps them for the longest audio so far). A block of
// BK keys and Q_ROWS rows needs BK + Q_ROWS - 1 consecutive position rows, staged beside the keys.
// A local-attention window masks keys outside i - left .. i + right as NEG, as `main` masks causally,
// and the blocks no row of the workgroup sees are not walked.

// Quad `c` of the head at col0 of position row `at`, zero outside the 2L - 1 rows.
fn position_quad(at: i32, col0: u32, c: u32) -> vec4<f32> {
    var quad = vec4<f32>(0.0);
    if (at >= 0 && u32(at) < 2u * p.span - 1u) {
        let base = u32(at) * p.heads * HEAD_DIM + col0 + 4u * c;
        for (var e = 0u; e < 4u; e++) {
            if (4u * c + e < HEAD_DIM) {
                quad[e] = positions[base + e];
            }
        }
    }
    return quad;
}

@compute @workgroup_size(THREADS)
fn relative(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let group = wid.x + wid.y * nwg.x;
    if (group >= p.groups) {
        return; // the grid's last row may be partly empty; uniform for the whole workgroup
    }
    let w = work_of(group);
    stage_queries(tid, w);

    let r = tid / ROW_THREADS;
    let t = tid % ROW_THREADS;
    let i = w.q0 + r;
    let center = p.span - 1u; // the position row of j - i = 0
    var row = Row(NEG, 0.0, array<vec4<f32>, MAX_QUADS_PER_THREAD>());

    // The keys some row of the block sees: from the first row's window start to the last row's end.
    let k_begin = select(0u, w.q0 - p.left, w.q0 > p.left);
    let k_end = min(p.tk, w.q0 + Q_ROWS + p.right);
    for (var kb = k_begin - k_begin % BK; kb < k_end; kb += BK) {
        workgroupBarrier(); // the previous block's tiles are no longer read
        stage_keys(tid, w, kb);
        // Tile row n is position row first + n: row r of the block and its key j read tile row
        // j - r + Q_ROWS - 1.
        let first = i32(center + kb) - i32(w.q0 + Q_ROWS - 1u);
        for (var e = tid; e < (BK + Q_ROWS - 1u) * QUADS; e += THREADS) {
            let n = e / QUADS;
            position_tile[n * K_STRIDE + e % QUADS] = position_quad(first + i32(n), w.col0, e % QUADS);
        }
        workgroupBarrier();
        let s = key_scores(r, t);
        var by_position = array<f32, MAX_KEYS_PER_THREAD>();
        for (var c = 0u; c < QUADS; c++) {
            let qc = q_tile[r * QUADS + c];
            for (var n = 0u; n < BK / ROW_THREADS; n++) {
                by_position[n] += dot(qc, position_tile[(t + n * ROW_THREADS + Q_ROWS - 1u - r) * K_STRIDE + c]);
            }
        }
        for (var n = 0u; n < BK / ROW_THREADS; n++) {
            let j = t + n * ROW_THREADS;
            let key = kb + j;
            var score = NEG;
            if (key < p.tk && i < p.tq && key + p.left >= i && key <= i + p.right) {
                let bias = position_bias[(center + key - i) * p.heads + w.h];
                score = (s[n] + by_position[n]) * p.scale + bias;
            }
            s_tile[r * BK + j] = score;
        }
        workgroupBarrier();
        row = absorb(r, t, row);
    }
    finish(i, t, w, row);
}
