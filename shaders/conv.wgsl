// Convolutions (see engine/gpu/ops/conv.py). 1-D over time-major x [T, C]: im2col unfolds x so that a
// full conv is one GEMM; depthwise_conv is computed directly (each channel has its own k taps, so
// there is no GEMM to hand it to). One thread per output element; positions outside x read zero.

const WG: u32 = 256u;

// The output element of this thread; dispatches are spread over x and y by recorder.grid().
fn element(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

// ---- im2col: x [batch*t, C] at 1, out [batch*t_out, C*kernel] at 2: each sequence of t rows on its own

struct UnfoldParams { t: u32, c: u32, kernel: u32, stride: u32, pad: u32, t_out: u32, batch: u32 }
@group(0) @binding(0) var<uniform> up: UnfoldParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> unfolded: array<f32>;

@compute @workgroup_size(WG)
fn im2col(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    let width = up.c * up.kernel;
    if (i >= up.batch * up.t_out * width) { return; }
    let col = i % width;  // c*kernel + j, the order of a conv weight [C_out, C, kernel] flattened
    let row = i / width;
    let src = i32((row % up.t_out) * up.stride + col % up.kernel) - i32(up.pad);
    var value = 0.0;
    if (src >= 0 && src < i32(up.t)) {
        value = x[((row / up.t_out) * up.t + u32(src)) * up.c + col / up.kernel];
    }
    unfolded[i] = value;
}

// ---- depthwise_conv: x at 1, w [C, k] at 2, b [C] at 3 (a dummy without HAS_B), out [T, C] at 4 --

override HAS_B: bool = true;

struct DepthwiseParams { t: u32, c: u32, k: u32, pad_left: u32 }
@group(0) @binding(0) var<uniform> dp: DepthwiseParams;
@group(0) @binding(2) var<storage, read> taps: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> conv_out: array<f32>;

@compute @workgroup_size(WG)
fn depthwise_conv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if (i >= dp.t * dp.c) { return; }
    let ch = i % dp.c;
    let t0 = i32(i / dp.c) - i32(dp.pad_left);
    // Only taps that land inside x contribute: clip the tap range instead of testing every tap.
    let j_first = u32(max(0, -t0));
    let j_end = u32(clamp(i32(dp.t) - t0, 0, i32(dp.k)));
    var acc = 0.0;
    for (var j = j_first; j < j_end; j++) {
        acc += taps[ch * dp.k + j] * x[u32(t0 + i32(j)) * dp.c + ch];
    }
    if (HAS_B) { acc += bias[ch]; }
    conv_out[i] = acc;
}

// ---- 2-D, 3x3 at stride 2 with padding 1 (Parakeet's subsampling, engine/conformer/subsampling.py) --
// x is an image [H*W, C]: H rows of W pixels, pixel-major, C channels. Output pixels are H' x W',
// H' = (H - 1) / 2 + 1. Tap t = 3i + j of output pixel (h', w') reads pixel (2h' + i - 1, 2w' + j - 1).

struct ImageParams { h: u32, w: u32, c: u32, h_out: u32, w_out: u32, scale: f32 }
@group(0) @binding(0) var<uniform> ip: ImageParams;
@group(0) @binding(2) var<storage, read_write> flat: array<f32>;

// Channel `ch` of tap `tap` of output pixel `pix`, zero outside the image.
fn tap_value(pix: u32, tap: u32, ch: u32) -> f32 {
    let h = i32((pix / ip.w_out) * 2u + tap / 3u) - 1;
    let w = i32((pix % ip.w_out) * 2u + tap % 3u) - 1;
    if (h < 0 || w < 0 || h >= i32(ip.h) || w >= i32(ip.w)) { return 0.0; }
    return x[(u32(h) * ip.w + u32(w)) * ip.c + ch];
}

// x at 1, out [H'*W', C*9] at 2: column c*9 + t, the order of a conv weight [C_out, C, 3, 3] flattened.
@compute @workgroup_size(WG)
fn im2col_3x3_s2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    let width = ip.c * 9u;
    if (i >= ip.h_out * ip.w_out * width) { return; }
    let col = i % width;
    flat[i] = tap_value(i / width, col % 9u, col / 9u);
}

// x at 1, w [C, 9] at 2, b [C] at 3, out [H'*W', C] at 4: each channel its own 3x3 taps.
@compute @workgroup_size(WG)
fn depthwise_3x3_s2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if (i >= ip.h_out * ip.w_out * ip.c) { return; }
    let ch = i % ip.c;
    var acc = bias[ch];
    for (var tap = 0u; tap < 9u; tap++) {
        acc += taps[ch * 9u + tap] * tap_value(i / ip.c, tap, ch);
    }
    conv_out[i] = acc;
}

// x [H*W, C] at 1 -> out [H, C*W] at 2, column c*W + w = scale * x[h*W + w, c]: the image's rows
// flattened channel-major, as NeMo's subsampling hands them to its projection.
@compute @workgroup_size(WG)
fn channels_major(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    let row = ip.c * ip.w;
    if (i >= ip.h * row) { return; }
    let h = i / row;
    let ch = (i % row) / ip.w;
    let w = i % ip.w;
    flat[i] = ip.scale * x[(h * ip.w + w) * ip.c + ch];
}
