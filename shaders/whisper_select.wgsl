// Whisper's greedy token selection on the GPU (engine/gpu/ops/select.py; the rules are those of
// Ops.whisper_select in engine/ops.py, the numpy oracle is NumpyOps.whisper_select).
//
// One workgroup. Each thread walks a strided share of the vocabulary once, skipping disallowed
// tokens, and keeps two online softmax partials, one over text (ids below timestamp_begin) and one
// over timestamps: the largest logit, its index and the sum of exp(logit - largest).
// `reduce_partial` merges each set's; thread 0 then applies the "timestamps are likelier than any text
// token" rule, picks the token and writes it to `ids` (what the next step's embed reads), appends it
// to the history in `state` and updates the state. The partials (`Partial`, `push`, `merge`, NONE for
// an empty set) are online_softmax.wgsl's, and `reduce_partial` the tier's, before this file in the
// module.
//
// state (u32): [0] tokens chosen so far n, [1] the last chosen timestamp (0: none yet),
// [2 .. 2+capacity) the chosen tokens, [2+capacity .. 2+2*capacity) their log-probabilities (f32 bits).
// masks (u32 bits, bit j%32 of word j/32): words [0, words) suppress, [words, 2*words) begin-suppress.

struct Params {
    n_vocab: u32,
    eot: u32,
    timestamp_begin: u32,
    timestamps: u32,             // 0: every timestamp is suppressed instead of the timestamp rules
    max_initial_timestamp: u32,  // latest first timestamp, as an index from timestamp_begin
    capacity: u32,
    words: u32,                  // words per mask plane
}

override WG: u32 = 256u;  // threads, a power of two

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> masks: array<u32>;
@group(0) @binding(3) var<storage, read_write> state: array<u32>;
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;

fn masked(plane: u32, j: u32) -> bool {
    return ((masks[plane * p.words + j / 32u] >> (j % 32u)) & 1u) != 0u;
}

@compute @workgroup_size(WG)
fn main(inv: Invocation) {
    let l = inv.lid;
    if (p.n_vocab == 0u) {  // an empty problem is the fast tier's probe (engine/gpu/fast.py)
        let seen = subgroup_layout(inv);
        state[2u * l] = bitcast<u32>(seen.x);
        state[2u * l + 1u] = bitcast<u32>(seen.y);
        return;
    }
    let n = state[0];
    let last_stamp = state[1];
    let begin = p.timestamp_begin;
    let selecting = n < p.capacity && !(n > 0u && state[1u + n] == p.eot);  // state[2 + n - 1]: the last token

    // The allowed ids are [text_lo, text_hi) and [stamp_lo, stamp_hi), minus the masks.
    var text_lo = 0u;
    var text_hi = begin;
    var stamp_lo = begin;
    var stamp_hi = p.n_vocab;
    if (p.timestamps == 0u) {
        stamp_hi = begin;
    } else {
        let last_was_stamp = n >= 1u && state[1u + n] >= begin;
        let penultimate_was_stamp = n < 2u || state[n] >= begin;
        if (last_was_stamp && penultimate_was_stamp) {  // a pair just closed: text or EOT
            stamp_hi = begin;
        }
        if (last_was_stamp && !penultimate_was_stamp) {  // a segment's end: the next start or EOT
            text_lo = p.eot;
        }
        if (last_stamp != 0u) {  // never back in time; after text, strictly forward
            stamp_lo = max(begin, select(last_stamp + 1u, last_stamp, last_was_stamp && !penultimate_was_stamp));
        }
        if (n == 0u) {  // the window opens with a timestamp within the first max_initial_timestamp
            text_hi = 0u;
            stamp_hi = min(stamp_hi, begin + p.max_initial_timestamp + 1u);
        }
    }

    var text = Partial(0.0, 0.0, NONE);
    var stamps = Partial(0.0, 0.0, NONE);
    for (var j = l; selecting && j < p.n_vocab; j += WG) {
        if (masked(0u, j) || (n == 0u && masked(1u, j))) {
            continue;
        }
        if (j >= text_lo && j < text_hi) {
            text = push(text, logits[j], j);
        } else if (j >= stamp_lo && j < stamp_hi) {
            stamps = push(stamps, logits[j], j);
        }
    }

    text = reduce_partial(text, inv);
    stamps = reduce_partial(stamps, inv);
    // Every thread read the state above, before the barriers, so thread 0 may now update it.
    if (l != 0u) {
        return;
    }
    if (!selecting) {
        ids[0] = p.eot;
        return;
    }
    // Timestamps together likelier than the best text token: text is disallowed. (Comparing
    // log-probabilities or logits is the same: both sides lose the same log-sum-exp of all.)
    let force_stamp = stamps.i != NONE && (text.i == NONE || stamps.m + log(stamps.s) > text.m);
    var token = p.eot;  // unreachable fallback: EOT or an early timestamp is always allowed
    var lse = 0.0;
    if (force_stamp) {
        token = stamps.i;
        lse = stamps.m + log(stamps.s);
    } else if (text.i != NONE) {
        let both = merge(text, stamps);
        token = both.i;
        lse = both.m + log(both.s);
    }
    ids[0] = token;
    state[2u + n] = token;
    state[2u + p.capacity + n] = bitcast<u32>(logits[token] - lse);
    state[0] = n + 1u;
    if (token >= begin) {
        state[1] = token;
    }
}
