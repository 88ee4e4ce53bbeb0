// The fast tier's reduction of online softmax partials (online_softmax.wgsl): each subgroup merges its
// lanes' partials in registers (a butterfly of shuffles, every lane ending with the subgroup's), and
// only one partial per subgroup goes through workgroup memory: two barriers instead of log2(WG).
// The winner is the same in any order of merges (`takes_over`); the sum's rounding may differ from
// the tree's. Assumes the layout the start's probe checks (reduce_subgroup.wgsl, engine/gpu/fast.py).

var<workgroup> subgroup_m: array<f32, WG / 4u>;  // one per subgroup: at least 4 lanes each (the probe)
var<workgroup> subgroup_s: array<f32, WG / 4u>;
var<workgroup> subgroup_i: array<u32, WG / 4u>;

// As partials_workgroup.wgsl's: workgroup-uniform control flow only. The shuffles' loop runs over
// the subgroup's size, the same for all of its lanes; the uniformity analysis can't tell, `inv`
// holding the lane's own index too, so its subgroup rule is off here (Tint applies it; naga doesn't).
@diagnostic(off, subgroup_uniformity)
fn reduce_partial(part: Partial, inv: Invocation) -> Partial {
    var mine = part;
    for (var lanes = inv.size / 2u; lanes > 0u; lanes /= 2u) {
        let other = Partial(subgroupShuffleXor(mine.m, lanes), subgroupShuffleXor(mine.s, lanes),
                            subgroupShuffleXor(mine.i, lanes));
        mine = merge(mine, other);
    }
    if (inv.lane == 0u) {
        subgroup_m[inv.lid / inv.size] = mine.m;
        subgroup_s[inv.lid / inv.size] = mine.s;
        subgroup_i[inv.lid / inv.size] = mine.i;
    }
    workgroupBarrier();
    var total = Partial(subgroup_m[0], subgroup_s[0], subgroup_i[0]);
    for (var g = 1u; g < WG / inv.size; g++) {
        total = merge(total, Partial(subgroup_m[g], subgroup_s[g], subgroup_i[g]));
    }
    workgroupBarrier();
    return total;
}
