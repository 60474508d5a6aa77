//! Embeds images/specs/*.yaml and harness-scripts/ templates so the binary
//! works from any directory.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new("images/specs");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
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
    std::fs::write(Path::new(&out_dir).join("builtin_specs.rs"), out)
        .expect("write builtin_specs.rs");
}
