//! Paths in diff headers as git writes them: quoted or not, with or
//! without a prefix, on `diff --git`, `---`/`+++` and extended header lines.

/// Path on a `---`/`+++` line; `None` for `/dev/null`. GNU diff appends a tab
/// and a timestamp, which are dropped.
pub(crate) fn dash_path(rest: &str) -> Result<Option<String>, &'static str> {
    let p = if rest.starts_with('"') {
        let (p, _) = unquote(rest).ok_or("bad quoted path")?;
        p
    } else {
        let p = rest.split('\t').next().unwrap_or("").trim_end();
        p.to_string()
    };
    if p.is_empty() {
        return Err("empty path");
    }
    if p == "/dev/null" {
        return Ok(None);
    }
    Ok(Some(p))
}

/// Path on a `rename from`/`copy to` line: unprefixed, maybe quoted.
pub(crate) fn header_path(val: &str) -> Result<String, &'static str> {
    let p = if val.starts_with('"') {
        unquote(val).ok_or("bad quoted path")?.0
    } else {
        val.to_string()
    };
    if p.is_empty() {
        return Err("empty path");
    }
    Ok(p)
}

/// Splits the text after `diff --git ` into its two paths. Unquoted names can
/// hold spaces, so prefer the split whose halves name the same file.
pub(crate) fn split_git_line(rest: &str) -> Option<(String, String)> {
    let rest = rest.trim_end();
    if rest.starts_with('"') {
        let (a, tail) = unquote(rest)?;
        let tail = tail.trim_start();
        let b = if tail.starts_with('"') {
            unquote(tail)?.0
        } else {
            tail.to_string()
        };
        return (!b.is_empty()).then_some((a, b));
    }
    if let Some(k) = rest.find(" \"") {
        let b = unquote(&rest[k + 1..])?.0;
        return Some((rest[..k].to_string(), b));
    }
    let spaces: Vec<usize> = rest.match_indices(' ').map(|(k, _)| k).collect();
    let halves = |k: usize| (&rest[..k], &rest[k + 1..]);
    if let Some(&k) = spaces.iter().find(|&&k| {
        let (a, b) = halves(k);
        !a.is_empty() && (a == b || strip_first(a) == strip_first(b))
    }) {
        let (a, b) = halves(k);
        return Some((a.to_string(), b.to_string()));
    }
    if let Some(&k) = spaces
        .iter()
        .find(|&&k| rest[..k].starts_with("a/") && rest[k + 1..].starts_with("b/"))
    {
        let (a, b) = halves(k);
        return Some((a.to_string(), b.to_string()));
    }
    let &k = spaces.first()?;
    let (a, b) = halves(k);
    (!a.is_empty() && !b.is_empty()).then(|| (a.to_string(), b.to_string()))
}

/// True when the pair carries one leading directory of prefix on each side
/// (git's `a/` `b/`, or custom ones like `i/` `w/` or `orig/` `new/`).
pub(crate) fn detect_prefix(o: Option<&str>, n: Option<&str>) -> bool {
    match (o, n) {
        (None, None) => false,
        (Some(o), None) => o.starts_with("a/"),
        (None, Some(n)) => n.starts_with("b/"),
        (Some(o), Some(n)) => {
            if o.starts_with("a/") && n.starts_with("b/") {
                return true;
            }
            match (o.split_once('/'), n.split_once('/')) {
                (Some((po, ro)), Some((pn, rn))) => {
                    !po.is_empty() && !pn.is_empty() && po != pn && ro == rn && !ro.is_empty()
                }
                _ => false,
            }
        }
    }
}

/// Removes one leading path component, as `patch -p1` and libgit2 do.
pub(crate) fn strip_first(p: &str) -> String {
    match p.split_once('/') {
        Some((_, rest)) => rest.to_string(),
        None => p.to_string(),
    }
}

/// Reads a C-style quoted string as git writes it; returns it and the rest.
pub(crate) fn unquote(s: &str) -> Option<(String, &str)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let text = String::from_utf8(out).ok()?;
                return Some((text, &s[i + 1..]));
            }
            b'\\' => {
                let c = *b.get(i + 1)?;
                i += 2;
                let v = match c {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'a' => 7,
                    b'b' => 8,
                    b'f' => 12,
                    b'v' => 11,
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'0'..=b'3' => {
                        let d1 = *b.get(i)?;
                        let d2 = *b.get(i + 1)?;
                        if !(b'0'..=b'7').contains(&d1) || !(b'0'..=b'7').contains(&d2) {
                            return None;
                        }
                        i += 2;
                        (c - b'0') * 64 + (d1 - b'0') * 8 + (d2 - b'0')
                    }
                    _ => return None,
                };
                out.push(v);
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

/// Quotes a path the way git does when it holds bytes a reader could split
/// on or misread; spaces are quoted too so libgit2 splits `diff --git` right.
pub(crate) fn quote(p: &str) -> String {
    let needs = p
        .bytes()
        .any(|c| c < 0x21 || c == b'"' || c == b'\\' || c >= 0x7f);
    if !needs {
        return p.to_string();
    }
    let mut out = String::from("\"");
    for c in p.bytes() {
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            b' ' => out.push(' '),
            c if !(0x20..0x7f).contains(&c) => out.push_str(&format!("\\{c:03o}")),
            c => out.push(c as char),
        }
    }
    out.push('"');
    out
}
