// Flash attention tiled in registers, for encoders: no mask, no relative positions, head_dim a
// multiple of 4 up to 64 (engine/gpu/ops/attention.py picks it; attention.wgsl does the rest).
//
// Parameters, bindings and each workgroup's query block come from attention_blocks.wgsl, before this
// file in a module (dh % 4 == 0 keeps every quad aligned; a batched encoder pass's windows each attend
// to their own keys). One workgroup of 16 x 16 threads per (head, block of 32 query rows); it walks
// the keys in blocks of BK = 32 staged in workgroup memory with a running softmax per row, as
// attention.wgsl does. What differs is the work per thread: thread (ty, tx) scores rows ty and ty + 16 against
// keys tx and tx + 16, so each vec4 read from workgroup memory feeds 4 multiply-adds instead of 2;
// then it owns output quad tx of its two rows. A query block is twice attention.wgsl's, so K and V
// are staged half as often, and each thread exponentiates 2 rows of a block, not 8 times 1.
//
// Two rows per thread rather than four: 64-row blocks halve the workgroups and leave the GPU idler
// (docs/PERFORMANCE.md: two query rows a thread).

override HEAD_DIM: u32 = 64u;
const ROWS: u32 = 2u; // query rows per thread
override QUADS: u32 = HEAD_DIM / 4u; // derived, never set by the host
// k_tile rows are K_STRIDE quads apart: an odd stride spreads the 16 keys read at once over banks.
override K_STRIDE: u32 = QUADS | 1u; // derived

const BK: u32 = 32u; // keys per block: tx and tx + 16
const S_STRIDE: u32 = 33u; // BK + 1: a row of scores, padded so that two rows read at once differ in bank
const THREADS: u32 = 256u;
const NEG: f32 = -3.0e38; // a key past Tk: exp(NEG - m) is exactly 0 for any finite row max m

var<workgroup> q_tile: array<vec4<f32>, 16u * ROWS * QUADS>;
var<workgroup> k_tile: array<vec4<f32>, BK * K_STRIDE>;
var<workgroup> v_tile: array<vec4<f32>, BK * QUADS>;
var<workgroup> s_tile: array<f32, 16u * ROWS * S_STRIDE>;

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
    let block = query_block(group, 16u * ROWS);
    let tx = tid % 16u;
    let ty = tid / 16u;

    for (var e = tid; e < 16u * ROWS * QUADS; e += THREADS) {
        let row = block.q0 + e / QUADS;
        let at = block.q_base + min(row, p.tq - 1u) * block.row_quads + e % QUADS;
        q_tile[e] = select(vec4<f32>(0.0), q[at], row < p.tq);
    }

    var m: array<f32, ROWS>;
    var l: array<f32, ROWS>;
    var acc: array<vec4<f32>, ROWS>;
    for (var a = 0u; a < ROWS; a++) {
        m[a] = NEG;
    }

    for (var kb = 0u; kb < p.tk; kb += BK) {
        workgroupBarrier(); // the previous block's tiles are no longer read
        for (var e = tid; e < BK * QUADS; e += THREADS) {
            let j = e / QUADS;
            let c = e % QUADS;
            let key = min(kb + j, p.tk - 1u); // a key past Tk is staged as the last one and masked below
            k_tile[j * K_STRIDE + c] = k[block.k_base + key * block.row_quads + c];
            v_tile[e] = v[block.k_base + key * block.row_quads + c];
        }
        workgroupBarrier();

        // Scores: ROWS rows x keys tx and tx + 16. Explicitly zeroed: naga zero-fills a variable
        // once per call, not at each loop iteration.
        var s = array<vec2<f32>, ROWS>();
        for (var c = 0u; c < QUADS; c++) {
            let k_lo = k_tile[tx * K_STRIDE + c];
            let k_hi = k_tile[(tx + 16u) * K_STRIDE + c];
            for (var a = 0u; a < ROWS; a++) {
                let qa = q_tile[(ty + 16u * a) * QUADS + c];
                s[a] += vec2<f32>(dot(qa, k_lo), dot(qa, k_hi));
            }
        }
        for (var a = 0u; a < ROWS; a++) {
            let base = (ty + 16u * a) * S_STRIDE;
            s_tile[base + tx] = select(s[a].x * p.scale, NEG, kb + tx >= p.tk);
            s_tile[base + tx + 16u] = select(s[a].y * p.scale, NEG, kb + tx + 16u >= p.tk);
        }
        workgroupBarrier();

        // Running softmax: the 16 threads of a row group read the same scores (a broadcast) and
        // each keeps the row's max and sum itself; thread tx accumulates output quad tx.
        for (var a = 0u; a < ROWS; a++) {
            let base = (ty + 16u * a) * S_STRIDE;
            var m_block = NEG;
            for (var j = 0u; j < BK; j++) {
                m_block = max(m_block, s_tile[base + j]);
            }
            let m_new = max(m[a], m_block); // finite: key kb < Tk is in the block
            let correction = exp(m[a] - m_new);
            var l_a = l[a] * correction;
            var acc_a = acc[a] * correction;
            for (var j = 0u; j < BK; j++) {
                let w = exp(s_tile[base + j] - m_new);
                l_a += w;
                if (tx < QUADS) {
                    acc_a += w * v_tile[j * QUADS + tx];
                }
            }
            m[a] = m_new;
            l[a] = l_a;
            acc[a] = acc_a;
        }
    }

    if (tx < QUADS) {
        for (var a = 0u; a < ROWS; a++) {
            let row = block.q0 + ty + 16u * a;
            if (row < p.tq) {
                out[block.q_base + row * block.row_quads + tx] = acc[a] / l[a];
            }
        }
    }
}
