// Reductions over a workgroup, the portable way: a tree in workgroup memory. A module of row kernels
// is this file or reduce_subgroup.wgsl, then the kernels' file (engine/gpu/entry_points.py names the
// pair): both define the same `Invocation` (the builtins an entry point takes), `workgroup_index`,
// `reduce_sum`, `reduce_max`, `reduce_lanes` and `subgroup_layout`, so one text of each kernel serves
// both tiers.
// The including file declares WG, the workgroup size.

struct Invocation {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> shared_vals: array<f32, WG>;

// The workgroup's index in a dispatch spread over x and y (recorder.grid()), as a value every
// invocation is known to share: `inv` holds the invocation's own index too, so WGSL's uniformity
// analysis (Tint applies it; naga doesn't) takes all of `inv` as varying, and a kernel that returns
// early on its workgroup's index before a reduction's barriers would be refused. One barrier.
var<workgroup> workgroup_slot: u32;

fn workgroup_index(inv: Invocation) -> u32 {
    if (inv.lid == 0u) { workgroup_slot = inv.wid.x + inv.wid.y * inv.nwg.x; }
    return workgroupUniformLoad(&workgroup_slot);
}

// One value per thread in, the workgroup's sum (max) out to every thread. They must be called in
// workgroup-uniform control flow (they contain barriers).
fn reduce_sum(value: f32, inv: Invocation) -> f32 {
    shared_vals[inv.lid] = value;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (inv.lid < half) {
            shared_vals[inv.lid] = shared_vals[inv.lid] + shared_vals[inv.lid + half];
        }
        workgroupBarrier();
    }
    let total = shared_vals[0];
    workgroupBarrier();  // everyone has read the result before the next reduction overwrites it
    return total;
}

fn reduce_max(value: f32, inv: Invocation) -> f32 {
    shared_vals[inv.lid] = value;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half = half / 2u) {
        if (inv.lid < half) {
            shared_vals[inv.lid] = max(shared_vals[inv.lid], shared_vals[inv.lid + half]);
        }
        workgroupBarrier();
    }
    let total = shared_vals[0];
    workgroupBarrier();
    return total;
}

// The sum over each aligned group of `width` invocations (a power of two dividing WG: one output's
// threads in gemv), for every invocation of the group.
fn reduce_lanes(value: f32, width: u32, inv: Invocation) -> f32 {
    shared_vals[inv.lid] = value;
    workgroupBarrier();
    let lane = inv.lid % width;
    for (var half = width / 2u; half > 0u; half = half / 2u) {
        if (lane < half) {
            shared_vals[inv.lid] = shared_vals[inv.lid] + shared_vals[inv.lid + half];
        }
        workgroupBarrier();
    }
    let total = shared_vals[inv.lid - lane];
    workgroupBarrier();
    return total;
}

// What a probe of the fast tier reads (reduce_subgroup.wgsl); portable kernels are never probed.
fn subgroup_layout(inv: Invocation) -> vec2<f32> {
    return vec2<f32>(0.0, f32(inv.lid));
}
