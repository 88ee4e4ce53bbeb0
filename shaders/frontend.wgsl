// Frontends' last steps, after the products that make their features (engine/gpu/ops/frontend.py).
//
// whisper_log_mel: Whisper's normalised log-mel out [frames, n_mels] from mel power [rows, n_mels]
// of the frames with sound (rows <= frames; the rest are silence, power 0). v = log10(max(mel,
// 1e-10)), clamped to at least top - 8 where top is the largest v (and at least -10, silence's v,
// when rows < frames), then (v + 4) / 4. The clamp needs the maximum of the whole window first, so
// one workgroup does both passes: 3000 x 80 values are a few hundred per thread, microseconds, and
// a second dispatch with a partial maximum per workgroup would cost more than it saves.

struct Params {
    rows: u32,
    frames: u32,
    cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> mel: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

const THREADS: u32 = 256u;
const LOG10_2: f32 = 0.30102999566398120;
const SILENCE: f32 = -10.0; // log10(1e-10)

var<workgroup> tops: array<f32, THREADS>;

fn log_power(i: u32) -> f32 {
    return log2(max(mel[i], 1e-10)) * LOG10_2; // WGSL has no log10
}

@compute @workgroup_size(THREADS)
fn whisper_log_mel(@builtin(local_invocation_index) tid: u32) {
    let sound = p.rows * p.cols;
    var top = select(-3.0e38, SILENCE, p.rows < p.frames);
    for (var i = tid; i < sound; i += THREADS) {
        top = max(top, log_power(i));
    }
    tops[tid] = top;
    workgroupBarrier();
    for (var step = THREADS / 2u; step > 0u; step >>= 1u) {
        if (tid < step) {
            tops[tid] = max(tops[tid], tops[tid + step]);
        }
        workgroupBarrier();
    }
    let floor = tops[0] - 8.0;
    for (var i = tid; i < p.frames * p.cols; i += THREADS) {
        var v = SILENCE;
        if (i < sound) {
            v = log_power(i);
        }
        out[i] = (max(v, floor) + 4.0) / 4.0;
    }
}
