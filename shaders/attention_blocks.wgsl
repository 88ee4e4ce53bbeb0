// What the encoder attention kernels share (attention_tiled.wgsl and, in the fast tier,
// attention_tiled_subgroup.wgsl, each after this file in a module): their parameters, bindings and
// which (sequence, head, block of query rows) a workgroup takes. Both read q: [Tq, H*dh] and k, v:
// [Tk, H*dh] as vec4s for each of `batch` sequences one after the other in the buffers, and write out
// like q; each defines QUADS (dh / 4). (Their loops over the tiles stay in the kernels: naga 29
// panics on a helper function that indexes an array sized by an override.)

struct Params {
    tq: u32,
    tk: u32,
    heads: u32,
    scale: f32,
    groups: u32, // batch * heads * ceil(tq / rows per workgroup): the grid may hold more workgroups than that
    batch: u32, // sequences of tq queries and tk keys each
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

struct QueryBlock {
    q0: u32, // its first query row in the sequence
    row_quads: u32, // quads per row of q, k, v, out
    q_base: u32, // the quad of q and out where the sequence's row 0 starts for this head
    k_base: u32, // the same in k and v
}

// The block of `rows` query rows of workgroup `group` (< p.groups): workgroups go head by head,
// then block by block, then sequence by sequence.
fn query_block(group: u32, rows: u32) -> QueryBlock {
    let per_sequence = p.groups / p.batch;
    let local = group % per_sequence;
    let h = local % p.heads;
    let row_quads = p.heads * QUADS;
    let sequence = group / per_sequence;
    return QueryBlock((local / p.heads) * rows, row_quads, sequence * p.tq * row_quads + h * QUADS,
                      sequence * p.tk * row_quads + h * QUADS);
}
