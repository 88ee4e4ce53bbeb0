// Reductions over a workgroup for the fast tier: each subgroup reduces in registers (subgroupAdd,
// subgroupMax) and only one value per subgroup goes through workgroup memory, so a reduction costs
// two barriers instead of 2·log2(WG); every invocation then adds the subgroups' values in the same
// order, so all agree. The same functions as reduce_workgroup.wgsl, which says how modules are made.
// They assume the layout the start's probe checks (engine/gpu/fast.py): invocation lid is lane
// lid % size of subgroup lid / size, the subgroups of one size from 4 to 32.

struct Invocation {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_size) size: u32,
    @builtin(subgroup_invocation_id) lane: u32,
}

const MAX_SUBGROUPS: u32 = 64u;  // 256 threads in subgroups of 4, the smallest the probe accepts

var<workgroup> subgroup_vals: array<f32, MAX_SUBGROUPS>;

// As reduce_workgroup.wgsl's: the workgroup's index, known to the uniformity analysis as uniform.
var<workgroup> workgroup_slot: u32;

fn workgroup_index(inv: Invocation) -> u32 {
    if (inv.lid == 0u) { workgroup_slot = inv.wid.x + inv.wid.y * inv.nwg.x; }
    return workgroupUniformLoad(&workgroup_slot);
}

// Must be called in workgroup-uniform control flow (a barrier).
fn reduce_sum(value: f32, inv: Invocation) -> f32 {
    let part = subgroupAdd(value);
    if (inv.lane == 0u) { subgroup_vals[inv.lid / inv.size] = part; }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < (WG + inv.size - 1u) / inv.size; i++) { total += subgroup_vals[i]; }
    workgroupBarrier();  // everyone has read the values before the next reduction writes them
    return total;
}

fn reduce_max(value: f32, inv: Invocation) -> f32 {
    let part = subgroupMax(value);
    if (inv.lane == 0u) { subgroup_vals[inv.lid / inv.size] = part; }
    workgroupBarrier();
    var top = subgroup_vals[0];
    for (var i = 1u; i < (WG + inv.size - 1u) / inv.size; i++) { top = max(top, subgroup_vals[i]); }
    workgroupBarrier();
    return top;
}

// As reduce_workgroup.wgsl's; `width` must be a multiple of the subgroup size (the probe accepts no
// subgroup wider than 32, gemv's width).
fn reduce_lanes(value: f32, width: u32, inv: Invocation) -> f32 {
    let part = subgroupAdd(value);
    if (inv.lane == 0u) { subgroup_vals[inv.lid / inv.size] = part; }
    workgroupBarrier();
    let first = (inv.lid - inv.lid % width) / inv.size;
    var total = 0.0;
    for (var i = 0u; i < width / inv.size; i++) { total += subgroup_vals[first + i]; }
    workgroupBarrier();
    return total;
}

// (subgroup size, lane) as this invocation saw them: what a probe writes and the host checks.
fn subgroup_layout(inv: Invocation) -> vec2<f32> {
    return vec2<f32>(f32(inv.size), f32(inv.lane));
}
