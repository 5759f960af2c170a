//! NVTX ranges named after kernels, so Nsight Systems' timeline and Nsight
//! Compute's `--nvtx` filters show which warpforge launch is which.
//!
//! Off by default, and then `libnvToolsExt` is never loaded. On for the whole
//! process with `WARPFORGE_NVTX=1` in the environment (read at the first
//! launch) or [`enable`]. Each launch is then wrapped in a push/pop range
//! named after the kernel (`axpy_f32`) on the launching thread: around the
//! queuing of a GPU launch, around the whole run of an emulated one.
//!
//! The library is `libnvToolsExt.so` (NVTX v2): the CUDA 12 toolkit ships it,
//! and `pip install nvidia-nvtx-cu12` puts it under the venv's
//! `site-packages/nvidia/nvtx/lib` (add that to `LD_LIBRARY_PATH`). Without
//! it, [`enable`] is `Error::NvtxUnavailable`; with `WARPFORGE_NVTX=1` the
//! ranges are silently skipped (a profiling switch must not break a run).
//!
//! ```
//! // Name every launch in the profiler's timeline, if the library is there.
//! match warpforge::nvtx::enable() {
//!     Ok(()) => assert!(warpforge::nvtx::enabled()),
//!     Err(e) => assert!(matches!(e, warpforge::Error::NvtxUnavailable)),
//! }
//! warpforge::nvtx::disable();
//! assert!(!warpforge::nvtx::enabled());
//! ```

use super::error::{Error, Result};
use std::ffi::CString;
use std::marker::PhantomData;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// Unset: read `WARPFORGE_NVTX` at the first launch.
const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNSET);

/// Whether launches are wrapped in NVTX ranges.
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => {
            let wanted =
                std::env::var_os("WARPFORGE_NVTX").is_some_and(|v| !v.is_empty() && v != "0");
            let state = if wanted && available() { ON } else { OFF };
            // A concurrent `enable`/`disable` wins over the environment.
            let _ = STATE.compare_exchange(UNSET, state, Ordering::Relaxed, Ordering::Relaxed);
            STATE.load(Ordering::Relaxed) == ON
        }
    }
}

/// Wraps every launch from now on in an NVTX range named after the kernel.
/// Fails with `Error::NvtxUnavailable` if `libnvToolsExt` cannot be loaded.
pub fn enable() -> Result<()> {
    if !available() {
        return Err(Error::NvtxUnavailable);
    }
    STATE.store(ON, Ordering::Relaxed);
    Ok(())
}

/// Stops wrapping launches in NVTX ranges.
pub fn disable() {
    STATE.store(OFF, Ordering::Relaxed);
}

/// Whether `libnvToolsExt` can be loaded (looked up once, and only when asked:
/// never while NVTX is off).
pub fn available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen the library by its usual names.
    *PRESENT.get_or_init(|| unsafe { cudarc::nvtx::sys::is_culib_present() })
}

/// An open NVTX range: popped when dropped, on the thread that pushed it
/// (NVTX push/pop ranges are per thread, so the guard is not `Send`).
pub(crate) struct LaunchRange(PhantomData<*const ()>);

/// A range named `kernel` if NVTX is on.
pub(crate) fn launch_range(kernel: &str) -> Option<LaunchRange> {
    if !enabled() {
        return None;
    }
    let name = CString::new(kernel).ok()?;
    // SAFETY: NVTX is on only if the library loaded (checked in `enabled`/`enable`);
    // the message is a NUL-terminated string that NVTX copies before returning.
    unsafe { cudarc::nvtx::sys::nvtxRangePushA(name.as_ptr()) };
    Some(LaunchRange(PhantomData))
}

impl Drop for LaunchRange {
    fn drop(&mut self) {
        // SAFETY: pops the range this guard pushed, on the same thread (the
        // guard lives on the launching thread's stack and is not Send).
        unsafe { cudarc::nvtx::sys::nvtxRangePop() };
    }
}
