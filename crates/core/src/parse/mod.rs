//! Pure text parsers (`&str -> Result<T, ParseError>`), no I/O. Each is unit-tested
//! on real text; the readers in `host/` feed them files through a `HostRoot`.

pub mod arm_midr;
pub mod cmdline;
pub mod cpio;
pub mod cpulist;
pub mod digits;
pub mod domstats;
pub mod interrupts;
pub mod modules;
pub mod option_rom;
pub mod paired_lines;
pub mod pci_config;
pub mod pci_resource;
pub mod pe;
pub mod procstat;
pub mod qmp;
pub mod task;
pub mod values;

/// Why a piece of text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    pub fn new(msg: impl Into<String>) -> Self {
        ParseError(msg.into())
    }
}
