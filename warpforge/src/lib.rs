pub const PTX_SM80: &str = include_str!(env!("WARPFORGE_PTX_SM_80"));
