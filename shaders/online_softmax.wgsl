// Online softmax partials, for kernels that pick the likeliest of a set of logits and its probability
// in one pass (whisper_select.wgsl, transducer.wgsl's `choose`). A module is a reduction file
// (reduce_workgroup.wgsl or reduce_subgroup.wgsl, for `Invocation`), this file, the partials' reduction
// of the same tier (partials_workgroup.wgsl or partials_subgroup.wgsl), then the kernel's file
// (engine/gpu/entry_points.py names them). Empty sets are marked by index NONE
// rather than by infinities, which WGSL has no literal for and some compilers don't keep.

const NONE = 0xffffffffu;

// Online softmax partial over a set of tokens: largest logit m at index i (NONE: the set is empty),
// s = sum of exp(logit - m).
struct Partial { m: f32, s: f32, i: u32 }

// Adds token j with logit x; j grows along a thread's walk, so the strict > keeps the first of equals.
fn push(a: Partial, x: f32, j: u32) -> Partial {
    if (a.i == NONE) {
        return Partial(x, 1.0, j);
    }
    if (x > a.m) {
        return Partial(x, a.s * exp(a.m - x) + 1.0, j);
    }
    return Partial(a.m, a.s + exp(x - a.m), a.i);
}

// Whether the maximum of b (non-empty) wins over that of a (non-empty) when the two are merged: it is
// larger, or equal at a lower index (numpy's argmax), so the winner doesn't depend on the order of merges.
fn takes_over(a: Partial, b: Partial) -> bool {
    return b.m > a.m || (b.m == a.m && b.i < a.i);
}

// The partial of both sets: the winner's maximum and index, and the loser's sum rescaled to the winner's
// maximum (the winner's needs no exp(0) factor).
fn merge(a: Partial, b: Partial) -> Partial {
    if (b.i == NONE) {
        return a;
    }
    if (a.i == NONE) {
        return b;
    }
    if (takes_over(a, b)) {
        return Partial(b.m, a.s * exp(a.m - b.m) + b.s, b.i);
    }
    return Partial(a.m, a.s + b.s * exp(b.m - a.m), a.i);
}
