//! A WIM (or ESD) file's header and the XML that describes its images
//! (name, edition, build, architecture, languages), read from inside an
//! installer image through `IsoImage::read_at`: the header's 208 bytes and
//! the XML resource (at most [`MAX_XML_BYTES`]), never the multi-gigabyte
//! rest. ESD files share the header and keep their XML uncompressed.

use quick_xml::events::Event;

use super::iso::{IsoImage, MediaError};

/// A WIM header's size in bytes (version 1.13, the only one in use).
pub const WIM_HEADER_BYTES: usize = 208;
/// The largest XML description read (real ones are a few KiB per image).
pub const MAX_XML_BYTES: u64 = 16 << 20;
/// The most images one description may list.
const MAX_IMAGES: usize = 1024;
/// The deepest element nesting accepted in the description.
const MAX_XML_DEPTH: usize = 32;

const MAGIC: &[u8; 8] = b"MSWIM\0\0\0";
/// Resource flag: the resource is compressed.
const RESHDR_COMPRESSED: u8 = 0x04;

/// One Windows image inside install.wim / install.esd.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WimImage {
    /// Its number, as `/index:` and the answer file's `/IMAGE/INDEX` say.
    pub index: u32,
    pub name: String,
    pub edition_id: String,
    pub build: u32,
    /// "amd64", "arm64", "x86", or the number when it is another one.
    pub arch: String,
    pub languages: Vec<String>,
    /// "Client" or "Server".
    pub installation_type: String,
}

/// Where the XML description is, from the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct XmlResource {
    pub offset: u64,
    pub size: u64,
}

/// What is wrong with a WIM file's header or image description
/// (`MediaError::Corrupt` with the file's name in front, for the user).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WimError {
    #[error("it does not start with a WIM header (MSWIM)")]
    NotWim,
    #[error("its header is {0} bytes, not 208")]
    HeaderSize(u32),
    #[error("its image description (XML) is compressed, which WIM files never do")]
    XmlCompressed,
    #[error("it has no image description (XML)")]
    NoXml,
    #[error("its image description (XML) is {0} bytes, more than the {MAX_XML_BYTES} allowed")]
    XmlTooLarge(u64),
    #[error(
        "its image description (XML) lies at bytes {offset}..{end} of a {file_bytes}-byte file"
    )]
    XmlOutside {
        offset: u64,
        end: u64,
        file_bytes: u64,
    },
    #[error("its image description (XML) has an odd length for UTF-16")]
    OddLength,
    #[error("its image description (XML) is not UTF-16 text")]
    NotUtf16,
    #[error("its image description (XML) is malformed: {0}")]
    Malformed(String),
    /// Text quick-xml could not unescape (its own words).
    #[error("{0}")]
    Unescape(String),
    #[error("its image description nests too deep")]
    TooDeep,
    #[error("an IMAGE has no number (INDEX)")]
    NoIndex,
    #[error("it lists more than {MAX_IMAGES} images")]
    TooManyImages,
    #[error("its image description (XML) lists no images")]
    NoImages,
}

/// The header's check and the XML resource's place in the file.
pub(crate) fn parse_header(header: &[u8], file_bytes: u64) -> Result<XmlResource, WimError> {
    if header.get(..8) != Some(MAGIC.as_slice()) {
        return Err(WimError::NotWim);
    }
    let header_size = header
        .get(8..12)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if (header_size as usize) < WIM_HEADER_BYTES || header.len() < WIM_HEADER_BYTES {
        return Err(WimError::HeaderSize(header_size));
    }
    let reshdr = &header[72..96];
    let mut size_bytes = [0u8; 8];
    size_bytes[..7].copy_from_slice(&reshdr[..7]);
    let size = u64::from_le_bytes(size_bytes);
    let flags = reshdr[7];
    let offset = u64::from_le_bytes(
        reshdr[8..16]
            .try_into()
            .map_err(|_| WimError::HeaderSize(header_size))?,
    );
    if flags & RESHDR_COMPRESSED != 0 {
        return Err(WimError::XmlCompressed);
    }
    if size == 0 {
        return Err(WimError::NoXml);
    }
    if size > MAX_XML_BYTES {
        return Err(WimError::XmlTooLarge(size));
    }
    if offset.checked_add(size).is_none_or(|end| end > file_bytes) {
        return Err(WimError::XmlOutside {
            offset,
            end: offset.saturating_add(size),
            file_bytes,
        });
    }
    Ok(XmlResource { offset, size })
}

/// The images that `wim_path` inside `image` describes.
pub fn read_images(image: &IsoImage, wim_path: &str) -> Result<Vec<WimImage>, MediaError> {
    let bad = |why: WimError| MediaError::Corrupt {
        what: format!("{wim_path}: {why}"),
    };
    let file_bytes = image.file_size(wim_path)?;
    if file_bytes < WIM_HEADER_BYTES as u64 {
        return Err(MediaError::Corrupt {
            what: format!("{wim_path}: {file_bytes} bytes is too short for a WIM file"),
        });
    }
    let header = image.read_at(wim_path, 0, WIM_HEADER_BYTES)?;
    let xml = parse_header(&header, file_bytes).map_err(bad)?;
    let bytes = image.read_at(wim_path, xml.offset, xml.size as usize)?;
    parse_xml(&bytes).map_err(bad)
}

/// The images of a WIM's XML description (UTF-16LE, normally with a BOM).
pub(crate) fn parse_xml(bytes: &[u8]) -> Result<Vec<WimImage>, WimError> {
    let text = utf16le(bytes)?;
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut path: Vec<String> = Vec::new();
    let mut images: Vec<WimImage> = Vec::new();
    let mut current: Option<WimImage> = None;
    let mut pos = 0usize;
    let mut chars = String::new();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| WimError::Malformed(e.to_string()))?;
        let end = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let raw = text.get(pos..end).unwrap_or_default();
        pos = end;
        match event {
            Event::Eof => break,
            Event::Start(start) => {
                let tag = String::from_utf8_lossy(start.name().as_ref()).to_ascii_uppercase();
                if path.len() >= MAX_XML_DEPTH {
                    return Err(WimError::TooDeep);
                }
                if path.len() == 1 && path[0] == "WIM" && tag == "IMAGE" {
                    let index = start
                        .attributes()
                        .flatten()
                        .find(|a| a.key.as_ref().eq_ignore_ascii_case(b"INDEX"))
                        .and_then(|a| String::from_utf8_lossy(&a.value).trim().parse().ok())
                        .ok_or(WimError::NoIndex)?;
                    current = Some(WimImage {
                        index,
                        ..WimImage::default()
                    });
                }
                path.push(tag);
                chars.clear();
            }
            Event::Text(_) | Event::GeneralRef(_) => {
                let piece = quick_xml::escape::unescape(raw)
                    .map_err(|e| WimError::Unescape(e.to_string()))?;
                if chars.len() + piece.len() <= 4096 {
                    chars.push_str(&piece);
                }
            }
            Event::End(_) => {
                if let Some(img) = current.as_mut() {
                    set_field(img, &path, chars.trim());
                }
                if path.len() == 2 && path[1] == "IMAGE" {
                    images.extend(current.take());
                    if images.len() > MAX_IMAGES {
                        return Err(WimError::TooManyImages);
                    }
                }
                path.pop();
                chars.clear();
            }
            _ => {}
        }
    }
    if images.is_empty() {
        return Err(WimError::NoImages);
    }
    images.sort_by_key(|i| i.index);
    Ok(images)
}

/// One element's text, by where it sits below `WIM/IMAGE`.
fn set_field(img: &mut WimImage, path: &[String], text: &str) {
    let Some(below) = path.get(2..) else { return };
    let below: Vec<&str> = below.iter().map(String::as_str).collect();
    match below.as_slice() {
        ["NAME"] => img.name = text.to_string(),
        ["WINDOWS", "EDITIONID"] => img.edition_id = text.to_string(),
        ["WINDOWS", "VERSION", "BUILD"] => img.build = text.parse().unwrap_or(0),
        ["WINDOWS", "ARCH"] => img.arch = arch_name(text),
        ["WINDOWS", "LANGUAGES", "LANGUAGE"] if !text.is_empty() => {
            img.languages.push(text.to_string());
        }
        ["WINDOWS", "INSTALLATIONTYPE"] => img.installation_type = text.to_string(),
        _ => {}
    }
}

/// PROCESSOR_ARCHITECTURE numbers: 0 x86, 5 arm, 9 amd64, 12 arm64.
fn arch_name(number: &str) -> String {
    match number {
        "0" => "x86".into(),
        "5" => "arm".into(),
        "9" => "amd64".into(),
        "12" => "arm64".into(),
        other => other.to_string(),
    }
}

/// UTF-16LE text (a leading BOM dropped); an odd length or a broken
/// surrogate is an error.
fn utf16le(bytes: &[u8]) -> Result<String, WimError> {
    if !bytes.len().is_multiple_of(2) {
        return Err(WimError::OddLength);
    }
    let units = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]));
    let text: String = char::decode_utf16(units)
        .collect::<Result<_, _>>()
        .map_err(|_| WimError::NotUtf16)?;
    Ok(text.strip_prefix('\u{feff}').unwrap_or(&text).to_string())
}
