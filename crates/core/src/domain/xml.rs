//! A lossless XML document for the user's libvirt domain: every node keeps the
//! exact source text it came from, so what the app does not touch is written
//! back byte for byte (unknown elements and attributes, their order, comments,
//! namespaces such as libosinfo metadata, whitespace). Edited elements are
//! regenerated; their untouched neighbours are not.
//!
//! serde cannot hold unknown subtrees, so the user's document is a tree; serde
//! is only for fragments the app fully owns (STYLE.md, virt-manager's lesson).

use quick_xml::escape::{escape, unescape};
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub name: String,
    /// Unescaped value.
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Element(Element),
    /// Character data: the unescaped text and its exact source.
    Text {
        text: String,
        raw: String,
    },
    /// Comments, CDATA, processing instructions, declarations: kept verbatim.
    Other {
        raw: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<Attr>,
    pub children: Vec<Node>,
    /// The exact start tag as read; `None` once the name or attributes change.
    raw_start: Option<String>,
    /// The exact end tag as read (`None` for `<empty/>` elements and new ones).
    raw_end: Option<String>,
    /// Written as `<x/>` when it has no children.
    self_closing: bool,
}

/// A parse error with the position a person can find in their file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct XmlError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Declarations, comments and whitespace before the root element.
    pub prolog: Vec<Node>,
    pub root: Element,
    /// Whatever follows the root element.
    pub epilog: Vec<Node>,
}

fn line_col(text: &str, pos: usize) -> (usize, usize) {
    // A position inside a character (the parser counts bytes) counts as that character.
    let before = &text[..text.floor_char_boundary(pos)];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

fn err_at(text: &str, pos: usize, message: impl Into<String>) -> XmlError {
    let (line, column) = line_col(text, pos);
    XmlError {
        line,
        column,
        message: message.into(),
    }
}

fn element_from(
    text: &str,
    start: &BytesStart,
    raw: &str,
    pos: usize,
) -> Result<Element, XmlError> {
    let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
    let mut attrs = Vec::new();
    for a in start.attributes() {
        let a = a.map_err(|e| err_at(text, pos, format!("bad attribute in <{name}>: {e}")))?;
        let value = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| err_at(text, pos, format!("bad attribute value in <{name}>: {e}")))?
            .into_owned();
        attrs.push(Attr {
            name: String::from_utf8_lossy(a.key.as_ref()).into_owned(),
            value,
        });
    }
    Ok(Element {
        name,
        attrs,
        children: Vec::new(),
        raw_start: Some(raw.to_string()),
        raw_end: None,
        self_closing: false,
    })
}

/// How deep elements may nest. A libvirt domain is about ten levels deep and
/// libxml2 (so libvirt) refuses more than 256 by default; the limit keeps
/// every walk over the tree (writing, indenting, dropping) off the end of
/// the stack on hostile input.
pub const MAX_DEPTH: usize = 1000;

/// The byte order mark some editors put in front of a UTF-8 file.
const BOM: &str = "\u{feff}";

impl Document {
    /// Parse; malformed XML is an error with line and column, never a panic.
    /// A leading byte order mark is kept (first in the prolog) and written back.
    pub fn parse(text: &str) -> Result<Document, XmlError> {
        match text.strip_prefix(BOM) {
            // The parser does not count a BOM in its positions: parse what
            // follows it, so that every node's source text is its own.
            Some(body) => {
                let mut doc = Self::parse_body(body)?;
                doc.prolog.insert(0, Node::Other { raw: BOM.into() });
                Ok(doc)
            }
            None => Self::parse_body(text),
        }
    }

    fn parse_body(text: &str) -> Result<Document, XmlError> {
        let mut reader = Reader::from_str(text);
        let config = reader.config_mut();
        config.trim_text(false);
        config.check_end_names = true;
        config.expand_empty_elements = false;
        let mut stack: Vec<Element> = Vec::new();
        let mut prolog = Vec::new();
        let mut epilog = Vec::new();
        let mut root: Option<Element> = None;
        let mut pos = 0usize;
        loop {
            let event = reader
                .read_event()
                .map_err(|e| err_at(text, reader.buffer_position() as usize, e.to_string()))?;
            let end = reader.buffer_position() as usize;
            let raw = text.get(pos..end).unwrap_or("");
            let node = match event {
                Event::Eof => break,
                Event::Start(s) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(err_at(
                            text,
                            pos,
                            format!(
                                "elements nested more than {MAX_DEPTH} levels deep; a libvirt domain is about ten"
                            ),
                        ));
                    }
                    stack.push(element_from(text, &s, raw, pos)?);
                    pos = end;
                    continue;
                }
                Event::End(_) => {
                    let mut el = stack
                        .pop()
                        .ok_or_else(|| err_at(text, pos, "end tag without a start tag"))?;
                    el.raw_end = Some(raw.to_string());
                    Node::Element(el)
                }
                Event::Empty(s) => {
                    let mut el = element_from(text, &s, raw, pos)?;
                    el.self_closing = true;
                    Node::Element(el)
                }
                Event::Text(_) | Event::GeneralRef(_) => {
                    let unescaped = unescape(raw)
                        .map_err(|e| err_at(text, pos, e.to_string()))?
                        .into_owned();
                    // Adjacent text and entity references form one text node.
                    let siblings = match stack.last_mut() {
                        Some(parent) => &mut parent.children,
                        None if root.is_none() => &mut prolog,
                        None => &mut epilog,
                    };
                    if let Some(Node::Text { text: t, raw: r }) = siblings.last_mut() {
                        t.push_str(&unescaped);
                        r.push_str(raw);
                    } else {
                        siblings.push(Node::Text {
                            text: unescaped,
                            raw: raw.to_string(),
                        });
                    }
                    pos = end;
                    continue;
                }
                Event::CData(_)
                | Event::Comment(_)
                | Event::Decl(_)
                | Event::PI(_)
                | Event::DocType(_) => Node::Other {
                    raw: raw.to_string(),
                },
            };
            pos = end;
            match (stack.last_mut(), node) {
                (Some(parent), n) => parent.children.push(n),
                (None, Node::Element(el)) => {
                    if root.is_some() {
                        return Err(err_at(
                            text,
                            pos,
                            "a second root element: an XML document has one",
                        ));
                    }
                    root = Some(el);
                }
                (None, n) => {
                    if root.is_none() {
                        prolog.push(n)
                    } else {
                        epilog.push(n)
                    }
                }
            }
        }
        if let Some(open) = stack.last() {
            return Err(err_at(
                text,
                text.len(),
                format!("<{}> is never closed", open.name),
            ));
        }
        let root =
            root.ok_or_else(|| err_at(text, text.len(), "no root element: the document is empty"))?;
        Ok(Document {
            prolog,
            root,
            epilog,
        })
    }

    /// The document as text: untouched parts exactly as read.
    pub fn serialize(&self) -> String {
        let mut out = String::new();
        for n in &self.prolog {
            write_node(&mut out, n);
        }
        write_element(&mut out, &self.root);
        for n in &self.epilog {
            write_node(&mut out, n);
        }
        out
    }
}

fn write_node(out: &mut String, n: &Node) {
    match n {
        Node::Element(e) => write_element(out, e),
        Node::Text { raw, .. } | Node::Other { raw } => out.push_str(raw),
    }
}

fn write_element(out: &mut String, e: &Element) {
    match &e.raw_start {
        Some(raw) if !e.self_closing || e.children.is_empty() => out.push_str(raw),
        _ => {
            let _ = write!(out, "<{}", e.name);
            for a in &e.attrs {
                let _ = write!(
                    out,
                    " {}='{}'",
                    a.name,
                    escape(a.value.as_str()).replace('\'', "&apos;")
                );
            }
            out.push_str(if e.children.is_empty() { "/>" } else { ">" });
        }
    }
    if e.children.is_empty() && (e.self_closing || e.raw_start.is_none()) {
        return;
    }
    for c in &e.children {
        write_node(out, c);
    }
    match &e.raw_end {
        Some(raw) => out.push_str(raw),
        None => {
            let _ = write!(out, "</{}>", e.name);
        }
    }
}

impl Element {
    /// A new element the app creates.
    pub fn new(name: &str) -> Self {
        Element {
            name: name.to_string(),
            attrs: Vec::new(),
            children: Vec::new(),
            raw_start: None,
            raw_end: None,
            self_closing: true,
        }
    }
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }
    /// Set (or add, at the end) an attribute; the start tag is regenerated.
    pub fn set_attr(&mut self, name: &str, value: &str) {
        if self.attr(name) == Some(value) {
            return;
        }
        match self.attrs.iter_mut().find(|a| a.name == name) {
            Some(a) => a.value = value.to_string(),
            None => self.attrs.push(Attr {
                name: name.to_string(),
                value: value.to_string(),
            }),
        }
        self.raw_start = None;
    }
    pub fn remove_attr(&mut self, name: &str) {
        let before = self.attrs.len();
        self.attrs.retain(|a| a.name != name);
        if self.attrs.len() != before {
            self.raw_start = None;
        }
    }
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|n| match n {
            Node::Element(e) => Some(e),
            _ => None,
        })
    }
    /// The child elements, mutable.
    pub fn elements_mut(&mut self) -> impl Iterator<Item = &mut Element> {
        self.children.iter_mut().filter_map(|n| match n {
            Node::Element(e) => Some(e),
            _ => None,
        })
    }
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.elements().find(|e| e.name == name)
    }
    pub fn child_mut(&mut self, name: &str) -> Option<&mut Element> {
        self.children.iter_mut().find_map(|n| match n {
            Node::Element(e) if e.name == name => Some(e),
            _ => None,
        })
    }
    /// The text content (concatenated text children).
    pub fn text(&self) -> String {
        self.children
            .iter()
            .filter_map(|n| match n {
                Node::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
    /// Replace the text content.
    pub fn set_text(&mut self, text: &str) {
        if self.text() == text && self.elements().next().is_none() {
            return;
        }
        self.children.retain(|n| !matches!(n, Node::Text { .. }));
        self.children.insert(
            0,
            Node::Text {
                text: text.to_string(),
                raw: escape(text).into_owned(),
            },
        );
        if self.self_closing {
            self.raw_start = None;
            self.self_closing = false;
        }
    }
    /// The child `name`, appended (indented like its siblings) when absent.
    /// `None` only if the tree is inconsistent, which parsing never produces.
    pub fn child_or_insert(&mut self, name: &str) -> Option<&mut Element> {
        if self.child(name).is_none() {
            self.append_child(Element::new(name));
        }
        self.child_mut(name)
    }

    /// Like `child_or_insert`, but a new element goes right after an existing
    /// sibling: the last one named `after[0]`, else `after[1]`, and so on
    /// (e.g. `<cputune>` after `<iothreads>`, else after `<vcpu>`).
    pub fn child_or_insert_after(&mut self, name: &str, after: &[&str]) -> Option<&mut Element> {
        if self.child(name).is_none() {
            let at = after.iter().find_map(|a| {
                self.children
                    .iter()
                    .rposition(|n| matches!(n, Node::Element(e) if e.name == *a))
            });
            match at {
                Some(i) => {
                    self.children
                        .insert(i + 1, Node::Element(Element::new(name)));
                    if let Some(step) = child_indent(&self.children) {
                        self.children.insert(i + 1, ws(step));
                    }
                }
                None => self.append_child(Element::new(name)),
            }
        }
        self.child_mut(name)
    }

    /// Child elements named `name`, mutable.
    pub fn children_named_mut<'a>(
        &'a mut self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a mut Element> + 'a {
        self.children.iter_mut().filter_map(move |n| match n {
            Node::Element(e) if e.name == name => Some(e),
            _ => None,
        })
    }

    /// Append a child element, indented like the existing children.
    pub fn append_child(&mut self, child: Element) {
        if self.self_closing {
            self.raw_start = None;
            self.self_closing = false;
        }
        // No indentation to copy (a new element): `indent_new_elements` does it.
        let step = child_indent(&self.children);
        // `...<last/>\n</parent>`: the new element goes before the closing indentation.
        let closing = match self.children.last() {
            Some(Node::Text { text, .. }) if text.trim().is_empty() => self.children.pop(),
            _ => None,
        };
        if let Some(step) = step
            && (closing.is_some() || self.elements().next().is_some())
        {
            self.children.push(ws(step));
        }
        self.children.push(Node::Element(child));
        if let Some(c) = closing {
            self.children.push(c);
        }
    }
    /// Remove every child element named `name`.
    pub fn remove_children(&mut self, name: &str) {
        self.remove_children_where(|e| e.name == name);
    }
    /// Remove every child element `drop` says yes to (with its indentation).
    pub fn remove_children_where(&mut self, drop: impl Fn(&Element) -> bool) {
        let mut out: Vec<Node> = Vec::with_capacity(self.children.len());
        for n in std::mem::take(&mut self.children) {
            if matches!(&n, Node::Element(e) if drop(e)) {
                // Drop the indentation that led to it as well.
                if matches!(out.last(), Some(Node::Text { text, .. }) if text.trim().is_empty()) {
                    out.pop();
                }
                continue;
            }
            out.push(n);
        }
        self.children = out;
    }
}

/// The whitespace before the existing child elements (`\n    `); else one step
/// deeper than the closing indentation; else none is known.
fn child_indent(children: &[Node]) -> Option<String> {
    children
        .windows(2)
        .find_map(|w| match (&w[0], &w[1]) {
            (Node::Text { text, .. }, Node::Element(_)) if text.trim().is_empty() => {
                Some(text.clone())
            }
            _ => None,
        })
        .or_else(|| match children.last() {
            Some(Node::Text { text, .. }) if text.trim().is_empty() && text.contains('\n') => {
                Some(format!("{text}  "))
            }
            _ => None,
        })
}

fn ws(text: String) -> Node {
    Node::Text {
        raw: text.clone(),
        text,
    }
}

/// Indent elements the app created (they have element children but no
/// whitespace of their own), `depth` levels deep, two spaces a level.
fn indent_new(el: &mut Element, depth: usize) {
    let has_elements = el.elements().next().is_some();
    let has_ws = el
        .children
        .iter()
        .any(|n| matches!(n, Node::Text { text, .. } if text.trim().is_empty()));
    if has_elements && !has_ws && el.raw_end.is_none() {
        let inner = format!("\n{}", "  ".repeat(depth + 1));
        let mut out = Vec::with_capacity(el.children.len() * 2 + 1);
        for n in std::mem::take(&mut el.children) {
            if matches!(n, Node::Element(_)) {
                out.push(ws(inner.clone()));
            }
            out.push(n);
        }
        out.push(ws(format!("\n{}", "  ".repeat(depth))));
        el.children = out;
    }
    for n in el.children.iter_mut() {
        if let Node::Element(c) = n {
            indent_new(c, depth + 1);
        }
    }
}

impl Document {
    /// Give elements the app added the indentation of their place in the tree.
    pub fn indent_new_elements(&mut self) {
        indent_new(&mut self.root, 0);
    }
}

#[cfg(test)]
mod tests;
