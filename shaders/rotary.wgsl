// Rotary position embedding on the first rot_dim dims of every head of x [T, H*dh] (see
// engine/gpu/ops/norm.py). One thread per element: each computes its own pair's rotation.
//
// Angles are exact to ~1e-6 rad at any position below 2^24. A plain f32 angle pos * freq is off by
// up to half an ulp of the angle (6e-5 rad at position 1000), and GPU sin/cos lose accuracy far from
// zero. So the host passes each pair's frequency in turns per position, split as hi + lo with hi
// holding 12 significant bits; positions are split into their high and low 12 bits the same way, so
// the big products are exact, their whole turns drop out with fract(), and sin/cos see |angle| <= pi.

struct Params { t: u32, width: u32, head_dim: u32, rot_dim: u32, pos0: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> turns_per_pos: array<vec2<f32>>;  // [rot_dim/2] (hi, lo)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

override INTERLEAVED: bool = true;  // pairs (2i, 2i+1); else (i, i + rot_dim/2)
const WG: u32 = 256u;
const TAU: f32 = 6.2831853;

// The angle in (-pi, pi] that pair `pair` turns by at position `pos`, modulo a whole turn.
fn angle(pos: u32, pair: u32) -> f32 {
    let freq = turns_per_pos[pair];
    let low = pos & 0xfffu;
    let high = pos - low;
    var turn = fract(fract(f32(high) * freq.x) + fract(f32(low) * freq.x) + fract(f32(pos) * freq.y));
    if (turn > 0.5) { turn -= 1.0; }
    return turn * TAU;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid;  // spread over x and y by recorder.grid()
    if (i >= p.t * p.width) { return; }
    let row = i / p.width;
    let d = (i % p.width) % p.head_dim;
    if (d >= p.rot_dim) {
        out[i] = x[i];
        return;
    }
    let head = i - d;
    var pair: u32;
    var first: u32;
    var second: u32;
    var is_second: bool;
    if (INTERLEAVED) {
        pair = d / 2u;
        first = head + 2u * pair;
        second = first + 1u;
        is_second = (d & 1u) == 1u;
    } else {
        let half = p.rot_dim / 2u;
        pair = d % half;
        first = head + pair;
        second = first + half;
        is_second = d >= half;
    }
    let a = angle(p.pos0 + row, pair);
    let c = cos(a);
    let s = sin(a);
    if (is_second) {
        out[i] = x[second] * c + x[first] * s;
    } else {
        out[i] = x[first] * c - x[second] * s;
    }
}
