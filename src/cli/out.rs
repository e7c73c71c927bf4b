//! Where the CLI writes. `println!` panics when the reader has gone (`| head`
//! closes the pipe): `out!`/`outln!` return the failure instead, as a
//! `StdoutError` that `main` recognises, so a closed pipe ends the command
//! quietly with exit 0, as ripgrep does. `errln!` writes to stderr and never
//! fails (there is nowhere left to say that stderr failed).

use std::io::{self, Write};

/// Writing to stdout failed; `is_closed` when the reader closed the pipe.
#[derive(Debug, thiserror::Error)]
#[error("writing to stdout: {0}")]
pub struct StdoutError(#[source] io::Error);

impl StdoutError {
    pub fn is_closed(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

/// Write formatted text to stdout (used by `out!` and `outln!`).
pub fn write_fmt(args: std::fmt::Arguments<'_>) -> Result<(), StdoutError> {
    io::stdout().lock().write_fmt(args).map_err(StdoutError)
}

/// Push out what stdout still holds (a last line without a newline).
pub fn flush() -> Result<(), StdoutError> {
    io::stdout().lock().flush().map_err(StdoutError)
}

/// Whether `err` is (or was caused by) stdout's reader closing the pipe.
pub fn closed(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<StdoutError>()
            .is_some_and(StdoutError::is_closed)
    })
}

/// Write to stderr, ignoring failure (`eprintln!` would panic).
pub fn err_fmt(args: std::fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// `print!` that returns `Result<(), StdoutError>` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::write_fmt(format_args!($($arg)*))
    };
}

/// `println!` that returns `Result<(), StdoutError>` instead of panicking.
macro_rules! outln {
    () => {
        $crate::cli::out::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::out::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::out::err_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, out, outln};
