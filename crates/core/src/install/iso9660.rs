//! ISO 9660 (ECMA-119): the volume descriptors from sector 16 (which also
//! say whether a UDF volume follows), and folders read through the Joliet
//! tree (UCS-2 names) when there is one, else the primary tree with Rock
//! Ridge names (NM entries) when it has them, else its 8.3-style names with
//! the `;1` version cut off.

use super::iso::{
    Disc, Extent, Filesystem, MAX_DIR_BYTES, MAX_DIR_ENTRIES, MAX_EXTENTS, MediaError, Node,
    SECTOR_BYTES, corrupt,
};

/// The most volume descriptors looked at from sector 16.
const MAX_DESCRIPTORS: u64 = 64;

/// What the volume recognition area (sectors 16 onwards) holds.
#[derive(Debug, Default)]
pub(crate) struct Descriptors {
    /// An NSR02/NSR03 descriptor: a UDF volume is there.
    pub has_udf: bool,
    /// The primary volume descriptor's sector.
    pub primary: Option<Vec<u8>>,
    /// A supplementary descriptor with Joliet's escape sequence.
    pub joliet: Option<Vec<u8>>,
}

pub(crate) fn scan_descriptors(disc: &Disc) -> Result<Descriptors, MediaError> {
    let mut found = Descriptors::default();
    for n in 16..16 + MAX_DESCRIPTORS {
        if (n + 1) * SECTOR_BYTES > disc.size_bytes {
            break;
        }
        let sector = disc.sector(n)?;
        match &sector[1..6] {
            b"CD001" => match sector[0] {
                1 if found.primary.is_none() => found.primary = Some(sector),
                2 if is_joliet(&sector) && found.joliet.is_none() => found.joliet = Some(sector),
                _ => {}
            },
            b"NSR02" | b"NSR03" => found.has_udf = true,
            b"TEA01" => break,
            b"BEA01" | b"BOOT2" | b"CDW02" => {}
            _ => break,
        }
    }
    Ok(found)
}

/// Joliet's escape sequences (%/@, %/C, %/E: UCS-2 levels 1 to 3).
fn is_joliet(svd: &[u8]) -> bool {
    let esc = &svd[88..120];
    esc.windows(3)
        .any(|w| w[0] == b'%' && w[1] == b'/' && matches!(w[2], b'@' | b'C' | b'E'))
}

#[derive(Debug)]
pub(crate) struct Iso9660 {
    pub label: String,
    pub root: Node,
    pub names: Filesystem,
}

impl Iso9660 {
    /// The filesystem the descriptors describe, or None without a primary one.
    pub fn open(disc: &Disc, vds: &Descriptors) -> Result<Option<Iso9660>, MediaError> {
        let Some(primary) = &vds.primary else {
            return Ok(None);
        };
        let label = String::from_utf8_lossy(&primary[40..72]).trim().to_string();
        let (tree, mut names) = match &vds.joliet {
            Some(svd) => (svd, Filesystem::Joliet),
            None => (primary, Filesystem::Iso9660),
        };
        let block = u16::from_le_bytes([tree[128], tree[129]]);
        if u64::from(block) != SECTOR_BYTES {
            return Err(MediaError::Unsupported {
                what: format!("ISO 9660 logical blocks of {block} bytes (only 2048)"),
            });
        }
        let record = Record::parse(&tree[156..190])
            .ok_or_else(|| corrupt("the ISO 9660 root folder's record is malformed"))?;
        let mut root = record.node(String::from("/"));
        root.is_dir = true;
        if names == Filesystem::Iso9660 && has_rock_ridge(disc, &root)? {
            names = Filesystem::RockRidge;
        }
        Ok(Some(Iso9660 { label, root, names }))
    }

    pub fn read_dir(&self, disc: &Disc, dir: &Node) -> Result<Vec<Node>, MediaError> {
        let data = dir_data(disc, dir)?;
        let mut out: Vec<Node> = Vec::new();
        // A file larger than 4 GiB is several records of one name, each but
        // the last flagged "more follows".
        let mut pending: Option<Node> = None;
        let mut pos = 0usize;
        while pos < data.len() {
            let len = usize::from(data[pos]);
            let sector_end = (pos / SECTOR_BYTES as usize + 1) * SECTOR_BYTES as usize;
            if len == 0 {
                pos = sector_end;
                continue;
            }
            let bytes = data
                .get(pos..pos + len)
                .filter(|_| pos + len <= sector_end)
                .ok_or_else(|| corrupt(format!("a record in {} runs past its sector", dir.name)))?;
            pos += len;
            let record = Record::parse(bytes)
                .ok_or_else(|| corrupt(format!("a record in {} is malformed", dir.name)))?;
            if record.name == [0] || record.name == [1] {
                continue;
            }
            let name = self.name(&record)?;
            let node = record.node(name);
            match pending.take() {
                Some(mut first) if first.name == node.name => {
                    if first.extents.len() >= MAX_EXTENTS {
                        return Err(corrupt(format!("{} has too many pieces", node.name)));
                    }
                    first.size = first.size.saturating_add(node.size);
                    first.extents.extend(node.extents);
                    pending = Some(first);
                }
                Some(first) => {
                    out.push(first);
                    pending = Some(node);
                }
                None => pending = Some(node),
            }
            if !record.more_follows() {
                out.extend(pending.take());
            }
            if out.len() > MAX_DIR_ENTRIES {
                return Err(corrupt(format!(
                    "{} holds more than {MAX_DIR_ENTRIES} entries",
                    dir.name
                )));
            }
        }
        out.extend(pending);
        Ok(out)
    }

    fn name(&self, record: &Record) -> Result<String, MediaError> {
        let raw = match self.names {
            Filesystem::Joliet => {
                let units = record
                    .name
                    .chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]));
                char::decode_utf16(units)
                    .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect()
            }
            Filesystem::RockRidge => match record.rock_ridge_name() {
                Some(name) => return Ok(name),
                None => String::from_utf8_lossy(record.name).into_owned(),
            },
            Filesystem::Iso9660 | Filesystem::Udf => {
                String::from_utf8_lossy(record.name).into_owned()
            }
        };
        let name = match raw.rsplit_once(';') {
            Some((base, _version)) => base.to_string(),
            None => raw,
        };
        let name = match name.strip_suffix('.') {
            Some(base) if !record.is_dir() && !base.is_empty() => base.to_string(),
            _ => name,
        };
        if name.is_empty() {
            return Err(corrupt("a record has an empty name"));
        }
        Ok(name)
    }
}

/// A folder's own data: its records.
fn dir_data(disc: &Disc, dir: &Node) -> Result<Vec<u8>, MediaError> {
    if dir.size > MAX_DIR_BYTES {
        return Err(corrupt(format!(
            "the folder {} says it is {} bytes long",
            dir.name, dir.size
        )));
    }
    disc.read_node(dir, 0, dir.size as usize)
}

/// The root's "." record carries SUSP's SP entry when Rock Ridge is there.
fn has_rock_ridge(disc: &Disc, root: &Node) -> Result<bool, MediaError> {
    let data = dir_data(disc, root)?;
    let Some(first) = data.first().map(|&l| usize::from(l)) else {
        return Ok(false);
    };
    Ok(data.get(..first).and_then(Record::parse).is_some_and(|r| {
        r.system_use.starts_with(b"SP") && r.system_use.get(4..6) == Some(&[0xBE, 0xEF])
    }))
}

/// One directory record.
struct Record<'a> {
    location: u32,
    attr_blocks: u8,
    data_len: u32,
    flags: u8,
    name: &'a [u8],
    system_use: &'a [u8],
}

impl<'a> Record<'a> {
    fn parse(bytes: &'a [u8]) -> Option<Record<'a>> {
        let len = usize::from(*bytes.first()?);
        if len < 34 || len > bytes.len() {
            return None;
        }
        let u32_at = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
        let name_len = usize::from(bytes[32]);
        let name = bytes.get(33..33 + name_len)?;
        let su_start = 33 + name_len + usize::from(name_len % 2 == 0);
        Some(Record {
            location: u32_at(2)?,
            attr_blocks: bytes[1],
            data_len: u32_at(10)?,
            flags: bytes[25],
            name,
            system_use: bytes.get(su_start.min(len)..len)?,
        })
    }

    fn is_dir(&self) -> bool {
        self.flags & 0x02 != 0
    }

    fn more_follows(&self) -> bool {
        self.flags & 0x80 != 0
    }

    fn node(&self, name: String) -> Node {
        let start = u64::from(self.location) + u64::from(self.attr_blocks);
        let offset = start * SECTOR_BYTES;
        Node {
            name,
            is_dir: self.is_dir(),
            size: u64::from(self.data_len),
            extents: vec![Extent::Image {
                offset,
                len: u64::from(self.data_len),
            }],
            id: offset,
        }
    }

    /// The name in Rock Ridge's NM entries (several when it is long).
    fn rock_ridge_name(&self) -> Option<String> {
        let mut su = self.system_use;
        let mut name = Vec::new();
        let mut found = false;
        while su.len() >= 4 {
            let len = usize::from(su[2]);
            if len < 4 || len > su.len() {
                break;
            }
            let (entry, rest) = su.split_at(len);
            match &entry[..2] {
                b"NM" if len >= 5 && entry[4] & 0x06 == 0 => {
                    name.extend_from_slice(&entry[5..]);
                    found = true;
                }
                b"ST" => break,
                _ => {}
            }
            su = rest;
        }
        (found && !name.is_empty()).then(|| String::from_utf8_lossy(&name).into_owned())
    }
}
