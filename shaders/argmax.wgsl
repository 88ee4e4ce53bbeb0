// Index of the largest value of each row of x [M, N] -> ids [M] (u32), the first one on ties, so
// greedy decoding picks what numpy's argmax picks. One workgroup per row: each thread scans a
// strided share of the row, then a tree reduction in shared memory.

struct Params {
    m: u32,
    n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;

const GROUP = 256u;
const NONE = 0xffffffffu;  // "no index yet": loses every tie, so it never beats a real index

var<workgroup> best_value: array<f32, GROUP>;
var<workgroup> best_index: array<u32, GROUP>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) l: u32) {
    let row = wid.x + wid.y * groups.x;
    if (row >= p.m) {
        return;
    }
    var value = bitcast<f32>(0xff800000u);  // -inf
    var index = NONE;
    // A thread sees its indices in increasing order, so a strict > keeps the first of equals.
    for (var j = l; j < p.n; j += GROUP) {
        let v = x[row * p.n + j];
        if (v > value || index == NONE) {
            value = v;
            index = j;
        }
    }
    best_value[l] = value;
    best_index[l] = index;
    workgroupBarrier();
    for (var stride = GROUP / 2u; stride > 0u; stride /= 2u) {
        if (l < stride) {
            let v = best_value[l + stride];
            let i = best_index[l + stride];
            if (v > best_value[l] || (v == best_value[l] && i < best_index[l])) {
                best_value[l] = v;
                best_index[l] = i;
            }
        }
        workgroupBarrier();
    }
    if (l == 0u) {
        ids[row] = best_index[0];
    }
}
