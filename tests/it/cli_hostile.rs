//! Arguments a user (or a script gone wrong) can give: negative, NaN,
//! infinite and huge durations, CPUs the host does not have, a pinning
//! request bigger than the host. Each gets a clear message and exit 2, and
//! nothing starts; none panics.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Refused with exit 2 and a message holding `says`, without a panic.
fn refused(args: &[&str], says: &str) -> Result<(), String> {
    let o = run(args);
    let err = stderr(&o);
    if o.status.code() != Some(2) || !err.contains(says) || err.contains("panicked") {
        return Err(format!(
            "{args:?}: exit {:?}, stderr: {err}",
            o.status.code()
        ));
    }
    Ok(())
}

fn all_refused(cases: &[(Vec<&str>, &str)]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(args, says)| refused(args, says).err())
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn durations_and_numbers_are_checked_when_read() {
    let mut cases = Vec::new();
    for bad in [
        "-1", "NaN", "nan", "inf", "-inf", "1e300", "0", "-0", "ten", "",
    ] {
        cases.push((
            vec!["monitor", "--demo", "--duration-s", bad],
            "--duration-s",
        ));
    }
    for (flag, bad) in [
        ("--duration-s", "-1"),
        ("--duration-s", "0"),
        ("--duration-s", "1e300"),
        ("--duration-s", "86401"),
        ("--duration-s", "nan"),
        ("--interval-us", "1"),
        ("--interval-us", "-5"),
        ("--interval-us", "99999999999"),
        ("--priority", "0"),
        ("--priority", "1000"),
    ] {
        cases.push((vec!["latency", "--cpus", "0", flag, bad], flag));
    }
    cases.push((
        vec!["monitor", "--demo", "--interval-ms", "0"],
        "--interval-ms",
    ));
    cases.push((vec!["pin", "--demo", "--vcpus", "0"], "--vcpus"));
    cases.push((vec!["pin", "--demo", "--vcpus", "-3"], "--vcpus"));
    all_refused(&cases);
    // A fraction of a second is a duration like any other.
    let o = run(&[
        "monitor",
        "--demo",
        "--json",
        "--interval-ms",
        "50",
        "--duration-s",
        "0.2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `--host` is read once, where the arguments are read: a bad address is
/// refused before any command starts (no snapshot fetched, nothing run
/// there), for every command, with the form it takes.
#[test]
fn a_bad_host_address_is_refused_where_the_arguments_are_read() {
    let mut cases = Vec::new();
    for bad in [
        "server",
        "ssh://-oProxyCommand=x",
        "ssh://host:0",
        "ssh://a b",
        "",
    ] {
        for cmd in [
            vec!["scan"],
            vec!["tune", "status"],
            vec!["domain", "list"],
            vec!["monitor"],
        ] {
            let mut args = cmd.clone();
            args.extend(["--host", bad]);
            cases.push((args, "--host"));
        }
    }
    all_refused(&cases);
    let o = run(&["scan", "--host", "server"]);
    assert!(
        stderr(&o).contains("give ssh://[user@]host[:port][/path]"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn latency_refuses_cpus_the_host_does_not_have_before_starting_anything() {
    let t0 = Instant::now();
    all_refused(&[
        (
            vec!["latency", "--cpus", "0-65535", "--duration-s", "60"],
            "65535 are not online on this host (online: 0",
        ),
        (
            vec!["latency", "--cpus", "65535", "--duration-s", "60"],
            "--cpus 65535: CPU 65535 is not online on this host",
        ),
        (
            vec!["latency", "--cpus", "", "--duration-s", "60"],
            "names no CPU",
        ),
        (
            vec!["latency", "--cpus", "0-", "--duration-s", "60"],
            "--cpus",
        ),
        (vec!["latency", "--cpus", "99999999999"], "--cpus"),
    ]);
    // Refused at once: no probe ran for the minute asked.
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topology")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn a_pinning_request_too_big_says_what_fits_and_what_reserve_frees() {
    // The demo's Ryzen: 6 cores x 2 threads, core 0 (CPUs 0,6) kept by default.
    let o = run(&["pin", "--demo", "--vcpus", "12"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("only 10 host threads are free"), "{err}");
    assert!(err.contains("This host has 12 CPUs online (0-11)"), "{err}");
    assert!(err.contains("at most 10 vCPUs can be pinned here"), "{err}");
    assert!(err.contains("--reserve cannot free more"), "{err}");
    // A reserve wider than it needs: the one that frees enough.
    let o = run(&["pin", "--demo", "--vcpus", "8", "--reserve", "0-3"]);
    let err = stderr(&o);
    assert!(
        err.contains("--reserve 0-3 widened to whole cores"),
        "{err}"
    );
    assert!(
        err.contains(
            "`--reserve 0,6` keeps only that core (2 threads) for the host and frees 10 threads"
        ),
        "{err}"
    );
    assert!(!err.contains("at most"), "8 fit: {err}");
    // A hybrid Intel (6 P-cores with 2 threads, 8 E-cores with 1): keeping
    // one E-core instead of P-core 0 frees one thread more.
    let root = fixture("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t");
    let o = run(&["pin", "--root", &root, "--vcpus", "19"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("only 18 host threads are free"), "{err}");
    assert!(err.contains("keeps only that core (1 thread)"), "{err}");
    assert!(err.contains("frees 19 threads"), "{err}");
}

#[test]
fn an_empty_reserve_is_refused_not_written_as_an_empty_cpuset() {
    all_refused(&[(
        vec!["pin", "--demo", "--vcpus", "2", "--reserve", ""],
        "names no CPU",
    )]);
    let o = run(&["pin", "--demo", "--vcpus", "2", "--reserve", "0", "--xml"]);
    let xml = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(!xml.contains("cpuset=''"), "{xml}");
}

#[test]
fn domain_new_refuses_memory_no_host_has() {
    all_refused(&[
        (
            vec![
                "--demo",
                "domain",
                "new",
                "--name",
                "x",
                "--vcpus",
                "2",
                "--memory",
                "18446744073709551615M",
                "--disk",
                "/x.qcow2",
            ],
            "more than 64 TiB",
        ),
        (
            vec![
                "--demo", "domain", "new", "--name", "x", "--vcpus", "2", "--memory", "-1G",
                "--disk", "/x.qcow2",
            ],
            "--memory",
        ),
    ]);
}
