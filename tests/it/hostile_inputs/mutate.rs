//! The mutator of the hostile-input harness: a reproducible generator and
//! the ways a real input is damaged (see hostile_inputs.rs).

/// xorshift64*: reproducible from its seed, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const TOKENS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999",
    b"4294967295",
    b"0x",
    b"0xffffffffffffffff",
    b"\xff\xfe",
    "é".as_bytes(),
    "\u{feff}".as_bytes(),
    "𝄞".as_bytes(),
    b"\n",
    b"\r\n",
    b" ",
    b"\t",
    b":",
    b",",
    b"-",
    b"=",
    b"\"",
    b"'",
    b"<",
    b">",
    b"</",
    b"/>",
    b"<a>",
    b"&",
    b"&amp;",
    b"&#0;",
    b"&#x110000;",
    b"&lol;",
    b"<!DOCTYPE d [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;\">]>",
    b"<![CDATA[",
    b"<?xml version='1.0'?>",
    b"{",
    b"}",
    b"[",
    b"]",
    b"null",
    b"070701",
    b"TRAILER!!!",
    b"\x55\xaa",
    b"PCIR",
    b"\x00\x00\x00\x00\x00\x00\x00\x00",
    b"CPU0",
    b"processor\t: ",
    b"vfio-msix[0](0000:01:00.0)",
    b"Node 0, zone   Normal ",
    b"vcpu.0.",
];

/// Mutated copies of the seeds (at most `MAX_INPUT` bytes), and now and
/// then plain random bytes.
pub const MAX_INPUT: usize = 1 << 20;

pub fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], out: &mut Vec<u8>) {
    out.clear();
    if seeds.is_empty() || rng.below(16) == 0 {
        let n = rng.below(512);
        out.extend((0..n).map(|_| rng.next() as u8));
        return;
    }
    let seed = &seeds[rng.below(seeds.len())];
    if rng.below(16) == 0 {
        // A short window of a seed: the cut-off starts parsers choke on.
        let from = rng.below(seed.len() + 1);
        out.extend_from_slice(&seed[from..(from + rng.below(32)).min(seed.len())]);
    } else {
        out.extend_from_slice(seed);
    }
    for _ in 0..1 + rng.below(8) {
        let len = out.len();
        // The edges a quarter of the time: a BOM goes first, a cut goes last.
        let at = match rng.below(8) {
            0 => 0,
            1 => len,
            _ => rng.below(len + 1),
        };
        match rng.below(10) {
            0 if len > 0 => out[at.min(len - 1)] ^= 1 << rng.below(8),
            1 if len > 0 => {
                out[at.min(len - 1)] = [0, 0xff, b'\n', b' ', b'9', b'<', 0x80][rng.below(7)]
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, t.iter().copied());
            }
            3 => {
                let end = (at + rng.below(256)).min(len);
                out.drain(at..end);
            }
            4 if at < len => {
                // A range repeated: long lines, deep nesting, many entries.
                let end = (at + 1 + rng.below(64)).min(len);
                let chunk = out[at..end].to_vec();
                for _ in 0..rng.below(200) {
                    if out.len() + chunk.len() > MAX_INPUT {
                        break;
                    }
                    out.splice(at..at, chunk.iter().copied());
                }
            }
            5 => out.truncate(at),
            6 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                let to = (from + rng.below(4096)).min(other.len());
                out.splice(at..at, other[from..to].iter().copied());
            }
            7 => {
                let n = rng.below(32);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(at..at, junk);
            }
            8 => {
                // The next number made huge.
                if let Some(p) = out[at..].iter().position(u8::is_ascii_digit) {
                    let p = at + p;
                    out.splice(p..p, b"9999999999999999999999".iter().copied());
                }
            }
            _ => {
                let t = ["é", "\u{feff}", "\u{0}", "ß", "中"][rng.below(5)];
                out.splice(at..at, t.bytes());
            }
        }
    }
    out.truncate(MAX_INPUT);
}
