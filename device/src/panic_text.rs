//! The text a kernel panic prints on the GPU.
//!
//! CUDA's `vprintf` prints `%s` up to a NUL byte and has no `%.*s` (a length
//! from the argument list), while Rust's strings carry a length and no NUL.
//! So the panic handler copies the message into a fixed-size,
//! NUL-terminated buffer in the thread's local memory and prints that (the
//! file name comes NUL-terminated: `Location::file_as_c_str`). Nothing here
//! formats (`core::fmt`): ptxas gives every kernel with a panic path its own
//! copy of the handler, and formatting made that copy about 3 000
//! instructions, most of the time ptxas spent on a reduction kernel. The
//! buffer is plain Rust, tested on the host.

use core::mem::MaybeUninit;

/// A NUL-terminated copy of a string, at most `N - 1` bytes. A longer string
/// is cut at a UTF-8 character boundary and ends in `...`. Only the bytes up
/// to the NUL are ever written: nothing zeroes or moves the whole buffer,
/// which ptxas would write out as one instruction per byte.
pub(crate) struct CText<const N: usize> {
    bytes: [MaybeUninit<u8>; N],
    /// Bytes before the NUL; `bytes[..=len]` are written.
    len: usize,
}

impl<const N: usize> CText<N> {
    /// Room kept for the `...` that marks a cut.
    const ELLIPSIS: &'static [u8] = b"...";
    const NUL: u8 = 0;

    /// The empty string: only its NUL is written (`N` ≥ 1: it holds at
    /// least the NUL).
    pub(crate) fn new() -> Self {
        const { assert!(N >= 1, "a C string needs room for its NUL") };
        let mut bytes = [MaybeUninit::uninit(); N];
        bytes[0].write(Self::NUL);
        CText { bytes, len: 0 }
    }

    /// Writes `s`, cut to fit, and the NUL. Loops bounded by the buffer and
    /// the string, so it has no panic path of its own.
    pub(crate) fn set(&mut self, s: &str) {
        let room = N - 1;
        let (take, dots) = if s.len() <= room {
            (s.len(), 0)
        } else {
            let dots = Self::ELLIPSIS.len().min(room);
            let mut take = room - dots;
            while take > 0 && !s.is_char_boundary(take) {
                take -= 1;
            }
            (take, dots)
        };
        let text = s.as_bytes().iter().take(take);
        let dots = Self::ELLIPSIS.iter().take(dots);
        let mut len = 0;
        for (to, &b) in self.bytes.iter_mut().zip(text.chain(dots)) {
            to.write(b);
            len += 1;
        }
        self.len = len.min(room);
        self.bytes[self.len].write(Self::NUL);
    }

    /// The bytes up to and including the NUL.
    #[cfg(test)]
    pub(crate) fn as_bytes_with_nul(&self) -> &[u8] {
        // SAFETY: `bytes[..=len]` are written (`new` writes the NUL at 0,
        // `set` every byte up to its NUL); `MaybeUninit<u8>` has `u8`'s layout.
        unsafe { core::slice::from_raw_parts(self.bytes.as_ptr().cast(), self.len + 1) }
    }

    /// A pointer to the NUL-terminated bytes, for `%s`.
    #[cfg(target_arch = "nvptx64")]
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr().cast()
    }
}

#[cfg(test)]
mod tests {
    use super::CText;

    fn text<const N: usize>(s: &str) -> Vec<u8> {
        let mut t = CText::<N>::new();
        t.set(s);
        t.as_bytes_with_nul().to_vec()
    }

    #[test]
    fn short_text_is_copied_and_nul_terminated() {
        assert_eq!(text::<16>("in bounds"), b"in bounds\0");
        assert_eq!(text::<16>(""), b"\0");
        assert_eq!(CText::<4>::new().as_bytes_with_nul(), b"\0");
    }

    #[test]
    fn text_that_fills_the_buffer_exactly_is_not_cut() {
        assert_eq!(text::<6>("abcde"), b"abcde\0");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis_and_stays_within_the_buffer() {
        assert_eq!(text::<10>("abcdefghijk"), b"abcdef...\0");
        assert_eq!(text::<10>("abcdefghij"), b"abcdef...\0");
        // A buffer too small for the ellipsis keeps what fits of it.
        assert_eq!(text::<3>("abcdef"), b"..\0");
        assert_eq!(text::<1>("abc"), b"\0");
        // Set twice: the second text is what is printed.
        let mut t = CText::<8>::new();
        t.set("longer text");
        t.set("ab");
        assert_eq!(t.as_bytes_with_nul(), b"ab\0");
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        // "é" is two bytes: 11 bytes leave room for 7 before the "...", which
        // would end inside the second "é"; the cut moves back to 6.
        let bytes = text::<11>("abcdéééé");
        let s = std::str::from_utf8(&bytes[..bytes.len() - 1]).expect("valid UTF-8");
        assert_eq!(s, "abcdé...");
        assert_eq!(*bytes.last().unwrap(), 0);
    }
}
