//! The part of Python's `xml.etree.ElementTree.fromstring` (expat, with
//! namespace processing) that `parse_log_doctest` relies on: elements and
//! their attributes, and an error wherever expat finds the text not
//! well-formed, since the reference then raises.
//!
//! Kept: the five predefined entities and character references (any other
//! entity is undefined: there is no DTD before the root here), attribute
//! value normalisation (a literal tab, CR, LF or CRLF becomes one space),
//! XML 1.0 characters only, `]]>` and `--` rules, duplicate attributes,
//! matching end tags, namespace prefixes (`{uri}local` tags, unbound
//! prefixes are errors). Text content is checked, not kept.

use std::collections::HashSet;
use std::fmt;

/// One element: its tag (`{uri}local` when namespaced), attributes in
/// document order, child elements.
pub(crate) struct Element {
    pub tag: String,
    attrs: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    /// `Element.get(name)`.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every element below this one in document order (what `.//X` walks).
    pub fn descendants(&self) -> impl Iterator<Item = &Element> {
        let mut stack: Vec<&Element> = self.children.iter().rev().collect();
        std::iter::from_fn(move || {
            let e = stack.pop()?;
            stack.extend(e.children.iter().rev());
            Some(e)
        })
    }
}

impl Drop for Element {
    // The derived drop recurses once per level: flatten instead.
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.children);
        while let Some(mut e) = stack.pop() {
            stack.append(&mut e.children);
        }
    }
}

/// Why the text is not well-formed, and where (a byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct XmlError {
    pub what: &'static str,
    pub offset: usize,
}

impl fmt::Display for XmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

/// Parse a whole document: one root element, with only whitespace,
/// comments and processing instructions around it.
pub(crate) fn parse(text: &str) -> Result<Element, XmlError> {
    let mut p = XmlParser {
        s: text,
        i: 0,
        bindings: Vec::new(),
        scopes: Vec::new(),
    };
    if p.s.starts_with("<?xml") && p.s[5..].starts_with(is_space) {
        p.skip_past("?>", "unclosed XML declaration")?;
    }
    p.misc()?;
    if !p.rest().starts_with('<') {
        return Err(p.err(if p.rest().is_empty() {
            "no element found"
        } else {
            "syntax error"
        }));
    }
    let root = p.root()?;
    p.misc()?;
    if !p.rest().is_empty() {
        return Err(p.err("junk after document element"));
    }
    Ok(root)
}

struct XmlParser<'a> {
    s: &'a str,
    i: usize,
    /// Namespace bindings in force, innermost last: (prefix, uri); "" is
    /// the default namespace. Flat, so that a lookup costs the bindings
    /// declared, not the depth.
    bindings: Vec<(String, String)>,
    /// How many of `bindings` each open element declared.
    scopes: Vec<usize>,
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// XML 1.0's `Char`.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic()
        || matches!(c, '_' | ':' | '\u{c0}'..='\u{d6}' | '\u{d8}'..='\u{f6}' | '\u{f8}'..='\u{2ff}'
            | '\u{370}'..='\u{37d}' | '\u{37f}'..='\u{1fff}' | '\u{200c}'..='\u{200d}'
            | '\u{2070}'..='\u{218f}' | '\u{2c00}'..='\u{2fef}' | '\u{3001}'..='\u{d7ff}'
            | '\u{f900}'..='\u{fdcf}' | '\u{fdf0}'..='\u{fffd}' | '\u{10000}'..='\u{effff}')
}

fn is_name_char(c: char) -> bool {
    is_name_start(c)
        || c.is_ascii_digit()
        || matches!(c, '-' | '.' | '\u{b7}' | '\u{300}'..='\u{36f}' | '\u{203f}'..='\u{2040}')
}

impl<'a> XmlParser<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }

    fn err(&self, what: &'static str) -> XmlError {
        XmlError {
            what,
            offset: self.i,
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        let ok = self.rest().starts_with(lit);
        if ok {
            self.i += lit.len();
        }
        ok
    }

    fn skip_space(&mut self) -> bool {
        let before = self.i;
        self.i = self.s.len() - self.rest().trim_start_matches(is_space).len();
        self.i > before
    }

    /// Past the next `end`, every character in between a legal one.
    fn skip_past(&mut self, end: &str, unclosed: &'static str) -> Result<&'a str, XmlError> {
        let Some(n) = self.rest().find(end) else {
            return Err(self.err(unclosed));
        };
        let body = &self.rest()[..n];
        if let Some(bad) = body.find(|c| !is_xml_char(c)) {
            self.i += bad;
            return Err(self.err("not well-formed (invalid token)"));
        }
        self.i += n + end.len();
        Ok(body)
    }

    /// Whitespace, comments and processing instructions outside the root.
    fn misc(&mut self) -> Result<(), XmlError> {
        loop {
            self.skip_space();
            if self.rest().starts_with("<!--") {
                self.comment()?;
            } else if self.rest().starts_with("<?") {
                self.pi()?;
            } else {
                return Ok(());
            }
        }
    }

    fn comment(&mut self) -> Result<(), XmlError> {
        self.i += 4;
        let start = self.i;
        let body = self.skip_past("-->", "unclosed token")?;
        if body.contains("--") || body.ends_with('-') {
            self.i = start;
            return Err(self.err("not well-formed (invalid token)"));
        }
        Ok(())
    }

    fn pi(&mut self) -> Result<(), XmlError> {
        self.i += 2;
        let target = self.name()?;
        if target.eq_ignore_ascii_case("xml") {
            return Err(self.err("XML or text declaration not at start of entity"));
        }
        if !self.rest().starts_with("?>") && !self.skip_space() {
            return Err(self.err("not well-formed (invalid token)"));
        }
        self.skip_past("?>", "unclosed token")?;
        Ok(())
    }

    fn name(&mut self) -> Result<&'a str, XmlError> {
        let rest = self.rest();
        let mut chars = rest.char_indices();
        match chars.next() {
            Some((_, c)) if is_name_start(c) => {}
            Some(_) => return Err(self.err("not well-formed (invalid token)")),
            None => return Err(self.err("unclosed token")),
        }
        let end = chars
            .find(|(_, c)| !is_name_char(*c))
            .map_or(rest.len(), |(i, _)| i);
        self.i += end;
        Ok(&rest[..end])
    }

    /// `&...;` at the cursor, its character(s) appended to `out`.
    fn reference(&mut self, out: &mut String) -> Result<(), XmlError> {
        let at = self.i;
        self.i += 1;
        let Some(semi) = self.rest().find(';') else {
            return Err(self.err("not well-formed (invalid token)"));
        };
        let body = &self.rest()[..semi];
        let c = if let Some(num) = body.strip_prefix('#') {
            let value = match num.strip_prefix('x') {
                Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    u32::from_str_radix(hex, 16).ok()
                }
                None if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) => {
                    num.parse().ok()
                }
                _ => return Err(self.err("not well-formed (invalid token)")),
            };
            match value.and_then(char::from_u32).filter(|c| is_xml_char(*c)) {
                Some(c) => c,
                None => return Err(self.err("reference to invalid character number")),
            }
        } else {
            match body {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                "apos" => '\'',
                "quot" => '"',
                _ => {
                    let mut probe = XmlParser {
                        s: body,
                        i: 0,
                        bindings: Vec::new(),
                        scopes: Vec::new(),
                    };
                    let named = probe.name().is_ok() && probe.i == body.len();
                    self.i = at;
                    return Err(self.err(if named {
                        "undefined entity"
                    } else {
                        "not well-formed (invalid token)"
                    }));
                }
            }
        };
        out.push(c);
        self.i += semi + 1;
        Ok(())
    }

    fn attr_value(&mut self) -> Result<String, XmlError> {
        let quote = match self.rest().chars().next() {
            Some(q @ ('"' | '\'')) => q,
            _ => return Err(self.err("not well-formed (invalid token)")),
        };
        self.i += 1;
        let mut value = String::new();
        loop {
            let Some(c) = self.rest().chars().next() else {
                return Err(self.err("unclosed token"));
            };
            match c {
                _ if c == quote => {
                    self.i += 1;
                    return Ok(value);
                }
                '<' => return Err(self.err("not well-formed (invalid token)")),
                '&' => self.reference(&mut value)?,
                '\r' => {
                    // CRLF is one line end, then one space.
                    self.i += if self.rest().starts_with("\r\n") {
                        2
                    } else {
                        1
                    };
                    value.push(' ');
                }
                '\t' | '\n' => {
                    self.i += 1;
                    value.push(' ');
                }
                _ if !is_xml_char(c) => return Err(self.err("not well-formed (invalid token)")),
                _ => {
                    self.i += c.len_utf8();
                    value.push(c);
                }
            }
        }
    }

    fn close_scope(&mut self) {
        let n = self.scopes.pop().unwrap_or(0);
        self.bindings.truncate(self.bindings.len() - n);
    }

    /// `prefix:local` → `{uri}local` under the open scopes.
    fn expand(&self, qname: &str, is_attr: bool) -> Result<String, XmlError> {
        let (prefix, local) = match qname.split_once(':') {
            Some((p, l)) if !p.is_empty() && !l.is_empty() && !l.contains(':') => (p, l),
            Some(_) => return Err(self.err("not well-formed (invalid token)")),
            None if is_attr => return Ok(qname.to_string()),
            None => ("", qname),
        };
        if prefix == "xml" {
            return Ok(format!("{{http://www.w3.org/XML/1998/namespace}}{local}"));
        }
        let uri = self.bindings.iter().rev().find(|(p, _)| p == prefix);
        match uri {
            Some((_, uri)) if !uri.is_empty() => Ok(format!("{{{uri}}}{local}")),
            _ if prefix.is_empty() => Ok(local.to_string()),
            _ => Err(self.err("unbound prefix")),
        }
    }

    /// The root element and everything in it. Iterative, with the open
    /// elements on a stack of its own: a log can nest deeper than a thread's
    /// stack allows, and expat has no depth limit either.
    fn root(&mut self) -> Result<Element, XmlError> {
        let mut open: Vec<(&'a str, Element)> = Vec::new();
        loop {
            // At the `<` of a start tag.
            let (qname, element, empty) = self.start_tag()?;
            let mut done = if empty {
                self.close_scope();
                Some(element)
            } else {
                open.push((qname, element));
                None
            };
            loop {
                if let Some(element) = done.take() {
                    match open.last_mut() {
                        Some((_, parent)) => parent.children.push(element),
                        None => return Ok(element),
                    }
                }
                if self.content()? == Markup::Start {
                    break;
                }
                let (qname, element) = open.pop().expect("content ends inside an element");
                self.end_tag(qname)?;
                self.close_scope();
                done = Some(element);
            }
        }
    }

    /// `<name attr="v" ...>` or `/>`; the element's namespace scope is
    /// pushed. Returns the qualified name, the element and whether it was
    /// empty (`/>`).
    fn start_tag(&mut self) -> Result<(&'a str, Element, bool), XmlError> {
        self.i += 1; // '<'
        let qname = self.name()?;
        let mut raw: Vec<(&'a str, String)> = Vec::new();
        let mut seen = HashSet::new();
        let empty = loop {
            let spaced = self.skip_space();
            if self.eat("/>") {
                break true;
            }
            if self.eat(">") {
                break false;
            }
            if self.rest().is_empty() {
                return Err(self.err("unclosed token"));
            }
            if !spaced {
                return Err(self.err("not well-formed (invalid token)"));
            }
            let at = self.i;
            let key = self.name()?;
            self.skip_space();
            if !self.eat("=") {
                return Err(self.err("not well-formed (invalid token)"));
            }
            self.skip_space();
            let value = self.attr_value()?;
            if !seen.insert(key) {
                self.i = at;
                return Err(self.err("duplicate attribute"));
            }
            raw.push((key, value));
        };
        let mut scope = Vec::new();
        let mut plain = Vec::new();
        for (key, value) in raw {
            if key == "xmlns" {
                scope.push((String::new(), value));
            } else if let Some(prefix) = key.strip_prefix("xmlns:") {
                if value.is_empty() {
                    return Err(self.err("unbound prefix"));
                }
                scope.push((prefix.to_string(), value));
            } else {
                plain.push((key, value));
            }
        }
        self.scopes.push(scope.len());
        self.bindings.extend(scope);
        let tag = self.expand(qname, false)?;
        let mut attrs: Vec<(String, String)> = Vec::with_capacity(plain.len());
        let mut expanded = HashSet::new();
        for (key, value) in plain {
            let key = self.expand(key, true)?;
            if !expanded.insert(key.clone()) {
                return Err(self.err("duplicate attribute"));
            }
            attrs.push((key, value));
        }
        let element = Element {
            tag,
            attrs,
            children: Vec::new(),
        };
        Ok((qname, element, empty))
    }

    /// `</name>` closing `qname`, at its `</`.
    fn end_tag(&mut self, qname: &str) -> Result<(), XmlError> {
        self.i += 2;
        let end = self.name()?;
        if end != qname {
            return Err(self.err("mismatched tag"));
        }
        self.skip_space();
        if !self.eat(">") {
            return Err(self.err(if self.rest().is_empty() {
                "unclosed token"
            } else {
                "not well-formed (invalid token)"
            }));
        }
        Ok(())
    }

    /// Character data, comments, CDATA and processing instructions up to
    /// the next start tag or end tag, which it stops at.
    fn content(&mut self) -> Result<Markup, XmlError> {
        let mut scratch = String::new();
        loop {
            let rest = self.rest();
            let Some(c) = rest.chars().next() else {
                return Err(self.err("no element found"));
            };
            match c {
                '<' if rest.starts_with("</") => return Ok(Markup::End),
                '<' if rest.starts_with("<!--") => self.comment()?,
                '<' if rest.starts_with("<![CDATA[") => {
                    self.i += 9;
                    self.skip_past("]]>", "unclosed CDATA section")?;
                }
                '<' if rest.starts_with("<?") => self.pi()?,
                '<' if rest.starts_with("<!") => return Err(self.err("syntax error")),
                '<' => return Ok(Markup::Start),
                '&' => {
                    scratch.clear();
                    self.reference(&mut scratch)?;
                }
                _ if rest.starts_with("]]>") => {
                    return Err(self.err("not well-formed (invalid token)"))
                }
                _ if !is_xml_char(c) => return Err(self.err("not well-formed (invalid token)")),
                _ => self.i += c.len_utf8(),
            }
        }
    }
}

/// What [`XmlParser::content`] stopped at.
#[derive(PartialEq, Eq)]
enum Markup {
    Start,
    End,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(e: &Element) -> Vec<&str> {
        e.descendants().map(|e| e.tag.as_str()).collect()
    }

    #[test]
    fn elements_attributes_and_document_order() {
        let doc = "<r a=\"1&amp;&#x41;&#66;\" b='x\ty\r\nz'>text<!-- c --><x><y/></x><?pi d?><![CDATA[<&]]><z/></r>";
        let root = parse(doc).unwrap();
        assert_eq!(root.tag, "r");
        assert_eq!(root.attr("a"), Some("1&AB"));
        assert_eq!(root.attr("b"), Some("x y z"));
        assert_eq!(root.attr("c"), None);
        assert_eq!(tags(&root), ["x", "y", "z"]);
    }

    /// Each as ElementTree (Python 3.11's expat) answered it.
    #[test]
    fn expat_edge_cases() {
        let cases: &[(&str, bool)] = &[
            ("<a><?XML x?></a>", false),
            ("<a><?xmlfoo x?></a>", true),
            ("<a/ >", false),
            ("<a x = \"1\"/>", true),
            ("<a>&#x;</a>", false),
            ("<a><?pi?></a>", true),
            ("<a><?pi?x?></a>", false),
            ("<a><!----></a>", true),
            ("<a><!-- - --></a>", true),
            ("<a><!-----></a>", false),
            ("<a>]]</a>", true),
            ("<a xmlns:p=\"\"/>", false),
            ("<a xmlns=\"\"/>", true),
            ("<a xml:lang=\"x\"/>", true),
            ("<a:b:c/>", false),
            ("<a\u{b7}/>", true),
            ("<\u{b7}a/>", false),
            ("<a>\u{fffd}</a>", true),
            ("<a>\u{ffff}</a>", false),
            ("<a x=\"\u{1}\"/>", false),
            ("<a></a\t>", true),
            ("<a>< /a>", false),
            ("<a\u{37e}/>", false),
            ("<a\u{3000}/>", false),
            ("<a>&#9;&#xa;&#13;</a>", true),
            ("<a>&#xFFFE;</a>", false),
            ("<a b=\"1\" xmlns:p=\"u\" p:b=\"2\"/>", true),
            (
                "<a xmlns:p=\"u\" xmlns:q=\"u\" p:b=\"1\" q:b=\"2\"/>",
                false,
            ),
        ];
        for (doc, ok) in cases {
            assert_eq!(parse(doc).is_ok(), *ok, "{doc:?}");
        }
    }

    #[test]
    fn namespaces_are_expanded() {
        let root = parse("<r xmlns=\"u\" xmlns:p=\"v\"><p:a p:k=\"1\" k=\"2\"/><b/></r>").unwrap();
        assert_eq!(root.tag, "{u}r");
        assert_eq!(tags(&root), ["{v}a", "{u}b"]);
        let a = root.descendants().next().unwrap();
        assert_eq!(a.attr("{v}k"), Some("1"));
        assert_eq!(a.attr("k"), Some("2"));
        assert!(parse("<p:a/>").is_err());
    }

    #[test]
    fn not_well_formed_is_an_error() {
        for bad in [
            "",
            "<doctest",
            "<doctest>",
            "<a></b>",
            "<a><b></a>",
            "<a x=\"1\" x=\"2\"/>",
            "<a x=\"1\"y=\"2\"/>",
            "<a x=\"<\"/>",
            "<a>&nbsp;</a>",
            "<a>& </a>",
            "<a>&#0;</a>",
            "<a>\u{1b}[0m</a>",
            "<a>]]></a>",
            "<a><!-- a -- b --></a>",
            "<a/>junk",
            "<a/><b/>",
            "< a/>",
            "<a><?xml version=\"1.0\"?></a>",
            "<a><!DOCTYPE a></a>",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse("<a/>\n<!-- after -->\n").is_ok());
        // Deeper than any thread's stack would allow by recursion.
        let deep = format!("{}{}", "<a>".repeat(50_000), "</a>".repeat(50_000));
        let root = parse(&deep).unwrap();
        assert_eq!(root.descendants().count(), 49_999);
        assert!(parse(&"<a>".repeat(50_000)).is_err());
        assert!(parse("<?xml version=\"1.0\"?>\n<a/>").is_ok());
    }
}
