//! The typed description of a kernel that `#[kernel]` derives from its signature.
//!
//! For `#[kernel] pub fn axpy_f32(a: f32, x: &[f32], y: Out<f32>)` the macro emits
//! - on nvptx64: `extern "gpu-kernel" fn axpy_f32(a, x_ptr, x_len, y_ptr, y_len)`,
//!   unmangled, so Nsight and `cuobjdump` show the Rust name;
//! - on the host: a unit struct `axpy_f32` implementing [`Kernel`] with
//!   `Args = (f32, RawIn<f32>, RawOut<f32>)`, which the host crate launches on
//!   the GPU (same parameter order, a slice as pointer + length) or runs in the
//!   emulator through [`Kernel::run_thread`].
//!
//! Both come from the one signature, so the device entry and the host launcher
//! cannot disagree on argument count, order or type. [`Kernel::MODULE`] names
//! the kernels crate (its Cargo package name) whose PTX holds the entry, so the
//! host looks the entry up in that module only, and checks [`Kernel::PARAMS`]
//! against the entry's `.param` list before the first launch.

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    /// How a kernel parameter crosses the launch.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ParamKind {
        /// A value, passed as is.
        Scalar,
        /// `&[T]` or `Global<T>`: read-only buffer, passed as device pointer and length.
        Input,
        /// `Out<T>`: guarded output buffer, passed as device pointer and length.
        Output,
        /// `OutMatrix<T>`: output matrix whose shape the host binds, passed as
        /// device pointer, length, rows, columns, row stride, batches and
        /// batch stride (`usize` each).
        OutputMatrix,
        /// `TensorMap<T, R, B0, B1, S>`: a TMA tensor map, passed as the
        /// device address of its 128 bytes (which the host encoded), then
        /// its tensor's buffer (which orders the launch with the buffer's
        /// other users; the kernel reads it only through the map).
        TensorMap,
        /// `StoreMatrix<T, M, B0, B1, S>`: an output matrix written by TMA
        /// stores, passed as the device address of its map's 128 bytes, then
        /// as an `OutMatrix`'s seven parameters.
        StoreMatrix,
    }

    /// A kernel's launch bounds, CUDA's `__launch_bounds__` and
    /// `__maxnreg__`: `#[kernel(max_threads = 256, min_blocks = 2,
    /// max_registers = 128)]`. The build writes them into the PTX entry as
    /// `.maxntid`, `.minnctapersm` and `.maxnreg`, so ptxas allocates
    /// registers for that occupancy; the host refuses a launch whose block
    /// has more than `max_threads` threads (it would fail on the GPU).
    ///
    /// ```
    /// use warpforge_device::kernel::LaunchBounds;
    /// let b = LaunchBounds { max_threads: Some(256), ..LaunchBounds::NONE };
    /// assert!(b.admits(256) && !b.admits(257));
    /// assert!(LaunchBounds::NONE.admits(1024));
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct LaunchBounds {
        /// Most threads per block (`.maxntid`).
        pub max_threads: Option<u32>,
        /// Fewest resident blocks per multiprocessor ptxas should allow for (`.minnctapersm`).
        pub min_blocks: Option<u32>,
        /// Most registers per thread (`.maxnreg`).
        pub max_registers: Option<u32>,
    }

    impl LaunchBounds {
        /// No bounds.
        pub const NONE: LaunchBounds = LaunchBounds {
            max_threads: None,
            min_blocks: None,
            max_registers: None,
        };

        /// Whether a block of `threads` threads is within `max_threads`.
        pub const fn admits(&self, threads: u64) -> bool {
            match self.max_threads {
                Some(max) => threads <= max as u64,
                None => true,
            }
        }
    }

    /// One parameter of a kernel signature.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Param {
        /// Name in the Rust signature.
        pub name: &'static str,
        /// How it is passed.
        pub kind: ParamKind,
        /// Element or scalar type, as written (`f32`, `bf16`, …).
        pub ty: &'static str,
        /// `size_of` the scalar, or of one element of a buffer, in bytes.
        pub bytes: usize,
    }

    /// A read-only buffer argument as the emulator receives it.
    #[derive(Debug)]
    pub struct RawIn<T> {
        /// First element.
        pub ptr: *const T,
        /// Elements.
        pub len: usize,
    }

    /// An output buffer argument as the emulator receives it.
    #[derive(Debug)]
    pub struct RawOut<T> {
        /// First element.
        pub ptr: *mut T,
        /// Elements.
        pub len: usize,
    }

    /// An output matrix argument as the emulator receives it: the buffer and
    /// the shape the host checked it holds.
    #[derive(Debug)]
    pub struct RawOutMatrix<T> {
        /// First element.
        pub ptr: *mut T,
        /// Elements of the buffer.
        pub len: usize,
        /// Rows of the matrix.
        pub rows: usize,
        /// Columns of the matrix.
        pub cols: usize,
        /// Elements between the starts of consecutive rows.
        pub row_stride: usize,
        /// Batches of the matrix (1 for a plain one).
        pub batches: usize,
        /// Elements between the starts of consecutive batches.
        pub batch_stride: usize,
    }

    impl<T> Clone for RawOutMatrix<T> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T> Copy for RawOutMatrix<T> {}
    // SAFETY: as for `RawOut`: one launch's arguments, the buffer kept alive
    // and borrowed by the host launcher for the whole launch.
    unsafe impl<T: Send> Send for RawOutMatrix<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send> Sync for RawOutMatrix<T> {}

    impl<T: Copy> RawOutMatrix<T> {
        /// The buffer as an output matrix.
        ///
        /// # Safety
        /// `ptr` must be valid for reads and writes of `len` elements while the view lives.
        pub unsafe fn as_matrix<'a, M: crate::own::Mapping2>(
            self,
        ) -> crate::own::OutMatrix<'a, T, M> {
            // SAFETY: the caller's contract.
            unsafe {
                crate::own::OutMatrix::from_raw(
                    self.ptr,
                    self.len,
                    self.rows,
                    self.cols,
                    self.row_stride,
                    self.batches,
                    self.batch_stride,
                )
            }
        }
    }

    /// A tensor map argument as the emulator receives it: the description
    /// the host checked, typed as the kernel's parameter is.
    pub struct RawTensorMap<T, const R: usize, const B0: usize, const B1: usize, S> {
        /// The map.
        pub desc: crate::emu::tma::TensorDesc,
        _kernel_type: core::marker::PhantomData<fn() -> (T, S)>,
    }

    impl<T, const R: usize, const B0: usize, const B1: usize, S> RawTensorMap<T, R, B0, B1, S> {
        /// `desc`, for a kernel parameter of this type.
        pub fn new(desc: crate::emu::tma::TensorDesc) -> Self {
            RawTensorMap {
                desc,
                _kernel_type: core::marker::PhantomData,
            }
        }
    }

    impl<T, const R: usize, const B0: usize, const B1: usize, S> Clone
        for RawTensorMap<T, R, B0, B1, S>
    {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T, const R: usize, const B0: usize, const B1: usize, S> Copy
        for RawTensorMap<T, R, B0, B1, S>
    {
    }

    impl<T: crate::shared::SharedElement, const R: usize, const B0: usize, const B1: usize, S>
        RawTensorMap<T, R, B0, B1, S>
    where
        S: crate::swizzle::Mode,
    {
        /// The map as the kernel's parameter.
        ///
        /// # Safety
        /// The tensor must stay readable and unwritten while the view lives.
        #[track_caller]
        pub unsafe fn as_map<'a>(self) -> crate::tma::TensorMap<'a, T, R, B0, B1, S> {
            // SAFETY: the caller's contract; `from_raw` checks on the host
            // that the description is of this type.
            unsafe { crate::tma::TensorMap::from_raw(self.desc) }
        }
    }

    /// A TMA-stored output matrix as the emulator receives it: the matrix
    /// and the map of it the host checked, typed as the kernel's parameter
    /// is.
    pub struct RawStoreMatrix<T, const B0: usize, const B1: usize, S> {
        /// The matrix.
        pub matrix: RawOutMatrix<T>,
        /// The map of it (rank 3: columns, rows, batches).
        pub desc: crate::emu::tma::TensorDesc,
        _kernel_type: core::marker::PhantomData<fn() -> S>,
    }

    impl<T, const B0: usize, const B1: usize, S> RawStoreMatrix<T, B0, B1, S> {
        /// `matrix` and its map `desc`, for a kernel parameter of this type.
        pub fn new(matrix: RawOutMatrix<T>, desc: crate::emu::tma::TensorDesc) -> Self {
            RawStoreMatrix {
                matrix,
                desc,
                _kernel_type: core::marker::PhantomData,
            }
        }
    }

    impl<T, const B0: usize, const B1: usize, S> Clone for RawStoreMatrix<T, B0, B1, S> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T, const B0: usize, const B1: usize, S> Copy for RawStoreMatrix<T, B0, B1, S> {}
    // SAFETY: as for `RawOutMatrix`: one launch's arguments, the buffer kept
    // alive and borrowed mutably by the host launcher for the whole launch.
    unsafe impl<T: Send, const B0: usize, const B1: usize, S> Send for RawStoreMatrix<T, B0, B1, S> {}
    // SAFETY: as above.
    unsafe impl<T: Send, const B0: usize, const B1: usize, S> Sync for RawStoreMatrix<T, B0, B1, S> {}

    impl<T: crate::shared::SharedElement, const B0: usize, const B1: usize, S: crate::swizzle::Mode>
        RawStoreMatrix<T, B0, B1, S>
    {
        /// The matrix as the kernel's parameter.
        ///
        /// # Safety
        /// As [`RawOutMatrix::as_matrix`], and `desc` a map of exactly that
        /// matrix (`StoreMatrix::from_raw` checks it on the host).
        #[track_caller]
        pub unsafe fn as_store_matrix<'a, M: crate::own::Mapping2>(
            self,
        ) -> crate::tma::StoreMatrix<'a, T, M, B0, B1, S> {
            // SAFETY: the caller's contract.
            unsafe { crate::tma::StoreMatrix::from_raw(self.desc, self.matrix.as_matrix()) }
        }
    }

    impl<T> Clone for RawIn<T> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T> Copy for RawIn<T> {}
    impl<T> Clone for RawOut<T> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T> Copy for RawOut<T> {}

    // SAFETY: these are the kernel arguments of one launch, shared by all its
    // emulated threads exactly as a GPU shares them; the host launcher keeps the
    // buffers alive and unaliased (borrowed) for the whole launch.
    unsafe impl<T: Sync> Send for RawIn<T> {}
    // SAFETY: as above.
    unsafe impl<T: Sync> Sync for RawIn<T> {}
    // SAFETY: as above; threads write only through bounds-checked `Slot`s.
    unsafe impl<T: Send> Send for RawOut<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send> Sync for RawOut<T> {}

    impl<T> RawIn<T> {
        /// The buffer as a slice.
        ///
        /// # Safety
        /// `ptr` must be valid for reads of `len` elements while the slice lives.
        pub unsafe fn as_slice<'a>(self) -> &'a [T] {
            // SAFETY: the caller's contract.
            unsafe { crate::guard::input_from_raw(self.ptr, self.len) }
        }
    }

    impl<T: Copy> RawOut<T> {
        /// The buffer as a guarded output view.
        ///
        /// # Safety
        /// `ptr` must be valid for reads and writes of `len` elements while the view lives.
        pub unsafe fn as_out<'a, M: crate::own::Mapping>(self) -> crate::guard::Out<'a, T, M> {
            // SAFETY: the caller's contract.
            unsafe { crate::guard::Out::from_raw(self.ptr, self.len) }
        }
    }

    /// A kernel as the host sees it: name, module, parameters, needs (shared
    /// memory, block shape), and the emulator entry.
    ///
    /// Implemented by `#[kernel]` only. The host launches a kernel on the GPU
    /// by looking up the entry [`NAME`](Kernel::NAME) in the PTX module
    /// [`MODULE`](Kernel::MODULE) and passing [`Args`](Kernel::Args) to it as
    /// [`PARAMS`](Kernel::PARAMS) describe, and the emulator calls
    /// [`run_thread`](Kernel::run_thread); nothing else about the kernel is
    /// known to the host, so a description that does not match the code would
    /// let a safe launch read or write out of bounds.
    ///
    /// # Safety
    ///
    /// An implementation promises that, for the one function it describes:
    /// - `NAME` is the unmangled name of its PTX entry, and `MODULE` the Cargo
    ///   package name of the kernels crate compiled into the PTX module that
    ///   holds that entry;
    /// - `PARAMS` and `Args` list its parameters in order, exactly as the entry
    ///   declares them: each scalar by value with its type and size, each
    ///   `&[T]` as [`RawIn<T>`], each `Out<T>` as [`RawOut<T>`] (on the GPU a
    ///   device pointer then a `usize` element count) and each `OutMatrix<T>`
    ///   as [`RawOutMatrix<T>`] (pointer, count, rows, columns, row stride,
    ///   batches, batch stride), each `TensorMap<T, R, B0, B1, S>` as
    ///   [`RawTensorMap`] of the same arguments (on the GPU the map's
    ///   device address, then its tensor's device pointer), each
    ///   `StoreMatrix<T, M, B0, B1, S>` as [`RawStoreMatrix<T, B0, B1, S>`]
    ///   (on the GPU the map's device address, then as an `OutMatrix`),
    ///   and the body touches a buffer only within the element count it is given;
    /// - `SHARED_BYTES` is at least the launch-sized shared memory the body
    ///   uses, and `BLOCK` is `Some` whenever the body assumes a block shape;
    /// - `run_thread` runs that function's body for one emulated thread.
    ///
    /// `#[kernel]` derives all of them from the one signature (`unsafe impl`,
    /// `MODULE = env!("CARGO_PKG_NAME")` of the crate it expands in). Do not
    /// implement this trait by hand. The host checks `PARAMS` against the PTX
    /// entry's `.param` list before the first GPU launch, but that is a check
    /// of the widths and pointers, not of what the body does with them.
    pub unsafe trait Kernel: Copy + Send + Sync + 'static {
        /// The PTX entry name: the Rust function name.
        const NAME: &'static str;
        /// The Cargo package name of the kernels crate the kernel is compiled
        /// in (`"warpforge-kernels-reduce"` for the library's reductions), which is also the name
        /// of the PTX module holding its entry (`warpforge::ptx::Module::name`).
        /// Kernels defined where no PTX is built (a host crate's tests) name
        /// that crate and run on the emulator only.
        const MODULE: &'static str;
        /// The parameters, in order.
        const PARAMS: &'static [Param];
        /// Launch-sized shared memory per block the kernel needs (`#[kernel(shared = [T; N])]`).
        const SHARED_BYTES: usize;
        /// The one block shape the kernel may be launched with
        /// (`#[kernel(block = (X, Y, Z))]`), or `None` if it runs with any block.
        /// The host refuses a launch with another block before anything runs.
        const BLOCK: Option<crate::thread::Dim3>;
        /// Its launch bounds (`#[kernel(max_threads = …, min_blocks = …,
        /// max_registers = …)]`); the host refuses a block over `max_threads`.
        const LAUNCH_BOUNDS: LaunchBounds = LaunchBounds::NONE;
        /// The argument tuple: scalars as themselves, `&[T]` as [`RawIn`], `Out<T>` as [`RawOut`].
        type Args: Copy + Send + Sync;

        /// Runs the kernel body for the calling emulated thread.
        ///
        /// # Safety
        /// Every buffer in `args` must be valid for its length, for the whole launch.
        unsafe fn run_thread(args: Self::Args);
    }
}
