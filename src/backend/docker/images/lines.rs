//! Dockerfile lines that more than one tier writes: LABEL lines, and the
//! offline ENV line of an instance image's languages. A leaf below the
//! tiers' plans, so that no two of them import each other.

use std::collections::BTreeMap;

use crate::toolchain::Language;

/// LABEL lines for a Dockerfile.
pub(crate) fn label_lines(labels: &BTreeMap<String, String>) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let items: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("    \"{}\"=\"{}\"", esc(k), esc(v)))
        .collect();
    format!("LABEL \\\n{}", items.join(" \\\n"))
}

/// A Dockerfile ENV value, quoted when it holds what ENV would split on.
pub(crate) fn env_value(v: &str) -> String {
    if v.is_empty() || v.contains([' ', '"', '\\', '$']) {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        v.to_string()
    }
}

/// The environment the eval runs with for these languages: offline
/// (`CARGO_NET_OFFLINE`, `GOPROXY=off`, …), as an instance image's last
/// `ENV` line; empty for none.
pub fn offline_env_line(languages: impl Iterator<Item = Language>) -> String {
    let vars: Vec<String> = languages
        .flat_map(Language::offline_env)
        .map(|(k, v)| format!("{k}={}", env_value(&v)))
        .collect();
    match vars.is_empty() {
        true => String::new(),
        false => format!("ENV {}\n", vars.join(" ")),
    }
}
