//! Probes of the numeric library: fast and accurate f32 math, packed halves.

use super::write_results;
use warpforge_device::num::{self, Bf16x2, F16x2};
use warpforge_device::{Out, thread};
use warpforge_macros::kernel;

/// Functions in [`probe_math`]'s output order.
pub const MATH_FUNCTIONS: [&str; 8] = [
    "ex2_approx",
    "lg2_approx",
    "rsqrt_approx",
    "rcp_approx",
    "exp",
    "log",
    "tanh",
    "erf",
];

/// `out[8i..]` = the functions of [`MATH_FUNCTIONS`] at `x[i]`.
#[kernel]
pub fn probe_math(x: &[f32], mut out: Out<f32>) {
    let i = thread::global_index_x();
    let Some(&v) = x.get(i) else { return };
    let r = [
        num::ex2_approx(v),
        num::lg2_approx(v),
        num::rsqrt_approx(v),
        num::rcp_approx(v),
        num::exp(v),
        num::log(v),
        num::tanh(v),
        num::erf(v),
    ];
    write_results(&mut out, i, r);
}

/// Packed-half operations in [`probe_packed`]'s output order.
pub const PACKED_OPS: [&str; 6] = [
    "f16x2 add",
    "f16x2 sub",
    "f16x2 mul",
    "f16x2 fma",
    "bf16x2 add",
    "bf16x2 fma",
];

/// `out[8i..]` = the operations of [`PACKED_OPS`] on the packed registers
/// `a[i]`, `b[i]`, `c[i]` (fma: `a·b + c`; bf16x2 mul is an fma with −0,
/// covered by fma), then `from_f32(f[2i], f[2i+1])` as f16x2 and bf16x2.
#[kernel]
pub fn probe_packed(a: &[u32], b: &[u32], c: &[u32], f: &[f32], mut out: Out<u32>) {
    let i = thread::global_index_x();
    let (Some(&a), Some(&b), Some(&c)) = (a.get(i), b.get(i), c.get(i)) else {
        return;
    };
    let (fl, fh) = (
        f.get(2 * i).copied().unwrap_or(0.0),
        f.get(2 * i + 1).copied().unwrap_or(0.0),
    );
    let (ha, hb, hc) = (
        F16x2::from_bits(a),
        F16x2::from_bits(b),
        F16x2::from_bits(c),
    );
    let (ba, bb, bc) = (
        Bf16x2::from_bits(a),
        Bf16x2::from_bits(b),
        Bf16x2::from_bits(c),
    );
    let r = [
        (ha + hb).to_bits(),
        (ha - hb).to_bits(),
        (ha * hb).to_bits(),
        F16x2::fma(ha, hb, hc).to_bits(),
        (ba + bb).to_bits(),
        Bf16x2::fma(ba, bb, bc).to_bits(),
        F16x2::from_f32(fl, fh).to_bits(),
        Bf16x2::from_f32(fl, fh).to_bits(),
    ];
    write_results(&mut out, i, r);
}

/// `out[2i..]` = [`num::fma_f32`]`(x[i], y[i], z[i])`, [`num::sqrt_f32`]`(x[i])`.
#[kernel]
pub fn probe_fma_sqrt_f32(x: &[f32], y: &[f32], z: &[f32], mut out: Out<f32>) {
    let i = thread::global_index_x();
    let (Some(&x), Some(&y), Some(&z)) = (x.get(i), y.get(i), z.get(i)) else {
        return;
    };
    write_results(&mut out, i, [num::fma_f32(x, y, z), num::sqrt_f32(x)]);
}

/// f64 functions in [`probe_math_f64`]'s output order.
pub const MATH_F64_FUNCTIONS: [&str; 4] = ["exp_f64", "log_f64", "sqrt_f64", "fma_f64"];

/// `out[4i..]` = `exp_f64`, `log_f64`, `sqrt_f64` of `x[i]`, and
/// `fma_f64(x[i], y[i], z[i])`.
#[kernel]
pub fn probe_math_f64(x: &[f64], y: &[f64], z: &[f64], mut out: Out<f64>) {
    let i = thread::global_index_x();
    let (Some(&x), Some(&y), Some(&z)) = (x.get(i), y.get(i), z.get(i)) else {
        return;
    };
    let r = [
        num::exp_f64(x),
        num::log_f64(x),
        num::sqrt_f64(x),
        num::fma_f64(x, y, z),
    ];
    write_results(&mut out, i, r);
}
