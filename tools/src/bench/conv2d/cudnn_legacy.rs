//! The legacy cuDNN API's fastest measured algorithm
//! (`cudnnFindConvolutionForwardAlgorithm`), timed beside the anchor for
//! comparison only: on an H200 it ran the ResNet-50 3×3 NHWC f16 layers at
//! 72–77 TFLOP/s where the backend API's engines did 277–384 (2026-11-28), so
//! a ratio against it flatters any kernel.

use super::super::Timing;
use super::cudnn::{Cudnn, Operands, Owned, Timed, fail};
use cudarc::cudnn::result::{self, CudnnError};
use cudarc::cudnn::sys;
use cudarc::driver::{DevicePtr, DevicePtrMut};
use std::ffi::c_int;
use warpforge::conv2d::{Conv2d, Layout};

impl Cudnn {
    /// Median seconds per `cudnnConvolutionForward` of `conv` (no bias),
    /// with the fastest algorithm cuDNN measures (the v7 heuristic's
    /// first where finding fails), after `timing.warmup` calls.
    pub(super) fn time_legacy<T: super::BenchConv>(
        &self,
        timing: Timing,
        conv: &Conv2d,
        ops: &mut Operands<T>,
    ) -> Result<Timed, String> {
        let int = |v: usize, what: &str| {
            c_int::try_from(v).map_err(|_| format!("cuDNN: {what} = {v} does not fit an int"))
        };
        let ints = |dims: [usize; 4], what: &str| -> Result<[c_int; 4], String> {
            Ok([
                int(dims[0], what)?,
                int(dims[1], what)?,
                int(dims[2], what)?,
                int(dims[3], what)?,
            ])
        };
        // cuDNN takes logical dims [N, C, H, W] / [K, C/G, R, S] and a format.
        let (format, logical) = match conv.layout() {
            Layout::Nchw => (sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW, [0, 1, 2, 3]),
            Layout::Nhwc => (sys::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC, [0, 3, 1, 2]),
        };
        let wlogical = match conv.layout() {
            Layout::Nchw => [0, 1, 2, 3],
            Layout::Nhwc => [0, 3, 1, 2],
        };
        let (xd, wd, yd) = (
            conv.input_dims(),
            conv.weight_dims(),
            conv.output_dims().map_err(|e| e.to_string())?,
        );
        let x_dims = ints(logical.map(|i| xd[i]), "an input size")?;
        let w_dims = ints(wlogical.map(|i| wd[i]), "a weight size")?;
        let y_dims = ints(logical.map(|i| yd[i]), "an output size")?;
        let pad = conv.pad();
        if pad.top != pad.bottom || pad.left != pad.right {
            return Err(format!(
                "cuDNN: asymmetric padding {pad:?} (cuDNN pads both sides alike)"
            ));
        }
        let (sh, sw) = conv.strides();
        let (dh, dw) = conv.dilations();
        let geometry = [
            int(pad.top, "padding")?,
            int(pad.left, "padding")?,
            int(sh, "stride")?,
            int(sw, "stride")?,
            int(dh, "dilation")?,
            int(dw, "dilation")?,
        ];
        let groups = int(conv.group_count(), "groups")?;
        let make = |what: &'static str| move |e: CudnnError| fail(what, &e);

        let x_desc = Owned {
            raw: result::create_tensor_descriptor().map_err(make("a tensor descriptor"))?,
            destroy: result::destroy_tensor_descriptor,
        };
        let y_desc = Owned {
            raw: result::create_tensor_descriptor().map_err(make("a tensor descriptor"))?,
            destroy: result::destroy_tensor_descriptor,
        };
        let w_desc = Owned {
            raw: result::create_filter_descriptor().map_err(make("a filter descriptor"))?,
            destroy: result::destroy_filter_descriptor,
        };
        let c_desc = Owned {
            raw: result::create_convolution_descriptor()
                .map_err(make("a convolution descriptor"))?,
            destroy: result::destroy_convolution_descriptor,
        };
        let float = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
        let [ph, pw, u, v, dil_h, dil_w] = geometry;
        // SAFETY: each descriptor was just created and is live; the
        // arguments are plain values.
        unsafe {
            result::set_tensor4d_descriptor(x_desc.raw, format, T::DATA_TYPE, x_dims)
                .map_err(make("the input's descriptor"))?;
            result::set_tensor4d_descriptor(y_desc.raw, format, T::DATA_TYPE, y_dims)
                .map_err(make("the output's descriptor"))?;
            result::set_filter4d_descriptor(w_desc.raw, T::DATA_TYPE, format, w_dims)
                .map_err(make("the filter's descriptor"))?;
            // f32 accumulation for both types, as warpforge's kernels.
            result::set_convolution2d_descriptor(
                c_desc.raw,
                ph,
                pw,
                u,
                v,
                dil_h,
                dil_w,
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                float,
            )
            .map_err(make("the convolution's descriptor"))?;
            result::set_convolution_group_count(c_desc.raw, groups)
                .map_err(make("the group count"))?;
            result::set_convolution_math_type(c_desc.raw, T::MATH)
                .map_err(make("the math type"))?;
        }
        let s = &self.stream;
        let Operands { x, w, y } = ops;

        const ALGOS: usize =
            sys::cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_COUNT as usize;
        // SAFETY: all-zero bytes are a valid perf struct (enums with a zero
        // variant, a float, integers).
        let mut perf: [sys::cudnnConvolutionFwdAlgoPerf_t; ALGOS] = unsafe { std::mem::zeroed() };
        let mut found: c_int = 0;
        // SAFETY: live handle and descriptors; `perf` holds ALGOS entries
        // and cuDNN writes at most the requested count, and `found`.
        let find = unsafe {
            sys::cudnnFindConvolutionForwardAlgorithm(
                self.handle.raw,
                x_desc.raw,
                w_desc.raw,
                c_desc.raw,
                y_desc.raw,
                ALGOS as c_int,
                &mut found,
                perf.as_mut_ptr(),
            )
        }
        .result();
        let how = match find {
            Ok(()) => "measured by cudnnFindConvolutionForwardAlgorithm".to_owned(),
            Err(e) => {
                found = 0;
                // SAFETY: as for the find call.
                unsafe {
                    result::get_convolution_forward_algorithm(
                        self.handle.raw,
                        x_desc.raw,
                        w_desc.raw,
                        c_desc.raw,
                        y_desc.raw,
                        ALGOS as c_int,
                        &mut found,
                        perf.as_mut_ptr(),
                    )
                }
                .map_err(make("cudnnGetConvolutionForwardAlgorithm_v7"))?;
                format!("v7 heuristic (find failed: {e})")
            }
        };
        // The fastest that succeeded and whose workspace can be allocated.
        let count = usize::try_from(found).unwrap_or(0).min(ALGOS);
        let mut chosen = None;
        for p in &perf[..count] {
            if p.status != sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS {
                continue;
            }
            // SAFETY: live descriptors; a plain value out.
            let Ok(bytes) = (unsafe {
                result::get_convolution_forward_workspace_size(
                    self.handle.raw,
                    x_desc.raw,
                    w_desc.raw,
                    c_desc.raw,
                    y_desc.raw,
                    p.algo,
                )
            }) else {
                continue;
            };
            if let Ok(ws) = s.alloc_zeros::<u8>(bytes.max(1)) {
                chosen = Some((*p, ws, bytes));
                break;
            }
        }
        let Some((p, mut ws, ws_bytes)) = chosen else {
            return Err(format!(
                "cuDNN: no forward algorithm for this shape ({how}, {count} tried)"
            ));
        };
        // SAFETY: a live descriptor; the math type the algorithm was found with.
        unsafe { result::set_convolution_math_type(c_desc.raw, p.mathType) }
            .map_err(make("the math type"))?;
        let (alpha, beta) = T::one_zero();
        let once = || {
            let (xp, _rx) = x.device_ptr(s);
            let (wp, _rw) = w.device_ptr(s);
            let (yp, _ry) = y.device_ptr_mut(s);
            let (wsp, _rws) = ws.device_ptr_mut(s);
            // SAFETY: the buffers hold exactly the elements the
            // descriptors describe, of the descriptors' type; the
            // workspace holds `ws_bytes`; alpha and beta are the scaling
            // type cuDNN reads for T.
            unsafe {
                result::convolution_forward(
                    self.handle.raw,
                    (&alpha) as *const T::Scalar as *const std::ffi::c_void,
                    x_desc.raw,
                    xp as *const std::ffi::c_void,
                    w_desc.raw,
                    wp as *const std::ffi::c_void,
                    c_desc.raw,
                    p.algo,
                    wsp as *mut std::ffi::c_void,
                    ws_bytes,
                    (&beta) as *const T::Scalar as *const std::ffi::c_void,
                    y_desc.raw,
                    yp as *mut std::ffi::c_void,
                )
            }
            .map_err(make("cudnnConvolutionForward"))
        };
        let seconds = super::super::time_anchor_calls(s, timing, "cuDNN", once)?;
        Ok(Timed {
            seconds,
            algorithm: format!(
                "{:?}, {:?}, workspace {ws_bytes} B ({how})",
                p.algo, p.mathType
            ),
        })
    }
}
