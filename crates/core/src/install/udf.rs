//! UDF (ECMA-167 as OSTA UDF profiles it), the filesystem Windows installer
//! images keep their files in: the anchor at sector 256, the main volume
//! descriptor sequence (partition and logical volume descriptors), the file
//! set descriptor, file entries (plain and extended) with short, long or
//! embedded allocation descriptors, and folders of file identifier
//! descriptors. Every descriptor's tag checksum and CRC are checked; type 1
//! partition maps only (what optical installer media use).

use super::iso::{
    Disc, Extent, MAX_DIR_BYTES, MAX_DIR_ENTRIES, MAX_EXTENTS, MediaError, Node, SECTOR_BYTES,
    corrupt,
};

const TAG_ANCHOR: u16 = 2;
const TAG_PARTITION: u16 = 5;
const TAG_LOGICAL_VOLUME: u16 = 6;
const TAG_TERMINATOR: u16 = 8;
const TAG_FILE_SET: u16 = 256;
const TAG_FILE_ID: u16 = 257;
const TAG_ALLOC_EXTENT: u16 = 258;
const TAG_FILE_ENTRY: u16 = 261;
const TAG_EXT_FILE_ENTRY: u16 = 266;
/// The most sectors of a volume descriptor sequence read.
const MAX_VDS_SECTORS: u64 = 256;
/// The most allocation extent descriptors one file's list may chain through.
const MAX_AED_CHAIN: usize = 1024;

/// Whether sector 256 holds a valid anchor volume descriptor pointer.
pub(crate) fn has_anchor(disc: &Disc) -> bool {
    disc.sector(256)
        .is_ok_and(|s| check_tag(&s, Some(256)) == Ok(TAG_ANCHOR))
}

#[derive(Debug)]
pub(crate) struct Udf {
    pub label: String,
    pub root: Node,
    /// Per partition reference number: the partition's first byte and its blocks.
    partitions: Vec<Partition>,
}

#[derive(Debug, Clone, Copy)]
struct Partition {
    start_byte: u64,
    blocks: u32,
}

/// A long allocation descriptor: an extent in one of the partitions.
#[derive(Debug, Clone, Copy)]
struct LongAd {
    len: u32,
    block: u32,
    partition: u16,
}

impl LongAd {
    fn parse(b: &[u8]) -> LongAd {
        LongAd {
            len: le32(b, 0),
            block: le32(b, 4),
            partition: le16(b, 8),
        }
    }
}

impl Udf {
    pub fn open(disc: &Disc) -> Result<Udf, MediaError> {
        let anchor = disc.sector(256)?;
        if check_tag(&anchor, Some(256)).map_err(|e| corrupt(e.to_string()))? != TAG_ANCHOR {
            return Err(corrupt("sector 256 holds no UDF anchor volume descriptor"));
        }
        let main = (le32(&anchor, 16), le32(&anchor, 20));
        let reserve = (le32(&anchor, 24), le32(&anchor, 28));
        match read_vds(disc, main) {
            Ok(udf) => Ok(udf),
            Err(first) => read_vds(disc, reserve).map_err(|_| first),
        }
    }

    pub fn read_dir(&self, disc: &Disc, dir: &Node) -> Result<Vec<Node>, MediaError> {
        if dir.size > MAX_DIR_BYTES {
            return Err(corrupt(format!(
                "the folder {} says it is {} bytes long",
                dir.name, dir.size
            )));
        }
        let data = disc.read_node(dir, 0, dir.size as usize)?;
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < data.len() {
            let fid = data
                .get(pos..)
                .filter(|rest| rest.len() >= 38)
                .ok_or_else(|| corrupt(format!("{}'s last entry is cut short", dir.name)))?;
            let bad = |why: String| corrupt(format!("an entry of {}: {why}", dir.name));
            if check_tag(fid, None).map_err(|e| bad(e.to_string()))? != TAG_FILE_ID {
                return Err(bad("not a file identifier descriptor".to_string()));
            }
            let characteristics = fid[18];
            let name_len = usize::from(fid[19]);
            let icb = LongAd::parse(&fid[20..36]);
            let use_len = usize::from(le16(fid, 36));
            let total = (38 + use_len + name_len).next_multiple_of(4);
            let raw_name = fid
                .get(38 + use_len..38 + use_len + name_len)
                .ok_or_else(|| bad("its name runs past the folder's end".to_string()))?;
            pos += total;
            // Bit 2: deleted; bit 3: the parent folder's entry.
            if characteristics & 0x0C != 0 {
                continue;
            }
            let name = cs0(raw_name).map_err(|e| bad(e.to_string()))?;
            out.push(self.read_icb(disc, icb, name)?);
            if out.len() > MAX_DIR_ENTRIES {
                return Err(corrupt(format!(
                    "{} holds more than {MAX_DIR_ENTRIES} entries",
                    dir.name
                )));
            }
        }
        Ok(out)
    }

    /// The byte of the image where block `block` of partition `partition` starts.
    fn block_byte(&self, partition: u16, block: u32) -> Result<u64, MediaError> {
        let p = self
            .partitions
            .get(usize::from(partition))
            .ok_or_else(|| corrupt(format!("it names partition {partition}, which it lacks")))?;
        if block >= p.blocks {
            return Err(corrupt(format!(
                "block {block} lies past its partition's {} blocks",
                p.blocks
            )));
        }
        Ok(p.start_byte + u64::from(block) * SECTOR_BYTES)
    }

    /// The file or folder whose (extended) file entry `icb` points at.
    fn read_icb(&self, disc: &Disc, icb: LongAd, name: String) -> Result<Node, MediaError> {
        let at = self.block_byte(icb.partition, icb.block)?;
        let fe = disc.read(at, SECTOR_BYTES as usize)?;
        let bad = |why: String| corrupt(format!("the entry of {name}: {why}"));
        let (ad_base, ea_len, ad_len) =
            match check_tag(&fe, Some(icb.block)).map_err(|e| bad(e.to_string()))? {
                TAG_FILE_ENTRY => (176, le32(&fe, 168), le32(&fe, 172)),
                TAG_EXT_FILE_ENTRY => (216, le32(&fe, 208), le32(&fe, 212)),
                other => {
                    return Err(bad(format!(
                        "descriptor {other} where a file entry belongs"
                    )));
                }
            };
        let file_type = fe[27];
        let flags = le16(&fe, 34);
        let size = le64(&fe, 56);
        let ads = (ad_base as usize)
            .checked_add(ea_len as usize)
            .and_then(|from| fe.get(from..from.checked_add(ad_len as usize)?))
            .ok_or_else(|| bad("its allocation descriptors run past its block".to_string()))?;
        let extents = match flags & 7 {
            0 => self.extents(disc, ads, 8, icb.partition, &name)?,
            1 => self.extents(disc, ads, 16, icb.partition, &name)?,
            3 => {
                let data = ads
                    .get(..usize::try_from(size).unwrap_or(usize::MAX))
                    .ok_or_else(|| bad("its embedded data is shorter than its size".into()))?;
                vec![Extent::Inline(data.to_vec())]
            }
            other => {
                return Err(MediaError::Unsupported {
                    what: format!("allocation descriptors of type {other} (in {name})"),
                });
            }
        };
        Ok(Node {
            name,
            is_dir: file_type == 4,
            size,
            extents,
            id: at,
        })
    }

    /// The extents short (8-byte) or long (16-byte) descriptors list,
    /// following "next extent of descriptors" links a bounded number of times.
    fn extents(
        &self,
        disc: &Disc,
        ads: &[u8],
        ad_bytes: usize,
        icb_partition: u16,
        name: &str,
    ) -> Result<Vec<Extent>, MediaError> {
        let mut out = Vec::new();
        let mut list = ads.to_vec();
        for _ in 0..MAX_AED_CHAIN {
            let mut next = None;
            for ad in list.chunks_exact(ad_bytes) {
                let raw_len = le32(ad, 0);
                let (kind, len) = (raw_len >> 30, u64::from(raw_len & 0x3FFF_FFFF));
                if len == 0 {
                    break;
                }
                let (block, partition) = if ad_bytes == 8 {
                    (le32(ad, 4), icb_partition)
                } else {
                    (le32(ad, 4), le16(ad, 8))
                };
                match kind {
                    0 => out.push(Extent::Image {
                        offset: self.block_byte(partition, block)?,
                        len,
                    }),
                    1 | 2 => out.push(Extent::Zeros { len }),
                    _ => {
                        next = Some((partition, block));
                        break;
                    }
                }
                if out.len() > MAX_EXTENTS {
                    return Err(corrupt(format!("{name} is made of too many pieces")));
                }
            }
            let Some((partition, block)) = next else {
                return Ok(out);
            };
            let aed = disc.read(self.block_byte(partition, block)?, SECTOR_BYTES as usize)?;
            let bad = |why: String| corrupt(format!("{name}'s extent list: {why}"));
            if check_tag(&aed, Some(block)).map_err(|e| bad(e.to_string()))? != TAG_ALLOC_EXTENT {
                return Err(bad(
                    "no allocation extent descriptor where one belongs".into()
                ));
            }
            let len = le32(&aed, 20) as usize;
            list = aed
                .get(24..24usize.saturating_add(len))
                .ok_or_else(|| bad("its descriptors run past the block".into()))?
                .to_vec();
        }
        Err(corrupt(format!(
            "{name}'s extent list links on without end"
        )))
    }
}

/// The volume descriptor sequence at `(bytes, sector)`: partitions, the
/// logical volume, then the file set and the root folder it points at.
fn read_vds(disc: &Disc, (len, first): (u32, u32)) -> Result<Udf, MediaError> {
    let mut partitions: Vec<(u16, Partition)> = Vec::new();
    let mut volume = None;
    let sectors = (u64::from(len) / SECTOR_BYTES).min(MAX_VDS_SECTORS);
    for n in u64::from(first)..u64::from(first) + sectors {
        let sector = disc.sector(n)?;
        let bad = |why: String| corrupt(format!("UDF volume descriptor at sector {n}: {why}"));
        match check_tag(&sector, Some(n as u32)).map_err(|e| bad(e.to_string()))? {
            TAG_PARTITION => partitions.push((
                le16(&sector, 22),
                Partition {
                    start_byte: u64::from(le32(&sector, 188)) * SECTOR_BYTES,
                    blocks: le32(&sector, 192),
                },
            )),
            TAG_LOGICAL_VOLUME if volume.is_none() => volume = Some(sector),
            TAG_TERMINATOR => break,
            _ => {}
        }
    }
    let lvd = volume.ok_or_else(|| corrupt("UDF has no logical volume descriptor"))?;
    let block = le32(&lvd, 212);
    if u64::from(block) != SECTOR_BYTES {
        return Err(MediaError::Unsupported {
            what: format!("UDF logical blocks of {block} bytes (only 2048)"),
        });
    }
    let label = dstring(&lvd[84..212]).map_err(|e| corrupt(e.to_string()))?;
    let fsd_at = LongAd::parse(&lvd[248..264]);
    let maps = usize::try_from(le32(&lvd, 268)).unwrap_or(usize::MAX);
    let mut by_ref = Vec::new();
    let mut pos = 440usize;
    for _ in 0..maps.min(64) {
        let kind = *lvd
            .get(pos)
            .ok_or_else(|| corrupt("UDF partition maps run past their block"))?;
        let map_len = usize::from(lvd.get(pos + 1).copied().unwrap_or(0));
        if kind != 1 || map_len != 6 || pos + 6 > lvd.len() {
            return Err(MediaError::Unsupported {
                what: format!(
                    "a UDF partition map of type {kind} (a virtual, sparable or metadata partition)"
                ),
            });
        }
        let number = le16(&lvd, pos + 4);
        let partition = partitions
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, p)| *p)
            .ok_or_else(|| corrupt(format!("UDF partition {number} is not described")))?;
        by_ref.push(partition);
        pos += 6;
    }
    let mut udf = Udf {
        label,
        root: Node {
            name: "/".into(),
            is_dir: true,
            size: 0,
            extents: Vec::new(),
            id: 0,
        },
        partitions: by_ref,
    };
    let fsd = disc.read(
        udf.block_byte(fsd_at.partition, fsd_at.block)?,
        SECTOR_BYTES as usize,
    )?;
    let bad = |why: String| corrupt(format!("UDF file set descriptor: {why}"));
    if check_tag(&fsd, Some(fsd_at.block)).map_err(|e| bad(e.to_string()))? != TAG_FILE_SET {
        return Err(bad("not where the logical volume says".into()));
    }
    let root_icb = LongAd::parse(&fsd[400..416]);
    if root_icb.len == 0 {
        return Err(bad("it has no root folder".into()));
    }
    let root = udf.read_icb(disc, root_icb, "/".into())?;
    if !root.is_dir {
        return Err(bad("its root is not a folder".into()));
    }
    udf.root = root;
    Ok(udf)
}

/// What is wrong with one descriptor or name (`MediaError::Corrupt` with
/// where it was found in front, for the user).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UdfFault {
    #[error("a descriptor is cut short")]
    CutShort,
    #[error("its tag checksum is wrong")]
    Checksum,
    #[error("its CRC covers more bytes than it has")]
    CrcPastEnd,
    #[error("its CRC is wrong")]
    Crc,
    #[error("it says it is at block {said}, not {at}")]
    Location { said: u32, at: u32 },
    #[error("a name's length runs past its field")]
    NamePastField,
    #[error("a name in compression {0}, which is not 8 or 16")]
    Compression(u8),
}

/// A descriptor tag's identifier, once its checksum, its CRC and (when
/// given) its recorded location are right.
pub(crate) fn check_tag(buf: &[u8], location: Option<u32>) -> Result<u16, UdfFault> {
    let tag = buf.get(..16).ok_or(UdfFault::CutShort)?;
    let sum = tag
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 4)
        .fold(0u8, |acc, (_, b)| acc.wrapping_add(*b));
    if sum != tag[4] {
        return Err(UdfFault::Checksum);
    }
    let crc_len = usize::from(le16(tag, 10));
    let body = buf.get(16..16 + crc_len).ok_or(UdfFault::CrcPastEnd)?;
    if crc_itu(body) != le16(tag, 8) {
        return Err(UdfFault::Crc);
    }
    if let Some(at) = location
        && le32(tag, 12) != at
    {
        return Err(UdfFault::Location {
            said: le32(tag, 12),
            at,
        });
    }
    Ok(le16(tag, 0))
}

/// CRC-16/CCITT (polynomial 0x1021, initial 0), as ECMA-167 7.2.6 specifies.
pub(crate) fn crc_itu(data: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A dstring: OSTA compressed unicode whose used length is the field's last byte.
fn dstring(field: &[u8]) -> Result<String, UdfFault> {
    let used = usize::from(*field.last().unwrap_or(&0));
    if used == 0 {
        return Ok(String::new());
    }
    let bytes = field
        .get(..used)
        .filter(|_| used < field.len())
        .ok_or(UdfFault::NamePastField)?;
    cs0(bytes)
}

/// OSTA CS0 compressed unicode: a compression byte (8: one byte a
/// character; 16: UCS-2 big-endian), then the characters.
pub(crate) fn cs0(bytes: &[u8]) -> Result<String, UdfFault> {
    let Some((&id, rest)) = bytes.split_first() else {
        return Ok(String::new());
    };
    match id {
        8 | 254 => Ok(rest.iter().map(|&b| char::from(b)).collect()),
        16 | 255 => Ok(char::decode_utf16(
            rest.chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]])),
        )
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()),
        other => Err(UdfFault::Compression(other)),
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| {
        u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]])
    })
}
