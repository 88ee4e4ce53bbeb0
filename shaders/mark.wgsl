// The submission mark: the last dispatch of every submission writes its serial number, so a
// read-back can tell a submission the driver dropped from one that ran (see engine/gpu/recorder.py).

struct Params { serial: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> mark: array<u32>;

@compute @workgroup_size(1)
fn main() {
    mark[0] = p.serial;
}
