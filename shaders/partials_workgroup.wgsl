// The portable reduction of online softmax partials (online_softmax.wgsl) over a workgroup: a tree in
// workgroup memory. partials_subgroup.wgsl is the fast tier's; both define `reduce_partial`, so one
// text of each kernel serves both tiers. The including file declares WG, the workgroup size.

var<workgroup> partial_m: array<f32, WG>;
var<workgroup> partial_s: array<f32, WG>;
var<workgroup> partial_i: array<u32, WG>;

// Every thread's partial in, the workgroup's out to every thread. Must be called in workgroup-uniform
// control flow (barriers).
fn reduce_partial(part: Partial, inv: Invocation) -> Partial {
    let l = inv.lid;
    partial_m[l] = part.m;
    partial_s[l] = part.s;
    partial_i[l] = part.i;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (l < half) {
            let both = merge(Partial(partial_m[l], partial_s[l], partial_i[l]),
                             Partial(partial_m[l + half], partial_s[l + half], partial_i[l + half]));
            partial_m[l] = both.m;
            partial_s[l] = both.s;
            partial_i[l] = both.i;
        }
        workgroupBarrier();
    }
    let total = Partial(partial_m[0], partial_s[0], partial_i[0]);
    workgroupBarrier();  // everyone has read the result before the next reduction writes again
    return total;
}
