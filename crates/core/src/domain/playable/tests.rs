use super::*;

#[test]
fn looking_glass_sizes_are_the_projects_own() {
    assert_eq!(looking_glass_mib(1920, 1080, false), 32);
    assert_eq!(looking_glass_mib(1920, 1200, false), 32);
    assert_eq!(looking_glass_mib(2560, 1440, false), 64);
    assert_eq!(looking_glass_mib(3840, 2160, false), 128);
    assert_eq!(looking_glass_mib(3840, 2160, true), 256);
}

#[test]
fn pipewire_only_where_both_know_it() {
    assert_eq!(
        audio_backend(Some(7_002_000), Some(9_000_000), false),
        AudioBackend::Pulseaudio
    );
    assert_eq!(
        audio_backend(Some(8_001_000), Some(9_000_000), false),
        AudioBackend::Pulseaudio
    );
    assert_eq!(
        audio_backend(Some(8_002_002), Some(10_000_000), false),
        AudioBackend::Pipewire
    );
    assert_eq!(audio_backend(None, None, false), AudioBackend::Pulseaudio);
    assert_eq!(
        audio_backend(Some(8_002_002), Some(10_000_000), true),
        AudioBackend::Spice
    );
}

const OLD: &str = "<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n  <name>w</name>\n  <devices>\n    <!-- mine -->\n    <input type='mouse' bus='ps2'/>\n  </devices>\n  <qemu:commandline>\n    <qemu:arg value='-object'/>\n    <qemu:arg value='input-linux,id=kbd1,evdev=/dev/input/by-id/usb-K-event-kbd,grab_all=on,repeat=on'/>\n    <qemu:arg value='-smbios'/>\n    <qemu:arg value='type=1'/>\n  </qemu:commandline>\n</domain>\n";

#[test]
fn an_input_linux_recipe_becomes_native_evdev_and_the_rest_stays() {
    let mut doc = Document::parse(OLD).unwrap();
    let p = Playable {
        evdev_keyboard: Some("/dev/input/by-id/usb-K-event-kbd".into()),
        evdev_mouse: Some("/dev/input/by-id/usb-M-event-mouse".into()),
        ..Playable::default()
    };
    let edits = apply_playable(&mut doc, &p).unwrap();
    let out = doc.serialize();
    assert!(!out.contains("input-linux"), "{out}");
    assert!(out.contains("<qemu:arg value='-smbios'/>"), "{out}");
    assert!(out.contains("<!-- mine -->"), "{out}");
    assert!(
        out.contains("grabToggle=\"ctrl-ctrl\"") || out.contains("grabToggle='ctrl-ctrl'"),
        "{out}"
    );
    assert!(
        out.contains("type=\"evdev\"") || out.contains("type='evdev'"),
        "{out}"
    );
    assert!(edits.iter().any(|e| e.path == "qemu:commandline"));
    // Applied again: the same document.
    let again = apply_playable(&mut doc, &p).unwrap();
    assert_eq!(
        doc.serialize().matches("evdev").count(),
        out.matches("evdev").count()
    );
    assert!(again.iter().all(|e| e.path != "qemu:commandline"));
}

#[test]
fn bad_choices_are_refused() {
    let p = Playable {
        evdev_keyboard: Some("/dev/input/by-id/usb-K-kbd".into()),
        ..Playable::default()
    };
    assert!(matches!(validate(&p), Err(PlayError::NotEvdev(_))));
    let p = Playable {
        grab_toggle: Some("f12".into()),
        ..Playable::default()
    };
    assert!(matches!(validate(&p), Err(PlayError::Toggle(..))));
}
