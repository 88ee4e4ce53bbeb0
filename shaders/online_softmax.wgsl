// Online softmax partials, for kernels that pick the likeliest of a set of logits and its probability
// in one pass (whisper_select.wgsl, transducer.wgsl's `choose`). A module is this file, then the
// kernel's file (engine/gpu/entry_points.py names the pair). Empty sets are marked by index NONE
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
// larger, or equal at a lower index (numpy's argmax). How the sums are rescaled is the kernel's
// (whisper_select.wgsl rescales both to the larger maximum, transducer.wgsl only the loser's).
fn takes_over(a: Partial, b: Partial) -> bool {
    return b.m > a.m || (b.m == a.m && b.i < a.i);
}
