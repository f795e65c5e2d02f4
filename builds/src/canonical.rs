//! A build's identity: the sha256 of the bytes that travel. An `.apk` is
//! its own file. An `.app` travels as a canonical tar: its files and links
//! only (a directory is implied by what it holds), sorted by path, each
//! under the bundle's own name (`Shop.app/Info.plist`), times, owners and
//! names zeroed, modes 0644 or 0755 (executable), links kept as links; so
//! that the same bundle has one identity whether it comes as a directory
//! or zipped, on any machine. Nothing outside the bundle is taken: an
//! absolute path, a `..`, or a link that leaves it is refused.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::BuildError;

/// The sha256 (hex) and size of a file, read in pieces.
pub fn file_digest(path: &Path) -> Result<(String, u64), BuildError> {
    let io = |source| BuildError::Io { path: path.into(), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut sink = Hashing::default();
    std::io::copy(&mut file, &mut sink).map_err(io)?;
    Ok(sink.finish())
}

/// Writes what it is given into a sha256 and counts it: the canonical
/// archive is hashed as it is made, never held.
#[derive(Default)]
pub struct Hashing {
    hasher: Sha256,
    bytes: u64,
}

impl Hashing {
    pub fn finish(self) -> (String, u64) {
        (hex::encode(self.hasher.finalize()), self.bytes)
    }
}

impl Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        self.bytes += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One entry of the canonical archive.
enum Entry {
    File { executable: bool },
    Link { target: String },
}

/// The canonical archive of the `.app` directory at `path`, written to
/// `out` (a [`Hashing`] for its identity, a file or a stream to send it).
pub fn write_dir<W: Write>(path: &Path, out: W) -> Result<W, BuildError> {
    let bundle = bundle_name(path)?;
    let mut entries: Vec<(String, PathBuf, Entry)> = Vec::new();
    walk(path, path, &mut entries)?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut tar = tar::Builder::new(out);
    for (relative, full, entry) in entries {
        let name = format!("{bundle}/{relative}");
        match entry {
            Entry::File { executable } => {
                let io = |source| BuildError::Io { path: full.clone(), source };
                let file = std::fs::File::open(&full).map_err(io)?;
                let size = file.metadata().map_err(io)?.len();
                append_file(&mut tar, &name, size, executable, file).map_err(io)?;
            }
            Entry::Link { target } => {
                check_link(path, &relative, &target)?;
                append_link(&mut tar, &name, &target).map_err(|source| BuildError::Io { path: full, source })?;
            }
        }
    }
    tar.into_inner().map_err(|source| BuildError::Io { path: path.into(), source })
}

/// The identity and size of the `.app` directory at `path`.
pub fn dir_digest(path: &Path) -> Result<(String, u64), BuildError> {
    Ok(write_dir(path, Hashing::default())?.finish())
}

fn walk(root: &Path, dir: &Path, entries: &mut Vec<(String, PathBuf, Entry)>) -> Result<(), BuildError> {
    let io = |source| BuildError::Io { path: dir.into(), source };
    for item in std::fs::read_dir(dir).map_err(io)? {
        let item = item.map_err(io)?;
        let full = item.path();
        let kind = item.file_type().map_err(|source| BuildError::Io { path: full.clone(), source })?;
        let relative = full
            .strip_prefix(root)
            .map_err(|_| BuildError::BadArchive { path: full.clone(), why: "outside the bundle".into() })?
            .to_str()
            .ok_or_else(|| BuildError::BadArchive { path: full.clone(), why: "a name that is not UTF-8".into() })?
            .to_owned();
        if kind.is_dir() {
            walk(root, &full, entries)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&full).map_err(|source| BuildError::Io { path: full.clone(), source })?;
            let target = target.to_str().unwrap_or_default().to_owned();
            entries.push((relative, full, Entry::Link { target }));
        } else if kind.is_file() {
            let executable =
                executable(&item.metadata().map_err(|source| BuildError::Io { path: full.clone(), source })?);
            entries.push((relative, full, Entry::File { executable }));
        } else {
            return Err(BuildError::BadArchive { path: full, why: "neither a file, a folder nor a link".into() });
        }
    }
    Ok(())
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    false
}

fn bundle_name(path: &Path) -> Result<String, BuildError> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| BuildError::NotABuild { path: path.into(), why: "a bundle without a name".into() })
}

/// A link must stay inside the bundle: relative, and never above its root.
pub(crate) fn check_link(path: &Path, relative: &str, target: &str) -> Result<(), BuildError> {
    let refuse = || BuildError::BadArchive {
        path: path.into(),
        why: format!("{relative} links to {target}, outside the bundle"),
    };
    if target.is_empty() || Path::new(target).is_absolute() {
        return Err(refuse());
    }
    let mut depth: i64 = Path::new(relative).components().count() as i64 - 1;
    for component in Path::new(target).components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return Err(refuse()),
        }
        if depth < 0 {
            return Err(refuse());
        }
    }
    Ok(())
}

fn header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

fn append_file<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    size: u64,
    executable: bool,
    data: impl Read,
) -> std::io::Result<()> {
    let mut header = header(tar::EntryType::Regular, size, if executable { 0o755 } else { 0o644 });
    tar.append_data(&mut header, name, data)
}

fn append_link<W: Write>(tar: &mut tar::Builder<W>, name: &str, target: &str) -> std::io::Result<()> {
    let mut header = header(tar::EntryType::Symlink, 0, 0o755);
    tar.append_link(&mut header, name, target)
}

/// The one `.app` a zip holds: the prefix of its entries (`Shop.app/`,
/// or `Payload/Shop.app/`). An entry that climbs out (`..`, an absolute
/// path) refuses the whole zip.
pub(crate) fn bundle_in_zip<R: Read + std::io::Seek>(
    path: &Path,
    zip: &zip::ZipArchive<R>,
) -> Result<String, BuildError> {
    let mut bundles: Vec<String> = Vec::new();
    for name in zip.file_names() {
        check_zip_name(path, name)?;
        let mut prefix = String::new();
        for part in name.split('/') {
            prefix.push_str(part);
            prefix.push('/');
            if part.ends_with(".app") {
                if !bundles.contains(&prefix) {
                    bundles.push(prefix.clone());
                }
                break;
            }
        }
    }
    match bundles.len() {
        1 => Ok(bundles.remove(0)),
        0 => Err(BuildError::NotABuild { path: path.into(), why: "the zip holds no .app".into() }),
        n => Err(BuildError::NotABuild {
            path: path.into(),
            why: format!("the zip holds {n} .app bundles ({}); zip the one to test", bundles.join(", ")),
        }),
    }
}

fn check_zip_name(path: &Path, name: &str) -> Result<(), BuildError> {
    let climbs = name.starts_with('/') || name.contains('\\') || name.split('/').any(|part| part == "..");
    if climbs {
        return Err(BuildError::BadArchive {
            path: path.into(),
            why: format!("the entry {name:?} climbs out of the archive"),
        });
    }
    Ok(())
}

/// The canonical archive of the bundle at `prefix` in a zip, written to `out`.
pub fn write_zip<R: Read + std::io::Seek, W: Write>(
    path: &Path,
    zip: &mut zip::ZipArchive<R>,
    prefix: &str,
    out: W,
) -> Result<W, BuildError> {
    let bundle = prefix.trim_end_matches('/').rsplit('/').next().unwrap_or_default().to_owned();
    let bad = |why: String| BuildError::BadArchive { path: path.into(), why };
    let mut names: Vec<(String, usize)> = (0..zip.len())
        .filter_map(|i| {
            let name = zip.name_for_index(i)?;
            let relative = name.strip_prefix(prefix)?;
            (!relative.is_empty() && !name.ends_with('/')).then(|| (relative.to_owned(), i))
        })
        .collect();
    names.sort();
    let mut tar = tar::Builder::new(out);
    for (relative, index) in names {
        let mut entry = zip.by_index(index).map_err(|e| bad(format!("{relative}: {e}")))?;
        let name = format!("{bundle}/{relative}");
        let mode = entry.unix_mode().unwrap_or(0o644);
        let io = |e: std::io::Error| bad(format!("{relative}: {e}"));
        if mode & 0o170000 == 0o120000 {
            let mut target = String::new();
            entry.read_to_string(&mut target).map_err(io)?;
            check_link(path, &relative, &target)?;
            append_link(&mut tar, &name, &target).map_err(io)?;
        } else {
            let size = entry.size();
            append_file(&mut tar, &name, size, mode & 0o111 != 0, &mut entry).map_err(io)?;
        }
    }
    tar.into_inner().map_err(|source| BuildError::Io { path: path.into(), source })
}

/// The canonical archive of the one `.app` in the zip at `path`.
pub fn write_zipped<W: Write>(path: &Path, out: W) -> Result<W, BuildError> {
    let file = std::fs::File::open(path).map_err(|source| BuildError::Io { path: path.into(), source })?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| BuildError::BadArchive { path: path.into(), why: format!("not a readable zip: {e}") })?;
    let bundle = bundle_in_zip(path, &zip)?;
    write_zip(path, &mut zip, &bundle, out)
}

pub(crate) fn zip_digest<R: Read + std::io::Seek>(
    path: &Path,
    zip: &mut zip::ZipArchive<R>,
    prefix: &str,
) -> Result<(String, u64), BuildError> {
    Ok(write_zip(path, zip, prefix, Hashing::default())?.finish())
}
