//! The tile copy without a check per chunk (`PanelCopy`, from
//! `InteriorPanel::thread_copy`) needs the proof that only
//! `InteriorPanel::check` mints: a panel cannot be written down without it
//! (private fields), so a kernel cannot reach the unchecked copy with an edge
//! tile, an unproven offset or a misaligned leading dimension.
use warpforge_device::Global;
use warpforge_device::mma::InteriorPanel;

fn forged(src: Global<'_, u16>) -> InteriorPanel<'_, u16, 2, 8> {
    InteriorPanel {
        src,
        origin: 3,
        ld: 8,
        step: 8,
        steps: 1,
    }
}

fn main() {
    let _ = forged;
}
