//! Tile configurations as types: one type per configuration of a
//! warp-specialised kernel, carrying its tile shape, its ring's stages, its
//! warpgroups and the register split derived from them — the kernels take
//! their constants from it, and so does the host's dispatch (threads,
//! shared memory, tile shape), so the two cannot disagree.
//!
//! A block is `CONSUMERS` consumer warpgroups (each `wgmma`s 64 rows of the
//! `BM × BN` tile) and one producer warpgroup. The split: a block of
//! `THREADS` threads launches with at most `65536 / THREADS` registers a
//! thread, in steps of 8 ([`LAUNCH_REGS`](WgmmaTile::LAUNCH_REGS): 168 for
//! 384 threads); the producer gives registers back (`setmaxnreg.dec` to
//! `PRODUCER_REGS`, the one number a configuration chooses) and the
//! consumers take what that frees, as many as fit
//! ([`CONSUMER_REGS`](WgmmaTile::CONSUMER_REGS)): an `.inc` draws only on
//! what the block's `.dec`s released, so asking more would wait for ever.
//! The crate's `tile_config!` macro checks it all at compile time.

/// The registers a thread of a `threads`-thread block may hold at launch:
/// `65536 / threads` in steps of 8, at most 255 (a kernel's limit; 248 in
/// steps of 8).
pub const fn launch_registers(threads: u32) -> u32 {
    let per_thread = 65536 / threads;
    let capped = if per_thread > 255 { 255 } else { per_thread };
    capped / 8 * 8
}

/// The consumer warpgroups' registers a thread when the producer
/// warpgroup keeps `producer` of the block's `launch` a thread: the rest
/// of the pool, shared evenly, in steps of 8, at most 256.
pub const fn consumer_registers(launch: u32, consumers: u32, producer: u32) -> u32 {
    let threads = (consumers + 1) * 128;
    let pool = launch * threads - producer * 128;
    let each = pool / (consumers * 128) / 8 * 8;
    if each > 256 { 256 } else { each }
}

/// A warp-specialised `wgmma` kernel's configuration (module docs). Made
/// by the crate's `tile_config!` macro, which also checks it.
pub trait WgmmaTile {
    /// The block's tile of the output: `BM` rows (`64·CONSUMERS`), `BN`
    /// columns.
    const BM: usize;
    const BN: usize;
    /// The k-step: K per stage of the ring, in 2-byte elements (128 bytes,
    /// one swizzle span; a 4-byte element's kernel takes half as many).
    const BK: usize;
    /// The ring's stages.
    const STAGES: usize;
    /// Consumer warpgroups (each 64 rows of the tile).
    const CONSUMERS: usize;
    /// The producer warpgroup's registers a thread after its
    /// `setmaxnreg.dec`.
    const PRODUCER_REGS: u32;
    /// Threads a block: the consumers' warpgroups and the producer's.
    const THREADS: u32 = (Self::CONSUMERS as u32 + 1) * 128;
    /// Registers a thread at launch (the kernel's `max_threads` bound
    /// gives ptxas no more).
    const LAUNCH_REGS: u32 = launch_registers(Self::THREADS);
    /// The consumer warpgroups' registers a thread after their
    /// `setmaxnreg.inc`: all the producer released.
    const CONSUMER_REGS: u32 = consumer_registers(
        Self::LAUNCH_REGS,
        Self::CONSUMERS as u32,
        Self::PRODUCER_REGS,
    );
    /// The "full" barrier's arrivals a phase is the kernel's (who fills a
    /// stage); "empty" and "drained" expect one arrival per consumer
    /// thread.
    const CONSUMER_THREADS: u32 = Self::CONSUMERS as u32 * 128;
    /// One stage of the ring in 2-byte elements: the A tile (`BM × BK`)
    /// and B's (`BN × BK`).
    const STAGE_ELEMS: usize = (Self::BM + Self::BN) * Self::BK;
    /// One stage of the ring in bytes.
    const STAGE_BYTES: usize = 2 * Self::STAGE_ELEMS;
    /// The ring's stages in bytes (where its barriers start).
    const RING_BYTES: usize = Self::STAGES * Self::STAGE_BYTES;
    /// The ring's barriers: "full" and "empty" per stage, then "drained".
    const BARRIERS: usize = 2 * Self::STAGES + 1;
    /// The launch's dynamic shared memory in 2-byte elements: the ring,
    /// then the barriers (8 bytes each).
    const SHARED_ELEMS: usize = Self::STAGES * Self::STAGE_ELEMS + Self::BARRIERS * 4;
    /// The same in bytes.
    const SHARED_BYTES: usize = 2 * Self::SHARED_ELEMS;

    /// The producer warpgroup's `setmaxnreg.dec` to
    /// [`PRODUCER_REGS`](Self::PRODUCER_REGS) (every warp of it, together).
    fn producer_registers();
    /// The consumer warpgroups' `setmaxnreg.inc` to
    /// [`CONSUMER_REGS`](Self::CONSUMER_REGS) (every warp of each, together).
    fn consumer_registers();
}

/// Defines a configuration type: `tile_config!(Name: BM × BN × BK, STAGES
/// stages, CONSUMERS consumers, PRODUCER_REGS producer registers)`, with
/// compile-time checks that the tile is whole `wgmma`s, the ring and its
/// barriers fit the 227 KiB a block may have, and the register split is
/// one `setmaxnreg` can make (24 ..= 256 in steps of 8) and the pool can
/// serve (threads × limits within the block's registers at launch).
macro_rules! tile_config {
    ($(#[$doc:meta])* $name:ident: $bm:literal x $bn:literal x $bk:literal,
     $stages:literal stages, $consumers:literal consumers, $producer:literal producer registers) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;

        impl $crate::config::WgmmaTile for $name {
            const BM: usize = $bm;
            const BN: usize = $bn;
            const BK: usize = $bk;
            const STAGES: usize = $stages;
            const CONSUMERS: usize = $consumers;
            const PRODUCER_REGS: u32 = $producer;

            #[inline(always)]
            fn producer_registers() {
                warpforge_device::wgmma::release_registers::<
                    { <$name as $crate::config::WgmmaTile>::PRODUCER_REGS },
                >();
            }

            #[inline(always)]
            fn consumer_registers() {
                warpforge_device::wgmma::increase_registers::<
                    { <$name as $crate::config::WgmmaTile>::CONSUMER_REGS },
                >();
            }
        }

        const _: () = {
            use $crate::config::WgmmaTile as C;
            type T = $name;
            assert!(T::BM == 64 * T::CONSUMERS, "each consumer warpgroup wgmmas 64 rows");
            assert!(
                T::BN % 64 == 0 && T::BN >= 64 && T::BN <= 256,
                "BN: whole 64-column panels, one wgmma wide"
            );
            assert!(T::BK == 64, "a k-step is one 128-byte swizzle span of 2-byte elements");
            assert!(T::STAGES >= 2, "a ring of at least two stages");
            assert!(
                T::SHARED_ELEMS * 2 <= 227 * 1024,
                "the ring and its barriers within the 227 KiB a block may have"
            );
            let (p, c, l) = (T::PRODUCER_REGS, T::CONSUMER_REGS, T::LAUNCH_REGS);
            assert!(p >= 24 && p % 8 == 0 && p <= l, "the producer's .dec: 24 ..= the launch's");
            assert!(c >= l && c <= 256 && c % 8 == 0, "the consumers' .inc: the launch's ..= 256");
            assert!(
                p * 128 + c * T::CONSUMER_THREADS <= l * T::THREADS,
                "the split within the 64 K-register pool the block launched with"
            );
            assert!(l * T::THREADS <= 65536, "the block's registers within the SM's 64 K");
        };
    };
}
pub(crate) use tile_config;
