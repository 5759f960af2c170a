//! Convolution reference: the direct seven-loop definition in f64, in the
//! storage layouts of a [`Conv2d`], sharing none of the kernels' index code.
//!
//! ```
//! use warpforge::conv2d::{Conv2d, Layout};
//! use warpforge::reference::conv2d;
//! let p = Conv2d::new(Layout::Nhwc, [1, 2, 2, 2], [1, 2, 1, 1]).relu(true);
//! // x[h][w][c]: pixel (h, w) holds channels (1, -2)·(h·2 + w + 1); w = (1, 1).
//! let x = [1.0, -2.0, 2.0, -4.0, 3.0, -6.0, 4.0, -8.0];
//! assert_eq!(conv2d(&p, &x, &[1.0, 1.0], Some(&[0.5]))?, [0.0; 4]); // all negative: ReLU
//! # Ok::<(), warpforge::Error>(())
//! ```

use crate::conv2d::{Conv2d, Layout};
use crate::{Error, Result};

/// `y = conv(x, w) (+ bias)`, ReLU if `p` asks (NaN kept), accumulated in
/// f64 in `(c, r, s)` order, every operand in `p`'s storage layout
/// ([`Conv2d::input_dims`], …). Checks `p` ([`Conv2d::validate`]) and the
/// slices' lengths.
pub fn conv2d(p: &Conv2d, x: &[f64], w: &[f64], bias: Option<&[f64]>) -> Result<Vec<f64>> {
    p.validate()?;
    let [n, k, pp, qq] = p.output_dims()?;
    let (n, k, pp, qq) = match p.layout() {
        Layout::Nchw => (n, k, pp, qq),
        // output_dims is [N, P, Q, K] in NHWC.
        Layout::Nhwc => (n, qq, k, pp),
    };
    let nhwc = p.layout() == Layout::Nhwc;
    let [_, c, h, wd] = logical_input(p);
    let [_, cg, r, s] = logical_weight(p);
    // validate(): groups ≥ 1 and divides K.
    let kg = k / p.group_count();
    let ((sh, sw), (dh, dw)) = (p.strides(), p.dilations());
    let (ph, pw) = (p.pad().top, p.pad().left);
    let len = |dims: [usize; 4]| dims.iter().product::<usize>();
    for (name, got, want) in [
        ("x", x.len(), len(p.input_dims())),
        ("w", w.len(), len(p.weight_dims())),
    ] {
        if got != want {
            return Err(Error::ShapeMismatch {
                op: "reference::conv2d",
                detail: format!("{name} has {got} elements, needs {want}"),
            });
        }
    }
    if let Some(b) = bias
        && b.len() != k
    {
        return Err(Error::ShapeMismatch {
            op: "reference::conv2d",
            detail: format!("bias has {} elements, needs K = {k}", b.len()),
        });
    }
    let x_at = |ni: usize, ci: usize, hi: usize, wi: usize| {
        if nhwc {
            x[((ni * h + hi) * wd + wi) * c + ci]
        } else {
            x[((ni * c + ci) * h + hi) * wd + wi]
        }
    };
    let w_at = |ki: usize, ci: usize, ri: usize, si: usize| {
        if nhwc {
            w[((ki * r + ri) * s + si) * cg + ci]
        } else {
            w[((ki * cg + ci) * r + ri) * s + si]
        }
    };
    let mut y = vec![0.0; n * k * pp * qq];
    for ni in 0..n {
        for ki in 0..k {
            let g = ki / kg;
            for oh in 0..pp {
                for ow in 0..qq {
                    let mut acc = 0.0f64;
                    for ci in 0..cg {
                        for ri in 0..r {
                            for si in 0..s {
                                // Signed: the padding is outside the input.
                                let ih = (oh * sh + ri * dh) as i64 - ph as i64;
                                let iw = (ow * sw + si * dw) as i64 - pw as i64;
                                if ih < 0 || iw < 0 || ih >= h as i64 || iw >= wd as i64 {
                                    continue;
                                }
                                acc += x_at(ni, g * cg + ci, ih as usize, iw as usize)
                                    * w_at(ki, ci, ri, si);
                            }
                        }
                    }
                    if let Some(b) = bias {
                        acc += b[ki];
                    }
                    if p.relu_enabled() && acc < 0.0 {
                        acc = 0.0;
                    }
                    let at = if nhwc {
                        ((ni * pp + oh) * qq + ow) * k + ki
                    } else {
                        ((ni * k + ki) * pp + oh) * qq + ow
                    };
                    y[at] = acc;
                }
            }
        }
    }
    Ok(y)
}

fn logical_input(p: &Conv2d) -> [usize; 4] {
    let d = p.input_dims();
    match p.layout() {
        Layout::Nchw => d,
        Layout::Nhwc => [d[0], d[3], d[1], d[2]],
    }
}

fn logical_weight(p: &Conv2d) -> [usize; 4] {
    let d = p.weight_dims();
    match p.layout() {
        Layout::Nchw => d,
        Layout::Nhwc => [d[0], d[3], d[1], d[2]],
    }
}
