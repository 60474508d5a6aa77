//! Embeds images/specs/*.yaml, the files specs write into repositories
//! (images/fixtures/*) and harness-scripts/ templates so the binary works
//! from any directory.

use std::fmt::Write;
use std::path::Path;

fn main() {
    embed(
        Path::new("images/specs"),
        |n| n.ends_with(".yaml") || n.ends_with(".yml"),
        "builtin_specs.rs",
    );
    embed(
        Path::new("images/fixtures"),
        |_| true,
        "builtin_fixtures.rs",
    );
}

/// `&[(name, include_str!(path))]` of the files in `dir` that `want`, sorted.
fn embed(dir: &Path, want: fn(&str) -> bool, out_name: &str) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| want(n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut out = String::from("&[\n");
    for n in &names {
        let abs = std::fs::canonicalize(dir.join(n)).expect("spec path");
        println!("cargo:rerun-if-changed={}", abs.display());
        writeln!(
            out,
            "    ({n:?}, include_str!({:?})),",
            abs.display().to_string()
        )
        .unwrap();
    }
    out.push(']');
    let out_dir = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(Path::new(&out_dir).join(out_name), out).expect("write the embedded list");
}
