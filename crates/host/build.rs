//! Packs the board crates' sources into the `xrunbench` binary, so that an
//! installed one builds xrun-trial, xrun-player and xrun-hackbench for this
//! machine after the checkout it came from is gone (see `carried.rs`).
//!
//! Carried: the crates the board binaries are built from and those their
//! manifests name (cargo reads a member's dev-dependencies too), the lock
//! file, and the workspace manifest narrowed to them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The workspace members carried.
const CRATES: [&str; 8] = [
    "crates/schema",
    "crates/wav",
    "crates/player",
    "crates/hackbench",
    "crates/trial",
    "crates/programs",
    "crates/paths",
    "crates/test-support",
];

fn main() {
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir).join("../..");
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for c in CRATES {
        println!("cargo:rerun-if-changed={}", root.join(c).display());
        walk(&root, &root.join(c), &mut files);
    }
    files.sort();
    let mut out = String::from("/// The carried files: (path in the workspace, bytes).\n");
    out.push_str("pub const FILES: &[(&str, &[u8])] = &[\n");
    let mut hash = Sha256::new();
    for (name, path) in &files {
        let bytes = std::fs::read(path).expect("a carried file reads");
        hash.update(name.as_bytes());
        hash.update(&bytes);
        writeln!(
            out,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let manifest = narrowed_manifest(&root.join("Cargo.toml"));
    hash.update(manifest.as_bytes());
    writeln!(
        out,
        "/// The workspace manifest, narrowed to the carried crates."
    )
    .unwrap();
    writeln!(out, "pub const MANIFEST: &str = {manifest:?};").unwrap();
    writeln!(out, "/// The lock file.").unwrap();
    writeln!(
        out,
        "pub const LOCK: &str = include_str!({:?});",
        root.join("Cargo.lock")
            .canonicalize()
            .unwrap()
            .display()
            .to_string()
    )
    .unwrap();
    writeln!(
        out,
        "/// A digest of all of it: the directory it is unpacked into."
    )
    .unwrap();
    let digest: String = hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    writeln!(out, "pub const DIGEST: &str = {digest:?};").unwrap();
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("carried.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}

/// Every file under `dir` but build output, as (path from `root`, path).
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a carried crate reads")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.file_name().is_some_and(|n| n == "target") {
            continue;
        }
        if p.is_dir() {
            walk(root, &p, out);
        } else if p.is_file() {
            let abs = p.canonicalize().expect("a carried file's path");
            let rel = p.strip_prefix(root).expect("under the root");
            out.push((rel.to_string_lossy().into_owned(), abs));
        }
    }
}

/// The workspace manifest with only the carried members, and only the
/// workspace dependencies that are not other members.
fn narrowed_manifest(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("the workspace manifest reads");
    let mut doc: toml::Table = text.parse().expect("the workspace manifest parses");
    let ws = doc
        .get_mut("workspace")
        .and_then(toml::Value::as_table_mut)
        .expect("a [workspace] table");
    ws.insert(
        "members".into(),
        toml::Value::Array(CRATES.iter().map(|c| toml::Value::from(*c)).collect()),
    );
    ws.remove("exclude");
    if let Some(deps) = ws
        .get_mut("dependencies")
        .and_then(toml::Value::as_table_mut)
    {
        deps.retain(|_, v| match v.get("path").and_then(toml::Value::as_str) {
            Some(p) => CRATES.contains(&p),
            None => true,
        });
    }
    toml::to_string(&doc).expect("a TOML table writes")
}
