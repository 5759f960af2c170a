//! The PTX cache: built modules (PTX and compressed cubins), stored under a key
//! that hashes everything that decides them, so that every build of the same
//! kernels — debug and release, `cargo test` and `cargo run -p …`, clippy,
//! rustdoc, another feature set of the host crate — reuses one nested build
//! and one set of `ptxas` runs instead of repeating them in its own `OUT_DIR`.
//!
//! # Where
//!
//! `WARPFORGE_PTX_CACHE=DIR` names the cache's root (`0` or `off` turns the
//! cache off). Otherwise the root is `warpforge-ptx/` in the outer build's
//! target directory (found from `OUT_DIR`'s layout; trybuild's projects,
//! which build in a target directory inside the workspace's, share the
//! workspace's), and `cargo clean` empties it. Under the root:
//!
//! - `nvptx-<arch>/`: the nested cargo's target directory, shared by every
//!   kernels crate and build of the workspace (`core` for nvptx64 is built
//!   once; cargo's own lock serialises concurrent nested builds);
//! - `nvptx-<arch>-w<N>/`: the same for worker N (from 1) of
//!   [`crate::build_all`], which builds several packages at once, each
//!   worker in its own directories (worker 0, and every single build, in
//!   `nvptx-<arch>/`); each keeps its `core` from one run to the next;
//! - `<package>/<key>/`: one built module set, immutable once written: the
//!   `.ptx` files, the `.cubin.zst` files and `entry.txt`, which lists them.
//!
//! A build copies an entry's files into its own `OUT_DIR` and embeds those
//! copies, so removing an entry never breaks a build that used it. Entries are
//! written to a scratch directory and renamed into place, so a reader never
//! sees half of one; the [`KEEP`] most recently used entries of each package
//! are kept.
//!
//! # The key
//!
//! An XXH3-128 hash of: this cache's format and the builder's version; the
//! package; the architectures, profile and rustc flags; `rustc -vV`; whether
//! cubins are made and, if so, for which architectures and by which `ptxas
//! --version`; and the path (relative to the workspace) and contents of every
//! file the build watches (the kernels crate's and its path dependencies'
//! `Cargo.toml` and `src/`, the workspace's `Cargo.toml`, `Cargo.lock`,
//! `.cargo/config.toml`, and whatever [`crate::PtxBuilder::watch`] adds). A
//! change to any of these is a miss; nothing else can change the output.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use twox_hash::XxHash3_128;

use crate::{Arch, CubinFile, PtxModule};

/// How many entries of one package the cache keeps (the most recently used).
pub const KEEP: usize = 4;

/// Bumped whenever an entry's layout or the key's inputs change meaning.
const FORMAT: &str = "warpforge-ptx-cache 1";

/// The cache of one kernels package.
#[derive(Clone, Debug)]
pub(crate) struct Cache {
    root: PathBuf,
    package: String,
}

/// Accumulates the key's inputs.
pub(crate) struct Key(XxHash3_128);

impl Key {
    pub(crate) fn new(package: &str) -> Key {
        let mut key = Key(XxHash3_128::new());
        key.text("format", FORMAT);
        key.text("builder", env!("CARGO_PKG_VERSION"));
        key.text("package", package);
        key
    }

    /// A labelled value: the label and the length keep `("ab", "c")` and
    /// `("a", "bc")` apart.
    pub(crate) fn bytes(&mut self, label: &str, value: &[u8]) {
        for part in [label.as_bytes(), value] {
            self.0.write(&(part.len() as u64).to_le_bytes());
            self.0.write(part);
        }
    }

    pub(crate) fn text(&mut self, label: &str, value: &str) {
        self.bytes(label, value.as_bytes());
    }

    /// Every file under `path` (itself, if it is a file), in a fixed order,
    /// by its path relative to `base` (when inside it) and its contents. A
    /// path that does not exist adds only its name.
    pub(crate) fn tree(&mut self, base: &Path, path: &Path) -> std::io::Result<()> {
        let name = path.strip_prefix(base).unwrap_or(path);
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.text("missing", &name.to_string_lossy());
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if meta.is_dir() {
            let mut children: Vec<PathBuf> = std::fs::read_dir(path)?
                .map(|entry| entry.map(|e| e.path()))
                .collect::<Result<_, _>>()?;
            children.sort();
            for child in children {
                self.tree(base, &child)?;
            }
        } else {
            self.text("file", &name.to_string_lossy());
            self.bytes("contents", &std::fs::read(path)?);
        }
        Ok(())
    }

    /// The key as 32 hex digits.
    pub(crate) fn finish(&self) -> String {
        format!("{:032x}", self.0.finish_128())
    }
}

/// What an entry holds: the modules (with paths inside the entry) and the
/// warnings the build that made it printed (a failed `ptxas`), replayed on
/// every hit.
#[derive(Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) modules: Vec<PtxModule>,
    pub(crate) warnings: Vec<String>,
}

impl Cache {
    /// The cache for `package`, or `None` when it is turned off or no target
    /// directory is found above `out_dir`.
    pub(crate) fn locate(package: &str, out_dir: &Path) -> Option<Cache> {
        let root = match std::env::var_os("WARPFORGE_PTX_CACHE") {
            Some(v) if v == "0" || v == "off" => return None,
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => target_dir_of(out_dir)?.join("warpforge-ptx"),
        };
        Some(Cache {
            root: std::path::absolute(&root).unwrap_or(root),
            package: package.to_owned(),
        })
    }

    /// The nested cargo's target directory for `arch` on worker `worker`
    /// (see [`nested_dir_name`]).
    pub(crate) fn nested_target_dir(&self, arch: Arch, worker: usize) -> PathBuf {
        self.root.join(nested_dir_name(arch, worker))
    }

    fn entry_dir(&self, key: &str) -> PathBuf {
        self.root.join(&self.package).join(key)
    }

    /// The entry stored under `key`, with its files copied into `out_dir`
    /// (the returned modules name the copies), or `None` on a miss or a
    /// damaged entry.
    pub(crate) fn fetch(&self, key: &str, out_dir: &Path) -> Option<Entry> {
        let dir = self.entry_dir(key);
        let listing = std::fs::read_to_string(dir.join("entry.txt")).ok()?;
        let entry = parse_entry(&listing, &dir)?;
        let copy = |from: &Path| -> Option<PathBuf> {
            let to = out_dir.join(from.file_name()?);
            let bytes = std::fs::read(from).ok()?;
            if std::fs::read(&to).ok().as_deref() != Some(&bytes[..]) {
                std::fs::create_dir_all(out_dir).ok()?;
                std::fs::write(&to, bytes).ok()?;
            }
            Some(to)
        };
        let mut modules = Vec::new();
        for m in entry.modules {
            let mut cubins = Vec::new();
            for c in m.cubins {
                cubins.push(CubinFile {
                    path: copy(&c.path)?,
                    ..c
                });
            }
            modules.push(PtxModule {
                arch: m.arch,
                path: copy(&m.path)?,
                cubins,
            });
        }
        touch(&dir);
        Some(Entry {
            modules,
            warnings: entry.warnings,
        })
    }

    /// Stores `modules` (their files) and `warnings` under `key`, then drops
    /// all but the [`KEEP`] most recently used entries of the package. Errors
    /// are returned as text for a cargo warning: a cache that cannot be
    /// written only costs the next build its time.
    pub(crate) fn store(
        &self,
        key: &str,
        modules: &[PtxModule],
        warnings: &[String],
    ) -> Result<(), String> {
        let dir = self.entry_dir(key);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let scratch = self
            .root
            .join(&self.package)
            .join(format!(".{key}.partial-{}-{nanos}", std::process::id()));
        let result = (|| {
            std::fs::create_dir_all(&scratch)?;
            let mut listing = String::new();
            let put = |path: &Path| -> std::io::Result<String> {
                let name = path
                    .file_name()
                    .ok_or_else(|| std::io::Error::other("a module file has no name"))?
                    .to_string_lossy()
                    .into_owned();
                std::fs::copy(path, scratch.join(&name))?;
                Ok(name)
            };
            for m in modules {
                listing.push_str(&format!("ptx\t{}\t{}\n", m.arch.name(), put(&m.path)?));
                for c in &m.cubins {
                    listing.push_str(&format!(
                        "cubin\t{}\t{}\t{}\t{}\n",
                        m.arch.name(),
                        c.sm,
                        c.arch_suffix,
                        put(&c.path)?
                    ));
                }
            }
            for w in warnings {
                listing.push_str(&format!("warning\t{}\n", w.replace(['\n', '\t'], " ")));
            }
            std::fs::write(scratch.join("entry.txt"), listing)?;
            match std::fs::rename(&scratch, &dir) {
                Ok(()) => Ok(()),
                // Another build stored the same key first: its entry is as good.
                Err(_) if dir.join("entry.txt").is_file() => {
                    std::fs::remove_dir_all(&scratch)?;
                    Ok(())
                }
                Err(e) => Err(e),
            }
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&scratch);
        }
        result.map_err(|e| {
            format!(
                "warpforge: could not store `{}`'s PTX in the cache at {}: {e}",
                self.package,
                dir.display()
            )
        })?;
        touch(&dir);
        self.evict(&dir);
        Ok(())
    }

    /// Removes all but the [`KEEP`] most recently used entries (and scratch
    /// directories over a day old); `keep` is never removed.
    fn evict(&self, keep: &Path) {
        let Ok(read) = std::fs::read_dir(self.root.join(&self.package)) else {
            return;
        };
        let mut entries: Vec<(SystemTime, PathBuf)> = Vec::new();
        for path in read.flatten().map(|e| e.path()) {
            let used = used(&path);
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with('.') {
                let stale = used.elapsed().is_ok_and(|age| age.as_secs() > 24 * 60 * 60);
                if stale {
                    let _ = std::fs::remove_dir_all(&path);
                }
            } else if path != keep {
                entries.push((used, path));
            }
        }
        entries.sort_by_key(|(used, _)| std::cmp::Reverse(*used));
        for (_, path) in entries.into_iter().skip(KEEP.saturating_sub(1)) {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// The name of the nested cargo's target directory for `arch` on worker
/// `worker`: `nvptx-<arch>` for worker 0 (so a single build keeps one
/// layout), `nvptx-<arch>-w<N>` for worker N. Workers building at once need
/// directories of their own: cargo locks a target directory for a build.
pub(crate) fn nested_dir_name(arch: Arch, worker: usize) -> String {
    match worker {
        0 => format!("nvptx-{}", arch.name()),
        n => format!("nvptx-{}-w{n}", arch.name()),
    }
}

/// The target directory of the build whose build script writes to `out_dir`
/// (`<target>[/<triple>]/<profile>/build/<package>-<hash>/out`), or of the
/// outermost target directory around that one: trybuild's projects build in
/// `target/tests/trybuild`, and share the workspace's cache. A target
/// directory is known by the files cargo keeps at its root
/// (`.rustc_info.json`, `CACHEDIR.TAG`). `None` for another layout.
fn target_dir_of(out_dir: &Path) -> Option<PathBuf> {
    let mut up = out_dir.ancestors();
    let (_, _, build, profile) = (up.next()?, up.next()?, up.next()?, up.next()?);
    if build.file_name()? != "build" {
        return None;
    }
    let mut root = profile.parent()?;
    // Cargo sets TARGET for build scripts; the triple is a directory level
    // only when the build named `--target`.
    if std::env::var_os("TARGET").is_some_and(|t| root.file_name() == Some(t.as_os_str())) {
        root = root.parent()?;
    }
    let outer = root
        .ancestors()
        .skip(1)
        .filter(|dir| dir.join(".rustc_info.json").is_file() || dir.join("CACHEDIR.TAG").is_file())
        .last();
    Some(outer.unwrap_or(root).to_path_buf())
}

/// When an entry was last used: the modification time of its `used` file.
fn used(dir: &Path) -> SystemTime {
    std::fs::metadata(dir.join("used"))
        .or_else(|_| std::fs::metadata(dir))
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

fn touch(dir: &Path) {
    let _ = std::fs::write(dir.join("used"), b"");
}

/// Reads `entry.txt` (paths relative to `dir`); `None` if any line is not
/// understood or names a missing file.
fn parse_entry(listing: &str, dir: &Path) -> Option<Entry> {
    let arch = |name: &str| Arch::ALL.into_iter().find(|a| a.name() == name);
    let file = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
    let mut modules: Vec<PtxModule> = Vec::new();
    let mut warnings = Vec::new();
    for line in listing.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields[..] {
            ["ptx", a, name] => modules.push(PtxModule {
                arch: arch(a)?,
                path: file(name)?,
                cubins: Vec::new(),
            }),
            ["cubin", a, sm, suffix, name] => {
                let arch_suffix = match suffix {
                    "" => "",
                    "a" => "a",
                    _ => return None,
                };
                let module = modules.iter_mut().find(|m| m.arch.name() == a)?;
                module.cubins.push(CubinFile {
                    sm: sm.parse().ok()?,
                    arch_suffix,
                    path: file(name)?,
                });
            }
            ["warning", text] => warnings.push(text.to_owned()),
            _ => return None,
        }
    }
    (!modules.is_empty()).then_some(Entry { modules, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "warpforge-cache-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn cache(root: &Path) -> Cache {
        Cache {
            root: root.to_path_buf(),
            package: "k".to_owned(),
        }
    }

    /// A built module set in `dir`: one PTX module with one cubin.
    fn built(dir: &Path, ptx: &str) -> Vec<PtxModule> {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("k.sm_80.ptx"), ptx).unwrap();
        std::fs::write(dir.join("k.sm_80.sm_86.cubin.zst"), b"zstd").unwrap();
        vec![PtxModule {
            arch: Arch::Sm80,
            path: dir.join("k.sm_80.ptx"),
            cubins: vec![CubinFile {
                sm: 86,
                arch_suffix: "",
                path: dir.join("k.sm_80.sm_86.cubin.zst"),
            }],
        }]
    }

    #[test]
    fn a_stored_entry_comes_back_as_copies_in_the_out_dir_with_its_warnings() {
        let dir = scratch("roundtrip");
        let cache = cache(&dir.join("cache"));
        let modules = built(&dir.join("build"), ".target sm_80");
        assert_eq!(cache.fetch("k1", &dir.join("out")), None);
        let warnings = vec!["no sm_90 cubin: ptxas failed".to_owned()];
        cache.store("k1", &modules, &warnings).unwrap();
        // The builder's own files may go; the entry has its own copies.
        std::fs::remove_dir_all(dir.join("build")).unwrap();
        let out = dir.join("out");
        let entry = cache.fetch("k1", &out).unwrap();
        assert_eq!(entry.warnings, warnings);
        assert_eq!(entry.modules.len(), 1);
        let m = &entry.modules[0];
        assert_eq!(m.arch, Arch::Sm80);
        assert_eq!(m.path, out.join("k.sm_80.ptx"));
        assert_eq!(std::fs::read_to_string(&m.path).unwrap(), ".target sm_80");
        assert_eq!(m.cubins.len(), 1);
        assert_eq!((m.cubins[0].sm, m.cubins[0].arch_suffix), (86, ""));
        assert_eq!(std::fs::read(&m.cubins[0].path).unwrap(), b"zstd");
        assert_eq!(cache.fetch("k2", &out), None, "another key is a miss");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_damaged_entry_is_a_miss() {
        let dir = scratch("damaged");
        let cache = cache(&dir.join("cache"));
        cache
            .store("k1", &built(&dir.join("build"), "ptx"), &[])
            .unwrap();
        std::fs::remove_file(cache.entry_dir("k1").join("k.sm_80.ptx")).unwrap();
        assert_eq!(cache.fetch("k1", &dir.join("out")), None);
        std::fs::write(cache.entry_dir("k1").join("entry.txt"), "what\n").unwrap();
        assert_eq!(cache.fetch("k1", &dir.join("out")), None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn only_the_most_recently_used_entries_are_kept() {
        let dir = scratch("evict");
        let cache = cache(&dir.join("cache"));
        let modules = built(&dir.join("build"), "ptx");
        for i in 0..KEEP + 2 {
            cache.store(&format!("k{i}"), &modules, &[]).unwrap();
            // Distinct modification times, oldest first.
            let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(cache.entry_dir(&format!("k{i}")).join("used"))
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        cache.store("newest", &modules, &[]).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.join("cache/k"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // The newest entry and the KEEP - 1 most recently used of the others.
        let mut expected: Vec<String> = (KEEP + 2 - (KEEP - 1)..KEEP + 2)
            .map(|i| format!("k{i}"))
            .chain(["newest".to_owned()])
            .collect();
        expected.sort();
        assert_eq!(left, expected);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_target_directory_is_found_from_the_out_dir_and_trybuild_shares_the_outer_one() {
        let dir = scratch("layout");
        let target = dir.join("target");
        std::fs::create_dir_all(&target).unwrap();
        let out = target.join("debug/build/k-0123/out");
        assert_eq!(target_dir_of(&out), Some(target.clone()));
        assert_eq!(
            target_dir_of(&target.join("release/build/k-0123/out")),
            Some(target.clone())
        );
        // A target directory with cargo's files at its root, and trybuild's inside it.
        std::fs::write(target.join(".rustc_info.json"), "{}").unwrap();
        let nested = target.join("tests/trybuild/x86_64-unknown-linux-gnu/debug/build/k-1/out");
        assert_eq!(target_dir_of(&nested), Some(target.clone()));
        assert_eq!(target_dir_of(&dir.join("elsewhere/out")), None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_key_changes_with_any_file_s_name_or_contents() {
        let dir = scratch("key");
        std::fs::create_dir_all(dir.join("src/deep")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "a").unwrap();
        std::fs::write(dir.join("src/deep/m.rs"), "b").unwrap();
        let key = || {
            let mut k = Key::new("k");
            k.tree(&dir, &dir.join("src")).unwrap();
            k.finish()
        };
        let first = key();
        assert_eq!(first, key(), "the same tree, the same key");
        std::fs::write(dir.join("src/deep/m.rs"), "c").unwrap();
        let second = key();
        assert_ne!(first, second);
        std::fs::rename(dir.join("src/deep/m.rs"), dir.join("src/deep/n.rs")).unwrap();
        assert_ne!(second, key());
        let mut a = Key::new("k");
        a.text("x", "ab");
        a.text("y", "c");
        let mut b = Key::new("k");
        b.text("x", "a");
        b.text("y", "bc");
        assert_ne!(a.finish(), b.finish());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
