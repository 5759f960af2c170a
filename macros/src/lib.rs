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
//! `OutMatrix<T>` / `OutMatrix<T, M>`, whose rows, columns, row stride,
//! batches and batch stride the host binds at launch (seven PTX parameters), and TMA
//! tensor maps `TensorMap<T, R, B0, B1, S>` (two PTX parameters: the device address of
//! the 128-byte map the host encoded, and its tensor's buffer; `warpforge_device::tma`). Anything else is a
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
//! Launch bounds, CUDA's `__launch_bounds__(256, 2)` and `__maxnreg__(128)`:
//! `#[kernel(max_threads = 256, min_blocks = 2, max_registers = 128)]` (each
//! optional; `min_blocks` needs `max_threads`). They become the PTX entry's
//! `.maxntid 256, 1, 1`, `.minnctapersm 2` and `.maxnreg 128`, so ptxas
//! allocates registers for the occupancy the kernel was designed for; the
//! host refuses a launch whose block has more than `max_threads` threads.
//! rustc cannot emit these directives itself: the macro records them in a
//! `#[used]` static `__warpforge_launch_bounds_NAME: [u32; 3]` of the PTX
//! module, and `warpforge-builder` moves them into the entry
//! (`warpforge_builder::apply_launch_bounds`).
//!
//! A generic fn is one kernel body for several kernels: `instances(...)`
//! lists them, each a name and the type and const arguments it is built with,
//! `#[kernel(block = 256, instances(scale_f32 = <f32>, scale_f64 = <f64>))]`
//! on `pub fn scale<T: Fma>(a: T, x: &[T], y: Out<T>)`. Each instance is
//! exactly what a non-generic `#[kernel] pub fn scale_f32(a: f32, ...)` would
//! be (its PTX entry, launch description, `Kernel::NAME`, shared size), with
//! the arguments substituted and every parameter check applied to it; the
//! generic fn stays an ordinary fn (bounds and where-clause included) that the
//! instances call as `scale::<f32>`. A generic kernel without `instances`, or
//! `instances` on a non-generic one, an instance with the wrong number or kind
//! of arguments, two instances of one name, and lifetime parameters are
//! compile errors.
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
    /// `instances(name = <args>, ...)`: the kernels a generic fn is instantiated as.
    instances: Option<Instances>,
    /// `max_threads = N`: most threads per block (`.maxntid N, 1, 1`).
    max_threads: Option<u32>,
    /// `min_blocks = N`: fewest resident blocks per SM (`.minnctapersm N`).
    min_blocks: Option<u32>,
    /// `max_registers = N`: most registers per thread (`.maxnreg N`).
    max_registers: Option<u32>,
}

/// `instances(...)` as written: its keyword (for error spans) and each instance.
struct Instances {
    keyword: Ident,
    list: Vec<Instance>,
}

/// One `name = <T, N, ...>` of `instances(...)`.
struct Instance {
    name: Ident,
    args: syn::AngleBracketedGenericArguments,
}

impl Parse for Instance {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<syn::Token![=]>()?;
        if !input.peek(syn::Token![<]) {
            return Err(input.error(format!(
                "write instance `{name}`'s generic arguments in angle brackets, \
                 e.g. `{name} = <f32>` or `{name} = <f32, 8>`"
            )));
        }
        Ok(Instance {
            name,
            args: input.parse()?,
        })
    }
}

const OPTIONS: &str = "`shared = [T; N]`, `block = X`, `(X, Y)` or `(X, Y, Z)`, the launch \
                       bounds `max_threads = N`, `min_blocks = N` and `max_registers = N`, and \
                       `instances(name = <T, ...>, ...)` for a generic kernel";

impl Parse for KernelAttr {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut attr = KernelAttr::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "instances" {
                if attr.instances.is_some() {
                    return Err(Error::new(key.span(), "`instances` is given twice"));
                }
                let content;
                syn::parenthesized!(content in input);
                let list = content.parse_terminated(Instance::parse, syn::Token![,])?;
                attr.instances = Some(Instances {
                    keyword: key,
                    list: list.into_iter().collect(),
                });
                if !input.is_empty() {
                    input.parse::<syn::Token![,]>()?;
                }
                continue;
            }
            input.parse::<syn::Token![=]>()?;
            let duplicate = || Error::new(key.span(), format!("`{key}` is given twice"));
            match key.to_string().as_str() {
                "shared" if attr.shared.is_some() => return Err(duplicate()),
                "shared" => attr.shared = Some(input.parse()?),
                "block" if attr.block.is_some() => return Err(duplicate()),
                "block" => attr.block = Some(block_shape(&input.parse()?)?),
                "max_threads" if attr.max_threads.is_some() => return Err(duplicate()),
                "max_threads" => attr.max_threads = Some(bound(&key, input, 1, 1024)?),
                "min_blocks" if attr.min_blocks.is_some() => return Err(duplicate()),
                "min_blocks" => attr.min_blocks = Some(bound(&key, input, 1, 32)?),
                "max_registers" if attr.max_registers.is_some() => return Err(duplicate()),
                "max_registers" => attr.max_registers = Some(bound(&key, input, 16, 255)?),
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
        if attr.min_blocks.is_some() && attr.max_threads.is_none() {
            return Err(Error::new(
                input.span(),
                "`min_blocks` needs `max_threads` too (ptxas ignores `.minnctapersm` without \
                 `.maxntid`): e.g. `#[kernel(max_threads = 256, min_blocks = 2)]`",
            ));
        }
        if let (Some(max), Some([x, y, z])) = (attr.max_threads, attr.block) {
            let threads = u64::from(x) * u64::from(y) * u64::from(z);
            if threads > u64::from(max) {
                return Err(Error::new(
                    input.span(),
                    format!(
                        "`block = ({x}, {y}, {z})` is {threads} threads, more than \
                         `max_threads = {max}`: no launch could run it"
                    ),
                ));
            }
        }
        Ok(attr)
    }
}

/// A launch bound: an integer literal in `lo..=hi`.
fn bound(key: &Ident, input: ParseStream<'_>, lo: u32, hi: u32) -> syn::Result<u32> {
    let lit: syn::LitInt = input.parse().map_err(|e| {
        Error::new(
            e.span(),
            format!("`{key}` takes an integer literal, e.g. `{key} = {hi}`"),
        )
    })?;
    let value: u64 = lit.base10_parse()?;
    if !(u64::from(lo)..=u64::from(hi)).contains(&value) {
        return Err(Error::new(
            lit.span(),
            format!("`{key} = {value}` is out of range: it must be {lo} to {hi}"),
        ));
    }
    Ok(value as u32)
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
    /// `OutMatrix<T>`: an output whose shape (rows, cols, row stride, batches,
    /// batch stride) the host binds.
    OutputMatrix,
    /// `TensorMap<T, R, B0, B1, S>`: a TMA tensor map; its type arguments
    /// (lifetimes left out), which the host's raw form repeats.
    TensorMap(TokenStream2),
    /// `StoreMatrix<T, M, B0, B1, S>`: an output matrix written by TMA
    /// stores; its element, box and swizzle (the mapping left out: the
    /// body's type infers it), which the host's raw form repeats.
    StoreMatrix(TokenStream2),
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
            if last.ident == "StoreMatrix" {
                let shape = "write `StoreMatrix<T, M, B0, B1, S>`: the element, the mapping, the \
                             store box (columns, rows) and the swizzle";
                let kept = type_args(last, || Error::new(ty.span(), shape))?;
                let (Some(GenericArgument::Type(elem)), 5) = (kept.first(), kept.len()) else {
                    return Err(Error::new(ty.span(), shape));
                };
                let elem = scalar_elem(elem)?;
                let (b0, b1, swizzle) = (kept[2], kept[3], kept[4]);
                return Ok((Kind::StoreMatrix(quote!(#elem, #b0, #b1, #swizzle)), elem));
            }
            if last.ident == "TensorMap" {
                let kept = type_args(last, || {
                    Error::new(
                        ty.span(),
                        "write `TensorMap<T, R, B0, B1, S>`: the element, the rank, the box and \
                         the swizzle",
                    )
                })?;
                let Some(GenericArgument::Type(elem)) = kept.first() else {
                    return Err(Error::new(
                        ty.span(),
                        "a `TensorMap`'s first argument is its element type",
                    ));
                };
                let elem = scalar_elem(elem)?;
                return Ok((Kind::TensorMap(quote!(#(#kept),*)), elem));
            }
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

/// The PTX parameter names of an output matrix `n`'s shape (after its
/// pointer and length): rows, columns, row stride, batches, batch stride.
fn matrix_params(n: &Ident) -> [Ident; 5] {
    ["rows", "cols", "row_stride", "batches", "batch_stride"].map(|f| format_ident!("{}_{}", n, f))
}

fn unsupported(ty: &Type) -> Error {
    Error::new(
        ty.span(),
        format!(
            "unsupported kernel parameter type `{}`: a kernel takes scalars ({}), read-only \
             buffers `&[T]`, guarded outputs `Out<T>`, `OutMatrix<T, M>`, tensor maps \
             `TensorMap<T, R, B0, B1, S>` and TMA-stored outputs `StoreMatrix<T, M, B0, B1, S>` \
             (written out: the macro reads the type's name, so an alias is not recognised)",
            show(ty),
            SCALARS.join(", ")
        ),
    )
}

fn expand(attr: KernelAttr, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    let generics = &sig.generics;
    // Problems with the generics and `instances(...)` come alone: the
    // parameter types below depend on them.
    if let Some(lt) = generics.lifetimes().next() {
        return Err(Error::new(
            lt.span(),
            format!(
                "a kernel cannot have lifetime parameters (`{}`): every buffer lives for the \
                 whole launch, so write `&[T]` with its lifetime elided",
                show(&lt.lifetime)
            ),
        ));
    }
    let targets = match (&attr.instances, generics.params.is_empty()) {
        (None, true) => vec![Target {
            name: sig.ident.clone(),
            subst: Vec::new(),
            call: format_ident!("__warpforge_body_{}", sig.ident).into_token_stream(),
            of: None,
        }],
        (None, false) => {
            let example: Vec<&str> = generics
                .params
                .iter()
                .map(|p| match p {
                    syn::GenericParam::Const(_) => "4",
                    _ => "f32",
                })
                .collect();
            return Err(Error::new(
                generics.span(),
                format!(
                    "a generic kernel needs `instances(...)`: each PTX entry has one concrete \
                     signature, so list the instances to build, each a kernel of its own, e.g. \
                     `#[kernel(instances({name}_f32 = <{args}>))]`",
                    name = sig.ident,
                    args = example.join(", ")
                ),
            ));
        }
        (Some(inst), true) => {
            return Err(Error::new(
                inst.keyword.span(),
                format!(
                    "`instances(...)` is for a generic kernel, but `{}` has no type or const \
                     parameters: remove `instances(...)`",
                    sig.ident
                ),
            ));
        }
        (Some(inst), false) => instance_targets(&sig.ident, generics, inst)?,
    };
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

    let mut named = Vec::new();
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
        named.push((pi.ident.clone(), &*pt.ty));
    }
    // Each instance's parameters, checked with its arguments substituted (an
    // error the instances share is reported once).
    let mut instances = Vec::new();
    // Per parameter, the errors earlier instances gave for it.
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); named.len()];
    for target in &targets {
        let mut params = Vec::new();
        for ((name, ty), seen) in named.iter().zip(&mut seen) {
            match target.substitute(ty).and_then(|ty| classify(&ty)) {
                Ok((kind, elem)) => params.push(Param {
                    name: name.clone(),
                    kind,
                    elem,
                }),
                Err(e) => {
                    if !seen.contains(&e.to_string()) {
                        seen.push(e.to_string());
                        errors.push(e);
                    }
                }
            }
        }
        let shared = match &attr.shared {
            Some(t) => match target.substitute(t) {
                Ok(t) => Some(t),
                Err(e) => {
                    errors.push(e);
                    None
                }
            },
            None => None,
        };
        instances.push((target, params, shared));
    }
    if let Some(all) = errors.into_iter().reduce(|mut all, e| {
        all.combine(e);
        all
    }) {
        return Err(all);
    }

    let attrs_doc: Vec<_> = func
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .cloned()
        .collect();
    let mut body_fn = func.clone();
    if generics.params.is_empty() {
        // The body under a name of its own: the kernel's name is the launch
        // description's (a unit struct, in the value namespace too).
        body_fn.sig.ident = format_ident!("__warpforge_body_{}", sig.ident);
        body_fn.vis = syn::Visibility::Inherited;
        body_fn.attrs.retain(|a| !a.path().is_ident("doc"));
    }
    // A generic kernel stays the ordinary generic fn, docs and all, that
    // each instance's entry and description call with its arguments.
    let mut out = quote! {
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        #body_fn
    };
    for (target, params, shared) in &instances {
        out.extend(instance_items(
            &attr,
            &func.vis,
            &attrs_doc,
            target,
            params,
            shared.as_ref(),
        ));
    }
    Ok(out)
}

/// One kernel to emit: the non-generic fn itself, or one instance of a generic one.
struct Target {
    /// The PTX entry's and the launch description's name.
    name: Ident,
    /// Each generic parameter's name and the tokens it stands for in this instance.
    subst: Vec<(Ident, TokenStream2)>,
    /// The body to call: `__warpforge_body_k` or `k::<f32, 4>`.
    call: TokenStream2,
    /// For an instance, the generic fn and its arguments as written, `k::<f32, 4>`.
    of: Option<String>,
}

impl Target {
    /// `ty` with this instance's arguments in place of the generic parameters.
    fn substitute(&self, ty: &Type) -> syn::Result<Type> {
        if self.subst.is_empty() {
            return Ok(ty.clone());
        }
        syn::parse2(substitute_tokens(ty.to_token_stream(), &self.subst))
    }
}

/// The generic arguments written on `segment`, lifetimes left out (a device
/// type's `'a`, which the host's raw form does not repeat); `err()` if it
/// has no `<…>`.
fn type_args(
    segment: &syn::PathSegment,
    err: impl FnOnce() -> Error,
) -> Result<Vec<&GenericArgument>, Error> {
    let PathArguments::AngleBracketed(args) = &segment.arguments else {
        return Err(err());
    };
    Ok(args
        .args
        .iter()
        .filter(|a| !matches!(a, GenericArgument::Lifetime(_)))
        .collect())
}

/// Replaces each identifier named in `subst` (not a path segment after `::`,
/// nor a lifetime) by its tokens, inside groups too.
fn substitute_tokens(tokens: TokenStream2, subst: &[(Ident, TokenStream2)]) -> TokenStream2 {
    use proc_macro2::{Group, TokenTree};
    let mut out = TokenStream2::new();
    let mut after_colon_or_quote = false;
    for tt in tokens {
        let next_after =
            matches!(&tt, TokenTree::Punct(p) if p.as_char() == ':' || p.as_char() == '\'');
        match tt {
            TokenTree::Ident(id) if !after_colon_or_quote => {
                match subst.iter().find(|(name, _)| *name == id) {
                    Some((_, with)) => out.extend(with.clone()),
                    None => out.extend([TokenTree::Ident(id)]),
                }
            }
            TokenTree::Group(g) => {
                let mut inner = Group::new(g.delimiter(), substitute_tokens(g.stream(), subst));
                inner.set_span(g.span());
                out.extend([TokenTree::Group(inner)]);
            }
            other => out.extend([other]),
        }
        after_colon_or_quote = next_after;
    }
    out
}

/// The targets `instances(...)` lists for the generic fn `name`: each with as
/// many arguments as it has type and const parameters, of the right kinds,
/// under a name of its own.
fn instance_targets(
    name: &Ident,
    generics: &syn::Generics,
    instances: &Instances,
) -> syn::Result<Vec<Target>> {
    let params: Vec<&syn::GenericParam> = generics.params.iter().collect();
    let expected: Vec<String> = params
        .iter()
        .map(|p| match p {
            syn::GenericParam::Type(t) => t.ident.to_string(),
            syn::GenericParam::Const(c) => format!("const {}", c.ident),
            syn::GenericParam::Lifetime(l) => show(&l.lifetime),
        })
        .collect();
    let expected = expected.join(", ");
    let mut errors: Vec<Error> = Vec::new();
    let mut targets: Vec<Target> = Vec::new();
    if instances.list.is_empty() {
        errors.push(Error::new(
            instances.keyword.span(),
            format!("`instances()` lists no instance of `{name}`: write at least one, `name = <{expected}>`"),
        ));
    }
    for inst in &instances.list {
        let iname = &inst.name;
        if iname == name {
            errors.push(Error::new(
                iname.span(),
                format!(
                    "instance `{iname}` has the generic fn's own name: give the instance a name \
                     of its own, e.g. `{name}_f32`"
                ),
            ));
            continue;
        }
        if targets.iter().any(|t| t.name == *iname) {
            errors.push(Error::new(
                iname.span(),
                format!("instance `{iname}` is listed twice: each instance is a PTX entry and needs a name of its own"),
            ));
            continue;
        }
        let args: Vec<&GenericArgument> = inst.args.args.iter().collect();
        if args.len() != params.len() {
            errors.push(Error::new(
                inst.args.span(),
                format!(
                    "instance `{iname}` gives {} generic argument{}, but `{name}` has {} \
                     parameter{}: write `{iname} = <...>` with one argument for each of <{expected}>",
                    args.len(),
                    if args.len() == 1 { "" } else { "s" },
                    params.len(),
                    if params.len() == 1 { "" } else { "s" },
                ),
            ));
            continue;
        }
        let mut subst = Vec::new();
        let mut shown = Vec::new();
        let mut ok = true;
        for (param, arg) in params.iter().zip(&args) {
            let wrong = |what: &str| {
                Error::new(
                    arg.span(),
                    format!(
                        "instance `{iname}`: `{}` is not {what} for parameter `{}` of `{name}`",
                        show(arg),
                        match param {
                            syn::GenericParam::Type(t) => t.ident.to_string(),
                            syn::GenericParam::Const(c) => format!("const {}", c.ident),
                            syn::GenericParam::Lifetime(l) => show(&l.lifetime),
                        }
                    ),
                )
            };
            let tokens = match (param, arg) {
                (syn::GenericParam::Type(t), GenericArgument::Type(ty)) => {
                    (t.ident.clone(), ty.to_token_stream())
                }
                (syn::GenericParam::Type(_), _) => {
                    errors.push(wrong("a type"));
                    ok = false;
                    continue;
                }
                (syn::GenericParam::Const(c), GenericArgument::Const(e)) => {
                    let tokens = match e {
                        Expr::Lit(_) | Expr::Block(_) => e.to_token_stream(),
                        _ => quote!({ #e }),
                    };
                    (c.ident.clone(), tokens)
                }
                // A named constant parses as a type: `<f32, TILE>`.
                (syn::GenericParam::Const(c), GenericArgument::Type(Type::Path(p)))
                    if p.qself.is_none() =>
                {
                    (c.ident.clone(), p.to_token_stream())
                }
                (syn::GenericParam::Const(_), _) => {
                    errors.push(wrong("a constant"));
                    ok = false;
                    continue;
                }
                (syn::GenericParam::Lifetime(_), _) => unreachable!("lifetimes are refused first"),
            };
            shown.push(show(&tokens.1));
            subst.push(tokens);
        }
        if !ok {
            continue;
        }
        let call_args: Vec<&TokenStream2> = subst.iter().map(|(_, t)| t).collect();
        targets.push(Target {
            name: iname.clone(),
            call: quote!(#name::<#(#call_args),*>),
            of: Some(format!("{name}::<{}>", shown.join(", "))),
            subst,
        });
    }
    match errors.into_iter().reduce(|mut all, e| {
        all.combine(e);
        all
    }) {
        Some(all) => Err(all),
        None => Ok(targets),
    }
}

/// The PTX entry, launch description and shared-memory constant of one kernel.
fn instance_items(
    attr: &KernelAttr,
    vis: &syn::Visibility,
    attrs_doc: &[syn::Attribute],
    target: &Target,
    params: &[Param],
    shared: Option<&Type>,
) -> TokenStream2 {
    let name = &target.name;
    let name_str = name.to_string();
    let body_name = &target.call;
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
    for p in params {
        let (n, t) = (&p.name, &p.elem);
        let n_str = n.to_string();
        let t_str = type_name(t).unwrap_or_default();
        let ptr = format_ident!("{}_ptr", n);
        let len = format_ident!("{}_len", n);
        abi_names.push(n.clone());
        match &p.kind {
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
            Kind::TensorMap(args) => {
                // The map's device address, then its tensor's buffer (which
                // the body never reads: it is there so the host's launch
                // orders the kernel after the buffer's writers and before
                // its later ones, as for every buffer argument). The body
                // gets the map typed as its parameter is (`from_raw` is
                // generic, inferred from the body).
                let tensor = format_ident!("_{}_tensor", n);
                ptx_params.push(quote!(#n: *const u8, #tensor: *const u8));
                ptx_args.push(quote_spanned!(ms=> unsafe { #dev::tma::TensorMap::from_raw(#n) }));
                abi_types.push(quote!(#dev::kernel::RawTensorMap<#args>));
                host_args.push(quote_spanned!(ms=> unsafe { #n.as_map() }));
                param_info.push(quote!(#dev::kernel::Param { name: #n_str, kind: #dev::kernel::ParamKind::TensorMap, ty: #t_str, bytes: ::core::mem::size_of::<#t>() }));
            }
            Kind::StoreMatrix(args) => {
                // The map's device address, then the matrix as an
                // `OutMatrix`'s seven parameters (the buffer pushed as a
                // written one, which orders the launch as for `OutMatrix`).
                let [rows, cols, stride, batches, batch_stride] = matrix_params(n);
                ptx_params.push(quote!(
                    #n: *const u8, #ptr: *mut #t, #len: usize, #rows: usize, #cols: usize,
                    #stride: usize, #batches: usize, #batch_stride: usize
                ));
                ptx_args.push(quote_spanned!(ms=> unsafe { #dev::tma::StoreMatrix::from_raw(#n, #dev::own::OutMatrix::from_raw(#ptr, #len, #rows, #cols, #stride, #batches, #batch_stride)) }));
                abi_types.push(quote!(#dev::kernel::RawStoreMatrix<#args>));
                host_args.push(quote_spanned!(ms=> unsafe { #n.as_store_matrix() }));
                param_info.push(quote!(#dev::kernel::Param { name: #n_str, kind: #dev::kernel::ParamKind::StoreMatrix, ty: #t_str, bytes: ::core::mem::size_of::<#t>() }));
            }
            Kind::OutputMatrix => {
                // The shape travels with the buffer, bound by the host at launch,
                // so every thread sees the same one (`warpforge_device::own`).
                let [rows, cols, stride, batches, batch_stride] = matrix_params(n);
                ptx_params.push(quote!(
                    #ptr: *mut #t, #len: usize, #rows: usize, #cols: usize, #stride: usize,
                    #batches: usize, #batch_stride: usize
                ));
                ptx_args.push(quote_spanned!(ms=> unsafe { #dev::own::OutMatrix::from_raw(#ptr, #len, #rows, #cols, #stride, #batches, #batch_stride) }));
                abi_types.push(quote!(#dev::kernel::RawOutMatrix<#t>));
                host_args.push(quote_spanned!(ms=> unsafe { #n.as_matrix() }));
                param_info.push(quote!(#dev::kernel::Param { name: #n_str, kind: #dev::kernel::ParamKind::OutputMatrix, ty: #t_str, bytes: ::core::mem::size_of::<#t>() }));
            }
        }
    }
    let shared_bytes = match shared {
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
    let opt = |v: Option<u32>| match v {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    };
    let (max_threads, min_blocks, max_registers) = (
        opt(attr.max_threads),
        opt(attr.min_blocks),
        opt(attr.max_registers),
    );
    let has_bounds =
        attr.max_threads.is_some() || attr.min_blocks.is_some() || attr.max_registers.is_some();
    // The bounds for the build (warpforge-builder turns this static into the
    // entry's `.maxntid`/`.minnctapersm`/`.maxnreg` and removes it: rustc has
    // no way to set them itself). 0 = none.
    let bounds_static = if has_bounds {
        let static_name = format_ident!("__warpforge_launch_bounds_{}", name_str);
        let values =
            [attr.max_threads, attr.min_blocks, attr.max_registers].map(|v| v.unwrap_or(0));
        quote_spanned! {ms=>
            #[cfg(target_arch = "nvptx64")]
            #[unsafe(no_mangle)]
            #[used]
            #[allow(non_upper_case_globals)]
            #[doc(hidden)]
            pub static #static_name: [u32; 3] = [#(#values),*];
        }
    } else {
        TokenStream2::new()
    };
    let of = match &target.of {
        Some(of) => format!(", the instance `{of}`"),
        None => String::new(),
    };
    let doc = format!(
        "Launch description of the `{name_str}` kernel (PTX entry `{name_str}`{of}), generated by `#[kernel]`.{block_doc}"
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
            const LAUNCH_BOUNDS: #dev::kernel::LaunchBounds = #dev::kernel::LaunchBounds {
                max_threads: #max_threads,
                min_blocks: #min_blocks,
                max_registers: #max_registers,
            };
            type Args = (#(#abi_types,)*);

            unsafe fn run_thread(args: Self::Args) {
                let (#(#abi_names,)*) = args;
                // SAFETY: the caller (the emulator launcher) guarantees every buffer
                // is valid for its length for the whole launch.
                #body_name(#(#host_args),*)
            }
        }
    };

    quote! {
        /// Launch-sized shared memory the kernel needs per block, in bytes.
        #[doc(hidden)]
        #vis const #shared_const: usize = #shared_bytes;

        #entry

        #bounds_static

        #[cfg(not(target_arch = "nvptx64"))]
        #(#attrs_doc)*
        #[doc = #doc]
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #struct_name;

        #description
    }
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
    fn launch_bounds_parse_and_are_checked() {
        let a = attr("max_threads = 256, min_blocks = 2, max_registers = 128").unwrap();
        assert_eq!(
            (a.max_threads, a.min_blocks, a.max_registers),
            (Some(256), Some(2), Some(128))
        );
        let a = attr("block = (16, 16), max_threads = 256").unwrap();
        assert_eq!((a.block, a.max_threads), (Some([16, 16, 1]), Some(256)));
        for (tokens, message) in [
            ("max_threads = 0", "out of range"),
            ("max_threads = 1025", "out of range"),
            ("max_registers = 300", "out of range"),
            ("min_blocks = 2", "`min_blocks` needs `max_threads`"),
            ("max_threads = N", "integer literal"),
            ("max_threads = 128, max_threads = 64", "given twice"),
            (
                "block = 256, max_threads = 128",
                "more than `max_threads = 128`",
            ),
        ] {
            let e = attr(tokens)
                .err()
                .unwrap_or_else(|| panic!("{tokens} was accepted"));
            assert!(e.to_string().contains(message), "{tokens}: {e}");
        }
    }

    #[test]
    fn instances_parse_with_the_other_options() {
        let a =
            attr("block = 256, instances(k_f32 = <f32>, k_f64_4 = <f64, 4>,), shared = [f32; 4]")
                .unwrap();
        let list = &a.instances.as_ref().unwrap().list;
        let names: Vec<String> = list.iter().map(|i| i.name.to_string()).collect();
        assert_eq!(names, ["k_f32", "k_f64_4"]);
        assert_eq!(list[1].args.args.len(), 2);
        assert_eq!(a.block, Some([256, 1, 1]));
        for tokens in [
            "instances(k = f32)",
            "instances = (k = <f32>)",
            "instances(k = <f32>), instances(j = <f64>)",
        ] {
            assert!(attr(tokens).is_err(), "{tokens} was accepted");
        }
    }

    #[test]
    fn substitution_leaves_paths_and_other_names_alone() {
        let subst = [
            (format_ident!("T"), quote!(f32)),
            (format_ident!("N"), quote!(4)),
        ];
        let ty: Type = syn::parse_str("Foo<T, [T; N], core::T, Elements>").unwrap();
        assert_eq!(
            show(&substitute_tokens(ty.to_token_stream(), &subst)),
            "Foo<f32, [f32; 4], core::T, Elements>"
        );
    }

    #[test]
    fn types_are_shown_as_written() {
        let ty: Type = syn::parse_str("&'a mut [Vec<HashMap<String, f32>>; 4]").unwrap();
        assert_eq!(show(&ty), "&'a mut [Vec<HashMap<String, f32>>; 4]");
    }
}
