//! The text a kernel panic prints on the GPU.
//!
//! CUDA's `vprintf` prints `%s` up to a NUL byte and has no `%.*s` (a length
//! from the argument list), while Rust's strings carry a length and no NUL.
//! So the panic handler formats the message and the file name into
//! fixed-size, NUL-terminated buffers in the thread's local memory and prints
//! those. The buffers are plain Rust, tested on the host.

use core::fmt;

/// A NUL-terminated string of at most `N - 1` bytes, built in place.
/// Text beyond the room is dropped at a UTF-8 character boundary and the
/// string ends in `...`.
pub(crate) struct CText<const N: usize> {
    bytes: [u8; N],
    len: usize,
    truncated: bool,
}

impl<const N: usize> CText<N> {
    /// Room kept for the `...` that marks a cut.
    const ELLIPSIS: &'static [u8] = b"...";

    pub(crate) const fn new() -> Self {
        CText {
            bytes: [0; N],
            len: 0,
            truncated: false,
        }
    }

    /// The bytes up to and including the NUL.
    #[cfg(test)]
    pub(crate) fn as_bytes_with_nul(&self) -> &[u8] {
        &self.bytes[..=self.len]
    }

    /// A pointer to the NUL-terminated bytes, for `%s`.
    #[cfg(target_arch = "nvptx64")]
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
}

impl<const N: usize> fmt::Write for CText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.truncated {
            return Ok(());
        }
        let room = N - 1 - self.len;
        if s.len() <= room {
            self.bytes[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
            self.len += s.len();
            return Ok(());
        }
        // Keep room for the ellipsis, and cut at a character boundary.
        let mut take = room.saturating_sub(Self::ELLIPSIS.len());
        while take > 0 && !s.is_char_boundary(take) {
            take -= 1;
        }
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        let dots = Self::ELLIPSIS.len().min(N - 1 - self.len);
        self.bytes[self.len..self.len + dots].copy_from_slice(&Self::ELLIPSIS[..dots]);
        self.len += dots;
        self.truncated = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::CText;
    use core::fmt::Write;

    fn text<const N: usize>(parts: &[&str]) -> Vec<u8> {
        let mut t = CText::<N>::new();
        for p in parts {
            t.write_str(p).unwrap();
        }
        t.as_bytes_with_nul().to_vec()
    }

    #[test]
    fn short_text_is_copied_and_nul_terminated() {
        assert_eq!(text::<16>(&["in ", "bounds"]), b"in bounds\0");
        assert_eq!(text::<16>(&[]), b"\0");
        let mut t = CText::<32>::new();
        write!(t, "row {} of {}", 7, 3).unwrap();
        assert_eq!(t.as_bytes_with_nul(), b"row 7 of 3\0");
    }

    #[test]
    fn text_that_fills_the_buffer_exactly_is_not_cut() {
        assert_eq!(text::<6>(&["abcde"]), b"abcde\0");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis_and_stays_within_the_buffer() {
        assert_eq!(text::<10>(&["abcdefghijk"]), b"abcdef...\0");
        // Later writes after a cut add nothing.
        assert_eq!(text::<10>(&["abcd", "efghijk", "more"]), b"abcdef...\0");
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        // "é" is two bytes: 11 bytes leave room for 7 before the "...", which
        // would end inside the second "é"; the cut moves back to 6.
        let bytes = text::<11>(&["abcdéééé"]);
        let s = std::str::from_utf8(&bytes[..bytes.len() - 1]).expect("valid UTF-8");
        assert_eq!(s, "abcdé...");
        assert_eq!(*bytes.last().unwrap(), 0);
    }
}
