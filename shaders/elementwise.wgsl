// Elementwise kernels over flat float32 tensors, one value per thread.

struct Params {
    count: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
       @builtin(local_invocation_index) l: u32) {
    let i = (wid.x + wid.y * groups.x) * 256u + l;
    if (i < p.count) {
        out[i] = x[i] + y[i];
    }
}
