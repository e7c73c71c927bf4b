//! A card's own ROM, read and judged: the one composition behind the app's
//! "Check its ROM", `check --read-rom` and `rom ADDRESS`.

use crate::checks::model::Finding;
use crate::checks::rom::{Card, rom_finding};
use crate::romread::{RomError, read_card_rom, rom_path};
use crate::sysroot::HostRoot;

/// What was read from the card and what it means.
pub struct CardRom {
    pub finding: Finding,
    /// The bytes (for `rom --save`), or why there are none.
    pub bytes: Result<Vec<u8>, RomError>,
}

/// Read `addr`'s ROM (root on the live host: the ROM BAR is switched on for
/// the read and off again) and judge it for `card` when the card is known.
pub fn card_rom(root: &HostRoot, addr: &str, card: Option<Card>) -> CardRom {
    let bytes = read_card_rom(root, addr);
    let finding = rom_finding(Some(addr), card, &rom_path(addr).to_string(), &bytes);
    CardRom { finding, bytes }
}
