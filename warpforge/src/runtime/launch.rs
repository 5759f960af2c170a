//! Typed launch configurations, and the argument traits that tie a launch to
//! its kernel's signature.
//!
//! `Device::launch(kernel, config, args)` compiles only if `args` matches the
//! kernel's `#[kernel]` signature position by position: a scalar for a
//! scalar of the same type, `&DeviceBuffer<T>` for `&[T]`, `&mut DeviceBuffer<T>`
//! for `Out<T>`. A buffer of the wrong dtype, a read-only buffer where the
//! kernel writes, or a missing argument is a type error, not a device fault.
//!
//! ```compile_fail
//! # use warpforge::{Device, LaunchConfig};
//! # use warpforge_kernels::elementwise::axpy_f32;
//! let dev = Device::emulator();
//! let x = dev.upload(&[1.0f64, 2.0]).unwrap();   // f64, but axpy_f32 takes f32
//! let mut y = dev.upload(&[0.0f32, 0.0]).unwrap();
//! dev.launch(axpy_f32, LaunchConfig::for_elements(2, 256).unwrap(), (2.0f32, &x, &mut y)).unwrap();
//! ```

use super::buffer::{DeviceBuffer, Memory};
use super::device::Device;
use super::element::Element;
use super::emulator::Binding;
use super::error::{Error, Result};
use cudarc::driver::{LaunchArgs, PushKernelArg};
use half::{bf16, f16};
use warpforge_device::Dim3;
use warpforge_device::emu::stream::Access;
use warpforge_device::kernel::{RawIn, RawOut, RawOutMatrix};
use warpforge_device::own::{BindError, batched_extent};

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// Launch-sized shared memory per block, in bytes, on top of nothing: the
    /// launch uses the larger of this and what the kernel declares.
    pub shared_bytes: u32,
    /// The problem size the config was made for (`for_elements(n)`: n;
    /// `for_2d(rows, cols, ..)`: rows × cols). Every output buffer of the
    /// launch must hold at least this many elements, or the launch is refused
    /// with `ShapeMismatch` before it runs: a too-small output would silently
    /// drop the writes past its end.
    pub elements: Option<u64>,
}

impl LaunchConfig {
    /// An explicit grid and block.
    pub const fn new(grid: Dim3, block: Dim3) -> Self {
        LaunchConfig {
            grid,
            block,
            shared_bytes: 0,
            elements: None,
        }
    }

    /// One thread per output element: `block_threads` per block, enough
    /// blocks for `n` (at least one, so a zero-length launch is still valid).
    /// Every output buffer of the launch must hold at least `n` elements;
    /// for kernels whose outputs are not per-thread (histograms, partial
    /// sums) use [`for_threads`](Self::for_threads).
    ///
    /// ```
    /// # use warpforge::LaunchConfig;
    /// let c = LaunchConfig::for_elements(1000, 256).unwrap();
    /// assert_eq!((c.grid.x, c.block.x, c.elements), (4, 256, Some(1000)));
    /// assert!(LaunchConfig::for_elements(usize::MAX, 256).is_err());
    /// ```
    pub fn for_elements(n: usize, block_threads: u32) -> Result<Self> {
        if block_threads == 0 {
            return Err(Error::ShapeMismatch {
                op: "LaunchConfig::for_elements",
                detail: "block_threads is 0; use a positive multiple of 32 such as 256".into(),
            });
        }
        let grid_x = grid_axis(
            "(any)",
            "grid.x",
            n.div_ceil(block_threads as usize).max(1),
            GRID_X_MAX,
            "use a grid-stride loop with a capped grid instead of one thread per element",
        )?;
        Ok(LaunchConfig {
            elements: Some(n as u64),
            ..LaunchConfig::new(Dim3::x(grid_x), Dim3::x(block_threads))
        })
    }

    /// At least `n` threads, `block_threads` per block, with no claim about
    /// the outputs' sizes (the kernel's guards handle them).
    ///
    /// ```
    /// # use warpforge::LaunchConfig;
    /// let c = LaunchConfig::for_threads(1000, 256).unwrap();
    /// assert_eq!((c.grid.x, c.elements), (4, None));
    /// ```
    pub fn for_threads(n: usize, block_threads: u32) -> Result<Self> {
        Ok(LaunchConfig {
            elements: None,
            ..Self::for_elements(n, block_threads)?
        })
    }

    /// One thread per element of a `rows × cols` row-major problem, in
    /// `block = (x, y)` tiles: `x` threads along a row (columns), `y` along a
    /// column, and enough blocks to cover it (at least one).
    ///
    /// ```
    /// # use warpforge::LaunchConfig;
    /// let c = LaunchConfig::for_2d(100, 1000, (32, 8)).unwrap();
    /// assert_eq!((c.grid.x, c.grid.y, c.block.x, c.block.y), (32, 13, 32, 8));
    /// assert_eq!(c.elements, Some(100_000));
    /// assert!(LaunchConfig::for_2d(1 << 20, 1 << 20, (16, 16)).is_err()); // grid.y > 65535
    /// ```
    pub fn for_2d(rows: usize, cols: usize, block: (u32, u32)) -> Result<Self> {
        let (bx, by) = block;
        if bx == 0 || by == 0 {
            return Err(Error::ShapeMismatch {
                op: "LaunchConfig::for_2d",
                detail: format!("block ({bx}, {by}) has a zero side; use e.g. (32, 8) or (16, 16)"),
            });
        }
        let blocks = |n: usize, b: u32, what, limit: u32| {
            let fix = "use larger tiles, or loop over rows inside the kernel";
            grid_axis("(any)", what, n.div_ceil(b as usize).max(1), limit, fix)
        };
        let gx = blocks(cols, bx, "grid.x", GRID_X_MAX)?;
        let gy = blocks(rows, by, "grid.y", GRID_YZ_MAX)?;
        let elements =
            (rows as u64)
                .checked_mul(cols as u64)
                .ok_or_else(|| Error::SizeOverflow {
                    what: format!("a {rows} × {cols} launch"),
                })?;
        Ok(LaunchConfig {
            elements: Some(elements),
            ..LaunchConfig::new(Dim3::new(gx, gy, 1), Dim3::new(bx, by, 1))
        })
    }

    /// Adds launch-sized shared memory.
    pub const fn with_shared_bytes(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }
}

/// The largest grid.x CUDA allows (2³¹ − 1).
const GRID_X_MAX: u32 = i32::MAX as u32;
/// The largest grid.y and grid.z CUDA allows.
const GRID_YZ_MAX: u32 = 65535;

/// What one compiled kernel allows, from the driver's function attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionLimits {
    /// Most threads per block it can run with: its registers per thread times
    /// the threads must fit the SM's register file.
    pub max_threads_per_block: u32,
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Statically declared shared memory, bytes.
    pub static_shared_bytes: u32,
}

/// What a device allows a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Block extent per dimension.
    pub max_block_dim: [u32; 3],
    /// Grid extent per dimension.
    pub max_grid_dim: [u32; 3],
    /// Dynamic shared memory per block without opt-in.
    pub max_shared_per_block: u32,
    /// Dynamic shared memory per block with opt-in (warpforge opts in for you).
    pub max_shared_per_block_optin: u32,
}

/// A GPU architecture the emulator can emulate: its launch limits, and the
/// compute capability it reports ([`Device::compute_capability`]).
///
/// The default is [`Arch::Sm90`], an H100-class GPU, what kernels are most
/// often sized for; emulate [`Arch::Sm86`] to check that a configuration also
/// fits the GPUs with the least shared memory per block among the targets.
///
/// ```
/// use warpforge::{Arch, Device};
/// let h100 = Device::emulator();                      // sm_90
/// assert_eq!(h100.compute_capability(), (9, 0));
/// assert_eq!(h100.limits().max_shared_per_block_optin, 232448);   // 227 KiB
/// let rtx = Device::emulator_for(Arch::Sm86);
/// assert_eq!(rtx.limits().max_shared_per_block_optin, 101376);    // 99 KiB
/// assert_eq!("sm_89".parse::<Arch>(), Ok(Arch::Sm89));
/// ```
///
/// [`Device::compute_capability`]: crate::Device::compute_capability
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// Compute capability 8.0 (A100).
    Sm80,
    /// Compute capability 8.6 (RTX 30xx, A10, A40).
    Sm86,
    /// Compute capability 8.9 (RTX 40xx, L4, L40).
    Sm89,
    /// Compute capability 9.0 (H100, H200): the default.
    #[default]
    Sm90,
}

impl Arch {
    /// Every architecture the emulator knows, oldest first.
    pub const ALL: [Arch; 4] = [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90];

    /// `(major, minor)`: `(9, 0)` for sm_90.
    pub const fn compute_capability(self) -> (i32, i32) {
        match self {
            Arch::Sm80 => (8, 0),
            Arch::Sm86 => (8, 6),
            Arch::Sm89 => (8, 9),
            Arch::Sm90 => (9, 0),
        }
    }

    /// `sm_90`.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
        }
    }

    /// Dynamic shared memory per block with opt-in, bytes: the CUDA C++
    /// Programming Guide's "Technical Specifications per Compute Capability"
    /// table (docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/
    /// compute-capabilities.html), "maximum amount of shared memory per thread
    /// block": 163 KB on 8.0, 99 KB on 8.6 and 8.9, 227 KB on 9.0 (KB = 1024
    /// bytes; what `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`
    /// reports). Without opt-in every one allows 48 KB.
    pub const fn max_shared_per_block_optin(self) -> u32 {
        match self {
            Arch::Sm80 => 163 * 1024,
            Arch::Sm86 | Arch::Sm89 => 99 * 1024,
            Arch::Sm90 => 227 * 1024,
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Arch {
    type Err = String;

    /// `sm_80`, `sm_86`, `sm_89` or `sm_90` (also `sm90`, `90`, `9.0`).
    fn from_str(s: &str) -> std::result::Result<Arch, String> {
        let digits: String = s
            .trim()
            .trim_start_matches("sm")
            .trim_start_matches('_')
            .chars()
            .filter(|c| *c != '.')
            .collect();
        Arch::ALL
            .into_iter()
            .find(|a| a.name()[3..] == digits)
            .ok_or_else(|| {
                format!(
                    "unknown architecture `{s}`: the emulator knows sm_80, sm_86, sm_89 and sm_90"
                )
            })
    }
}

impl Limits {
    /// What an emulator of `arch` enforces: the limits of that GPU, so a
    /// launch that passes in the emulator also passes there (and on any target
    /// with at least as much shared memory).
    pub const fn emulating(arch: Arch) -> Limits {
        Limits {
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [GRID_X_MAX, GRID_YZ_MAX, GRID_YZ_MAX],
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: arch.max_shared_per_block_optin(),
        }
    }

    /// Checks `config` for `kernel`, which needs `kernel_shared` bytes of
    /// shared memory and, on a GPU, has the `function` limits; returns the
    /// dynamic shared bytes the launch will use.
    pub fn check(
        &self,
        kernel: &'static str,
        config: &LaunchConfig,
        kernel_shared: usize,
        function: Option<FunctionLimits>,
    ) -> Result<u32> {
        let fail = |what, value: u64, limit: u64, fix| Error::LaunchConfig {
            kernel,
            what,
            value,
            limit,
            fix,
        };
        let (g, b) = (config.grid, config.block);
        const RESHAPE: &str = "reshape the block";
        const GRID_FIX: &str = "use a grid-stride loop or move work to grid.x";
        let dims = [
            ("block.x", b.x, self.max_block_dim[0], RESHAPE),
            ("block.y", b.y, self.max_block_dim[1], RESHAPE),
            ("block.z", b.z, self.max_block_dim[2], RESHAPE),
            ("grid.x", g.x, self.max_grid_dim[0], GRID_FIX),
            ("grid.y", g.y, self.max_grid_dim[1], GRID_FIX),
            ("grid.z", g.z, self.max_grid_dim[2], GRID_FIX),
        ];
        if let Some(&(what, ..)) = dims.iter().find(|d| d.1 == 0) {
            return Err(fail(
                what,
                0,
                1,
                "every grid and block dimension must be at least 1",
            ));
        }
        let threads = b.volume();
        if threads > u64::from(self.max_threads_per_block) {
            return Err(fail(
                "threads per block",
                threads,
                u64::from(self.max_threads_per_block),
                "use fewer threads per block and more blocks",
            ));
        }
        if let Some(&(what, v, limit, fix)) = dims.iter().find(|d| d.1 > d.2) {
            return Err(fail(what, u64::from(v), u64::from(limit), fix));
        }
        if let Some(f) = function
            && threads > u64::from(f.max_threads_per_block)
        {
            return Err(fail(
                "threads per block (registers × threads must fit the register file; \
                 this kernel uses its registers-per-thread)",
                threads,
                u64::from(f.max_threads_per_block),
                "launch with at most that many threads per block, or make the kernel use \
                 fewer registers (`warpforge ptx` shows its count)",
            ));
        }
        let shared = (config.shared_bytes as usize).max(kernel_shared);
        let static_shared = function.map_or(0, |f| f.static_shared_bytes as usize);
        let optin = self
            .max_shared_per_block_optin
            .max(self.max_shared_per_block);
        if shared.saturating_add(static_shared) > optin as usize {
            return Err(fail(
                "shared memory bytes per block (dynamic + static, with opt-in)",
                shared.saturating_add(static_shared) as u64,
                u64::from(optin),
                "use smaller tiles",
            ));
        }
        Ok(shared as u32)
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// One launch argument: a scalar, `&DeviceBuffer<T>` (for `&[T]`),
/// `&mut DeviceBuffer<T>` (for `Out<T>`), a [`MatrixMut`] (for
/// `OutMatrix<T>`), a `&TensorMap` (for `TensorMap<…>`) or a
/// `StoreMatrix` (for `StoreMatrix<…>`). Sealed: these are the only ones.
pub trait KernelArg: sealed::Sealed {
    /// What the kernel's emulator entry receives for it.
    type Abi: Copy + Send + Sync;
    #[doc(hidden)]
    fn owner(&self) -> Option<&Device>;
    /// Elements of an output buffer (None for inputs and scalars).
    #[doc(hidden)]
    fn output_len(&self) -> Option<usize> {
        None
    }
    #[doc(hidden)]
    fn emu_bind(&mut self, binding: &mut Binding) -> Option<Self::Abi>;
    /// Address, elements and element size of an output's emulator binding (None for others).
    #[doc(hidden)]
    fn emu_output(_abi: &Self::Abi) -> Option<(usize, usize, usize)> {
        None
    }
    #[doc(hidden)]
    fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>);
}

macro_rules! scalar_arg {
    ($($t:ty),*) => { $(
        impl sealed::Sealed for $t {}
        impl KernelArg for $t {
            type Abi = $t;
            fn owner(&self) -> Option<&Device> { None }
            fn emu_bind(&mut self, _: &mut Binding) -> Option<$t> { Some(*self) }
            fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>) { args.arg(&*self); }
        }
    )* };
}
scalar_arg!(
    f32, f64, i8, u8, i16, u16, i32, u32, i64, u64, usize, isize, f16, bf16
);

impl<T: Element> sealed::Sealed for &DeviceBuffer<T> {}
impl<T: Element> KernelArg for &DeviceBuffer<T> {
    type Abi = RawIn<T>;
    fn owner(&self) -> Option<&Device> {
        Some(self.device())
    }
    fn emu_bind(&mut self, binding: &mut Binding) -> Option<RawIn<T>> {
        match self.memory() {
            Memory::Emulated(m) => Some(RawIn {
                ptr: binding.claim(m, Access::Read),
                len: self.len,
            }),
            Memory::Gpu(_) => None,
        }
    }
    fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        let buf: &'a DeviceBuffer<T> = self;
        if let Memory::Gpu(slice) = buf.memory() {
            args.arg(slice);
            args.arg(&buf.len);
        }
    }
}

impl<T: Element> sealed::Sealed for &mut DeviceBuffer<T> {}
impl<T: Element> KernelArg for &mut DeviceBuffer<T> {
    type Abi = RawOut<T>;
    fn owner(&self) -> Option<&Device> {
        Some(self.device())
    }
    fn output_len(&self) -> Option<usize> {
        Some(self.len)
    }
    fn emu_bind(&mut self, binding: &mut Binding) -> Option<RawOut<T>> {
        match self.memory() {
            Memory::Emulated(m) => Some(RawOut {
                len: self.len,
                ptr: binding.claim(m, Access::Write),
            }),
            Memory::Gpu(_) => None,
        }
    }
    fn emu_output(abi: &RawOut<T>) -> Option<(usize, usize, usize)> {
        Some((abi.ptr as usize, abi.len, size_of::<T>()))
    }
    fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        let (memory, len, _) = self.memory_mut();
        if let Memory::Gpu(slice) = memory {
            args.arg(slice);
            args.arg(len);
        }
    }
}

/// A device buffer as the output matrix of a kernel's `OutMatrix<T>`
/// parameter: `batches` matrices of `rows × cols` (rows `row_stride`
/// elements apart, batch `b` at element `b·batch_stride`). The host binds
/// the shape, so every thread of the launch maps (batch, row, col) to the
/// same element and the owned forms (`warpforge_device::own`) stay disjoint.
///
/// Made by [`DeviceBuffer::matrix_mut`] (one batch) and
/// [`DeviceBuffer::batched_matrix_mut`], which check that the shape fits and
/// the batches do not overlap.
pub struct MatrixMut<'b, T: Element> {
    pub(super) buffer: &'b mut DeviceBuffer<T>,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) row_stride: usize,
    pub(super) batches: usize,
    pub(super) batch_stride: usize,
}

impl<T: Element> DeviceBuffer<T> {
    /// The buffer as a `rows × cols` matrix with rows `row_stride` elements
    /// apart (`row_stride >= cols`), for a kernel's `OutMatrix<T>` parameter:
    /// one batch ([`batched_matrix_mut`](Self::batched_matrix_mut)).
    /// `ShapeMismatch` if the row is longer than the stride or the matrix
    /// needs more elements than the buffer has (sizes multiplied with
    /// overflow checks).
    ///
    /// ```
    /// let dev = warpforge::Device::emulator();
    /// let mut y = dev.alloc_zeroed::<f32>(3 * 8)?;
    /// assert!(y.matrix_mut(3, 5, 8).is_ok());
    /// assert!(y.matrix_mut(4, 5, 8).is_err()); // needs 3·8 + 5 elements
    /// assert!(y.matrix_mut(3, 9, 8).is_err()); // a row longer than the stride
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn matrix_mut(
        &mut self,
        rows: usize,
        cols: usize,
        row_stride: usize,
    ) -> Result<MatrixMut<'_, T>> {
        self.bind_matrix("DeviceBuffer::matrix_mut", rows, cols, row_stride, 1, 0)
    }

    /// The buffer as `batches` matrices of `rows × cols` (rows `row_stride`
    /// apart, batch `b` starting at element `b·batch_stride`), for a
    /// kernel's `OutMatrix<T>` written by batch (`blockIdx.z` = the batch:
    /// `warpforge_device::own::OutMatrix::batch`). Refused unless the
    /// batches are disjoint by one of two rules
    /// (`warpforge_device::own::batched_extent`): stacked, `batch_stride ≥
    /// (rows − 1)·row_stride + cols`; or side by side (column ranges of one
    /// wider matrix), `batch_stride ≥ cols` and `(batches − 1)·batch_stride
    /// + cols ≤ row_stride`. `ShapeMismatch` naming the sizes for an overlap,
    /// a row longer than its stride or a buffer too short; `SizeOverflow`
    /// when the extent does not fit a `usize`.
    ///
    /// ```
    /// let dev = warpforge::Device::emulator();
    /// let mut y = dev.alloc_zeroed::<f32>(2 * 12)?;
    /// // Stacked: two 2 × 5 batches, rows 6 apart, a batch every 12.
    /// assert!(y.batched_matrix_mut(2, 5, 6, 2, 12).is_ok());
    /// // Side by side: three 2 × 4 column ranges of a 2 × 12 matrix.
    /// assert!(y.batched_matrix_mut(2, 4, 12, 3, 4).is_ok());
    /// // A batch stride of 3 < 4 columns: batches 0 and 1 share column 3.
    /// assert!(y.batched_matrix_mut(2, 4, 12, 3, 3).is_err());
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn batched_matrix_mut(
        &mut self,
        rows: usize,
        cols: usize,
        row_stride: usize,
        batches: usize,
        batch_stride: usize,
    ) -> Result<MatrixMut<'_, T>> {
        self.bind_matrix(
            "DeviceBuffer::batched_matrix_mut",
            rows,
            cols,
            row_stride,
            batches,
            batch_stride,
        )
    }

    fn bind_matrix(
        &mut self,
        op: &'static str,
        rows: usize,
        cols: usize,
        row_stride: usize,
        batches: usize,
        batch_stride: usize,
    ) -> Result<MatrixMut<'_, T>> {
        let fail = |detail: String| Error::ShapeMismatch { op, detail };
        let shape = if batches == 1 {
            format!("a {rows} × {cols} matrix with row stride {row_stride}")
        } else {
            format!(
                "{batches} batches of {rows} × {cols} with row stride {row_stride} and batch \
                 stride {batch_stride}"
            )
        };
        match batched_extent(rows, cols, row_stride, batches, batch_stride) {
            Ok(n) if n <= self.len => Ok(MatrixMut {
                buffer: self,
                rows,
                cols,
                row_stride,
                batches,
                batch_stride,
            }),
            Ok(n) => Err(fail(format!(
                "{shape} needs {n} elements, but the buffer has {}",
                self.len
            ))),
            Err(BindError::RowLongerThanStride) => Err(fail(format!(
                "a row of {cols} elements does not fit in a row stride of {row_stride}"
            ))),
            Err(BindError::Overlap { span }) => Err(fail(format!(
                "{shape} could overlap (two batches would write one element): batch stride \
                 {batch_stride} is neither stacked (≥ the \
                 {span} elements a batch spans, (rows − 1)·row stride + cols) nor side by side \
                 (≥ the {cols} columns, with (batches − 1)·batch stride + cols ≤ row stride \
                 {row_stride})"
            ))),
            Err(BindError::Overflow) => Err(Error::SizeOverflow { what: shape }),
        }
    }
}

impl<T: Element> sealed::Sealed for MatrixMut<'_, T> {}
impl<T: Element> KernelArg for MatrixMut<'_, T> {
    type Abi = RawOutMatrix<T>;
    fn owner(&self) -> Option<&Device> {
        Some(self.buffer.device())
    }
    fn output_len(&self) -> Option<usize> {
        // The batches are disjoint and fit in the buffer (checked by
        // `bind_matrix`), so their elements fit in a usize.
        Some(self.batches * self.rows * self.cols)
    }
    fn emu_bind(&mut self, binding: &mut Binding) -> Option<RawOutMatrix<T>> {
        match self.buffer.memory() {
            Memory::Emulated(m) => Some(RawOutMatrix {
                len: self.buffer.len,
                ptr: binding.claim(m, Access::Write),
                rows: self.rows,
                cols: self.cols,
                row_stride: self.row_stride,
                batches: self.batches,
                batch_stride: self.batch_stride,
            }),
            Memory::Gpu(_) => None,
        }
    }
    fn emu_output(abi: &RawOutMatrix<T>) -> Option<(usize, usize, usize)> {
        Some((abi.ptr as usize, abi.len, size_of::<T>()))
    }
    fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        let MatrixMut {
            buffer,
            rows,
            cols,
            row_stride,
            batches,
            batch_stride,
        } = self;
        let (memory, len, _) = buffer.memory_mut();
        if let Memory::Gpu(slice) = memory {
            args.arg(slice);
            args.arg(len);
            args.arg(&*rows);
            args.arg(&*cols);
            args.arg(&*row_stride);
            args.arg(&*batches);
            args.arg(&*batch_stride);
        }
    }
}

/// A launch's argument tuple, matching a kernel's `Args` position by position.
pub trait KernelArgs<Abi>: sealed::Sealed {
    #[doc(hidden)]
    fn owners(&self) -> Vec<&Device>;
    /// Refuses outputs smaller than the config's problem size.
    #[doc(hidden)]
    fn check_outputs(&self, kernel: &'static str, config: &LaunchConfig) -> Result<()>;
    #[doc(hidden)]
    fn emu_bind(&mut self, binding: &mut Binding) -> Option<Abi>;
    /// Per argument of `abi`, in order: an output's address, elements and element size.
    #[doc(hidden)]
    fn emu_outputs(abi: &Abi) -> Vec<Option<(usize, usize, usize)>>;
    #[doc(hidden)]
    fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>);
}

macro_rules! tuple_args {
    ($($a:ident $i:tt),*) => {
        impl<$($a: KernelArg),*> sealed::Sealed for ($($a,)*) {}
        impl<$($a: KernelArg),*> KernelArgs<($($a::Abi,)*)> for ($($a,)*) {
            fn owners(&self) -> Vec<&Device> {
                let owners: Vec<Option<&Device>> = vec![$(self.$i.owner()),*];
                owners.into_iter().flatten().collect()
            }
            #[allow(unused_variables)]
            fn check_outputs(&self, kernel: &'static str, config: &LaunchConfig) -> Result<()> {
                let Some(n) = config.elements else { return Ok(()) };
                $(
                    if let Some(len) = self.$i.output_len()
                        && (len as u64) < n
                    {
                        return Err(Error::ShapeMismatch {
                            op: kernel,
                            detail: format!(
                                "argument {} is an output of {len} elements, but the launch \
                                 config is for a problem of {n}; allocate at least {n} elements \
                                 (or make the config for {len})",
                                $i + 1
                            ),
                        });
                    }
                )*
                Ok(())
            }
            #[allow(clippy::unused_unit, unused_variables)]
            fn emu_bind(&mut self, binding: &mut Binding) -> Option<($($a::Abi,)*)> {
                Some(($(self.$i.emu_bind(binding)?,)*))
            }
            #[allow(unused_variables)]
            fn emu_outputs(abi: &($($a::Abi,)*)) -> Vec<Option<(usize, usize, usize)>> {
                vec![$($a::emu_output(&abi.$i)),*]
            }
            #[allow(unused_variables)]
            fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
                $(self.$i.push_gpu(args);)*
            }
        }
    };
}
tuple_args!();
tuple_args!(A 0);
tuple_args!(A 0, B 1);
tuple_args!(A 0, B 1, C 2);
tuple_args!(A 0, B 1, C 2, D 3);
tuple_args!(A 0, B 1, C 2, D 3, E 4);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

/// `blocks` as one dimension of `kernel`'s grid, if it fits in `u32` and
/// within `limit`; else `Error::LaunchConfig` naming the dimension (`what`)
/// and the `fix`.
pub(crate) fn grid_axis(
    kernel: &'static str,
    what: &'static str,
    blocks: usize,
    limit: u32,
    fix: &'static str,
) -> Result<u32> {
    u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= limit)
        .ok_or(Error::LaunchConfig {
            kernel,
            what,
            value: blocks as u64,
            limit: u64::from(limit),
            fix,
        })
}
