//! `#[kernel]`: one annotated Rust function becomes
//! (a) an unmangled `extern "gpu-kernel"` PTX entry on nvptx64,
//! (b) an emulator entry on the host, and
//! (c) a typed description (`warpforge_device::kernel::Kernel`) that the host launches with.
//!
//! The description is an `unsafe impl Kernel`: its name, parameters and
//! module (`Kernel::MODULE`, the Cargo package name of the crate the macro
//! expands in, `env!("CARGO_PKG_NAME")`) are derived from the same signature as
//! the PTX entry, which is what the trait's safety contract asks. So the host
//! finds the entry in the PTX module built from this crate, never one of the
//! same name in another crate's module.
//!
//! Parameters may be scalars (`f32 f64 i32 u32 i64 u64 usize f16 bf16 …`),
//! read-only buffers `&[T]` (or `Global<T>`, the same buffer typed as being
//! in global memory, which `cp.async` needs), guarded outputs `Out<T>` (or `Out<T, M>`, an
//! owned mapping: `warpforge_device::own`), and output matrices
//! `OutMatrix<T>` / `OutMatrix<T, M>`, whose rows, columns and row stride the
//! host binds at launch (five PTX parameters). Anything else is a
//! compile error that says what to write instead.
//!
//! `#[kernel(shared = [T; N])]` declares that the kernel needs `N` elements of
//! `T` of launch-sized shared memory per block; the host always provides it.
//!
//! `#[kernel(block = 256)]`, `#[kernel(block = (16, 16))]` or
//! `#[kernel(block = (8, 8, 4))]` declares the one block shape the kernel may
//! be launched with (for kernels whose tile loops assume it); the host refuses
//! a launch with any other block before anything runs. The dimensions are
//! integer literals, checked here: each at least 1, `z` at most 64, and at
//! most 1024 threads in all, the limits of every CUDA GPU.
//!
//! Both options may be given, in either order:
//! `#[kernel(block = (16, 16), shared = [f32; 256])]`.
//!
//! A kernel may not be an `unsafe fn` (the host launches it from safe code),
//! and the kernels crate may `#![forbid(unsafe_code)]`: the `unsafe` the
//! expansion needs is spanned at this macro's own site, which the lint does
//! not report, while `unsafe` the user writes still is (see `expand`).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{
    Error, Expr, FnArg, GenericArgument, Ident, ItemFn, Lit, Pat, PathArguments, ReturnType, Type,
};

/// Scalar types a kernel may take by value (and the element types of its buffers).
const SCALARS: &[&str] = &[
    "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "usize", "isize", "f16",
    "bf16",
];

/// Turns a Rust function into a warpforge kernel; see the crate docs.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = syn::parse_macro_input!(attr as KernelAttr);
    let func = syn::parse_macro_input!(item as ItemFn);
    expand(attr, func)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

#[derive(Default)]
struct KernelAttr {
    shared: Option<Type>,
    /// The declared block shape, `[x, y, z]`, already checked against the CUDA limits.
    block: Option<[u32; 3]>,
}

const OPTIONS: &str = "`shared = [T; N]` and `block = X`, `(X, Y)` or `(X, Y, Z)`";

impl Parse for KernelAttr {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut attr = KernelAttr::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            input.parse::<syn::Token![=]>()?;
            let duplicate = || Error::new(key.span(), format!("`{key}` is given twice"));
            match key.to_string().as_str() {
                "shared" if attr.shared.is_some() => return Err(duplicate()),
                "shared" => attr.shared = Some(input.parse()?),
                "block" if attr.block.is_some() => return Err(duplicate()),
                "block" => attr.block = Some(block_shape(&input.parse()?)?),
                other => {
                    return Err(Error::new(
                        key.span(),
                        format!("unknown #[kernel] option `{other}`; the options are {OPTIONS}"),
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(attr)
    }
}

/// The expression itself, seen through the invisible group a `macro_rules!` `$e:expr` wraps it in.
fn ungroup_expr(e: &Expr) -> &Expr {
    match e {
        Expr::Group(g) => ungroup_expr(&g.expr),
        _ => e,
    }
}

/// Threads per block on every CUDA GPU warpforge targets.
const MAX_BLOCK_THREADS: u64 = 1024;
/// `blockDim.z` on every CUDA GPU warpforge targets.
const MAX_BLOCK_Z: u64 = 64;

/// `block = X | (X, Y) | (X, Y, Z)`: integer literals, within the limits of every CUDA GPU.
fn block_shape(expr: &Expr) -> syn::Result<[u32; 3]> {
    const FORMS: &str = "write `block = X`, `block = (X, Y)` or `block = (X, Y, Z)` with \
                         integer literals, e.g. `block = 256` or `block = (16, 16)`";
    let dims: Vec<&Expr> = match ungroup_expr(expr) {
        Expr::Tuple(t) => t.elems.iter().collect(),
        Expr::Paren(p) => vec![&*p.expr],
        e => vec![e],
    };
    if dims.is_empty() {
        return Err(Error::new(
            expr.span(),
            format!("`block = ()` gives no dimensions: {FORMS}"),
        ));
    }
    if dims.len() > 3 {
        return Err(Error::new(
            expr.span(),
            format!(
                "`block = {}` has {} dimensions, but a CUDA block has at most 3 (x, y, z): {FORMS}",
                show(expr),
                dims.len()
            ),
        ));
    }
    let mut shape = [1u64; 3];
    for ((dim, slot), axis) in dims.iter().zip(&mut shape).zip(["x", "y", "z"]) {
        let lit = match ungroup_expr(dim) {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(lit), ..
            }) if matches!(lit.suffix(), "" | "u32") => lit,
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(lit), ..
            }) => {
                return Err(Error::new(
                    lit.span(),
                    format!(
                        "block.{axis} is `{lit}`, a `{}`: write it without a suffix (or as `u32`)",
                        lit.suffix()
                    ),
                ));
            }
            other => {
                return Err(Error::new(
                    other.span(),
                    format!(
                        "block.{axis} must be an integer literal, not `{}`: {FORMS}",
                        show(other)
                    ),
                ));
            }
        };
        // Too large for u64 is certainly too many threads.
        *slot = lit.base10_parse::<u64>().unwrap_or(u64::MAX);
        if *slot == 0 {
            return Err(Error::new(
                lit.span(),
                format!("block.{axis} is 0, but every block dimension must be at least 1"),
            ));
        }
    }
    let threads = shape.iter().fold(1u64, |n, &d| n.saturating_mul(d));
    if threads > MAX_BLOCK_THREADS {
        return Err(Error::new(
            expr.span(),
            format!(
                "`block = {}` is {threads} threads, but a CUDA block has at most \
                 {MAX_BLOCK_THREADS}: use a smaller block (and more blocks in the grid)",
                show(expr)
            ),
        ));
    }
    if shape[2] > MAX_BLOCK_Z {
        return Err(Error::new(
            dims[2].span(),
            format!(
                "block.z is {}, but a CUDA block has at most {MAX_BLOCK_Z} in z: \
                 move the extent to x or y",
                shape[2]
            ),
        ));
    }
    // Every dimension is now at most 1024.
    Ok(shape.map(|d| d as u32))
}

/// Tokens as a person writes them: `Vec<f32>`, `&mut [f32]`, `(16, 16)`, not `Vec < f32 >`.
fn show(tokens: &impl ToTokens) -> String {
    let mut s = tokens.to_token_stream().to_string();
    for (spaced, tight) in [
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        ("& ", "&"),
        ("* ", "*"),
        ("[ ", "["),
        (" ]", "]"),
        ("( ", "("),
        (" )", ")"),
        (" ;", ";"),
        (" ,", ","),
        (" ::", "::"),
        (":: ", "::"),
    ] {
        s = s.replace(spaced, tight);
    }
    s
}

enum Kind {
    Scalar,
    Input,
    Output,
    /// `OutMatrix<T>`: an output whose shape (rows, cols, row stride) the host binds.
    OutputMatrix,
}

struct Param {
    name: Ident,
    kind: Kind,
    /// The scalar type, or the element type of a buffer.
    elem: Type,
}

/// The type itself, seen through the invisible group a `macro_rules!` `$t:ty` wraps it in.
fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => ungroup(&g.elem),
        Type::Paren(p) => ungroup(&p.elem),
        _ => ty,
    }
}

fn type_name(ty: &Type) -> Option<String> {
    match ungroup(ty) {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn scalar_elem(ty: &Type) -> syn::Result<Type> {
    match type_name(ty) {
        Some(n) if SCALARS.contains(&n.as_str()) => Ok(ty.clone()),
        _ => Err(Error::new(
            ty.span(),
            format!(
                "unsupported kernel element type `{}`: buffers and scalars must be one of {}",
                show(ty),
                SCALARS.join(", ")
            ),
        )),
    }
}

fn classify(ty: &Type) -> syn::Result<(Kind, Type)> {
    match ungroup(ty) {
        Type::Reference(r) => match (ungroup(&r.elem), r.mutability) {
            (Type::Slice(s), None) => Ok((Kind::Input, scalar_elem(&s.elem)?)),
            (Type::Slice(_), Some(_)) => Err(Error::new(
                ty.span(),
                "a kernel cannot take `&mut [T]`: every GPU thread would hold the same mutable \
                 slice, which is aliasing undefined behaviour; take `Out<T>` and write through \
                 `out.at(i)`, which proves the index in bounds",
            )),
            _ => Err(unsupported(ty)),
        },
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last().expect("a path has a segment");
            // `Global<T>` is an input like `&[T]`, typed as being in global memory.
            let buffer = match last.ident.to_string().as_str() {
                "Out" => Some(Kind::Output),
                "OutMatrix" => Some(Kind::OutputMatrix),
                "Global" => Some(Kind::Input),
                _ => None,
            };
            if let Some(kind) = buffer {
                let missing = || {
                    let msg = format!("write `{}<T>` with its element type", last.ident);
                    Error::new(ty.span(), msg)
                };
                let PathArguments::AngleBracketed(args) = &last.arguments else {
                    return Err(missing());
                };
                let elem = args
                    .args
                    .iter()
                    .find_map(|a| match a {
                        GenericArgument::Type(t) => Some(t),
                        _ => None,
                    })
                    .ok_or_else(missing)?;
                Ok((kind, scalar_elem(elem)?))
            } else {
                Ok((Kind::Scalar, scalar_elem(ty).map_err(|_| unsupported(ty))?))
            }
        }
        _ => Err(unsupported(ty)),
    }
}

fn unsupported(ty: &Type) -> Error {
    Error::new(
        ty.span(),
        format!(
            "unsupported kernel parameter type `{}`: a kernel takes scalars ({}), read-only \
             buffers `&[T]` and guarded outputs `Out<T>`",
            show(ty),
            SCALARS.join(", ")
        ),
    )
}

fn expand(attr: KernelAttr, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    if !sig.generics.params.is_empty() {
        // Alone: its type parameters would also fail as parameter types below.
        return Err(Error::new(
            sig.generics.span(),
            "a kernel cannot be generic: each PTX entry has one concrete signature; \
             write one #[kernel] per type that calls a generic helper",
        ));
    }
    // Every other problem with the signature at once, so one build shows them all.
    let mut errors: Vec<Error> = Vec::new();
    if let Some(t) = &sig.asyncness {
        errors.push(Error::new(t.span(), "a kernel cannot be async"));
    }
    if let Some(t) = &sig.unsafety {
        errors.push(Error::new(
            t.span(),
            "a kernel cannot be an `unsafe fn`: the host launches kernels from safe code, \
             so nothing would uphold its safety preconditions; remove `unsafe` and check \
             what the kernel relies on in its body (`out.at(i)`, `x.get(i)`, `In2::new`)",
        ));
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        errors.push(Error::new(
            ty.span(),
            "a kernel returns nothing: write its results through `Out<T>` parameters",
        ));
    }

    let mut params = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            errors.push(Error::new(input.span(), "a kernel cannot take `self`"));
            continue;
        };
        let Pat::Ident(pi) = &*pt.pat else {
            errors.push(Error::new(
                pt.pat.span(),
                "kernel parameters must be plain names",
            ));
            continue;
        };
        match classify(&pt.ty) {
            Ok((kind, elem)) => params.push(Param {
                name: pi.ident.clone(),
                kind,
                elem,
            }),
            Err(e) => errors.push(e),
        }
    }
    if let Some(all) = errors.into_iter().reduce(|mut all, e| {
        all.combine(e);
        all
    }) {
        return Err(all);
    }

    let vis = &func.vis;
    let name = &sig.ident;
    let name_str = name.to_string();
    let body_name = format_ident!("__warpforge_body_{}", name);
    let mut body_fn = func.clone();
    body_fn.sig.ident = body_name.clone();
    body_fn.vis = syn::Visibility::Inherited;
    let attrs_doc: Vec<_> = func
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    body_fn.attrs.retain(|a| !a.path().is_ident("doc"));

    let dev = quote!(::warpforge_device);
    // `forbid(unsafe_code)` in a kernels crate: an `#[allow(unsafe_code)]` on
    // what this macro emits would be an error there (forbid cannot be
    // lowered). Instead, the `unsafe` this macro writes (the entry's
    // `no_mangle`, `unsafe extern fn` and raw-pointer views, the
    // `unsafe impl Kernel` and its `unsafe fn run_thread`) is built with
    // `Span::mixed_site()`, which carries this macro's expansion context:
    // rustc drops a lint whose span comes from an external macro's expansion
    // unless the lint opts in (`report_in_external_macro`), and `unsafe_code`
    // does not. Only tokens created here get that span (plus the entry's
    // visibility, re-spanned below); the user's tokens keep theirs, so
    // `unsafe` the user writes is still reported. And no user expression is
    // placed in an unsafe context created here: the body stays a separate
    // safe fn that the entry calls, and the `unsafe` blocks and fns hold only
    // the macro's own calls on parameter names it binds itself (tests:
    // `pass/forbid_unsafe_code.rs`, `compile_fail/forbid_user_unsafe.rs`). The macro vouches for the
    // `unsafe` it writes, as a library vouches for the `unsafe` inside a safe
    // function; the obligations are `Kernel`'s safety contract.
    let ms = Span::mixed_site();

    // nvptx64 entry: buffers flattened to (pointer, length), rebuilt into views.
    let mut ptx_params = Vec::new();
    let mut ptx_args = Vec::new();
    // Host description: the argument tuple and how each element becomes a parameter.
    let mut abi_types = Vec::new();
    let mut abi_names = Vec::new();
    let mut host_args = Vec::new();
    let mut param_info = Vec::new();
    for p in &params {
        let (n, t) = (&p.name, &p.elem);
        let n_str = n.to_string();
        let t_str = type_name(t).unwrap_or_default();
        let ptr = format_ident!("{}_ptr", n);
        let len = format_ident!("{}_len", n);
        abi_names.push(n.clone());
        match p.kind {
            Kind::Scalar => {
                ptx_params.push(quote!(#n: #t));
                ptx_args.push(quote!(#n));
                abi_types.push(quote!(#t));
                host_args.push(quote!(#n));
                param_info.push(quote!(#dev::kernel::Param { name: #n_str, kind: #dev::kernel::ParamKind::Scalar, ty: #t_str, bytes: ::core::mem::size_of::<#t>() }));
            }
            Kind::Input => {
                ptx_params.push(quote!(#ptr: *const #t, #len: usize));
                // SAFETY: the host launcher passes a live device buffer (global
                // memory) and its length; the body gets it as `&[T]` or `Global<T>`.
                ptx_args.push(quote_spanned!(ms=> #dev::global::FromGlobal::from_global(
                    unsafe { #dev::global::Global::from_raw(#ptr, #len) })));
                abi_types.push(quote!(#dev::kernel::RawIn<#t>));
                host_args.push(quote_spanned!(ms=> #dev::global::FromGlobal::from_global(
                    unsafe { #dev::global::Global::from_raw(#n.ptr, #n.len) })));
                param_info.push(quote!(#dev::kernel::Param { name: #n_str, kind: #dev::kernel::ParamKind::Input, ty: #t_str, bytes: ::core::mem::size_of::<#t>() }));
            }
            Kind::Output => {
                ptx_params.push(quote!(#ptr: *mut #t, #len: usize));
                ptx_args
                    .push(quote_spanned!(ms=> unsafe { #dev::guard::Out::from_raw(#ptr, #len) }));
                abi_types.push(quote!(#dev::kernel::RawOut<#t>));
                host_args.push(quote_spanned!(ms=> unsafe { #n.as_out() }));
                param_info.push(quote!(#dev::kernel::Param { name: #n_str, kind: #dev::kernel::ParamKind::Output, ty: #t_str, bytes: ::core::mem::size_of::<#t>() }));
            }
            Kind::OutputMatrix => {
                // The shape travels with the buffer, bound by the host at launch,
                // so every thread sees the same one (`warpforge_device::own`).
                let (rows, cols, stride) = (
                    format_ident!("{}_rows", n),
                    format_ident!("{}_cols", n),
                    format_ident!("{}_row_stride", n),
                );
                ptx_params.push(
                    quote!(#ptr: *mut #t, #len: usize, #rows: usize, #cols: usize, #stride: usize),
                );
                ptx_args.push(quote_spanned!(ms=> unsafe { #dev::own::OutMatrix::from_raw(#ptr, #len, #rows, #cols, #stride) }));
                abi_types.push(quote!(#dev::kernel::RawOutMatrix<#t>));
                host_args.push(quote_spanned!(ms=> unsafe { #n.as_matrix() }));
                param_info.push(quote!(#dev::kernel::Param { name: #n_str, kind: #dev::kernel::ParamKind::OutputMatrix, ty: #t_str, bytes: ::core::mem::size_of::<#t>() }));
            }
        }
    }
    let shared_bytes = match &attr.shared {
        Some(t) => quote!(::core::mem::size_of::<#t>()),
        None => quote!(0usize),
    };
    let shared_const = format_ident!("__WARPFORGE_SHARED_BYTES_{}", name_str.to_uppercase());
    let (block, block_doc) = match attr.block {
        Some([x, y, z]) => (
            quote!(::core::option::Option::Some(#dev::Dim3::new(#x, #y, #z))),
            format!(" Launch it with block ({x}, {y}, {z}); any other block shape is refused."),
        ),
        None => (quote!(::core::option::Option::None), String::new()),
    };
    let doc = format!(
        "Launch description of the `{name_str}` kernel (PTX entry `{name_str}`), generated by `#[kernel]`.{block_doc}"
    );
    let span = Span::call_site();
    let struct_name = Ident::new(&name_str, span);

    // The PTX entry and the launch description: the macro's own `unsafe`, at
    // its own span (`ms`, see above), so `forbid(unsafe_code)` does not see it.
    // The entry's visibility too: an item's span starts at it, and the user's
    // `pub` (from a `macro_rules!` in the kernels crate, say) would make the
    // whole `unsafe extern fn` look like the user's.
    let entry_vis: TokenStream2 = vis
        .to_token_stream()
        .into_iter()
        .map(|mut t| {
            t.set_span(ms);
            t
        })
        .collect();
    let entry = quote_spanned! {ms=>
        #[cfg(target_arch = "nvptx64")]
        #(#attrs_doc)*
        #[unsafe(no_mangle)]
        #[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
        #entry_vis unsafe extern "gpu-kernel" fn #name(#(#ptx_params),*) {
            // SAFETY: the host launcher passes, for each buffer, a live device
            // allocation and the element count it checked against the launch.
            #body_name(#(#ptx_args),*)
        }
    };
    let description = quote_spanned! {ms=>
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: every item is derived from the signature the PTX entry above is
        // compiled from, in this crate (`MODULE` is its package name).
        unsafe impl #dev::kernel::Kernel for #struct_name {
            const NAME: &'static str = #name_str;
            const MODULE: &'static str = ::core::env!("CARGO_PKG_NAME");
            const PARAMS: &'static [#dev::kernel::Param] = &[#(#param_info),*];
            const SHARED_BYTES: usize = #shared_const;
            const BLOCK: ::core::option::Option<#dev::Dim3> = #block;
            type Args = (#(#abi_types,)*);

            unsafe fn run_thread(args: Self::Args) {
                let (#(#abi_names,)*) = args;
                // SAFETY: the caller (the emulator launcher) guarantees every buffer
                // is valid for its length for the whole launch.
                #body_name(#(#host_args),*)
            }
        }
    };

    Ok(quote! {
        /// Launch-sized shared memory the kernel needs per block, in bytes.
        #[doc(hidden)]
        #vis const #shared_const: usize = #shared_bytes;

        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        #body_fn

        #entry

        #[cfg(not(target_arch = "nvptx64"))]
        #(#attrs_doc)*
        #[doc = #doc]
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #struct_name;

        #description
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(tokens: &str) -> syn::Result<KernelAttr> {
        syn::parse_str(tokens)
    }

    #[test]
    fn block_shapes_in_every_form_and_order() {
        for (tokens, shape) in [
            ("block = 256", [256, 1, 1]),
            ("block = 256u32", [256, 1, 1]),
            ("block = (256)", [256, 1, 1]),
            ("block = (16, 16)", [16, 16, 1]),
            ("block = (8, 8, 4)", [8, 8, 4]),
            ("block = (1024, 1, 1)", [1024, 1, 1]),
            ("block = (1, 1, 64)", [1, 1, 64]),
            ("shared = [f32; 256], block = (16, 16)", [16, 16, 1]),
            ("block = (16, 16), shared = [f32; 256],", [16, 16, 1]),
        ] {
            let a = attr(tokens).unwrap_or_else(|e| panic!("{tokens}: {e}"));
            assert_eq!(a.block, Some(shape), "{tokens}");
        }
        assert!(attr("shared = [f32; 4]").unwrap().block.is_none());
    }

    #[test]
    fn block_shapes_no_gpu_can_launch_are_refused() {
        for tokens in [
            "block = 0",
            "block = ()",
            "block = (2, 2, 2, 2)",
            "block = 1025",
            "block = (33, 32)",
            "block = (1, 1, 65)",
            "block = 99999999999999999999999",
            "block = 256i64",
            "block = -1",
            "block = N",
        ] {
            assert!(attr(tokens).is_err(), "{tokens} was accepted");
        }
    }

    #[test]
    fn types_are_shown_as_written() {
        let ty: Type = syn::parse_str("&'a mut [Vec<HashMap<String, f32>>; 4]").unwrap();
        assert_eq!(show(&ty), "&'a mut [Vec<HashMap<String, f32>>; 4]");
    }
}
