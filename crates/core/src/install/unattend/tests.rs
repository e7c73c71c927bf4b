//! The answer file against Microsoft's unattend reference
//! (learn.microsoft.com/windows-hardware/customize/desktop/unattend/): each
//! component in a pass it is documented for ("Applies to"), each setting one
//! the component documents, for Windows 10 and 11 alike (every setting below
//! is listed for both in the reference). `SCHEMA` is that table, written from
//! the reference pages named beside each row.

use super::*;
use crate::install::host_locale::HostLocale;
use quick_xml::Reader;
use quick_xml::events::Event;

/// (component, passes it applies to, the setting paths under it we may write).
const SCHEMA: &[(&str, &[&str], &[&str])] = &[
    // microsoft-windows-international-core-winpe: windowsPE only.
    (
        "Microsoft-Windows-International-Core-WinPE",
        &["windowsPE"],
        &[
            "SetupUILanguage",
            "SetupUILanguage/UILanguage",
            "InputLocale",
            "SystemLocale",
            "UILanguage",
            "UserLocale",
        ],
    ),
    // microsoft-windows-international-core: specialize, oobeSystem.
    (
        "Microsoft-Windows-International-Core",
        &["specialize", "oobeSystem"],
        &["InputLocale", "SystemLocale", "UILanguage", "UserLocale"],
    ),
    // microsoft-windows-setup: windowsPE only.
    (
        "Microsoft-Windows-Setup",
        &["windowsPE"],
        &[
            "DiskConfiguration",
            "DiskConfiguration/Disk",
            "DiskConfiguration/Disk/DiskID",
            "DiskConfiguration/Disk/WillWipeDisk",
            "DiskConfiguration/Disk/CreatePartitions",
            "DiskConfiguration/Disk/CreatePartitions/CreatePartition",
            "DiskConfiguration/Disk/CreatePartitions/CreatePartition/Order",
            "DiskConfiguration/Disk/CreatePartitions/CreatePartition/Type",
            "DiskConfiguration/Disk/CreatePartitions/CreatePartition/Size",
            "DiskConfiguration/Disk/CreatePartitions/CreatePartition/Extend",
            "DiskConfiguration/Disk/ModifyPartitions",
            "DiskConfiguration/Disk/ModifyPartitions/ModifyPartition",
            "DiskConfiguration/Disk/ModifyPartitions/ModifyPartition/Order",
            "DiskConfiguration/Disk/ModifyPartitions/ModifyPartition/PartitionID",
            "DiskConfiguration/Disk/ModifyPartitions/ModifyPartition/Label",
            "DiskConfiguration/Disk/ModifyPartitions/ModifyPartition/Letter",
            "DiskConfiguration/Disk/ModifyPartitions/ModifyPartition/Format",
            "ImageInstall",
            "ImageInstall/OSImage",
            "ImageInstall/OSImage/InstallFrom",
            "ImageInstall/OSImage/InstallFrom/MetaData",
            "ImageInstall/OSImage/InstallFrom/MetaData/Key",
            "ImageInstall/OSImage/InstallFrom/MetaData/Value",
            "ImageInstall/OSImage/InstallTo",
            "ImageInstall/OSImage/InstallTo/DiskID",
            "ImageInstall/OSImage/InstallTo/PartitionID",
            "UserData",
            "UserData/AcceptEula",
            "UserData/ProductKey",
            "UserData/ProductKey/Key",
            "UserData/ProductKey/WillShowUI",
        ],
    ),
    // microsoft-windows-shell-setup: specialize (ComputerName, TimeZone) and
    // oobeSystem (OOBE, UserAccounts, AutoLogon, FirstLogonCommands, TimeZone).
    (
        "Microsoft-Windows-Shell-Setup",
        &["specialize", "oobeSystem"],
        &[
            "ComputerName",
            "TimeZone",
            "OOBE",
            "OOBE/HideEULAPage",
            "OOBE/HideOEMRegistrationScreen",
            "OOBE/HideOnlineAccountScreens",
            "OOBE/HideWirelessSetupInOOBE",
            "OOBE/ProtectYourPC",
            "UserAccounts",
            "UserAccounts/LocalAccounts",
            "UserAccounts/LocalAccounts/LocalAccount",
            "UserAccounts/LocalAccounts/LocalAccount/Name",
            "UserAccounts/LocalAccounts/LocalAccount/DisplayName",
            "UserAccounts/LocalAccounts/LocalAccount/Group",
            "UserAccounts/LocalAccounts/LocalAccount/Password",
            "UserAccounts/LocalAccounts/LocalAccount/Password/Value",
            "UserAccounts/LocalAccounts/LocalAccount/Password/PlainText",
            "AutoLogon",
            "AutoLogon/Enabled",
            "AutoLogon/LogonCount",
            "AutoLogon/Username",
            "AutoLogon/Password",
            "AutoLogon/Password/Value",
            "AutoLogon/Password/PlainText",
            "FirstLogonCommands",
            "FirstLogonCommands/SynchronousCommand",
            "FirstLogonCommands/SynchronousCommand/Order",
            "FirstLogonCommands/SynchronousCommand/Description",
            "FirstLogonCommands/SynchronousCommand/CommandLine",
        ],
    ),
];

/// Settings the reference allows only in one of Shell-Setup's passes.
const SHELL_SPECIALIZE_ONLY: &[&str] = &["ComputerName"];
const SHELL_OOBE_ONLY: &[&str] = &["OOBE", "UserAccounts", "AutoLogon", "FirstLogonCommands"];

fn answer(user: &str, password: &str) -> Answer {
    Answer {
        windows: Windows::Eleven,
        arch: "amd64".into(),
        image_index: 6,
        locale: HostLocale {
            language: "de-DE".into(),
            input_locale: "0407:00000407".into(),
            time_zone: "W. Europe Standard Time".into(),
            notes: Vec::new(),
        },
        computer_name: "win11-gaming".into(),
        user: user.into(),
        password: Secret(password.into()),
    }
}

/// Every (pass, component, setting path, text) in the document.
fn settings(xml: &str) -> Vec<(String, String, String, String)> {
    let mut r = Reader::from_str(xml);
    let mut out = Vec::new();
    let (mut pass, mut comp) = (String::new(), String::new());
    let mut path: Vec<String> = Vec::new();
    let mut depth_in_comp = None::<usize>;
    let mut stack = 0usize;
    loop {
        match r.read_event().expect("the answer file parses") {
            Event::Start(e) => {
                stack += 1;
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                let attr = |k: &str| {
                    e.attributes()
                        .flatten()
                        .find(|a| a.key.as_ref() == k.as_bytes())
                        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                };
                match name.as_str() {
                    "settings" => pass = attr("pass").expect("a pass"),
                    "component" => {
                        comp = attr("name").expect("a name");
                        assert_eq!(attr("publicKeyToken").as_deref(), Some("31bf3856ad364e35"));
                        assert_eq!(attr("language").as_deref(), Some("neutral"));
                        assert_eq!(attr("versionScope").as_deref(), Some("nonSxS"));
                        depth_in_comp = Some(stack);
                    }
                    _ if depth_in_comp.is_some() => {
                        path.push(name);
                        out.push((pass.clone(), comp.clone(), path.join("/"), String::new()));
                    }
                    _ => {}
                }
            }
            Event::Text(t) => {
                if let Some(last) = out.last_mut()
                    && !path.is_empty()
                    && last.2 == path.join("/")
                {
                    last.3.push_str(t.decode().expect("text").trim());
                }
            }
            Event::GeneralRef(r) => {
                if let Some(last) = out.last_mut() {
                    let name = String::from_utf8_lossy(r.as_ref()).into_owned();
                    let c = match name.as_str() {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "quot" => '"',
                        "apos" => '\'',
                        other => panic!("an entity {other}"),
                    };
                    last.3.push(c);
                }
            }
            Event::End(e) => {
                if depth_in_comp == Some(stack) && e.name().as_ref() == b"component" {
                    depth_in_comp = None;
                } else if depth_in_comp.is_some() {
                    path.pop();
                }
                stack -= 1;
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

#[test]
fn every_component_and_setting_is_where_the_reference_allows_it() {
    let xml = answer_xml(&answer("Ada", "pa<ss>&\"word")).expect("answer");
    let all = settings(&xml);
    assert!(all.len() > 60, "{} settings", all.len());
    for (pass, comp, path, _) in &all {
        let (_, passes, paths) = SCHEMA
            .iter()
            .find(|(c, _, _)| c == comp)
            .unwrap_or_else(|| panic!("{comp} is not a component we checked"));
        assert!(passes.contains(&pass.as_str()), "{comp} in {pass}");
        assert!(
            paths.contains(&path.as_str()),
            "{comp}/{path} is not a documented setting"
        );
        let top = path.split('/').next().unwrap_or("");
        if comp == "Microsoft-Windows-Shell-Setup" {
            assert!(
                !(pass == "oobeSystem" && SHELL_SPECIALIZE_ONLY.contains(&top)),
                "{path} in {pass}"
            );
            assert!(
                !(pass == "specialize" && SHELL_OOBE_ONLY.contains(&top)),
                "{path} in {pass}"
            );
        }
    }
    let value = |p: &str| {
        all.iter()
            .find(|s| s.2 == p)
            .map(|s| s.3.clone())
            .unwrap_or_else(|| panic!("{p} missing"))
    };
    // The values round-trip through escaping; the edition is the index asked for.
    assert_eq!(
        value("UserAccounts/LocalAccounts/LocalAccount/Password/Value"),
        "pa<ss>&\"word"
    );
    assert_eq!(
        value("ImageInstall/OSImage/InstallFrom/MetaData/Value"),
        "6"
    );
    assert_eq!(value("InputLocale"), "0407:00000407");
    assert_eq!(value("ComputerName"), "WIN11-GAMING");
    assert_eq!(value("TimeZone"), "W. Europe Standard Time");
    // GPT for UEFI: an EFI and an MSR partition, Windows on the third.
    let types: Vec<String> = all
        .iter()
        .filter(|s| s.2.ends_with("CreatePartition/Type"))
        .map(|s| s.3.clone())
        .collect();
    assert_eq!(types, ["EFI", "MSR", "Primary"]);
    assert_eq!(value("ImageInstall/OSImage/InstallTo/PartitionID"), "3");
}

#[test]
fn no_bypass_no_fixed_drive_letter_and_the_first_logon_finds_its_media() {
    let xml = answer_xml(&answer("Ada", "x")).expect("answer");
    for not in [
        "LabConfig",
        "BypassTPMCheck",
        "BypassNRO",
        "DriverPaths",
        "E:\\",
    ] {
        assert!(!xml.contains(not), "{not} in the answer file");
    }
    let cmd = first_logon_command();
    assert!(cmd.contains("for %d in (D E F"), "{cmd}");
    assert!(xml.contains("vfio-assistant\\first-logon.ps1"));
}

#[test]
fn bad_names_and_passwords_are_refused_before_anything_is_written() {
    for bad in ["", "a/b", "x@y", "...", "  ", "twentyonecharacters__"] {
        assert_eq!(
            check_user(bad),
            Err(AnswerError::BadUser(bad.into())),
            "{bad:?}"
        );
    }
    assert_eq!(
        check_user("Administrator"),
        Err(AnswerError::ReservedUser("Administrator".into()))
    );
    assert!(check_user("Ada Lovelace").is_ok());
    assert_eq!(
        answer_xml(&answer("Ada", "a\nb")).err(),
        Some(AnswerError::BadPassword)
    );
    assert!(!format!("{:?}", answer("Ada", "hunter2")).contains("hunter2"));
}

#[test]
fn computer_names_are_netbios_safe() {
    assert_eq!(computer_name("win11"), "WIN11");
    assert_eq!(
        computer_name("my gaming vm with a long name"),
        "MY-GAMING-VM-WI"
    );
    assert_eq!(computer_name("1234"), "VM-1234");
    assert_eq!(computer_name("__"), "WINDOWS-VM");
}
