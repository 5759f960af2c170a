//! The conv2d anchor: cuDNN's backend (graph) API, the path cuDNN's fastest
//! engines are reached by (PyTorch's `benchmark=True` and cudnn-frontend use
//! it).
//!
//! Per shape: one convolution-forward operation in an operation graph (f32
//! compute, cross-correlation, the layout's real strides, paddings per side),
//! the engine configurations that heuristics modes A and B rank for it, the
//! first [`CANDIDATES_PER_MODE`] of each (without repeats) finalised into
//! execution plans and each timed briefly, then the fastest timed in full.
//! Configurations whose numerical notes change what is computed are left out
//! for f32 (tensor cores, i.e. TF32, and down-converted inputs: warpforge's
//! f32 is plain FMA); for f16 none are left out (as PyTorch does), and the
//! chosen engine's notes are reported. Each case reports the engine's global
//! index, its knobs, its notes, which heuristic ranked it where, its
//! workspace, and how many configurations were timed.

use super::super::Timing;
use super::cudnn::{Cudnn, Operands, Timed};
use cudarc::cudnn::sys::{
    self, cudnnBackendAttributeName_t as Attr, cudnnBackendAttributeType_t as Ty,
    cudnnBackendDescriptorType_t as Kind,
};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use std::ffi::c_void;
use warpforge::conv2d::{Conv2d, Layout};

/// Engine configurations timed from each heuristic's ranking (PyTorch's
/// `torch.backends.cudnn.benchmark_limit` is 10 in all).
pub(super) const CANDIDATES_PER_MODE: usize = 8;

/// Workspaces above this are not tried (bytes): 4 GiB.
const MAX_WORKSPACE: i64 = 4 << 30;

/// Unique ids of the three tensors in the graph and the variant pack.
const X_ID: i64 = 1;
const W_ID: i64 = 2;
const Y_ID: i64 = 3;

/// Knob choices read per configuration: more than any engine has.
const MAX_KNOBS: usize = 64;
/// Numerical notes read per engine: more than cuDNN defines.
const MAX_NOTES: usize = 32;

fn status(what: &str, s: sys::cudnnStatus_t) -> Result<(), String> {
    match s {
        sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS => Ok(()),
        e => Err(format!("cuDNN graph API: {what}: {e:?}")),
    }
}

/// A backend descriptor, destroyed on drop. Its setters are typed, so each
/// call passes cuDNN the element type the attribute type names.
struct Desc(sys::cudnnBackendDescriptor_t);

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by cudnnBackendCreateDescriptor, destroyed once, here.
        let _ = unsafe { sys::cudnnBackendDestroyDescriptor(self.0) };
    }
}

impl Desc {
    fn new(kind: Kind) -> Result<Desc, String> {
        let mut raw: sys::cudnnBackendDescriptor_t = std::ptr::null_mut();
        // SAFETY: writes one descriptor into `raw`.
        status("creating a descriptor", unsafe {
            sys::cudnnBackendCreateDescriptor(kind, &mut raw)
        })?;
        Ok(Desc(raw))
    }

    /// `count` elements at `values`, of the C type `ty` names.
    ///
    /// # Safety
    /// `values` points to `count` live elements of that C type.
    unsafe fn set_raw(
        &self,
        name: Attr,
        ty: Ty,
        count: usize,
        values: *const c_void,
    ) -> Result<(), String> {
        // SAFETY: a live descriptor; the caller's promise for `values`.
        status(&format!("setting {name:?}"), unsafe {
            sys::cudnnBackendSetAttribute(self.0, name, ty, count as i64, values)
        })
    }

    fn set_i64s(&self, name: Attr, values: &[i64]) -> Result<(), String> {
        // SAFETY: CUDNN_TYPE_INT64 is int64_t; the slice holds `len` of them.
        unsafe {
            self.set_raw(
                name,
                Ty::CUDNN_TYPE_INT64,
                values.len(),
                values.as_ptr().cast(),
            )
        }
    }

    fn set_descs(&self, name: Attr, values: &[&Desc]) -> Result<(), String> {
        let raw: Vec<sys::cudnnBackendDescriptor_t> = values.iter().map(|d| d.0).collect();
        // SAFETY: CUDNN_TYPE_BACKEND_DESCRIPTOR is cudnnBackendDescriptor_t; `raw`
        // holds live descriptors (borrowed from `values` for the call).
        unsafe {
            self.set_raw(
                name,
                Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                raw.len(),
                raw.as_ptr().cast(),
            )
        }
    }

    fn set_data_type(&self, name: Attr, value: sys::cudnnDataType_t) -> Result<(), String> {
        // SAFETY: CUDNN_TYPE_DATA_TYPE is cudnnDataType_t, one of them.
        unsafe { self.set_raw(name, Ty::CUDNN_TYPE_DATA_TYPE, 1, (&raw const value).cast()) }
    }

    fn set_f32(&self, name: Attr, value: f32) -> Result<(), String> {
        // SAFETY: CUDNN_TYPE_FLOAT is float, one of them.
        unsafe { self.set_raw(name, Ty::CUDNN_TYPE_FLOAT, 1, (&raw const value).cast()) }
    }

    fn set_handle(&self, name: Attr, value: sys::cudnnHandle_t) -> Result<(), String> {
        // SAFETY: CUDNN_TYPE_HANDLE is cudnnHandle_t, one of them (live: the
        // Cudnn that owns it outlives every descriptor made here).
        unsafe { self.set_raw(name, Ty::CUDNN_TYPE_HANDLE, 1, (&raw const value).cast()) }
    }

    fn set_conv_mode(&self, value: sys::cudnnConvolutionMode_t) -> Result<(), String> {
        // SAFETY: CUDNN_TYPE_CONVOLUTION_MODE is cudnnConvolutionMode_t, one.
        unsafe {
            self.set_raw(
                Attr::CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                Ty::CUDNN_TYPE_CONVOLUTION_MODE,
                1,
                (&raw const value).cast(),
            )
        }
    }

    fn set_heur_mode(&self, value: sys::cudnnBackendHeurMode_t) -> Result<(), String> {
        // SAFETY: CUDNN_TYPE_HEUR_MODE is cudnnBackendHeurMode_t, one.
        unsafe {
            self.set_raw(
                Attr::CUDNN_ATTR_ENGINEHEUR_MODE,
                Ty::CUDNN_TYPE_HEUR_MODE,
                1,
                (&raw const value).cast(),
            )
        }
    }

    fn set_ptrs(&self, name: Attr, values: &[*mut c_void]) -> Result<(), String> {
        // SAFETY: CUDNN_TYPE_VOID_PTR is void*; the slice holds `len` of them.
        unsafe {
            self.set_raw(
                name,
                Ty::CUDNN_TYPE_VOID_PTR,
                values.len(),
                values.as_ptr().cast(),
            )
        }
    }

    fn finalize(&self, what: &str) -> Result<(), String> {
        // SAFETY: a live descriptor.
        status(what, unsafe { sys::cudnnBackendFinalize(self.0) })
    }

    /// Up to `out.len()` elements of the C type `ty` names into `out`; how many.
    ///
    /// # Safety
    /// `E` is the C type `ty` names (for descriptors: live, created ones of the
    /// kind the attribute holds).
    unsafe fn get_raw<E>(&self, name: Attr, ty: Ty, out: &mut [E]) -> Result<usize, String> {
        let mut got: i64 = 0;
        // SAFETY: a live descriptor; `out` has room for `len` elements of the
        // type `ty` names (the caller's promise); cuDNN writes at most that many.
        status(&format!("reading {name:?}"), unsafe {
            sys::cudnnBackendGetAttribute(
                self.0,
                name,
                ty,
                out.len() as i64,
                &mut got,
                out.as_mut_ptr().cast(),
            )
        })?;
        Ok(usize::try_from(got).unwrap_or(0).min(out.len()))
    }

    fn get_i64(&self, name: Attr) -> Result<i64, String> {
        let mut v = [0i64];
        // SAFETY: CUDNN_TYPE_INT64 is int64_t.
        unsafe { self.get_raw(name, Ty::CUDNN_TYPE_INT64, &mut v) }?;
        Ok(v[0])
    }

    /// Enum values read as their underlying 32-bit integers: a value this
    /// binding's Rust enum does not list (a newer cuDNN) must not become one.
    fn get_enum_raw(&self, name: Attr, ty: Ty, max: usize) -> Result<Vec<u32>, String> {
        let mut v = vec![0u32; max];
        // SAFETY: the attribute types read here (numerical notes, knob types)
        // are C enums: 32-bit integers.
        let n = unsafe { self.get_raw(name, ty, &mut v) }?;
        v.truncate(n);
        Ok(v)
    }

    /// Fills `count` new descriptors of `kind` from a descriptor-array attribute.
    fn get_descs(&self, name: Attr, kind: Kind, count: usize) -> Result<Vec<Desc>, String> {
        let descs = (0..count)
            .map(|_| Desc::new(kind))
            .collect::<Result<Vec<_>, _>>()?;
        let mut raw: Vec<sys::cudnnBackendDescriptor_t> = descs.iter().map(|d| d.0).collect();
        // SAFETY: live descriptors of the kind the attribute holds, owned by
        // `descs`, which cuDNN fills in place.
        let n = unsafe { self.get_raw(name, Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR, &mut raw) }?;
        let mut descs = descs;
        descs.truncate(n);
        Ok(descs)
    }

    /// How many elements a descriptor-array attribute holds.
    fn count_descs(&self, name: Attr) -> Result<usize, String> {
        let mut got: i64 = 0;
        // SAFETY: a request for 0 elements writes only the count.
        status(&format!("counting {name:?}"), unsafe {
            sys::cudnnBackendGetAttribute(
                self.0,
                name,
                Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                0,
                &mut got,
                std::ptr::null_mut(),
            )
        })?;
        Ok(usize::try_from(got).unwrap_or(0))
    }
}

/// Logical `[N, C, H, W]` (or `[K, C/G, R, S]`) dims of a tensor stored as
/// `layout`, and its element strides.
fn dims_and_strides(layout: Layout, stored: [usize; 4]) -> ([i64; 4], [i64; 4]) {
    let s = stored.map(|d| d as i64);
    match layout {
        // stored [N, C, H, W]
        Layout::Nchw => (s, [s[1] * s[2] * s[3], s[2] * s[3], s[3], 1]),
        // stored [N, H, W, C]: logical [N, C, H, W]
        Layout::Nhwc => (
            [s[0], s[3], s[1], s[2]],
            [s[1] * s[2] * s[3], 1, s[2] * s[3], s[3]],
        ),
    }
}

fn tensor(
    id: i64,
    dtype: sys::cudnnDataType_t,
    layout: Layout,
    stored: [usize; 4],
) -> Result<Desc, String> {
    let (dims, strides) = dims_and_strides(layout, stored);
    let t = Desc::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
    t.set_data_type(Attr::CUDNN_ATTR_TENSOR_DATA_TYPE, dtype)?;
    t.set_i64s(Attr::CUDNN_ATTR_TENSOR_DIMENSIONS, &dims)?;
    t.set_i64s(Attr::CUDNN_ATTR_TENSOR_STRIDES, &strides)?;
    t.set_i64s(Attr::CUDNN_ATTR_TENSOR_UNIQUE_ID, &[id])?;
    // cudarc's allocations are 256-byte aligned.
    t.set_i64s(Attr::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, &[16])?;
    t.finalize("a tensor descriptor")?;
    Ok(t)
}

/// An engine configuration: the engine's global index, knobs and notes.
struct Config {
    cfg: Desc,
    engine: i64,
    knobs: Vec<(u32, i64)>,
    notes: Vec<u32>,
    /// `A#0`: the heuristic that ranked it and where.
    rank: String,
}

impl Config {
    fn read(cfg: Desc, rank: String) -> Result<Config, String> {
        let engine = cfg
            .get_descs(
                Attr::CUDNN_ATTR_ENGINECFG_ENGINE,
                Kind::CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                1,
            )?
            .pop()
            .ok_or("cuDNN graph API: an engine configuration without an engine")?;
        let index = engine.get_i64(Attr::CUDNN_ATTR_ENGINE_GLOBAL_INDEX)?;
        let notes = engine.get_enum_raw(
            Attr::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
            Ty::CUDNN_TYPE_NUMERICAL_NOTE,
            MAX_NOTES,
        )?;
        let mut knobs = Vec::new();
        for choice in cfg.get_descs(
            Attr::CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
            Kind::CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
            MAX_KNOBS,
        )? {
            let ty = choice.get_enum_raw(
                Attr::CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                Ty::CUDNN_TYPE_KNOB_TYPE,
                1,
            )?;
            let value = choice.get_i64(Attr::CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)?;
            if let Some(&ty) = ty.first() {
                knobs.push((ty, value));
            }
        }
        knobs.sort_unstable();
        Ok(Config {
            cfg,
            engine: index,
            knobs,
            notes,
            rank,
        })
    }

    /// `engine 27 {TILE_SIZE=3, STAGES=4} [TENSOR_CORE]`.
    fn describe(&self) -> String {
        let knobs: Vec<String> = self
            .knobs
            .iter()
            .map(|&(t, v)| format!("{}={v}", knob_name(t)))
            .collect();
        let notes: Vec<String> = self.notes.iter().map(|&n| note_name(n)).collect();
        format!(
            "engine {} {{{}}} [{}]",
            self.engine,
            knobs.join(", "),
            notes.join(", ")
        )
    }
}

/// `TILE_SIZE` for a knob type this binding lists, else `knob#N`.
fn knob_name(raw: u32) -> String {
    use sys::cudnnBackendKnobType_t as K;
    if raw < K::CUDNN_KNOB_TYPE_COUNTS as u32 {
        // SAFETY: the enum is `repr(u32)` with every value from 0 to
        // CUDNN_KNOB_TYPE_COUNTS, so `raw` is one of its variants.
        let k: K = unsafe { std::mem::transmute::<u32, K>(raw) };
        format!("{k:?}")
            .trim_start_matches("CUDNN_KNOB_TYPE_")
            .to_owned()
    } else {
        format!("knob#{raw}")
    }
}

/// `TENSOR_CORE` for a numerical note this binding lists, else `note#N`.
fn note_name(raw: u32) -> String {
    use sys::cudnnBackendNumericalNote_t as N;
    if raw < N::CUDNN_NUMERICAL_NOTE_TYPE_COUNT as u32 {
        // SAFETY: the enum is `repr(u32)` with every value from 0 to
        // CUDNN_NUMERICAL_NOTE_TYPE_COUNT, so `raw` is one of its variants.
        let n: N = unsafe { std::mem::transmute::<u32, N>(raw) };
        format!("{n:?}")
            .trim_start_matches("CUDNN_NUMERICAL_NOTE_")
            .to_owned()
    } else {
        format!("note#{raw}")
    }
}

/// Whether an engine with these notes computes something other than what
/// warpforge's kernel of that element type computes (module docs).
fn excluded(f32_data: bool, notes: &[u32]) -> bool {
    use sys::cudnnBackendNumericalNote_t as N;
    let changes_f32 = [
        N::CUDNN_NUMERICAL_NOTE_TENSOR_CORE as u32,
        N::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS as u32,
    ];
    f32_data && notes.iter().any(|n| changes_f32.contains(n))
}

/// An execution plan, its workspace and the variant pack that runs it.
struct Plan {
    plan: Desc,
    pack: Desc,
    /// Keeps the workspace the pack points to alive.
    _workspace: cudarc::driver::CudaSlice<u8>,
    workspace_bytes: i64,
}

impl Cudnn {
    /// Median seconds per call of the fastest engine configuration the
    /// backend API offers for `conv` (module docs), and how it ran.
    pub(super) fn time_graph<T: super::BenchConv>(
        &self,
        timing: Timing,
        conv: &Conv2d,
        ops: &mut Operands<T>,
    ) -> Result<Timed, String> {
        let layout = conv.layout();
        let x = tensor(X_ID, T::DATA_TYPE, layout, conv.input_dims())?;
        let w = tensor(W_ID, T::DATA_TYPE, layout, conv.weight_dims())?;
        let y = tensor(
            Y_ID,
            T::DATA_TYPE,
            layout,
            conv.output_dims().map_err(|e| e.to_string())?,
        )?;
        let pad = conv.pad();
        let (sh, sw) = conv.strides();
        let (dh, dw) = conv.dilations();
        let i = |v: usize| v as i64;
        let c = Desc::new(Kind::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?;
        c.set_data_type(
            Attr::CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
            sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
        )?;
        c.set_conv_mode(sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION)?;
        c.set_i64s(Attr::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, &[2])?;
        c.set_i64s(Attr::CUDNN_ATTR_CONVOLUTION_DILATIONS, &[i(dh), i(dw)])?;
        c.set_i64s(Attr::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, &[i(sh), i(sw)])?;
        c.set_i64s(
            Attr::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
            &[i(pad.top), i(pad.left)],
        )?;
        c.set_i64s(
            Attr::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
            &[i(pad.bottom), i(pad.right)],
        )?;
        c.finalize("the convolution descriptor")?;
        // Groups are implied by the filter's C/G against the input's C.
        let op = Desc::new(Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)?;
        op.set_descs(Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, &[&x])?;
        op.set_descs(Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, &[&w])?;
        op.set_descs(Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, &[&y])?;
        op.set_descs(
            Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
            &[&c],
        )?;
        op.set_f32(Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, 1.0)?;
        op.set_f32(Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, 0.0)?;
        op.finalize("the convolution operation")?;
        let graph = Desc::new(Kind::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
        graph.set_descs(Attr::CUDNN_ATTR_OPERATIONGRAPH_OPS, &[&op])?;
        graph.set_handle(Attr::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, self.handle.raw)?;
        graph.finalize("the operation graph")?;

        // The candidates: each heuristic's first few, without repeats.
        let f32_data = T::DATA_TYPE == sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
        let mut candidates: Vec<Config> = Vec::new();
        let mut heuristics = Vec::new();
        for (label, mode) in [
            ("A", sys::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_A),
            ("B", sys::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_B),
        ] {
            let ranked = (|| {
                let h = Desc::new(Kind::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
                h.set_descs(Attr::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[&graph])?;
                h.set_heur_mode(mode)?;
                h.finalize("the engine heuristics")?;
                let n = h.count_descs(Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS)?;
                h.get_descs(
                    Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS,
                    Kind::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                    n,
                )
            })();
            let ranked = match ranked {
                Ok(r) => r,
                Err(e) => {
                    heuristics.push(format!("{label}: {e}"));
                    continue;
                }
            };
            let (mut taken, mut left_out) = (0, 0);
            for (rank, cfg) in ranked.into_iter().enumerate() {
                if taken == CANDIDATES_PER_MODE {
                    break;
                }
                let Ok(config) = Config::read(cfg, format!("{label}#{rank}")) else {
                    continue;
                };
                if excluded(f32_data, &config.notes) {
                    left_out += 1;
                    continue;
                }
                taken += 1;
                if !candidates
                    .iter()
                    .any(|c| c.engine == config.engine && c.knobs == config.knobs)
                {
                    candidates.push(config);
                }
            }
            heuristics.push(format!(
                "{label}: {taken} taken, {left_out} left out by notes"
            ));
        }

        // Each candidate finalised and timed briefly; the fastest in full.
        let screen = Timing {
            warmup: 1,
            iters: 3,
            reps: 1,
        };
        let (mut unsupported, mut failed) = (0, 0);
        let mut best: Option<(f64, usize, Plan)> = None;
        for (k, config) in candidates.iter().enumerate() {
            let Ok(plan) = self.plan(&config.cfg, ops) else {
                unsupported += 1;
                continue;
            };
            match self.time_plan(screen, &plan) {
                Ok(s) if best.as_ref().is_none_or(|b| s < b.0) => best = Some((s, k, plan)),
                Ok(_) => {}
                Err(_) => failed += 1,
            }
        }
        let Some((_, k, plan)) = best else {
            return Err(format!(
                "cuDNN graph API: no engine configuration ran this shape ({} candidates, \
                 {unsupported} not supported, {failed} failed; heuristics {})",
                candidates.len(),
                heuristics.join("; ")
            ));
        };
        let seconds = self.time_plan(timing, &plan)?;
        let chosen = &candidates[k];
        Ok(Timed {
            seconds,
            algorithm: format!(
                "{}, ranked {}, workspace {} B; fastest of {} timed ({unsupported} not \
                 supported, {failed} failed; heuristics {})",
                chosen.describe(),
                chosen.rank,
                plan.workspace_bytes,
                candidates.len() - unsupported - failed,
                heuristics.join("; ")
            ),
        })
    }

    /// `cfg` finalised into a plan, with its workspace and a variant pack
    /// over `ops`.
    fn plan<T: super::BenchConv>(&self, cfg: &Desc, ops: &mut Operands<T>) -> Result<Plan, String> {
        let plan = Desc::new(Kind::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
        plan.set_handle(Attr::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, self.handle.raw)?;
        plan.set_descs(Attr::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[cfg])?;
        plan.finalize("an execution plan")?;
        let bytes = plan.get_i64(Attr::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)?;
        if !(0..=MAX_WORKSPACE).contains(&bytes) {
            return Err(format!("cuDNN graph API: a workspace of {bytes} B"));
        }
        let s = &self.stream;
        let mut workspace = s
            .alloc_zeros::<u8>((bytes as usize).max(1))
            .map_err(|e| format!("cuDNN graph API: a workspace of {bytes} B: {e}"))?;
        let pack = Desc::new(Kind::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
        {
            // The pointers stay valid while `ops` and `workspace` live: the
            // plan is used only inside `time_graph`, which borrows `ops`, and
            // `Plan` owns the workspace.
            let (xp, _rx) = ops.x.device_ptr(s);
            let (wp, _rw) = ops.w.device_ptr(s);
            let (yp, _ry) = ops.y.device_ptr_mut(s);
            let (wsp, _rws) = workspace.device_ptr_mut(s);
            let ptr = |p: u64| p as usize as *mut c_void;
            pack.set_ptrs(
                Attr::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                &[ptr(xp), ptr(wp), ptr(yp)],
            )?;
            pack.set_i64s(
                Attr::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                &[X_ID, W_ID, Y_ID],
            )?;
            pack.set_ptrs(Attr::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &[ptr(wsp)])?;
        }
        pack.finalize("the variant pack")?;
        Ok(Plan {
            plan,
            pack,
            _workspace: workspace,
            workspace_bytes: bytes,
        })
    }

    /// Median seconds per `cudnnBackendExecute` of `plan`.
    fn time_plan(&self, timing: Timing, plan: &Plan) -> Result<f64, String> {
        let once = || {
            // SAFETY: a finalised plan of this handle and a variant pack whose
            // pointers are live device buffers of the sizes the graph's
            // tensors describe, and a workspace of the plan's size.
            status("cudnnBackendExecute", unsafe {
                sys::cudnnBackendExecute(self.handle.raw, plan.plan.0, plan.pack.0)
            })
        };
        super::super::time_anchor_calls(&self.stream, timing, "cuDNN", once)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_dims_and_strides_describe_each_layout_in_memory() {
        // NHWC [2, 5, 7, 3] is logical [2, 3, 5, 7] with C innermost.
        let (dims, strides) = dims_and_strides(Layout::Nhwc, [2, 5, 7, 3]);
        assert_eq!(dims, [2, 3, 5, 7]);
        assert_eq!(strides, [105, 1, 21, 3]);
        let (dims, strides) = dims_and_strides(Layout::Nchw, [2, 3, 5, 7]);
        assert_eq!(dims, [2, 3, 5, 7]);
        assert_eq!(strides, [105, 35, 7, 1]);
        // Each element's offset is distinct and within the tensor.
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..2 {
            for c in 0..3 {
                for h in 0..5 {
                    for w in 0..7 {
                        let (_, s) = dims_and_strides(Layout::Nhwc, [2, 5, 7, 3]);
                        let off = n * s[0] + c * s[1] + h * s[2] + w * s[3];
                        // NHWC offset written out.
                        assert_eq!(off, ((n * 5 + h) * 7 + w) * 3 + c);
                        assert!(seen.insert(off));
                    }
                }
            }
        }
        assert_eq!(seen.len(), 210);
    }

    #[test]
    fn knob_and_note_names_come_from_the_binding_and_unknown_values_stay_numbers() {
        assert_eq!(knob_name(0), "SPLIT_K");
        assert_eq!(knob_name(14), "STAGES");
        assert_eq!(knob_name(9999), "knob#9999");
        assert_eq!(note_name(0), "TENSOR_CORE");
        assert_eq!(note_name(9999), "note#9999");
    }

    #[test]
    fn f32_leaves_out_tf32_and_down_converting_engines_and_f16_leaves_out_none() {
        use sys::cudnnBackendNumericalNote_t as N;
        let tc = N::CUDNN_NUMERICAL_NOTE_TENSOR_CORE as u32;
        let down = N::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS as u32;
        let fft = N::CUDNN_NUMERICAL_NOTE_FFT as u32;
        assert!(excluded(true, &[fft, tc]));
        assert!(excluded(true, &[down]));
        assert!(!excluded(true, &[fft]));
        assert!(!excluded(true, &[]));
        assert!(!excluded(false, &[tc, down]));
    }
}
