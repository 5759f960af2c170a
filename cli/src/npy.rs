//! NumPy `.npy` files (what `numpy.save` writes and `numpy.load` reads), for the CLI.
//!
//! - dtypes: float16, float32, float64, int32, int64, uint32, in either byte
//!   order on reading; written little-endian. Anything else (bool, complex,
//!   int8/16, uint8/16/64, float128, strings, objects, datetimes, structured
//!   dtypes) is refused with an error naming the dtype and listing these.
//! - layout: [`NpyArray`] is always C order (last axis fastest). A file saved
//!   in Fortran order (`fortran_order: True`) is transposed to C order on
//!   reading, so `shape` and `data` mean the same as for a C-order file.
//! - checks: the magic, the header, and that the data is exactly
//!   elements × item size bytes; every error names the file and the sizes.
//! - sizes: like numpy, a shape is refused (on reading and writing) when its
//!   non-zero dimensions times the item size exceed `isize::MAX` bytes, even
//!   if a zero dimension makes it empty: `(2**40, 0, 2**40)` is refused,
//!   `(2**20, 0, 2**20)` (no elements) and `(0, 2**40)` are read.
//! - shape `[]` is a 0-d array (one element), what a whole-tensor reduction writes.
//!
//! ```
//! use warpforge_cli::npy::{self, NpyData};
//! let path = std::env::temp_dir().join(format!("warpforge-npy-doc-{}.npy", std::process::id()));
//! npy::write(&path, &[2, 2], &NpyData::F32(vec![1.0, 2.0, 3.0, 4.0]))?;
//! let a = npy::read(&path)?;
//! assert_eq!(a.shape, [2, 2]);
//! assert_eq!(a.data, NpyData::F32(vec![1.0, 2.0, 3.0, 4.0]));
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), warpforge_cli::npy::NpyError>(())
//! ```

use half::f16;
use npyz::{NpyFile, NpyHeader, Order, TypeChar, TypeStr, WriteOptions, WriterBuilder};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The dtypes [`read`] and [`write()`] support, as numpy names them.
pub const SUPPORTED_DTYPES: &str = "float16, float32, float64, int32, int64, uint32";

/// An array read from or to be written to a `.npy` file, in C order.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// The shape; `[]` for a 0-d array (one element).
    pub shape: Vec<usize>,
    /// The elements, last axis fastest; as many as the product of `shape`.
    pub data: NpyData,
}

/// The elements of an [`NpyArray`], by dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    /// float16
    F16(Vec<f16>),
    /// float32
    F32(Vec<f32>),
    /// float64
    F64(Vec<f64>),
    /// int32
    I32(Vec<i32>),
    /// int64
    I64(Vec<i64>),
    /// uint32
    U32(Vec<u32>),
}

impl NpyData {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            NpyData::F16(v) => v.len(),
            NpyData::F32(v) => v.len(),
            NpyData::F64(v) => v.len(),
            NpyData::I32(v) => v.len(),
            NpyData::I64(v) => v.len(),
            NpyData::U32(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The numpy name of the dtype: `float32`, `int64`, …
    pub fn dtype_name(&self) -> &'static str {
        match self {
            NpyData::F16(_) => "float16",
            NpyData::F32(_) => "float32",
            NpyData::F64(_) => "float64",
            NpyData::I32(_) => "int32",
            NpyData::I64(_) => "int64",
            NpyData::U32(_) => "uint32",
        }
    }

    /// Whether the dtype is a floating-point one.
    pub fn is_float(&self) -> bool {
        matches!(self, NpyData::F16(_) | NpyData::F32(_) | NpyData::F64(_))
    }

    /// Bytes per element.
    fn item_size(&self) -> usize {
        match self {
            NpyData::F16(_) => 2,
            NpyData::F32(_) | NpyData::I32(_) | NpyData::U32(_) => 4,
            NpyData::F64(_) | NpyData::I64(_) => 8,
        }
    }
}

macro_rules! npy_data_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<Vec<$t>> for NpyData {
            fn from(v: Vec<$t>) -> NpyData { NpyData::$v(v) }
        }
    )*};
}
npy_data_from!(f16 => F16, f32 => F32, f64 => F64, i32 => I32, i64 => I64, u32 => U32);

impl NpyArray {
    /// Reads `path` (see [`read`]).
    pub fn read(path: impl AsRef<Path>) -> Result<NpyArray, NpyError> {
        read(path)
    }

    /// Writes this array to `path` (see [`write()`]).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), NpyError> {
        write(path, &self.shape, &self.data)
    }
}

/// Why a `.npy` file could not be read or written. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file could not be opened, read, created or written.
    #[error("{}: {action} failed: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// `reading` or `writing`.
        action: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a `.npy` file, or a damaged one: bad magic, truncated or unparsable header.
    #[error("{}: not a valid .npy file: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the sizes involved.
        reason: String,
    },
    /// A dtype this crate does not read or write.
    #[error(
        "{}: dtype {dtype} is not supported; supported dtypes: {SUPPORTED_DTYPES} \
         (convert it first, e.g. `np.save(path, a.astype(np.float32))`)",
        path.display()
    )]
    UnsupportedDType {
        /// The file.
        path: PathBuf,
        /// The dtype, as numpy names it and as the header spells it: `uint8 ('|u1')`.
        dtype: String,
    },
    /// The data after the header is not exactly elements × item size bytes.
    #[error(
        "{}: the header says shape {shape:?} of {dtype} ({elements} elements × {item_size} bytes \
         = {expected} bytes of data), but the file has {found} bytes of data{}",
        path.display(),
        if found < expected { " (truncated?)" } else { " (trailing bytes)" }
    )]
    DataLength {
        /// The file.
        path: PathBuf,
        /// The shape in the header.
        shape: Vec<usize>,
        /// The dtype in the header.
        dtype: String,
        /// Elements the shape holds.
        elements: usize,
        /// Bytes per element.
        item_size: usize,
        /// Bytes of data the header implies.
        expected: usize,
        /// Bytes of data in the file.
        found: usize,
    },
    /// A shape too large for any array: its non-zero dimensions times the item
    /// size exceed `isize::MAX` bytes (numpy refuses such shapes too).
    #[error(
        "{}: shape {shape:?} of {dtype} is too large for an array: its non-zero dimensions \
         × {item_size} bytes per element exceed {max} bytes, the most an array can hold \
         (numpy refuses such a shape too); use a smaller shape",
        path.display(),
        max = isize::MAX
    )]
    ShapeTooLarge {
        /// The file.
        path: PathBuf,
        /// The shape.
        shape: Vec<usize>,
        /// The dtype.
        dtype: String,
        /// Bytes per element.
        item_size: usize,
    },
    /// [`write()`] was given a shape whose element count is not the data's.
    #[error(
        "{}: shape {shape:?} holds {expected} elements but {found} were given to write",
        path.display()
    )]
    ShapeMismatch {
        /// The file.
        path: PathBuf,
        /// The shape asked for.
        shape: Vec<usize>,
        /// Elements that shape holds.
        expected: usize,
        /// Elements given.
        found: usize,
    },
}

#[derive(Clone, Copy)]
enum Kind {
    F16,
    F32,
    F64,
    I32,
    I64,
    U32,
}

/// Reads a `.npy` file: float16/32/64, int32/64 or uint32, either byte order,
/// C or Fortran order (returned in C order).
pub fn read(path: impl AsRef<Path>) -> Result<NpyArray, NpyError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| NpyError::Io {
        path: path.to_owned(),
        action: "reading",
        source,
    })?;
    parse(path, &bytes)
}

/// Parses the bytes of a `.npy` file; `path` is only for messages.
fn parse(path: &Path, bytes: &[u8]) -> Result<NpyArray, NpyError> {
    let malformed = |reason: String| NpyError::Malformed {
        path: path.to_owned(),
        reason,
    };
    precheck(bytes).map_err(malformed)?;
    let mut rest = bytes;
    let header = NpyHeader::from_reader(&mut rest).map_err(|e| malformed(e.to_string()))?;
    let ty = match header.dtype() {
        npyz::DType::Plain(ty) => ty,
        other => {
            return Err(NpyError::UnsupportedDType {
                path: path.to_owned(),
                dtype: format!("structured {}", other.descr()),
            });
        }
    };
    let kind = match (ty.type_char(), ty.size_field()) {
        (TypeChar::Float, 2) => Kind::F16,
        (TypeChar::Float, 4) => Kind::F32,
        (TypeChar::Float, 8) => Kind::F64,
        (TypeChar::Int, 4) => Kind::I32,
        (TypeChar::Int, 8) => Kind::I64,
        (TypeChar::Uint, 4) => Kind::U32,
        _ => {
            return Err(NpyError::UnsupportedDType {
                path: path.to_owned(),
                dtype: describe(&ty),
            });
        }
    };
    let item_size = ty.size_field() as usize;
    // `precheck` has shown the non-zero dimensions' product fits in a u64; on a
    // 32-bit target a dimension may still not fit a usize.
    let shape = header
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| malformed(format!("shape {:?} is too large", header.shape())))?;
    let too_large = || NpyError::ShapeTooLarge {
        path: path.to_owned(),
        shape: shape.clone(),
        dtype: describe(&ty),
        item_size,
    };
    let elements = element_count(&shape, item_size).ok_or_else(too_large)?;
    let expected = elements.checked_mul(item_size).ok_or_else(too_large)?;
    if rest.len() != expected {
        return Err(NpyError::DataLength {
            path: path.to_owned(),
            shape,
            dtype: describe(&ty),
            elements,
            item_size,
            expected,
            found: rest.len(),
        });
    }
    let fortran = header.order() == Order::Fortran;
    let file = NpyFile::with_header(header, rest);
    let decode_err = |e: std::io::Error| malformed(format!("decoding the data: {e}"));
    macro_rules! decode {
        ($v:ident, $t:ty) => {{
            let v = file.into_vec::<$t>().map_err(decode_err)?;
            NpyData::$v(if fortran {
                fortran_to_c(&shape, v).map_err(|e| malformed(format!("fortran_order: {e}")))?
            } else {
                v
            })
        }};
    }
    let data = match kind {
        Kind::F16 => decode!(F16, f16),
        Kind::F32 => decode!(F32, f32),
        Kind::F64 => decode!(F64, f64),
        Kind::I32 => decode!(I32, i32),
        Kind::I64 => decode!(I64, i64),
        Kind::U32 => decode!(U32, u32),
    };
    Ok(NpyArray { shape, data })
}

/// Checks the magic, that the header fits in the file, and that the product
/// of the shape's non-zero dimensions fits in a u64, before handing the header
/// to npyz: npyz multiplies the dimensions unchecked, in both orders (for the
/// strides), which overflows (a panic in debug builds) for a shape like
/// `(0, 2**32, 2**32)` unless every partial product fits.
fn precheck(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if bytes.len() < 10 {
        return Err(format!(
            "the file is {} bytes, shorter than the smallest .npy header (10 bytes)",
            bytes.len()
        ));
    }
    if &bytes[..6] != MAGIC {
        return Err(format!(
            "it does not start with the .npy magic \\x93NUMPY (starts with {:?})",
            String::from_utf8_lossy(&bytes[..6])
        ));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (text_start, text_len) = match major {
        1 => (10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        2 | 3 if bytes.len() >= 12 => (
            12,
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
        ),
        2 | 3 => {
            return Err(format!(
                "the file is {} bytes, shorter than a version {major}.{minor} header (12 bytes)",
                bytes.len()
            ));
        }
        _ => {
            return Err(format!(
                "unsupported .npy format version {major}.{minor} (1.0, 2.0 and 3.0 are)"
            ));
        }
    };
    let data_start = text_start + text_len;
    if bytes.len() < data_start {
        return Err(format!(
            "the header is truncated: it declares {text_len} bytes of header text, ending at \
             byte {data_start}, but the file is {} bytes",
            bytes.len()
        ));
    }
    let text = String::from_utf8_lossy(&bytes[text_start..data_start]);
    for dims in header_shapes(&text)? {
        let mut nonzero = dims.iter().filter(|&&d| d != 0);
        if nonzero.try_fold(1u64, |n, &d| n.checked_mul(d)).is_none() {
            return Err(format!(
                "shape {dims:?} is too large: its non-zero dimensions multiply to more elements \
                 than a 64-bit count can hold (numpy refuses such a shape too)"
            ));
        }
    }
    Ok(())
}

/// Whitespace the header's Python literal may have between tokens.
const HEADER_SPACE: [char; 5] = [' ', '\t', '\x0C', '\r', '\n'];

/// Every shape the header's text can give npyz, read conservatively so that
/// [`precheck`] can check them first. Each `shape` followed by a closing quote
/// and `:` counts, even inside another string or a repeated key: checking one
/// too many is harmless, missing the one npyz uses is not. Fails closed on
/// what numpy never writes: a backslash (an escape could spell the key
/// another way), or a `shape` value that is not a tuple or list of integer
/// literals (npyz would evaluate an expression like `2+2`).
fn header_shapes(text: &str) -> Result<Vec<Vec<u64>>, String> {
    if text.contains('\\') {
        return Err("the header contains a backslash escape, which numpy never writes".to_owned());
    }
    let mut shapes = Vec::new();
    for (at, key) in text.match_indices("shape") {
        let rest = &text[at + key.len()..];
        let unquoted = rest.trim_start_matches(['\'', '"']);
        if unquoted.len() == rest.len() {
            continue; // not the end of a string
        }
        let Some(value) = unquoted.trim_start_matches(HEADER_SPACE).strip_prefix(':') else {
            continue; // not a key
        };
        let value = value.trim_start_matches(HEADER_SPACE);
        let shown: String = value.chars().take(40).collect();
        let not_a_shape =
            || format!("its 'shape' is not a tuple of non-negative integers: {shown:?}");
        let close = match value.chars().next() {
            Some('(') => ')',
            Some('[') => ']',
            _ => return Err(not_a_shape()),
        };
        let end = value.find(close).ok_or_else(not_a_shape)?;
        let dims = value[1..end]
            .split(',')
            .map(|d| d.trim_matches(HEADER_SPACE))
            .filter(|d| !d.is_empty())
            .map(|d| parse_dim(d).ok_or_else(not_a_shape))
            .collect::<Result<Vec<u64>, String>>()?;
        shapes.push(dims);
    }
    Ok(shapes)
}

/// A Python integer literal (`12`, `1_000`, `0x10`, `0o7`, `0b1`; a Python 2
/// `12L`), if it is one and fits in a u64.
fn parse_dim(d: &str) -> Option<u64> {
    let d = d.strip_suffix(['L', 'l']).unwrap_or(d);
    let (digits, radix) = match d.get(..2) {
        Some("0x" | "0X") => (&d[2..], 16),
        Some("0o" | "0O") => (&d[2..], 8),
        Some("0b" | "0B") => (&d[2..], 2),
        _ => (d, 10),
    };
    let digits = digits
        .strip_prefix('_')
        .filter(|_| radix != 10)
        .unwrap_or(digits);
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c == '_' || c.is_digit(radix))
    {
        return None;
    }
    u64::from_str_radix(&digits.replace('_', ""), radix).ok()
}

/// The number of elements of `shape`, numpy's way: `None` if the product of
/// its non-zero dimensions times `item_size` exceeds `isize::MAX` bytes, even
/// when a zero dimension makes the shape empty (numpy refuses such shapes).
/// Every partial product of the dimensions, in any order, then fits too.
fn element_count(shape: &[usize], item_size: usize) -> Option<usize> {
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d))?;
    let bytes = nonzero.checked_mul(item_size.max(1))?;
    if isize::try_from(bytes).is_err() {
        return None;
    }
    Some(if shape.contains(&0) { 0 } else { nonzero })
}

/// `uint8 ('|u1')`: numpy's name for a dtype and its type string.
fn describe(ty: &TypeStr) -> String {
    let size = ty.size_field();
    let name = match ty.type_char() {
        TypeChar::Bool => "bool".to_owned(),
        TypeChar::Int => format!("int{}", size * 8),
        TypeChar::Uint => format!("uint{}", size * 8),
        TypeChar::Float => format!("float{}", size * 8),
        TypeChar::Complex => format!("complex{}", size * 8),
        TypeChar::TimeDelta => "timedelta64".to_owned(),
        TypeChar::DateTime => "datetime64".to_owned(),
        TypeChar::ByteStr => "bytes".to_owned(),
        TypeChar::UnicodeStr => "str".to_owned(),
        TypeChar::Object => "object".to_owned(),
        TypeChar::RawData => "void".to_owned(),
        _ => "unknown".to_owned(),
    };
    format!("{name} ('{ty}')")
}

/// Reorders the elements of a Fortran-order array (first axis fastest) to C
/// order. Refuses (rather than overflowing or indexing out of bounds) a `f`
/// that does not hold exactly the shape's elements; an empty array, which has
/// no strides to compute, is returned as it is whatever its dimensions.
fn fortran_to_c<T: Copy>(shape: &[usize], f: Vec<T>) -> Result<Vec<T>, String> {
    let n = if shape.contains(&0) {
        Some(0)
    } else {
        shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
    };
    if n != Some(f.len()) {
        return Err(format!(
            "shape {shape:?} does not hold the {} elements given",
            f.len()
        ));
    }
    if shape.len() < 2 || f.len() < 2 {
        return Ok(f);
    }
    // Every dimension is at least 1 here, so each stride is at most `f.len()`.
    let mut stride = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        stride[k] = stride[k - 1]
            .checked_mul(shape[k - 1])
            .ok_or_else(|| format!("the strides of shape {shape:?} overflow"))?;
    }
    let mut out = Vec::new();
    out.try_reserve_exact(f.len()).map_err(|e| {
        format!(
            "no memory for the C-order copy of {} elements: {e}",
            f.len()
        )
    })?;
    // `at` = Σ idx[k]·stride[k], the Fortran-order offset of the C-order index
    // `idx`, kept up to date as `idx` counts up: always below `f.len()`.
    let mut idx = vec![0usize; shape.len()];
    let mut at = 0usize;
    for _ in 0..f.len() {
        let x = f
            .get(at)
            .ok_or_else(|| format!("offset {at} outside shape {shape:?}"))?;
        out.push(*x);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                at += stride[k];
                break;
            }
            idx[k] = 0;
            at -= (shape[k] - 1) * stride[k];
        }
    }
    Ok(out)
}

/// Writes `data` with `shape` (C order, little-endian) to `path`, replacing it.
/// `shape` `[]` writes a 0-d array, which needs exactly one element. A shape
/// numpy refuses (its non-zero dimensions × item size over `isize::MAX`
/// bytes) is [`NpyError::ShapeTooLarge`]; either error leaves `path` untouched.
pub fn write(path: impl AsRef<Path>, shape: &[usize], data: &NpyData) -> Result<(), NpyError> {
    let path = path.as_ref();
    // Checked before npyz sees the shape: it multiplies the dimensions unchecked.
    let expected =
        element_count(shape, data.item_size()).ok_or_else(|| NpyError::ShapeTooLarge {
            path: path.to_owned(),
            shape: shape.to_vec(),
            dtype: data.dtype_name().to_owned(),
            item_size: data.item_size(),
        })?;
    if expected != data.len() {
        return Err(NpyError::ShapeMismatch {
            path: path.to_owned(),
            shape: shape.to_vec(),
            expected,
            found: data.len(),
        });
    }
    let io_err = |source| NpyError::Io {
        path: path.to_owned(),
        action: "writing",
        source,
    };
    let file = std::fs::File::create(path).map_err(io_err)?;
    let mut w = BufWriter::new(file);
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    match data {
        NpyData::F16(v) => write_typed(&mut w, &shape, v),
        NpyData::F32(v) => write_typed(&mut w, &shape, v),
        NpyData::F64(v) => write_typed(&mut w, &shape, v),
        NpyData::I32(v) => write_typed(&mut w, &shape, v),
        NpyData::I64(v) => write_typed(&mut w, &shape, v),
        NpyData::U32(v) => write_typed(&mut w, &shape, v),
    }
    .and_then(|()| w.flush())
    .map_err(io_err)
}

fn write_typed<T: npyz::AutoSerialize + Copy, W: Write>(
    w: W,
    shape: &[u64],
    data: &[T],
) -> std::io::Result<()> {
    let mut writer = WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(w)
        .begin_nd()?;
    writer.extend(data.iter().copied())?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh path in the temp dir, unique to this process and call.
    fn temp_path(name: &str) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        std::env::temp_dir().join(format!(
            "warpforge-npy-test-{}-{}-{name}.npy",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// The bytes numpy writes: magic, version 1.0, the header dict padded with
    /// spaces and a newline to a multiple of 64 bytes, then `data`.
    fn npy_bytes(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        npy_bytes_raw(&format!("'{descr}'"), fortran, shape, data)
    }

    /// [`npy_bytes`] with the descr as a Python literal (for structured dtypes).
    fn npy_bytes_raw(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let fortran = if fortran { "True" } else { "False" };
        let mut text =
            format!("{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}");
        while !(10 + text.len() + 1).is_multiple_of(64) {
            text.push(' ');
        }
        text.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((text.len() as u16).to_le_bytes());
        out.extend(text.as_bytes());
        out.extend(data);
        out
    }

    fn read_bytes(name: &str, bytes: &[u8]) -> Result<NpyArray, NpyError> {
        let path = temp_path(name);
        std::fs::write(&path, bytes).unwrap();
        let r = read(&path);
        std::fs::remove_file(&path).unwrap();
        r
    }

    fn round_trip(shape: &[usize], data: NpyData) {
        let path = temp_path("roundtrip");
        write(&path, shape, &data).unwrap();
        let back = read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back.shape, shape, "{}", data.dtype_name());
        assert_eq!(back.data, data, "shape {shape:?}");
    }

    #[test]
    fn round_trips_every_dtype_and_shape() {
        for shape in [&[][..], &[0], &[3], &[2, 3, 4]] {
            let n: usize = shape.iter().product();
            let ramp = || (0..n).map(|i| i as i64 * 7 - 20);
            round_trip(
                shape,
                NpyData::F16(ramp().map(|i| f16::from_f32(i as f32 * 0.25)).collect()),
            );
            round_trip(
                shape,
                NpyData::F32(ramp().map(|i| i as f32 / 3.0).collect()),
            );
            round_trip(
                shape,
                NpyData::F64(ramp().map(|i| i as f64 / 3.0).collect()),
            );
            round_trip(
                shape,
                NpyData::I32(
                    ramp()
                        .map(|i| (i as i32).wrapping_mul(100_000_007))
                        .collect(),
                ),
            );
            round_trip(shape, NpyData::I64(ramp().map(|i| i << 40).collect()));
            round_trip(
                shape,
                NpyData::U32(
                    ramp()
                        .map(|i| (i as u32).wrapping_mul(2654435761))
                        .collect(),
                ),
            );
        }
    }

    #[test]
    fn round_trips_special_float_values_bit_for_bit() {
        let v = vec![-0.0, f64::INFINITY, f64::NEG_INFINITY, 5e-324, f64::MAX];
        round_trip(&[5], NpyData::F64(v));
        let path = temp_path("nan");
        write(
            &path,
            &[1],
            &NpyData::F32(vec![f32::from_bits(0x7fc0_1234)]),
        )
        .unwrap();
        let back = read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let NpyData::F32(v) = back.data else {
            panic!("{back:?}")
        };
        assert_eq!(v[0].to_bits(), 0x7fc0_1234);
    }

    /// Splits a written file into its header text and data, checking the
    /// framing numpy's reader expects (magic, version 1.0, 64-byte alignment).
    fn split_written(bytes: &[u8]) -> (String, &[u8]) {
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert!((10 + len).is_multiple_of(64), "header not 64-byte aligned");
        let text = String::from_utf8(bytes[10..10 + len].to_vec()).unwrap();
        assert!(text.ends_with('\n'), "{text:?}");
        (text, &bytes[10 + len..])
    }

    #[test]
    fn writes_the_layout_numpy_reads() {
        let path = temp_path("layout");
        write(&path, &[2, 3], &NpyData::I32(vec![0, 1, 2, 3, 4, 5])).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (text, data) = split_written(&bytes);
        assert!(text.starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3"));
        assert_eq!(header_shapes(&text), Ok(vec![vec![2, 3]]));
        let want: Vec<u8> = (0i32..6).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(data, want);
        // 0-d: `shape: ()` and one element.
        let path = temp_path("layout0d");
        write(&path, &[], &NpyData::F64(vec![1.5])).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (text, data) = split_written(&bytes);
        assert!(
            text.contains("'descr': '<f8'") && text.contains("'shape': ()"),
            "{text}"
        );
        assert_eq!(data, 1.5f64.to_le_bytes());
    }

    #[test]
    fn reads_numpy_bytes_little_and_big_endian() {
        macro_rules! check {
            ($t:ty, $v:ident, $code:literal, $vals:expr) => {{
                let vals: Vec<$t> = $vals;
                for (order, le) in [("<", true), (">", false)] {
                    let data: Vec<u8> = vals
                        .iter()
                        .flat_map(|x| if le { x.to_le_bytes() } else { x.to_be_bytes() })
                        .collect();
                    let descr = format!("{order}{}", $code);
                    let a =
                        read_bytes("endian", &npy_bytes(&descr, false, "(1, 3)", &data)).unwrap();
                    assert_eq!(a.shape, [1, 3], "{descr}");
                    assert_eq!(a.data, NpyData::$v(vals.clone()), "{descr}");
                }
            }};
        }
        check!(
            f16,
            F16,
            "f2",
            vec![f16::from_f32(1.5), f16::MIN_POSITIVE_SUBNORMAL, f16::MAX]
        );
        check!(f32, F32, "f4", vec![1.5, -2.25e-30, 3.0e38]);
        check!(f64, F64, "f8", vec![1.5, -2.25e-300, 3.0e300]);
        check!(i32, I32, "i4", vec![1, -2, i32::MIN]);
        check!(i64, I64, "i8", vec![1, -2, i64::MIN]);
        check!(u32, U32, "u4", vec![1, 0x0102_0304, u32::MAX]);
    }

    #[test]
    fn reads_fortran_order_as_c_order() {
        // a = [[0, 1, 2], [3, 4, 5]] stored column-major: 0 3 1 4 2 5.
        let f: Vec<u8> = [0i64, 3, 1, 4, 2, 5]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let a = read_bytes("fortran", &npy_bytes("<i8", true, "(2, 3)", &f)).unwrap();
        assert_eq!(a.shape, [2, 3]);
        assert_eq!(a.data, NpyData::I64(vec![0, 1, 2, 3, 4, 5]));
        // 3-d: element (i, j, k) of shape (2, 3, 4) holds 100i + 10j + k.
        let shape = [2usize, 3, 4];
        let mut f = Vec::new();
        for k in 0..4 {
            for j in 0..3 {
                for i in 0..2 {
                    f.extend(((100 * i + 10 * j + k) as f32).to_le_bytes());
                }
            }
        }
        let a = read_bytes("fortran3", &npy_bytes("<f4", true, "(2, 3, 4)", &f)).unwrap();
        assert_eq!(a.shape, shape);
        let c: Vec<f32> = (0..2)
            .flat_map(|i| {
                (0..3).flat_map(move |j| (0..4).map(move |k| (100 * i + 10 * j + k) as f32))
            })
            .collect();
        assert_eq!(a.data, NpyData::F32(c));
    }

    #[test]
    fn refuses_unsupported_dtypes_by_name() {
        for (descr, size, name) in [
            ("|b1", 1, "bool"),
            ("|i1", 1, "int8"),
            ("<i2", 2, "int16"),
            ("|u1", 1, "uint8"),
            ("<u2", 2, "uint16"),
            ("<u8", 8, "uint64"),
            ("<c8", 8, "complex64"),
            ("<c16", 16, "complex128"),
            ("<f16", 16, "float128"),
            ("<U3", 12, "str"),
            ("|S3", 3, "bytes"),
            ("|O", 8, "object"),
        ] {
            let bytes = npy_bytes(descr, false, "(2,)", &vec![0u8; 2 * size]);
            let e = read_bytes("dtype", &bytes).unwrap_err();
            let msg = e.to_string();
            assert!(
                matches!(e, NpyError::UnsupportedDType { .. }),
                "{descr}: {msg}"
            );
            assert!(msg.contains(&format!("{name} ('{descr}')")), "{msg}");
            assert!(msg.contains(SUPPORTED_DTYPES), "{msg}");
        }
        let structured = npy_bytes_raw("[('a', '<f4'), ('b', '<i4')]", false, "(1,)", &[0; 8]);
        let e = read_bytes("structured", &structured).unwrap_err();
        assert!(matches!(e, NpyError::UnsupportedDType { .. }), "{e}");
        assert!(e.to_string().contains("structured"), "{e}");
    }

    /// `bytes` with the first `from` replaced by `to`.
    fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = bytes
            .windows(from.len())
            .position(|w| w == from)
            .expect("pattern present");
        [&bytes[..at], to, &bytes[at + from.len()..]].concat()
    }

    #[test]
    fn refuses_malformed_files_with_the_file_and_sizes() {
        let good = npy_bytes("<f4", false, "(2, 3)", &[0u8; 24]);
        let malformed = |name: &str, bytes: &[u8], needle: &str| {
            let path = temp_path(name);
            std::fs::write(&path, bytes).unwrap();
            let e = read(&path).unwrap_err();
            std::fs::remove_file(&path).unwrap();
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{name}: {msg}");
            assert!(msg.contains(needle), "{name}: {msg}");
            e
        };
        let e = malformed("empty", b"", "the file is 0 bytes");
        assert!(matches!(e, NpyError::Malformed { .. }));
        malformed("magic", b"PK\x03\x04 this is a zip file", "magic");
        let mut v9 = good.clone();
        v9[6] = 9;
        malformed("version", &v9, "version 9.0");
        malformed("header", &good[..40], "declares 118 bytes of header text");
        let garbage = replace(&good, b"'shape': (2, 3)", b"'shape': [2, 3");
        malformed("syntax", &garbage, "not a valid .npy file");
        let no_shape = replace(&good, b"'shape'", b"'shapx'");
        malformed("key", &no_shape, "shape");
        let not_a_dict = replace(&good, b"{'descr'", b"['descr'");
        malformed("dict", &not_a_dict, "not a valid .npy file");
        let e = malformed("short", &good[..good.len() - 1], "24 bytes of data");
        assert!(matches!(
            e,
            NpyError::DataLength {
                expected: 24,
                found: 23,
                elements: 6,
                item_size: 4,
                ..
            }
        ));
        assert!(e.to_string().contains("23 bytes"), "{e}");
        let mut long = good.clone();
        long.push(0);
        malformed("long", &long, "trailing");
        let huge = npy_bytes("<f4", false, "(4294967296, 4294967296, 4)", &[]);
        malformed("huge", &huge, "more elements");
        let e = read(temp_path("missing")).unwrap_err();
        assert!(matches!(e, NpyError::Io { .. }), "{e}");
        assert!(e.to_string().contains("reading failed"), "{e}");
    }

    #[test]
    fn empty_shapes_with_huge_dimensions_read_as_empty() {
        for (shape, dims) in [
            ("(1048576, 0, 1048576)", vec![1 << 20, 0, 1 << 20]),
            ("(0, 1099511627776)", vec![0, 1 << 40]),
            // Non-zero dimensions × 4 bytes = 2⁶² bytes: numpy's limit is 2⁶³ − 1.
            ("(1152921504606846976, 0)", vec![1 << 60, 0]),
        ] {
            for fortran in [false, true] {
                let a = read_bytes("empty", &npy_bytes("<f4", fortran, shape, &[])).unwrap();
                assert_eq!(a.shape, dims, "{shape} fortran={fortran}");
                assert_eq!(a.data, NpyData::F32(vec![]), "{shape}");
            }
        }
        // A 0 stored as data does not make a short file valid.
        let e = read_bytes("data", &npy_bytes("<f4", false, "(1048576, 0, 2)", &[0; 4]));
        assert!(
            matches!(
                e,
                Err(NpyError::DataLength {
                    expected: 0,
                    found: 4,
                    ..
                })
            ),
            "{e:?}"
        );
    }

    /// Shapes npyz would overflow on (it multiplies the dimensions unchecked,
    /// in both orders, a panic in debug builds) and shapes numpy refuses:
    /// every one an error naming the shape, however the header spells it.
    #[test]
    fn refuses_shapes_whose_sizes_overflow() {
        let refused = |name: &str, descr: &str, fortran: bool, shape: &str| {
            let e = read_bytes(name, &npy_bytes(descr, fortran, shape, &[])).unwrap_err();
            (e.to_string(), e)
        };
        for fortran in [false, true] {
            for shape in [
                "(0, 4294967296, 4294967296)",
                "(4294967296, 4294967296, 0)",
                "(1099511627776, 0, 1099511627776)",
                "[0, 4294967296, 4294967296]",
                "(0, 0x100000000, 0x1_0000_0000)",
                "(0,4294967296,4294967296,)",
            ] {
                let (msg, e) = refused("overflow", "<f4", fortran, shape);
                assert!(matches!(e, NpyError::Malformed { .. }), "{shape}: {msg}");
                assert!(msg.contains("non-zero dimensions"), "{shape}: {msg}");
                assert!(
                    msg.contains("4294967296") || msg.contains("1099511627776"),
                    "{msg}"
                );
            }
            // Fits a u64, but not isize::MAX bytes: 2⁶¹ × 4 bytes.
            let (msg, e) = refused("bytes", "<f4", fortran, "(2, 0, 1152921504606846976)");
            assert!(
                matches!(e, NpyError::ShapeTooLarge { item_size: 4, .. }),
                "{msg}"
            );
            assert!(msg.contains("[2, 0, 1152921504606846976]"), "{msg}");
            assert!(msg.contains("float32"), "{msg}");
        }
        // Spellings of a shape that are not plain integers are refused, not
        // guessed at: npyz would evaluate `2+2` and read escapes.
        for shape in [
            "(0, 2+2)",
            "(0, 4.0)",
            "(0, -1)",
            "((1, 2), 3)",
            "None",
            "(0, 1__0)",
        ] {
            let (msg, e) = refused("syntax", "<f4", false, shape);
            assert!(matches!(e, NpyError::Malformed { .. }), "{shape}: {msg}");
            assert!(
                msg.contains("not a tuple of non-negative integers"),
                "{shape}: {msg}"
            );
        }
        let (msg, _) = refused("escape", "<f\\x34", false, "(2,)");
        assert!(msg.contains("backslash"), "{msg}");
        // A second `shape` key (the last one wins in npyz) and one inside a
        // string: every candidate is checked.
        let dup = npy_bytes_raw(
            "'<f4', 'shape': (1,)",
            false,
            "(0, 4294967296, 4294967296)",
            &[],
        );
        let e = read_bytes("dup", &dup).unwrap_err();
        assert!(e.to_string().contains("non-zero dimensions"), "{e}");
        let decoy = replace(
            &npy_bytes("<f4", false, "(0, 4294967296, 4294967296)", &[]),
            b"'descr'",
            b"'x': \"shape': (1,)\", 'descr'",
        );
        let e = read_bytes("decoy", &decoy).unwrap_err();
        assert!(e.to_string().contains("non-zero dimensions"), "{e}");
    }

    #[test]
    fn parses_python_integer_literals_as_dimensions() {
        for (d, want) in [
            ("12", Some(12)),
            ("1_000", Some(1000)),
            ("0x10", Some(16)),
            ("0X_ff", Some(255)),
            ("0o17", Some(15)),
            ("0b101", Some(5)),
            ("7L", Some(7)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("", None),
            ("_1", None),
            ("1_", None),
            ("0x", None),
            ("0b2", None),
            ("+1", None),
            ("1e3", None),
        ] {
            assert_eq!(parse_dim(d), want, "{d:?}");
        }
    }

    #[test]
    fn element_count_follows_numpy() {
        assert_eq!(element_count(&[], 4), Some(1));
        assert_eq!(element_count(&[2, 3], 8), Some(6));
        assert_eq!(element_count(&[1 << 20, 0, 1 << 20], 4), Some(0));
        assert_eq!(element_count(&[1 << 60, 0], 4), Some(0));
        assert_eq!(element_count(&[1 << 61, 0], 4), None);
        assert_eq!(element_count(&[usize::MAX, usize::MAX, 0], 1), None);
        assert_eq!(element_count(&[1 << 31, 1 << 29], 4), Some(1 << 60));
        assert_eq!(element_count(&[1 << 31, 1 << 30], 4), None);
    }

    #[test]
    fn fortran_transpose_is_checked() {
        // An empty array is returned as it is: no strides, however large the
        // dimensions (the old transpose multiplied usize::MAX × 2 here).
        assert_eq!(fortran_to_c::<u8>(&[usize::MAX, 2, 0], vec![]), Ok(vec![]));
        assert_eq!(
            fortran_to_c::<u8>(&[0, usize::MAX, usize::MAX], vec![]),
            Ok(vec![])
        );
        // Data that does not match the shape is an error, not an overflow or
        // an index out of bounds.
        let e = fortran_to_c::<u8>(&[1 << 40, 1 << 40, 2], vec![]).unwrap_err();
        assert!(e.contains("does not hold the 0 elements"), "{e}");
        assert!(fortran_to_c(&[2, 3], vec![0u8; 5]).is_err());
        assert!(fortran_to_c(&[2, 0], vec![0u8; 1]).is_err());
        // A 4-d transpose against the index formula.
        let shape = [2usize, 3, 1, 4];
        let n = 24;
        let f: Vec<usize> = (0..n).collect();
        let c = fortran_to_c(&shape, f).unwrap();
        let mut want = Vec::new();
        for i in 0..2 {
            for j in 0..3 {
                for l in 0..4 {
                    want.push(i + 2 * j + 6 * l);
                }
            }
        }
        assert_eq!(c, want);
    }

    #[test]
    fn write_refuses_shapes_numpy_refuses_and_writes_empty_huge_ones() {
        let path = temp_path("toolarge");
        for shape in [
            &[1usize << 40, 1 << 40, 0][..],
            &[usize::MAX, usize::MAX, 0],
        ] {
            let e = write(&path, shape, &NpyData::F32(vec![])).unwrap_err();
            assert!(
                matches!(e, NpyError::ShapeTooLarge { item_size: 4, .. }),
                "{e}"
            );
            assert!(e.to_string().contains(&format!("{shape:?}")), "{e}");
            assert!(!path.exists());
        }
        // 2⁶⁰ × 8 bytes: over isize::MAX for float64, not for float16.
        let e = write(&path, &[1 << 60, 0], &NpyData::F64(vec![])).unwrap_err();
        assert!(
            matches!(e, NpyError::ShapeTooLarge { item_size: 8, .. }),
            "{e}"
        );
        round_trip(&[1 << 60, 0], NpyData::F16(vec![]));
        round_trip(&[1 << 20, 0, 1 << 20], NpyData::F32(vec![]));
        round_trip(&[0, 1 << 40], NpyData::I64(vec![]));
    }

    #[test]
    fn write_refuses_a_shape_that_does_not_hold_the_data() {
        let path = temp_path("mismatch");
        let e = write(&path, &[2, 2], &NpyData::F32(vec![1.0; 3])).unwrap_err();
        assert!(
            matches!(
                e,
                NpyError::ShapeMismatch {
                    expected: 4,
                    found: 3,
                    ..
                }
            ),
            "{e}"
        );
        assert!(!path.exists());
        let e = write(&path, &[], &NpyData::F32(vec![])).unwrap_err();
        assert!(
            matches!(
                e,
                NpyError::ShapeMismatch {
                    expected: 1,
                    found: 0,
                    ..
                }
            ),
            "{e}"
        );
    }
}
