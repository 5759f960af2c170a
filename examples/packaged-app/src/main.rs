//! A reduction through the packaged library, on the emulator, against a sum
//! computed here: the reductions family's PTX was built from the packaged
//! sources (the emulator runs the same kernel's Rust; the module must exist
//! for the launch to be planned at all).

use warpforge::{Device, reduce};

fn main() -> Result<(), warpforge::Error> {
    let dev = Device::emulator();
    let x: Vec<i64> = (1..=20_000).map(|i| i * 7 - 3).collect();
    let want: i64 = x.iter().sum();
    let got = reduce::sum(&dev.upload(&x)?)?;
    assert_eq!(got, want, "packaged reduce::sum");
    let module = &warpforge::ptx::REDUCE;
    let ptx: usize = module.variants.iter().map(|v| v.source.len()).sum();
    assert!(ptx > 0, "the reductions family has no PTX");
    println!(
        "packaged warpforge: reduce::sum of {} i64 = {got} (expected {want}); \
         {}: {ptx} bytes of PTX, {} cubins",
        x.len(),
        module.name,
        module.cubins.len()
    );
    Ok(())
}
