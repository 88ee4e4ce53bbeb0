// A transducer's greedy search (TDT or RNN-T) on the GPU, step by step without read-backs
// (engine/gpu/ops/transducer.py; the search's rules and its numpy oracle are in
// engine/conformer/heads.py). Every kernel reads the search's position from `state`, so a step's
// dispatches never change and a batch of steps is replayed as it was recorded.
//
// state (u32): [0] the encoder frame t, [1] tokens emitted on this frame without moving on,
// [2] emissions so far n, [3] 1 while the predictor is to take the last emitted token (set by
// `choose`, read by `lstm_cell`), then from HEADER four words per emission: token, frame, duration,
// probability (f32 bits). The search is over once t reaches the frame count; every kernel then
// leaves what it would write as it is.

const HEADER = 4u;  // NONE, the partials and `reduce_partial` come before this file in the module

// ---- joint_hidden: the joint's hidden layer at frame t ---------------------------------------------
// hidden [J] = act(encoder [T, J] at row t + prediction [J]), where the prediction is the joint's
// projection of the predictor's output (bias included).

struct HiddenParams {
    frames: u32,
    width: u32,
}

override ACT: u32 = 0u;  // 0 ReLU, 1 tanh, 2 sigmoid (engine/gpu/ops/transducer.py JOINT_ACTIVATIONS)

@group(0) @binding(0) var<uniform> hp: HiddenParams;
@group(0) @binding(1) var<storage, read> encoder: array<f32>;
@group(0) @binding(2) var<storage, read> prediction: array<f32>;
@group(0) @binding(3) var<storage, read> hidden_state: array<u32>;
@group(0) @binding(4) var<storage, read_write> hidden: array<f32>;

fn joint_activation(x: f32) -> f32 {
    // tanh is exactly ±1 in f32 past |x| = 9; the clamp keeps drivers that compute it through exp
    // from overflowing to NaN (as gemm.wgsl does).
    switch ACT {
        case 1u: { return tanh(clamp(x, -9.0, 9.0)); }
        case 2u: { return 0.5 * (1.0 + tanh(clamp(0.5 * x, -9.0, 9.0))); }
        default: { return max(x, 0.0); }
    }
}

@compute @workgroup_size(256)
fn joint_hidden(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = hidden_state[0];
    let j = gid.x;
    if (t >= hp.frames || j >= hp.width) {
        return;
    }
    hidden[j] = joint_activation(encoder[t * hp.width + j] + prediction[j]);
}

// ---- choose: the step's token and duration, and the search's next position --------------------------
// logits [n_tokens + n_durations] (the blank is token n_tokens - 1). One workgroup: each thread walks a
// strided share of the tokens keeping the largest logit, its index and the sum of exp(logit - largest);
// `reduce_partial` merges them (lower index on ties, as numpy's argmax); thread 0 picks the duration,
// records an emission and moves t on. On an emission `ids` [1] gets the token, for the predictor's
// embedding.

struct ChooseParams {
    frames: u32,
    n_tokens: u32,
    n_durations: u32,  // 0: RNN-T (every blank moves on one frame, a token stays)
    max_symbols: u32,  // 0: no limit
    capacity: u32,     // emissions the state holds; a full state ends the search
}

override WG: u32 = 256u;  // threads, a power of two

@group(0) @binding(0) var<uniform> cp: ChooseParams;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> durations: array<u32>;
@group(0) @binding(3) var<storage, read_write> state: array<u32>;
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;

@compute @workgroup_size(WG)
fn choose(inv: Invocation) {
    let l = inv.lid;
    if (cp.n_tokens == 0u) {  // an empty problem is the fast tier's probe (engine/gpu/fast.py)
        let seen = subgroup_layout(inv);
        state[2u * l] = bitcast<u32>(seen.x);
        state[2u * l + 1u] = bitcast<u32>(seen.y);
        return;
    }
    // Every invocation reaches the reduction's barriers, the search over or not: t is read from
    // read_write storage, which WGSL's uniformity analysis can't know to be the same for all.
    let t = state[0];
    let searching = t < cp.frames;
    var part = Partial(0.0, 0.0, NONE);
    for (var j = l; searching && j < cp.n_tokens; j += WG) {
        part = push(part, logits[j], j);
    }
    let best = reduce_partial(part, inv);
    // Every thread read the state above, before the barriers, so thread 0 may now update it.
    if (l != 0u) {
        return;
    }
    if (!searching) {
        state[3] = 0u;
        return;
    }
    let token = best.i;
    let blank = cp.n_tokens - 1u;
    var duration = 1u;
    var moves = token == blank;  // RNN-T: a blank moves on one frame, a token stays
    if (cp.n_durations > 0u) {
        var best = 0u;
        for (var d = 1u; d < cp.n_durations; d++) {
            if (logits[cp.n_tokens + d] > logits[cp.n_tokens + best]) {
                best = d;
            }
        }
        duration = durations[best];
        moves = false;
    }
    var next = t;
    var symbols = state[1] + 1u;
    var n = state[2];
    if (token != blank) {
        let at = HEADER + 4u * n;
        state[at] = token;
        state[at + 1u] = t;
        state[at + 2u] = duration;
        state[at + 3u] = bitcast<u32>(1.0 / best.s);  // exp(m - m) / sum
        n += 1u;
        ids[0] = token;
    }
    state[3] = select(0u, 1u, token != blank);
    if (cp.n_durations > 0u) {
        next += duration;
        // A blank that doesn't move would repeat unchanged until the symbol limit forces a step.
        moves = duration == 0u && (token == blank || (cp.max_symbols > 0u && symbols >= cp.max_symbols));
        if (duration != 0u) {
            symbols = 0u;
        }
    } else if (!moves && cp.max_symbols > 0u && symbols >= cp.max_symbols) {
        moves = true;
    }
    if (moves) {
        next += 1u;
        symbols = 0u;
    }
    if (n >= cp.capacity) {
        next = cp.frames;
    }
    state[0] = next;
    state[1] = symbols;
    state[2] = n;
}

// ---- lstm_cell: one LSTM layer's new state, where the last step emitted a token ---------------------
// gates [4H] (PyTorch's order i, f, g, o; both products and the bias summed), c [H] and h [H] updated
// in place; a step without an emission leaves them as they are. With INPUT_GATES the first layer's
// input gates of the emitted token, row cell_token[0] of a table [V, 4H], are added to the gates here:
// looking them up in a dispatch of their own cost as much as the whole cell update.

override INPUT_GATES: bool = false;

struct CellParams {
    hidden: u32,
    table_stride: u32,  // the input gates table's row stride (its padded width)
}

@group(0) @binding(0) var<uniform> lp: CellParams;
@group(0) @binding(1) var<storage, read> gates: array<f32>;
@group(0) @binding(2) var<storage, read> cell_state: array<u32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;
@group(0) @binding(5) var<storage, read> input_gates: array<f32>;
@group(0) @binding(6) var<storage, read> cell_token: array<u32>;

// Gate i: the products' sum, plus the token's input gates where they are looked up here.
fn gate(i: u32) -> f32 {
    if (INPUT_GATES) {
        return gates[i] + input_gates[cell_token[0] * lp.table_stride + i];
    }
    return gates[i];
}

fn sigmoid(x: f32) -> f32 {
    return 0.5 * (1.0 + tanh(clamp(0.5 * x, -9.0, 9.0)));
}

@compute @workgroup_size(256)
fn lstm_cell(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    if (j >= lp.hidden || cell_state[3] == 0u) {
        return;
    }
    let n = lp.hidden;
    let c_new = sigmoid(gate(n + j)) * c[j] + sigmoid(gate(j)) * tanh(clamp(gate(2u * n + j), -9.0, 9.0));
    c[j] = c_new;
    h[j] = sigmoid(gate(3u * n + j)) * tanh(clamp(c_new, -9.0, 9.0));
}
