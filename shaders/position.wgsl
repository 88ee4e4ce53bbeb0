// A decoder position held on the GPU (engine.ops.Position): `advance` adds to its counter in queue
// order, so the kernels of the next step read the new value, and a step's recording (whose
// parameters then never change) can be replayed (engine/gpu/recorder.py, Replay).

struct Params { by: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> counter: array<u32>;

@compute @workgroup_size(1)
fn advance() {
    counter[0] += p.by;
}
