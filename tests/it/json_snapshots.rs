//! `scan --json` and `check --json` of every real-machine fixture (and the
//! demo), kept as insta snapshots: a wrong value fails, not only a missing
//! key. The root's path (it differs per checkout) is the one thing replaced.
//! After a deliberate change: `INSTA_UPDATE=always cargo test --test it
//! json_snapshots`, then read the diff of `tests/it/snapshots/` before
//! committing it.

use std::path::Path;
use std::process::Command;

fn json_of(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    // Where the tree was read from, which differs per checkout and per
    // unpacked demo: said once at the top, and nowhere else.
    let root = v["root"].as_str().unwrap_or_default().to_string();
    assert!(!root.is_empty(), "{args:?}: no root");
    v["root"] = "<root>".into();
    let text = serde_json::to_string(&v).unwrap();
    assert!(
        !text.contains(&root),
        "{args:?}: the root's path {root} appears past its key"
    );
    v
}

#[test]
fn every_fixture_scans_and_checks_as_recorded() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology");
    let mut names: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| base.join(n).is_dir())
        .collect();
    names.sort();
    assert!(names.len() >= 16, "{names:?}");
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    settings.bind(|| {
        for n in &names {
            let root = base.join(n);
            let root = root.to_str().unwrap();
            insta::assert_json_snapshot!(
                format!("scan-{n}"),
                json_of(&["scan", "--json", "--root", root])
            );
            insta::assert_json_snapshot!(
                format!("check-{n}"),
                json_of(&["check", "--json", "--root", root])
            );
        }
        insta::assert_json_snapshot!("scan-demo", json_of(&["scan", "--json", "--demo"]));
    });
}

/// Fixes are words; a command to type is in `command`, which the app shows
/// only as "or in a terminal" next to its own button.
#[test]
fn fixes_name_no_command_and_commands_are_ours() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology");
    let mut roots: Vec<Vec<String>> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| vec!["--root".to_string(), p.to_string_lossy().into_owned()])
        .collect();
    roots.push(vec!["--demo".to_string()]);
    let mut commands = 0;
    for r in &roots {
        let mut args = vec!["check", "--json"];
        args.extend(r.iter().map(String::as_str));
        let v = json_of(&args);
        for f in v["findings"].as_array().unwrap() {
            let fix = f["fix"].as_str().unwrap_or("");
            assert!(
                !fix.contains("vfio-assistant"),
                "{r:?} {}: the fix names a command: {fix}",
                f["id"]
            );
            if let Some(c) = f["command"].as_str() {
                commands += 1;
                assert!(
                    c.starts_with("vfio-assistant ") || c.starts_with("sudo vfio-assistant "),
                    "{r:?} {}: {c}",
                    f["id"]
                );
            }
            assert!(
                f.get("action").is_some(),
                "{r:?} {}: no action key",
                f["id"]
            );
        }
    }
    // Captures lacking a file say how to capture again.
    assert!(commands > 0);
}
