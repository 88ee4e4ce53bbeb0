// The decoder's K/V cache: pack new rows in, attend over it split into key blocks, combine the
// blocks; a decoder step's attend packs its row itself (engine/gpu/ops/attention.py, class KvCache).
//
// Cache layout, one buffer of u32, each u32 two f16 (dims 2c and 2c+1 through pack2x16float;
// an odd head_dim's last pair has a zero high half):
//   K: [H, capacity, PAIRS] at word 0
//   V: [H, capacity, PAIRS] at word H * capacity * PAIRS
// Head-major, so a workgroup's block of keys of one head is one contiguous run of memory.
//
// Why split the keys: a decoder step has one query row per head. One workgroup per (head, row)
// would leave all but a few of the GPU's cores idle over Whisper's 1500 encoder positions, so each
// workgroup takes one block of WG keys and writes a partial softmax (max m, sum l, unnormalised
// weighted V) to a scratch tensor; `combine` then rescales the partials to a common max and merges
// them (the same algebra as flash attention's running softmax, done across workgroups).
//
// Positions on the GPU: pack's first row and attend's length are p.pos0 and p.length plus at[0],
// where `at` is a decoder's position counter (engine.ops.Position) or a zero for int positions. The
// host can't count key blocks it doesn't know the length of, so with a counter (a decoder's own
// tokens, a few hundred at most) attend runs one workgroup per (head, row) that walks its keys
// WG at a time with a running softmax: p.span keys per workgroup, WG when the keys are split.
//
// attend's maximum and sum over its keys are reduce_workgroup.wgsl's or, in the fast tier,
// reduce_subgroup.wgsl's, one of which comes before this file in a module (engine/gpu/entry_points.py
// names the pair), so one text of the kernel serves both tiers.

override HEAD_DIM: u32 = 64u;
override WG: u32 = 64u; // keys per attend workgroup, one thread each (the reductions' workgroup size)

override PAIRS: u32 = (HEAD_DIM + 1u) / 2u; // derived, never set by the host
const NEG: f32 = -3.0e38; // a masked score; contributes exactly zero weight (see attend)
const COMBINE_THREADS: u32 = 64u;
const PACK_THREADS: u32 = 64u;

struct Params {
    rows: u32,      // pack: new rows T; attend and combine: query rows Tq
    heads: u32,
    capacity: u32,
    pos0: u32,      // pack: position of the first new row
    length: u32,    // attend: positions held in the cache
    causal: u32,    // attend: 1 if row i sees positions 0 .. length - Tq + i only
    scale: f32,     // attend
    blocks: u32,    // attend and combine: key blocks per (head, row)
    groups: u32,    // work items the grid covers (pack: words; attend: workgroups; combine: rows)
    // Where the inputs' rows are (Ops.columns: q, k and v may be columns of one [T, 3*H*dh] tensor):
    // row t of k starts at float k_at + t * stride, of v at v_at + t * stride, of q at q_at + t * stride.
    q_at: u32,
    k_at: u32,
    v_at: u32,
    stride: u32,
    packs: u32,     // attend: 1 if it packs the row of k and v at pos0 first (a decoder step)
    span: u32,      // attend: keys per workgroup (WG, or the capacity when one walks them all)
}

@group(0) @binding(0) var<uniform> p: Params;

fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x; // see grid() in engine/gpu/recorder.py
}

// The cache word holding pair c of head h's K (or V) row at position pos (the layout above).
fn cache_word(is_v: bool, h: u32, pos: u32, c: u32) -> u32 {
    return select(0u, p.heads * p.capacity * PAIRS, is_v) + (h * p.capacity + pos) * PAIRS + c;
}

// ---- pack: k, v [T, H*dh] float32 -> cache positions pos0 .. pos0+T-1, K and V in one dispatch ----

// Bindings: pack reads k (1) and v (2) into the cache (3) at the position counter (4); attend reads
// q (5) and the cache (3) into out (6), and k and v too when it packs; combine reads partials (1)
// into out (2).
@group(0) @binding(1) var<storage, read> pack_k: array<f32>;
@group(0) @binding(2) var<storage, read> pack_v: array<f32>;
@group(0) @binding(3) var<storage, read_write> cache: array<u32>;
@group(0) @binding(4) var<storage, read> at: array<u32>;

fn pack_pair(src: u32, c: u32, is_v: bool) -> u32 {
    var lo: f32;
    var hi = 0.0;
    if (is_v) {
        lo = pack_v[p.v_at + src];
        if (2u * c + 1u < HEAD_DIM) { hi = pack_v[p.v_at + src + 1u]; }
    } else {
        lo = pack_k[p.k_at + src];
        if (2u * c + 1u < HEAD_DIM) { hi = pack_k[p.k_at + src + 1u]; }
    }
    return pack2x16float(vec2<f32>(lo, hi));
}

@compute @workgroup_size(PACK_THREADS)
fn pack(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let word = group_index(wid, nwg) * PACK_THREADS + tid; // one output u32 per thread
    if (word >= p.groups) {
        return;
    }
    let per_side = p.rows * p.heads * PAIRS;
    let is_v = word >= per_side;
    let e = word % per_side;
    let c = e % PAIRS;
    let h = (e / PAIRS) % p.heads;
    let t = e / (PAIRS * p.heads);
    let pos = p.pos0 + at[0] + t;
    if (pos >= p.capacity) {
        return; // past the cache: only a counter can get here (engine.ops.Ops.kv_pack)
    }
    let src = t * p.stride + h * HEAD_DIM + 2u * c;
    cache[cache_word(is_v, h, pos, c)] = pack_pair(src, c, is_v);
}

// ---- attend: one workgroup per (head, query row, key block) -> one partial ----
// partials: [H * Tq * blocks, HEAD_DIM + 2] float32, each row (m, l, acc[HEAD_DIM]).

@group(0) @binding(5) var<storage, read> attend_q: array<f32>;
@group(0) @binding(6) var<storage, read_write> attend_partials: array<f32>;

// q's dims (2 pair, 2 pair + 1) of the row at q_row times a key's pair kk.
fn score_pair(q_row: u32, pair: u32, kk: vec2<f32>) -> f32 {
    return attend_q[q_row + 2u * pair] * kk.x + attend_q[q_row + 2u * pair + 1u] * kk.y;
}

var<workgroup> weights: array<f32, WG>;
var<workgroup> group_sums: array<vec2<f32>, WG>; // the weighted V of each group of threads

@compute @workgroup_size(WG)
fn attend(inv: Invocation) {
    let tid = inv.lid;
    if (p.groups == 0u) { // an empty problem is the fast tier's probe (engine/gpu/fast.py)
        let seen = subgroup_layout(inv);
        attend_partials[2u * tid] = seen.x;
        attend_partials[2u * tid + 1u] = seen.y;
        return;
    }
    let group = workgroup_index(inv);
    if (group >= p.groups) {
        return; // workgroup-uniform, as every branch before the reductions, so their barriers stay uniform
    }
    let pos0 = p.pos0 + at[0];
    let length = min(p.length + at[0], p.capacity);
    if (p.packs == 1u) {
        // A decoder step (one row, one workgroup per head: group = head): write the head's new K
        // and V pair words at pos0 first, pack's job done here to save its dispatch. No other
        // workgroup reads this head's rows, so a barrier within the workgroup is all the ordering
        // the writes need.
        if (pos0 < p.capacity) {
            for (var word = tid; word < 2u * PAIRS; word += WG) {
                let is_v = word >= PAIRS;
                let c = word % PAIRS;
                cache[cache_word(is_v, group, pos0, c)] = pack_pair(group * HEAD_DIM + 2u * c, c, is_v);
            }
        }
        storageBarrier();
    }
    let b = group % p.blocks;
    let row = group / p.blocks; // h * Tq + i
    let i = row % p.rows;
    let h = row / p.rows;
    let out = group * (HEAD_DIM + 2u);
    let out_row = i * p.heads * HEAD_DIM + h * HEAD_DIM; // the row in out [Tq, H*dh] when blocks == 1

    var visible = length;
    if (p.causal == 1u) {
        visible = u32(clamp(i32(length) - i32(p.rows) + i32(i) + 1, 0, i32(length)));
    }
    let key0 = b * p.span;
    if (key0 >= visible) {
        // Nothing visible in this block (causal rows of a prefill): an empty partial, or, written
        // straight to out (one block, see below), zeros.
        for (var e = tid; e < HEAD_DIM + 2u; e += WG) {
            if (p.blocks == 1u) {
                if (e < HEAD_DIM) {
                    attend_partials[out_row + e] = 0.0;
                }
            } else {
                attend_partials[out + e] = select(0.0, NEG, e == 0u);
            }
        }
        return;
    }
    let key_end = min(key0 + p.span, visible);
    let q_row = p.q_at + i * p.stride + h * HEAD_DIM;

    // Weighted V: the threads split into WG / PAIRS groups; thread c of group g owns the pair of
    // dims (2c, 2c+1) over keys g, g + G, g + 2G, ... of a chunk, two keys per iteration so that two
    // loads are in flight. Reads of a key's row are contiguous across a group's threads. The groups'
    // sums meet in workgroup memory after the last chunk.
    let group_count = WG / PAIRS;
    let c = tid % PAIRS;
    let g = tid / PAIRS;
    var m = NEG; // running max over the chunks so far, the same in every thread
    var l = 0.0; // the sum of this thread's keys' weights (its key of each chunk), summed by all at the end
    var acc = vec2<f32>(0.0);
    for (var start = key0; start < key_end; start += WG) {
        let n = min(WG, key_end - start); // keys of this chunk the row sees

        // Score: one thread per key, a dot over the head's f16 pairs, four pairs a pass with their
        // loads issued first (one at a time, each pass waited for its load), summed in the same order.
        var s = NEG;
        if (tid < n) {
            let k_row = cache_word(false, h, start + tid, 0u);
            var dot = 0.0;
            var pair = 0u;
            for (; pair + 4u <= HEAD_DIM / 2u; pair += 4u) {
                let k0 = unpack2x16float(cache[k_row + pair]);
                let k1 = unpack2x16float(cache[k_row + pair + 1u]);
                let k2 = unpack2x16float(cache[k_row + pair + 2u]);
                let k3 = unpack2x16float(cache[k_row + pair + 3u]);
                dot += score_pair(q_row, pair, k0);
                dot += score_pair(q_row, pair + 1u, k1);
                dot += score_pair(q_row, pair + 2u, k2);
                dot += score_pair(q_row, pair + 3u, k3);
            }
            for (; pair < HEAD_DIM / 2u; pair++) {
                dot += score_pair(q_row, pair, unpack2x16float(cache[k_row + pair]));
            }
            if (HEAD_DIM % 2u == 1u) {
                dot += attend_q[q_row + HEAD_DIM - 1u] * unpack2x16float(cache[k_row + PAIRS - 1u]).x;
            }
            s = dot * p.scale;
        }

        // The chunk's max, then each thread's own key's weight, published for the weighted V; what
        // was summed before is rescaled to the new max.
        let m_new = max(m, reduce_max(s, inv));
        let rescale = exp(m - m_new);
        let weight = select(0.0, exp(s - m_new), tid < n);
        weights[tid] = weight;
        workgroupBarrier();

        l = l * rescale + weight;
        acc *= rescale;
        if (g < group_count) {
            let v_base = cache_word(true, h, start, c);
            var acc_odd = vec2<f32>(0.0);
            var j = g;
            for (; j + group_count < n; j += 2u * group_count) {
                acc += weights[j] * unpack2x16float(cache[v_base + j * PAIRS]);
                acc_odd += weights[j + group_count] * unpack2x16float(cache[v_base + (j + group_count) * PAIRS]);
            }
            if (j < n) {
                acc += weights[j] * unpack2x16float(cache[v_base + j * PAIRS]);
            }
            acc += acc_odd;
        }
        m = m_new;
        // The next chunk writes weights only after its reduce_max, whose barriers each thread reaches
        // once done with these reads, so no barrier of its own here.
    }
    group_sums[tid] = acc;
    l = reduce_sum(l, inv); // its barriers also show every group's sum to the reads below
    if (tid >= PAIRS) {
        return;
    }
    var weighted = vec2<f32>(0.0);
    for (var k = 0u; k < group_count; k++) {
        weighted += group_sums[k * PAIRS + tid];
    }
    if (p.blocks == 1u) {
        // One workgroup holds every key the row sees (a decoder's own tokens): the partial is the
        // answer, so write it normalised straight to out [Tq, H*dh] (the buffer bound here) and
        // the host skips `combine`.
        attend_partials[out_row + 2u * tid] = weighted.x / l;
        if (2u * tid + 1u < HEAD_DIM) {
            attend_partials[out_row + 2u * tid + 1u] = weighted.y / l;
        }
        return;
    }
    attend_partials[out + 2u + 2u * tid] = weighted.x;
    if (2u * tid + 1u < HEAD_DIM) {
        attend_partials[out + 3u + 2u * tid] = weighted.y;
    }
    if (tid == 0u) {
        attend_partials[out] = m;
        attend_partials[out + 1u] = l;
    }
}

// ---- combine: one workgroup per (head, query row): merge its blocks' partials -> out [Tq, H*dh] ----

@group(0) @binding(1) var<storage, read> combine_partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> combine_out: array<f32>;

@compute @workgroup_size(COMBINE_THREADS)
fn combine(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let row = group_index(wid, nwg); // h * Tq + i
    if (row >= p.groups) {
        return;
    }
    let i = row % p.rows;
    let h = row / p.rows;
    let partial = HEAD_DIM + 2u; // floats per partial
    let row0 = row * p.blocks * partial;

    // Blocks are few (1500 keys / 64 = 24), so every thread recomputes the common max and sum.
    var m = NEG;
    for (var b = 0u; b < p.blocks; b++) {
        m = max(m, combine_partials[row0 + b * partial]);
    }
    var l = 0.0;
    for (var b = 0u; b < p.blocks; b++) {
        l += combine_partials[row0 + b * partial + 1u] * exp(combine_partials[row0 + b * partial] - m);
    }
    // A row that sees no position at all (causal, Tq > length) has l = 0: it gets zeros.
    let inv = select(0.0, 1.0 / l, l > 0.0);
    let out_row = i * p.heads * HEAD_DIM + h * HEAD_DIM;
    for (var d = tid; d < HEAD_DIM; d += COMBINE_THREADS) {
        var o = 0.0;
        for (var b = 0u; b < p.blocks; b++) {
            o += combine_partials[row0 + b * partial + 2u + d] * exp(combine_partials[row0 + b * partial] - m);
        }
        combine_out[out_row + d] = o * inv;
    }
}
