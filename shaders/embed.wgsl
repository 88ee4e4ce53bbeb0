// Token embedding plus positions: out[t] = table[ids[t]] + positions[pos0 + t], where
// pos0 = p.pos0 + at[0]: `at` is a decoder's position counter on the GPU (engine.ops.Position), or a
// zero for an int position. Rows past the table's n_positions rows get no position row.
//
// The table is a weight in its GGUF type (engine/gpu/tensors.py: GpuWeight), so one thread decodes
// one value. Override constants: WTYPE 0 F32, 1 F16, 2 Q8_0; HAS_POS reads `positions` [P, D]
// (when false, any buffer is bound there and never read).

struct Params {
    t: u32,
    d: u32,
    k_pad: u32,         // the table's row stride in values
    scale_stride: u32,  // Q8_0: u32 words of f16 scales per table row
    pos0: u32,
    n_positions: u32,   // rows of the positions table
}

override WTYPE: u32 = 0u;
override HAS_POS: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> positions: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read> at: array<u32>;

// table[row, d] as f32; Q8_0 as f32(scale) * f32(q) like numpy's dequantisation.
fn table_value(row: u32, d: u32) -> f32 {
    let at = row * p.k_pad + d;
    if (WTYPE == 0u) {
        return bitcast<f32>(table[at]);
    }
    if (WTYPE == 1u) {
        return unpack2x16float(table[at / 2u])[at & 1u];
    }
    // Move the wanted byte to the top, then shift back arithmetically to sign-extend it.
    let q = (bitcast<i32>(table[at / 4u]) << (24u - 8u * (at & 3u))) >> 24u;
    let s = unpack2x16float(scales[row * p.scale_stride + d / 64u])[(d / 32u) & 1u];
    return s * f32(q);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) l: u32) {
    let i = (wid.x + wid.y * groups.x) * 256u + l;
    if (i >= p.t * p.d) {
        return;
    }
    let t = i / p.d;
    let d = i % p.d;
    var v = table_value(ids[t], d);
    let pos = p.pos0 + at[0] + t;
    if (HAS_POS && pos < p.n_positions) {
        v += positions[pos * p.d + d];
    }
    out[i] = v;
}
