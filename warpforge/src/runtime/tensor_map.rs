//! TMA tensor maps on the host: a [`DeviceBuffer`] described as a tensor,
//! checked once and encoded for the copy engine, then passed to a kernel
//! whose parameter is `warpforge_device::tma::TensorMap` of the same type.
//!
//! ```
//! use warpforge::{Device, TensorMap};
//! use warpforge_device::swizzle::Sw128;
//! use half::bf16;
//! let dev = Device::emulator();
//! let a = dev.upload(&vec![bf16::ZERO; 100 * 72]).unwrap();
//! // A 100 × 72 row-major matrix (rows 72 elements apart), copied in boxes
//! // of 64 columns × 128 rows, 128B-swizzled: the `wgmma` operand layout.
//! let map = TensorMap::<bf16, 2, 64, 128, Sw128>::matrix(&a, 100, 72, 72).unwrap();
//! assert_eq!(map.dims(), [72, 100]);
//! // Rows 1 element apart are not 16-byte multiples: refused, naming the field.
//! let bad = TensorMap::<bf16, 2, 64, 128, Sw128>::matrix(&a, 100, 71, 71).unwrap_err();
//! assert!(bad.to_string().contains("globalStrides[0]"));
//! ```

use super::buffer::{DeviceBuffer, Memory};
use super::device::Device;
use super::element::{DType, Element};
use super::emulator::Binding;
use super::error::{Error, Result};
use super::launch::{KernelArg, MatrixMut, sealed};
use cudarc::driver::sys;
use cudarc::driver::{CudaSlice, DevicePtr, LaunchArgs, PushKernelArg};
use std::marker::PhantomData;
use std::sync::Arc;
use warpforge_device::emu::stream::Access;
use warpforge_device::emu::tma::TensorDesc;
use warpforge_device::emu::tma::stored_row_end;
use warpforge_device::kernel::{RawStoreMatrix, RawTensorMap};
use warpforge_device::swizzle::{Mode, Swizzle};

/// A rank-`R` tensor of `T` in a device buffer, whose TMA copies move boxes
/// of `B0 × B1` elements (× 1 in further dimensions) landing swizzled by
/// `S`: a kernel parameter of type
/// `warpforge_device::tma::TensorMap<T, R, B0, B1, S>`. It borrows the
/// buffer: the buffer cannot be written, or freed, while a map of it
/// exists (a kernel reads it through the map).
///
/// Made by [`new`](Self::new) (any rank), [`matrix`](Self::matrix) or
/// [`batched`](Self::batched), each of which checks every rule of
/// `cuTensorMapEncodeTiled` (and that the tensor lies inside the buffer)
/// on both backends, and refuses a map with `Error::InvalidParameter`
/// naming the field. On a GPU the 128-byte map is encoded by the driver
/// and kept in device memory for the launches.
pub struct TensorMap<'b, T: Element, const R: usize, const B0: usize, const B1: usize, S: Mode> {
    buffer: &'b DeviceBuffer<T>,
    desc: TensorDesc,
    /// The encoded map on the GPU (16 × u64 = 128 bytes, 256-byte aligned),
    /// from the device's cache of uploaded maps ([`UploadedMaps`]).
    encoded: Option<Arc<CudaSlice<u64>>>,
    _swizzle: PhantomData<S>,
}

impl<T: Element, const R: usize, const B0: usize, const B1: usize, S: Mode> std::fmt::Debug
    for TensorMap<'_, T, R, B0, B1, S>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_map(f, "TensorMap", T::DTYPE, &self.desc, self.encoded.is_some())
    }
}

/// A map's `Debug`: its element type, tensor, box and swizzle, and whether
/// the driver encoded it.
fn debug_map(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    dtype: DType,
    desc: &TensorDesc,
    encoded: bool,
) -> std::fmt::Result {
    f.debug_struct(name)
        .field("dtype", &dtype)
        .field("dims", &desc.dims())
        .field("strides_bytes", &desc.strides())
        .field("box", &desc.box_dims())
        .field("swizzle", &desc.swizzle())
        .field("encoded", &encoded)
        .finish()
}

const OP: &str = "TensorMap::new";

impl<'b, T: Element, const R: usize, const B0: usize, const B1: usize, S: Mode>
    TensorMap<'b, T, R, B0, B1, S>
{
    /// The tensor of `buffer` with `dims` elements per dimension, innermost
    /// (contiguous) first, and `strides` elements between consecutive
    /// indices of dimensions 1 .. R (`R − 1` of them; dimension 0's elements
    /// are adjacent). Each stride must be a multiple of 16 bytes: pad rows
    /// whose bytes are not (or use a kernel without TMA).
    pub fn new(buffer: &'b DeviceBuffer<T>, dims: [usize; R], strides: &[usize]) -> Result<Self> {
        Self::new_at(buffer, 0, dims, strides)
    }

    /// As [`new`](Self::new), the tensor starting `offset` elements into
    /// `buffer` (a part of it: split-k's last k-range, say). The tensor
    /// must lie in the buffer's elements from `offset` on, and its first
    /// byte be 16-byte aligned, as every map's (`globalAddress`).
    ///
    /// ```
    /// use warpforge::{Device, TensorMap};
    /// use warpforge_device::swizzle::Sw128;
    /// use half::bf16;
    /// let dev = Device::emulator();
    /// let a = dev.upload(&vec![bf16::ZERO; 100 * 72]).unwrap();
    /// // Columns 64..72 of the 100 × 72 matrix: a 100 × 8 tensor 64 elements in.
    /// let map = TensorMap::<bf16, 2, 64, 128, Sw128>::new_at(&a, 64, [8, 100], &[72]).unwrap();
    /// assert_eq!(map.dims(), [8, 100]);
    /// // 9 columns from there reach past the buffer's last row.
    /// assert!(TensorMap::<bf16, 2, 64, 128, Sw128>::new_at(&a, 64, [9, 100], &[72]).is_err());
    /// // 4 elements in is 8 bytes: not 16-byte aligned.
    /// let bad = TensorMap::<bf16, 2, 64, 128, Sw128>::new_at(&a, 4, [8, 100], &[72]).unwrap_err();
    /// assert!(bad.to_string().contains("globalAddress"), "{bad}");
    /// ```
    pub fn new_at(
        buffer: &'b DeviceBuffer<T>,
        offset: usize,
        dims: [usize; R],
        strides: &[usize],
    ) -> Result<Self> {
        let invalid = |parameter: &'static str, detail: String| Error::InvalidParameter {
            op: OP,
            parameter,
            detail,
        };
        if strides.len() + 1 != R {
            return Err(invalid(
                "strides",
                format!(
                    "{} strides for {R} dimensions; give {}",
                    strides.len(),
                    R.max(1) - 1
                ),
            ));
        }
        // Check a rank-2 box with B1 = 1 too: the device type refuses it at
        // compile time, and so must the host.
        if R == 1 && B1 != 1 {
            return Err(invalid(
                "B1",
                format!("a rank-1 map's box is B0 × 1, not × {B1}"),
            ));
        }
        let mut box_dims = [1u32; 5];
        box_dims[0] = B0 as u32;
        if R > 1 {
            box_dims[1] = B1 as u32;
        }
        let (desc, encoded) = describe(
            OP,
            (buffer, offset),
            &dims,
            strides,
            &box_dims[..R],
            S::SWIZZLE,
        )?;
        Ok(TensorMap {
            buffer,
            desc,
            encoded,
            _swizzle: PhantomData,
        })
    }

    /// Elements per dimension, innermost first.
    pub fn dims(&self) -> Vec<u64> {
        self.desc.dims().to_vec()
    }

    /// The device it lives on.
    pub fn device(&self) -> &Device {
        self.buffer.device()
    }
}

impl<'b, T: Element, const B0: usize, const B1: usize, S: Mode> TensorMap<'b, T, 2, B0, B1, S> {
    /// A `rows × cols` row-major matrix, rows `ld` elements apart:
    /// dimension 0 is the columns, dimension 1 the rows, so a box corner is
    /// `[col, row]`.
    pub fn matrix(
        buffer: &'b DeviceBuffer<T>,
        rows: usize,
        cols: usize,
        ld: usize,
    ) -> Result<Self> {
        Self::new(buffer, [cols, rows], &[ld])
    }
}

impl<'b, T: Element, const B0: usize, const B1: usize, S: Mode> TensorMap<'b, T, 3, B0, B1, S> {
    /// `batches` row-major `rows × cols` matrices, rows `ld` and matrices
    /// `batch_stride` elements apart: a box corner is `[col, row, batch]`.
    pub fn batched(
        buffer: &'b DeviceBuffer<T>,
        batches: usize,
        rows: usize,
        cols: usize,
        ld: usize,
        batch_stride: usize,
    ) -> Result<Self> {
        Self::new(buffer, [cols, rows, batches], &[ld, batch_stride])
    }
}

/// The tensor `offset` elements into `buffer` with `dims` elements per
/// dimension (innermost first) and `strides` elements between consecutive
/// indices of dimensions 1.., copied in boxes of `box_dims` landing
/// swizzled by `swizzle`: checked by every rule of `cuTensorMapEncodeTiled`
/// (`TensorDesc::new`, both backends, against the buffer's bytes from the
/// offset on; `InvalidParameter` of `op` naming the field), then encoded by
/// the driver on a GPU. Sizes in bytes are checked-multiplied.
fn describe<T: Element>(
    op: &'static str,
    (buffer, offset): (&DeviceBuffer<T>, usize),
    dims: &[usize],
    strides: &[usize],
    box_dims: &[u32],
    swizzle: Swizzle,
) -> Result<(TensorDesc, Option<Arc<CudaSlice<u64>>>)> {
    let elem = size_of::<T>();
    let byte_strides: Vec<u64> = strides
        .iter()
        .map(|&s| s.checked_mul(elem).map(|b| b as u64))
        .collect::<Option<_>>()
        .ok_or_else(|| Error::SizeOverflow {
            what: format!("{op}: strides {strides:?} in bytes"),
        })?;
    let total_bytes = buffer
        .len()
        .checked_mul(elem)
        .ok_or_else(|| Error::SizeOverflow {
            what: format!("{op}: the buffer's bytes"),
        })?;
    if offset > buffer.len() {
        return Err(Error::InvalidParameter {
            op,
            parameter: "offset",
            detail: format!(
                "{offset} elements into a buffer of {}: past its end",
                buffer.len()
            ),
        });
    }
    // At most the buffer's bytes (offset ≤ len), so no overflow; the
    // tensor must lie in the bytes from there on.
    let offset_bytes = offset * elem;
    let buffer_bytes = total_bytes - offset_bytes;
    let base = match buffer.memory() {
        Memory::Emulated(m) => m
            .alloc
            .as_ptr()
            .cast::<u8>()
            .cast_const()
            .wrapping_add(offset_bytes),
        Memory::Gpu(slice) => {
            let (ptr, _sync) = slice.device_ptr(slice.stream());
            (ptr as usize).wrapping_add(offset_bytes) as *const u8
        }
    };
    let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    let desc = TensorDesc::new(
        base,
        buffer_bytes,
        &dims,
        &byte_strides,
        box_dims,
        elem,
        swizzle,
    )
    .map_err(|e| Error::InvalidParameter {
        op,
        parameter: "the tensor map",
        detail: e.to_string(),
    })?;
    let encoded = match buffer.memory() {
        Memory::Emulated(_) => None,
        Memory::Gpu(_) => Some(encode::<T>(buffer.device(), &desc)?),
    };
    Ok((desc, encoded))
}

/// `cuTensorMapEncodeTiled` for `desc` (already checked), the 128 bytes
/// in device memory: the device's copy of the same bytes if it has one
/// ([`UploadedMaps`]), else a new upload.
fn encode<T: Element>(device: &Device, desc: &TensorDesc) -> Result<Arc<CudaSlice<u64>>> {
    use sys::CUtensorMapDataType_enum as D;
    let data_type = match T::DTYPE {
        DType::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        DType::F64 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        DType::I32 => D::CU_TENSOR_MAP_DATA_TYPE_INT32,
        DType::U32 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        DType::I64 => D::CU_TENSOR_MAP_DATA_TYPE_INT64,
        DType::U64 => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
    };
    use sys::CUtensorMapSwizzle_enum as W;
    let swizzle = match desc.swizzle() {
        Swizzle::None => W::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => W::CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => W::CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => W::CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let rank = desc.rank();
    let element_strides = [1u32; 5];
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer is to a live array of at least `rank` (the
    // strides: `rank − 1`) elements, `map` is a writable, 128-byte-aligned
    // CUtensorMap; the driver reads them during the call only.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type,
            rank as u32,
            desc.base().cast_mut().cast(),
            desc.dims().as_ptr(),
            desc.strides().as_ptr(),
            desc.box_dims().as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave_enum::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion_enum::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            sys::CUtensorMapFloatOOBfill_enum::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::InvalidParameter {
            op: OP,
            parameter: "the tensor map",
            detail: format!(
                "the driver's cuTensorMapEncodeTiled refused it ({status:?}) for dims {:?}, \
                 strides {:?} bytes, box {:?}, {:?}; tensor maps need a GPU of compute \
                 capability 9.0 or newer",
                desc.dims(),
                desc.strides(),
                desc.box_dims(),
                desc.swizzle()
            ),
        });
    }
    device.uploaded_map(map.opaque, || {
        let uploaded = device.upload(&map.opaque)?;
        match uploaded.into_memory() {
            Memory::Gpu(slice) => Ok(Arc::new(slice)),
            Memory::Emulated(_) => unreachable!("a GPU buffer's device uploads to the GPU"),
        }
    })
}

/// The encoded tensor maps a device has in its memory, by their 128 bytes,
/// the most recently used first, at most [`UploadedMaps::CAPACITY`].
///
/// Why: a kernel reads its map from device memory, and uploading one is an
/// allocation, a memset and a copy from pageable host memory, which waits
/// for the stream's earlier work — per operand, per call. The same GEMM
/// called again (same buffers, shapes and strides) encodes the same bytes,
/// so its maps are reused as they are: a map's bytes are the whole of what
/// a kernel reads from it, and nothing writes an uploaded map. An entry
/// evicted while a launch still reads it stays alive: each [`TensorMap`]
/// holds its own reference until its launches are queued, and the device
/// buffer is freed stream-ordered after them, as any buffer is.
pub(crate) struct UploadedMaps<V> {
    entries: Vec<([u64; 16], V)>,
}

impl<V: Clone> UploadedMaps<V> {
    /// The entries kept: a few calls' worth of operands and outputs.
    pub(crate) const CAPACITY: usize = 64;

    pub(crate) fn new() -> Self {
        UploadedMaps {
            entries: Vec::new(),
        }
    }

    /// The cached value for `bytes`, moved to the front.
    pub(crate) fn get(&mut self, bytes: &[u64; 16]) -> Option<V> {
        let at = self.entries.iter().position(|(k, _)| k == bytes)?;
        let entry = self.entries.remove(at);
        let value = entry.1.clone();
        self.entries.insert(0, entry);
        Some(value)
    }

    /// Keeps `value` for `bytes` in front, dropping the least recently
    /// used entry past the capacity.
    pub(crate) fn insert(&mut self, bytes: [u64; 16], value: V) {
        self.entries.retain(|(k, _)| *k != bytes);
        self.entries.insert(0, (bytes, value));
        self.entries.truncate(Self::CAPACITY);
    }
}

impl<T: Element, const R: usize, const B0: usize, const B1: usize, S: Mode> sealed::Sealed
    for &TensorMap<'_, T, R, B0, B1, S>
{
}
impl<T: Element, const R: usize, const B0: usize, const B1: usize, S: Mode> KernelArg
    for &TensorMap<'_, T, R, B0, B1, S>
{
    type Abi = RawTensorMap<T, R, B0, B1, S>;
    fn owner(&self) -> Option<&Device> {
        Some(self.buffer.device())
    }
    fn emu_bind(&mut self, binding: &mut Binding) -> Option<Self::Abi> {
        match self.buffer.memory() {
            Memory::Emulated(m) => {
                // The launch reads the buffer (ordered after its writers, and
                // kept alive until the launch has run).
                binding.claim(m, Access::Read);
                Some(RawTensorMap::new(self.desc))
            }
            Memory::Gpu(_) => None,
        }
    }
    fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        // The map, then the tensor's buffer: the kernel reads the buffer
        // through the map only, but pushing it makes cudarc order the launch
        // after the buffer's writers and its later writers (or its free)
        // after the launch, as for a `&DeviceBuffer` argument.
        let buffer: &'a DeviceBuffer<T> = self.buffer;
        if let (Some(encoded), Memory::Gpu(slice)) = (&self.encoded, buffer.memory()) {
            args.arg(&**encoded);
            args.arg(slice);
        }
    }
}

/// An output matrix written by TMA stores: a kernel parameter of type
/// `warpforge_device::tma::StoreMatrix<T, M, B0, B1, S>` — the matrix a
/// [`MatrixMut`] binds, with a rank-3 tensor map of it (dimension 0 the
/// columns, 1 the rows, 2 the batches) whose boxes are `B0` columns × `B1`
/// rows, swizzled by `S` in shared memory. Made by
/// [`MatrixMut::tma_store`]; it holds the buffer's `&mut` borrow, so the
/// launch is the buffer's writer, ordered as for any output.
pub struct StoreMatrix<'b, T: Element, const B0: usize, const B1: usize, S: Mode> {
    matrix: MatrixMut<'b, T>,
    desc: TensorDesc,
    encoded: Option<Arc<CudaSlice<u64>>>,
    _swizzle: PhantomData<S>,
}

impl<T: Element, const B0: usize, const B1: usize, S: Mode> std::fmt::Debug
    for StoreMatrix<'_, T, B0, B1, S>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_map(
            f,
            "StoreMatrix",
            T::DTYPE,
            &self.desc,
            self.encoded.is_some(),
        )
    }
}

impl<'b, T: Element> MatrixMut<'b, T> {
    /// The matrix with a TMA store map of it, for a kernel's
    /// `StoreMatrix<T, M, B0, B1, S>` parameter. Refused
    /// (`InvalidParameter`, naming the field) where the TMA cannot describe
    /// it: a buffer not 16-byte aligned, rows (`cols` × the element size)
    /// or row and batch strides that are not multiples of 16 bytes (a
    /// store writes whole 16-byte chunks of a row: a GPU would write past
    /// the last column), a box the map cannot have (every rule of
    /// `cuTensorMapEncodeTiled`, as [`TensorMap::new`]), or extents past
    /// `i32::MAX` (a store's corner is 32-bit signed). A kernel with a plain
    /// epilogue takes such a matrix instead.
    ///
    /// ```
    /// use warpforge_device::swizzle::Sw128;
    /// let dev = warpforge::Device::emulator();
    /// let mut c = dev.alloc_zeroed::<f32>(100 * 264)?;
    /// // 100 × 260 f32 (rows 264 apart: 1056 bytes), stored in 32 × 16 boxes.
    /// let stored = c.matrix_mut(100, 260, 264)?.tma_store::<32, 16, Sw128>()?;
    /// drop(stored);
    /// // Rows 259 elements apart are not a multiple of 16 bytes.
    /// let err = c.matrix_mut(100, 256, 259)?.tma_store::<32, 16, Sw128>().unwrap_err();
    /// assert!(err.to_string().contains("globalStrides[0]"));
    /// // Nor are rows of 258 f32: a store would write columns 258 and 259.
    /// let err = c.matrix_mut(100, 258, 264)?.tma_store::<32, 16, Sw128>().unwrap_err();
    /// assert!(err.to_string().contains("columns 258..260"));
    /// # Ok::<(), warpforge::Error>(())
    /// ```
    pub fn tma_store<const B0: usize, const B1: usize, S: Mode>(
        self,
    ) -> Result<StoreMatrix<'b, T, B0, B1, S>> {
        const STORE_OP: &str = "MatrixMut::tma_store";
        let invalid = |parameter: &'static str, detail: String| Error::InvalidParameter {
            op: STORE_OP,
            parameter,
            detail,
        };
        for (what, n) in [
            ("rows", self.rows),
            ("cols", self.cols),
            ("batches", self.batches),
        ] {
            if n > i32::MAX as usize {
                return Err(invalid(
                    what,
                    format!("{n} is past i32::MAX: a TMA store's corner is 32-bit signed"),
                ));
            }
        }
        // The copy engine writes a row in whole 16-byte chunks (an H200 wrote
        // columns 90 and 91 of a 90-column f32 matrix): a row that ends
        // mid-chunk would get the rest of that chunk written past its end.
        let chunked = stored_row_end(self.cols as u64, size_of::<T>());
        if chunked != self.cols as u64 {
            let row_bytes = self.cols.saturating_mul(size_of::<T>());
            return Err(invalid(
                "cols",
                format!(
                    "{} columns of {:?} are {row_bytes} bytes a row, not a multiple of 16: a \
                     TMA store writes whole 16-byte chunks, so a GPU would write columns {}..{chunked} \
                     of each row too, outside the matrix; pad the columns to a multiple of {} \
                     (the view's cols, not only its row stride), or use a kernel with a plain \
                     epilogue",
                    self.cols,
                    T::DTYPE,
                    self.cols,
                    16 / size_of::<T>()
                ),
            ));
        }
        // One batch: any stride the map accepts (the batch index is always 0).
        let batch_stride = if self.batches == 1 {
            self.rows.saturating_mul(self.row_stride)
        } else {
            self.batch_stride
        };
        let (desc, encoded) = describe(
            STORE_OP,
            (&*self.buffer, 0),
            &[self.cols, self.rows, self.batches],
            &[self.row_stride, batch_stride],
            &[B0 as u32, B1 as u32, 1],
            S::SWIZZLE,
        )?;
        Ok(StoreMatrix {
            matrix: self,
            desc,
            encoded,
            _swizzle: PhantomData,
        })
    }
}

impl<T: Element, const B0: usize, const B1: usize, S: Mode> sealed::Sealed
    for StoreMatrix<'_, T, B0, B1, S>
{
}
impl<T: Element, const B0: usize, const B1: usize, S: Mode> KernelArg
    for StoreMatrix<'_, T, B0, B1, S>
{
    type Abi = RawStoreMatrix<T, B0, B1, S>;
    fn owner(&self) -> Option<&Device> {
        self.matrix.owner()
    }
    fn output_len(&self) -> Option<usize> {
        self.matrix.output_len()
    }
    fn emu_bind(&mut self, binding: &mut Binding) -> Option<Self::Abi> {
        let matrix = self.matrix.emu_bind(binding)?;
        Some(RawStoreMatrix::new(matrix, self.desc))
    }
    fn emu_output(abi: &Self::Abi) -> Option<(usize, usize, usize)> {
        <MatrixMut<'_, T> as KernelArg>::emu_output(&abi.matrix)
    }
    fn push_gpu<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        // The map, then the matrix as an `OutMatrix` (its buffer pushed as
        // a written one: cudarc orders the launch after the buffer's other
        // users, and theirs after it).
        if let Some(encoded) = &self.encoded {
            args.arg(&**encoded);
            self.matrix.push_gpu(args);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::UploadedMaps;

    fn key(i: u64) -> [u64; 16] {
        let mut k = [0; 16];
        k[3] = i;
        k
    }

    /// A map's bytes find its upload again; the least recently used of
    /// more than the capacity is dropped, a used one kept; inserting the
    /// same bytes again replaces the entry, never duplicates it.
    #[test]
    fn uploaded_maps_are_found_by_their_bytes_and_the_least_recent_goes() {
        let cap = UploadedMaps::<u64>::CAPACITY as u64;
        let mut maps = UploadedMaps::new();
        assert_eq!(maps.get(&key(1)), None);
        for i in 0..cap {
            maps.insert(key(i), 100 + i);
        }
        assert_eq!(maps.get(&key(0)), Some(100)); // now the most recent
        maps.insert(key(cap), 100 + cap); // drops key 1, the least recent
        assert_eq!(maps.get(&key(1)), None);
        assert_eq!(maps.get(&key(0)), Some(100));
        assert_eq!(maps.get(&key(cap)), Some(100 + cap));
        maps.insert(key(2), 7);
        assert_eq!(maps.get(&key(2)), Some(7));
        assert_eq!(maps.entries.len() as u64, cap);
    }
}
