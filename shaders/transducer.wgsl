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
    let t = state[0];
    if (t >= cp.frames) {
        if (l == 0u) {
            state[3] = 0u;
        }
        return;
    }
    var part = Partial(0.0, 0.0, NONE);
    for (var j = l; j < cp.n_tokens; j += WG) {
        part = push(part, logits[j], j);
    }
    let best = reduce_partial(part, inv);
    if (l != 0u) {
        return;
    }
    let token = best.i;
    let blank = cp.n_tokens - 1u;
    var duration = 1u;
    if (cp.n_durations > 0u) {
        var best = 0u;
        for (var d = 1u; d < cp.n_durations; d++) {
            if (logits[cp.n_tokens + d] > logits[cp.n_tokens + best]) {
                best = d;
            }
        }
        duration = durations[best];
    }
    let t_next = advance(t, state[1] + 1u, token, blank, duration, cp.n_durations > 0u, cp.max_symbols);
    var next = t_next.x;
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
    if (n >= cp.capacity) {
        next = cp.frames;
    }
    state[0] = next;
    state[1] = t_next.y;
    state[2] = n;
}

// Where the search goes after choosing `token` (and, TDT, `duration`) on frame t, the token being the
// frame's `symbols`-th without moving on (this one counted): (the next frame, the new symbol count).
// RNN-T: a blank moves on one frame, a token stays; TDT moves on by the duration. Either way a frame
// that reaches the symbol limit (max_symbols > 0) moves on.
fn advance(t: u32, symbols: u32, token: u32, blank: u32, duration: u32, tdt: bool, max_symbols: u32) -> vec2<u32> {
    var next = t;
    var count = symbols;
    var moves = token == blank;
    if (tdt) {
        next += duration;
        // A blank that doesn't move would repeat unchanged until the symbol limit forces a step.
        moves = duration == 0u && (token == blank || (max_symbols > 0u && count >= max_symbols));
        if (duration != 0u) {
            count = 0u;
        }
    } else if (!moves && max_symbols > 0u && count >= max_symbols) {
        moves = true;
    }
    if (moves) {
        next += 1u;
        count = 0u;
    }
    return vec2<u32>(next, count);
}

// ---- lstm_cell: one LSTM layer's new state, where the last step emitted a token ---------------------
// gates [4H] (PyTorch's order i, f, g, o; both products and the bias summed), c [H] and h [H] updated
// in place; a step without an emission leaves them as they are.

struct CellParams {
    hidden: u32,
}

@group(0) @binding(0) var<uniform> lp: CellParams;
@group(0) @binding(1) var<storage, read> gates: array<f32>;
@group(0) @binding(2) var<storage, read> cell_state: array<u32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;

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
    let c_new = sigmoid(gates[n + j]) * c[j] + sigmoid(gates[j]) * tanh(clamp(gates[2u * n + j], -9.0, 9.0));
    c[j] = c_new;
    h[j] = sigmoid(gates[3u * n + j]) * tanh(clamp(c_new, -9.0, 9.0));
}

// ---- small_steps: whole steps of a small head's search in one workgroup -----------------------------
// For heads whose predictor and joint are small (GigaAM's: one LSTM layer of 320, a joint of 320, 34
// characters), where a step's seven dispatches cost more than their arithmetic. One workgroup runs up
// to `steps` steps of an RNN-T search as joint_hidden, the joint's products, choose and the
// LSTM do (the same rules, through `advance`), with the predictor's state in workgroup memory, and
// stops early once the frames are done. The first LSTM layer's input gates are looked up per token
// (engine/conformer/search.py's table); a head with more layers is not taken here.
//
// `head` holds every weight as f32, each matrix stored k-major (W[r, k] at k * rows + r, so the
// threads of a product read consecutive words), at the offsets the parameters give: the joint's
// predictor projection Wp [J, H] and bias [J], its output layer Wo [O, J] and bias [O] (O = tokens),
// the gate table G [tokens, 4H] (embedding · Wxᵀ + bias) and the recurrent weights Wh [4H, H].

struct SmallParams {
    frames: u32,
    n_tokens: u32,
    max_symbols: u32,
    capacity: u32,
    hidden: u32,  // H
    joint: u32,   // J
    steps: u32,
    wp: u32,
    bp: u32,
    wo: u32,
    bo: u32,
    gates: u32,
    wh: u32,
}

const SMALL_MAX: u32 = 512u;  // H, J and O each at most this (engine/gpu/ops/transducer.py SMALL_HEAD_MAX)

@group(0) @binding(0) var<uniform> sp: SmallParams;
@group(0) @binding(1) var<storage, read> projected: array<f32>;  // [T, J]: the joint's encoder projection
@group(0) @binding(2) var<storage, read> head: array<f32>;
@group(0) @binding(3) var<storage, read_write> small_state: array<u32>;
@group(0) @binding(4) var<storage, read_write> cell: array<f32>;    // c [H]
@group(0) @binding(5) var<storage, read_write> output: array<f32>;  // h [H]

var<workgroup> c_sh: array<f32, SMALL_MAX>;
var<workgroup> h_sh: array<f32, SMALL_MAX>;
var<workgroup> prediction_sh: array<f32, SMALL_MAX>;
var<workgroup> hidden_sh: array<f32, SMALL_MAX>;
var<workgroup> logits_sh: array<f32, SMALL_MAX>;
var<workgroup> gates_sh: array<f32, 4u * SMALL_MAX>;
var<workgroup> t_sh: u32;        // the state's words 0..2: the frame t, ...
var<workgroup> symbols_sh: u32;  // ... tokens emitted on it without moving on, ...
var<workgroup> n_sh: u32;        // ... emissions so far
var<workgroup> emitted_sh: u32;  // the step's token, or the blank

// prediction = Wp · h + bp, from h_sh; the caller puts a barrier after it.
fn predict(l: u32) {
    for (var r = l; r < sp.joint; r += WG) {
        var sum = head[sp.bp + r];
        for (var k = 0u; k < sp.hidden; k++) {
            sum += head[sp.wp + k * sp.joint + r] * h_sh[k];
        }
        prediction_sh[r] = sum;
    }
}

@compute @workgroup_size(WG)
fn small_steps(inv: Invocation) {
    let l = inv.lid;
    let h_n = sp.hidden;
    for (var j = l; j < h_n; j += WG) {
        c_sh[j] = cell[j];
        h_sh[j] = output[j];
    }
    if (l == 0u) {
        t_sh = small_state[0];
        symbols_sh = small_state[1];
        n_sh = small_state[2];
    }
    workgroupBarrier();
    predict(l);
    workgroupBarrier();

    for (var step = 0u; step < sp.steps; step++) {
        let t = workgroupUniformLoad(&t_sh);
        if (t >= sp.frames) {
            break;
        }
        for (var j = l; j < sp.joint; j += WG) {
            hidden_sh[j] = joint_activation(projected[t * sp.joint + j] + prediction_sh[j]);
        }
        workgroupBarrier();
        for (var r = l; r < sp.n_tokens; r += WG) {
            var sum = head[sp.bo + r];
            for (var k = 0u; k < sp.joint; k++) {
                sum += head[sp.wo + k * sp.n_tokens + r] * hidden_sh[k];
            }
            logits_sh[r] = sum;
        }
        workgroupBarrier();
        var part = Partial(0.0, 0.0, NONE);
        for (var j = l; j < sp.n_tokens; j += WG) {
            part = push(part, logits_sh[j], j);
        }
        let best = reduce_partial(part, inv);
        let blank = sp.n_tokens - 1u;
        if (l == 0u) {
            let moved = advance(t, symbols_sh + 1u, best.i, blank, 1u, false, sp.max_symbols);
            var next = moved.x;
            var n = n_sh;
            if (best.i != blank) {
                let at = HEADER + 4u * n;
                small_state[at] = best.i;
                small_state[at + 1u] = t;
                small_state[at + 2u] = 1u;
                small_state[at + 3u] = bitcast<u32>(1.0 / best.s);
                n += 1u;
            }
            if (n >= sp.capacity) {
                next = sp.frames;
            }
            t_sh = next;
            symbols_sh = moved.y;
            n_sh = n;
            emitted_sh = best.i;
        }
        let token = workgroupUniformLoad(&emitted_sh);
        if (token == blank) {
            continue;
        }
        // The predictor takes the emitted token: gates = G[token] + Wh · h, then the cell.
        for (var r = l; r < 4u * h_n; r += WG) {
            var sum = head[sp.gates + token * 4u * h_n + r];
            for (var k = 0u; k < h_n; k++) {
                sum += head[sp.wh + k * 4u * h_n + r] * h_sh[k];
            }
            gates_sh[r] = sum;
        }
        workgroupBarrier();
        for (var j = l; j < h_n; j += WG) {
            let c_new = sigmoid(gates_sh[h_n + j]) * c_sh[j]
                + sigmoid(gates_sh[j]) * tanh(clamp(gates_sh[2u * h_n + j], -9.0, 9.0));
            c_sh[j] = c_new;
            h_sh[j] = sigmoid(gates_sh[3u * h_n + j]) * tanh(clamp(c_new, -9.0, 9.0));
        }
        workgroupBarrier();
        predict(l);
        workgroupBarrier();
    }

    for (var j = l; j < h_n; j += WG) {
        cell[j] = c_sh[j];
        output[j] = h_sh[j];
    }
    if (l == 0u) {
        small_state[0] = t_sh;
        small_state[1] = symbols_sh;
        small_state[2] = n_sh;
        small_state[3] = 0u;  // the predictor has taken every emission
    }
}
