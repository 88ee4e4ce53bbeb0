// Gated activations: x [M, 2D] -> [M, D], the first half of each row is the value, the second the
// gate (see engine/gpu/ops/norm.py). One thread per output element.

struct Params { rows: u32, d: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));  // exp overflows to inf for v < -88, giving the right limit 0
}

// The output element of this thread; dispatches are spread over x and y by recorder.grid().
fn element(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

// Input offset of the value of output element i; its gate is p.d further on.
fn value_at(i: u32) -> u32 {
    return (i / p.d) * 2u * p.d + i % p.d;
}

@compute @workgroup_size(WG)
fn glu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if (i >= p.rows * p.d) { return; }
    let at = value_at(i);
    out[i] = x[at] * sigmoid(x[at + p.d]);
}

@compute @workgroup_size(WG)
fn swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if (i >= p.rows * p.d) { return; }
    let at = value_at(i);
    let gate = x[at + p.d];
    out[i] = x[at] * gate * sigmoid(gate);
}
