//! cuDNN, loaded at run time through cudarc's raw bindings: a handle on its
//! own stream of the same GPU (the primary context warpforge uses), the
//! operands of one convolution on that stream, and the element types. The
//! anchor is timed through the backend (graph) API ([`super::cudnn_graph`]);
//! the legacy `cudnnFind…` path ([`super::cudnn_legacy`]) is timed beside it
//! for comparison only. Raw because cudarc's safe wrappers keep the handle
//! and descriptors private.

use super::super::sample;
use cudarc::cudnn::result::{self, CudnnError};
use cudarc::cudnn::{CudnnDataType, sys};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use std::sync::Arc;
use warpforge::Device;
use warpforge::conv2d::Conv2d;

/// Why cuDNN is not used on the emulator.
pub(super) const EMULATOR: &str = "cuDNN: not available on the emulator";

/// Element types cuDNN times: the storage type and the math it may use.
pub(super) trait CudnnElement:
    CudnnDataType + DeviceRepr + ValidAsZeroBits + Copy + Default
{
    /// Tensor cores for f16; plain FMA (no TF32) for f32.
    const MATH: sys::cudnnMathType_t;
    /// `alpha = 1`, `beta = 0` in the scaling type cuDNN reads.
    fn one_zero() -> (Self::Scalar, Self::Scalar);
}

impl CudnnElement for f32 {
    const MATH: sys::cudnnMathType_t = sys::cudnnMathType_t::CUDNN_FMA_MATH;
    fn one_zero() -> (f32, f32) {
        (1.0, 0.0)
    }
}

impl CudnnElement for half::f16 {
    const MATH: sys::cudnnMathType_t = sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH;
    fn one_zero() -> (f32, f32) {
        (1.0, 0.0)
    }
}

/// A cuDNN object destroyed on drop.
pub(super) struct Owned<T: Copy> {
    pub(super) raw: T,
    pub(super) destroy: unsafe fn(T) -> Result<(), CudnnError>,
}

impl<T: Copy> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `raw` was created by the matching create call and is
        // destroyed once, here; nothing uses it after its owner drops.
        let _ = unsafe { (self.destroy)(self.raw) };
    }
}

/// An open cuDNN handle on its own stream.
pub(super) struct Cudnn {
    pub(super) stream: Arc<CudaStream>,
    pub(super) handle: Owned<sys::cudnnHandle_t>,
    version: usize,
}

/// One timed convolution: median seconds per call, and how cuDNN ran it.
pub(super) struct Timed {
    pub(super) seconds: f64,
    pub(super) algorithm: String,
}

/// The operands of one convolution on cuDNN's stream, filled with the bench's
/// pattern, shared by every way of timing it.
pub(super) struct Operands<T: DeviceRepr> {
    pub(super) x: CudaSlice<T>,
    pub(super) w: CudaSlice<T>,
    pub(super) y: CudaSlice<T>,
}

pub(super) fn fail(what: &str, e: &dyn std::fmt::Display) -> String {
    format!("cuDNN: {what}: {e}")
}

impl Cudnn {
    /// cuDNN on `dev`'s GPU, or why not (never a panic: the library is
    /// looked for before cudarc's loader, which panics without it, runs).
    pub(super) fn open(dev: &Device) -> Result<Cudnn, String> {
        let Some(info) = dev.gpu_info() else {
            return Err(EMULATOR.to_owned());
        };
        // SAFETY: only tries to load the library (dlopen) under each candidate name.
        if !unsafe { sys::is_culib_present() } {
            return Err(format!(
                "cuDNN: not available (no libcudnn under the names cudarc loads: {}; put \
                 the directory of libcudnn.so.9 on LD_LIBRARY_PATH, e.g. a Python venv's \
                 site-packages/nvidia/cudnn/lib)",
                cudarc::get_lib_name_candidates("cudnn").join(", ")
            ));
        }
        let ctx = CudaContext::new(info.ordinal)
            .map_err(|e| format!("cuDNN: not available (opening GPU {}: {e})", info.ordinal))?;
        // SAFETY: the bench uses these buffers on this one stream only.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| format!("cuDNN: not available (a stream: {e})"))?;
        ctx.bind_to_thread()
            .map_err(|e| format!("cuDNN: not available (binding the context: {e})"))?;
        let raw = result::create_handle()
            .map_err(|e| format!("cuDNN: not available (cudnnCreate: {e})"))?;
        let handle = Owned {
            raw,
            destroy: result::destroy_handle,
        };
        // SAFETY: a live handle and a live stream of the same context.
        unsafe { result::set_stream(handle.raw, stream.cu_stream() as sys::cudaStream_t) }
            .map_err(|e| format!("cuDNN: not available (cudnnSetStream: {e})"))?;
        Ok(Cudnn {
            stream,
            handle,
            version: result::get_version(),
        })
    }

    /// `cuDNN 9.19.0 (/…/libcudnn.so.9)`: the version the library reports
    /// and the file the process mapped.
    pub(super) fn version_text(&self) -> String {
        let v = self.version;
        let path = std::fs::read_to_string("/proc/self/maps")
            .ok()
            .and_then(|maps| {
                maps.lines()
                    .filter_map(|l| l.split_whitespace().nth(5))
                    .find(|p| p.contains("libcudnn.so") || p.contains("libcudnn64"))
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "path unknown".to_owned());
        format!("cuDNN {}.{}.{} ({path})", v / 10000, v / 100 % 100, v % 100)
    }

    /// The report's note on how the anchor is measured.
    pub(super) fn describe(&self) -> String {
        format!(
            "anchor: {}, its backend (graph) API: engine configurations from heuristics \
             modes A and B, the first {} of each timed per shape, the fastest kept, on its \
             own stream; `cudnn-legacy` rows: the legacy API's \
             cudnnFindConvolutionForwardAlgorithm, for comparison only (ratio = its rate ÷ \
             the anchor's)",
            self.version_text(),
            super::cudnn_graph::CANDIDATES_PER_MODE,
        )
    }

    /// `conv`'s input, weights and (zeroed) output on cuDNN's stream.
    pub(super) fn operands<T: super::BenchConv>(
        &self,
        conv: &Conv2d,
    ) -> Result<Operands<T>, String> {
        let s = &self.stream;
        let host = |len: usize| -> Vec<T> {
            (0..len)
                .map(|i| <T as super::BenchConv>::from_f32(sample(i)))
                .collect()
        };
        let len = |d: [usize; 4]| d.iter().product::<usize>();
        let yd = conv.output_dims().map_err(|e| e.to_string())?;
        Ok(Operands {
            x: s.clone_htod(&host(len(conv.input_dims())))
                .map_err(|e| fail("uploading x", &e))?,
            w: s.clone_htod(&host(len(conv.weight_dims())))
                .map_err(|e| fail("uploading w", &e))?,
            y: s.alloc_zeros::<T>(len(yd))
                .map_err(|e| fail("allocating y", &e))?,
        })
    }
}
