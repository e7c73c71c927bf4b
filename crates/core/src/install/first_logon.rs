//! What runs at Windows' first logon, from our media: the virtio-win guest
//! tools (the guest agent and the SPICE agent) from the virtio-win disc on
//! whatever letter it has, the Looking Glass host when the VM has Looking
//! Glass and the user gave its installer, and MSI mode for the
//! passed-through GPU's functions. Windows enumerates the card's functions
//! a little after the first logon, and a vendor driver's install resets
//! the key, so MSI mode is also a scheduled task at every start
//! (`msi.ps1`, copied to `C:\ProgramData\vfio-assistant`). Everything is
//! logged to `C:\ProgramData\vfio-assistant\first-logon.log`, and
//! `first-logon.done` says it is over: the host reads both through the
//! guest agent.

use std::fmt::Write as _;

/// Where the guest keeps our scripts and log.
pub const GUEST_DIR: &str = "C:\\ProgramData\\vfio-assistant";
/// The file whose presence says the first logon's work is over.
pub const DONE_FILE: &str = "C:\\ProgramData\\vfio-assistant\\first-logon.done";
/// The Looking Glass host installer's name on our media.
pub const LG_INSTALLER: &str = "looking-glass-host-setup.exe";

/// What the first logon does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirstLogon {
    /// The GPU's functions as PCI vendor and device IDs (e.g. 0x10de,
    /// 0x2484 and its audio 0x10de, 0x228b).
    pub msi_ids: Vec<(u16, u16)>,
    /// The Looking Glass host installer is on the media.
    pub looking_glass: bool,
}

/// `PCI\VEN_10DE&DEV_2484`: the start of the functions' instance IDs.
fn id_patterns(ids: &[(u16, u16)]) -> String {
    ids.iter()
        .map(|(v, d)| format!("'PCI\\VEN_{v:04X}&DEV_{d:04X}*'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The MSI script: for every present device whose instance ID matches,
/// `MSISupported` = 1 under its Device Parameters (Microsoft's "Interrupt
/// Management" key). Run at first logon (waiting up to ten minutes for the
/// functions to appear) and by the startup task (no wait).
pub fn msi_script(ids: &[(u16, u16)]) -> String {
    format!(
        r#"param([int]$WaitMinutes = 0)
# VFIO Assistant: MSI mode for the passed-through GPU's functions.
$patterns = @({})
$log = '{GUEST_DIR}\first-logon.log'
$deadline = (Get-Date).AddMinutes($WaitMinutes)
do {{
  $devs = @(Get-PnpDevice -PresentOnly -ErrorAction SilentlyContinue | Where-Object {{ $id = $_.InstanceId; @($patterns | Where-Object {{ $id -like $_ }}).Count -gt 0 }})
  if ($devs.Count -ge $patterns.Count) {{ break }}
  Start-Sleep -Seconds 10
}} while ((Get-Date) -lt $deadline)
foreach ($d in $devs) {{
  $key = "HKLM:\SYSTEM\CurrentControlSet\Enum\$($d.InstanceId)\Device Parameters\Interrupt Management\MessageSignaledInterruptProperties"
  New-Item -Path $key -Force | Out-Null
  New-ItemProperty -Path $key -Name MSISupported -PropertyType DWord -Value 1 -Force | Out-Null
  Add-Content -Path $log -Value ("{{0:s}} MSI mode on for {{1}}" -f (Get-Date), $d.InstanceId)
}}
"#,
        id_patterns(ids)
    )
}

/// The first-logon script (`-Media D:` is our drive).
pub fn first_logon_script(f: &FirstLogon) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"param([string]$Media)
# VFIO Assistant: the first logon after an unattended install.
$dir = '{GUEST_DIR}'
New-Item -ItemType Directory -Force -Path $dir | Out-Null
$log = Join-Path $dir 'first-logon.log'
function Say($m) {{ Add-Content -Path $log -Value ("{{0:s}} {{1}}" -f (Get-Date), $m) }}
Say "started from $Media"
$tools = Get-PSDrive -PSProvider FileSystem | ForEach-Object {{ Join-Path $_.Root 'virtio-win-guest-tools.exe' }} | Where-Object {{ Test-Path $_ }} | Select-Object -First 1
if ($tools) {{
  $p = Start-Process -FilePath $tools -ArgumentList '/install','/quiet','/norestart' -Wait -PassThru
  Say "virtio-win guest tools ($tools): exit $($p.ExitCode)"
}} else {{
  Say 'virtio-win-guest-tools.exe is on no drive: the guest agent is not installed'
}}
"#
    );
    if f.looking_glass {
        let _ = write!(
            s,
            r#"$lg = Join-Path $Media 'vfio-assistant\{LG_INSTALLER}'
if (Test-Path $lg) {{
  $p = Start-Process -FilePath $lg -ArgumentList '/S' -Wait -PassThru
  Say "Looking Glass host: exit $($p.ExitCode)"
}} else {{
  Say 'the Looking Glass host installer is not on the media'
}}
"#
        );
    }
    if !f.msi_ids.is_empty() {
        let _ = write!(
            s,
            r#"Copy-Item -Path (Join-Path $Media 'vfio-assistant\msi.ps1') -Destination $dir -Force
& (Join-Path $dir 'msi.ps1') -WaitMinutes 10
$action = New-ScheduledTaskAction -Execute 'powershell.exe' -Argument "-NoProfile -ExecutionPolicy Bypass -File `"$dir\msi.ps1`""
$trigger = New-ScheduledTaskTrigger -AtStartup
Register-ScheduledTask -TaskName 'VFIO Assistant MSI mode' -Action $action -Trigger $trigger -User 'SYSTEM' -RunLevel Highest -Force | Out-Null
Say 'MSI mode: the startup task is registered'
"#
        );
    }
    let _ = write!(
        s,
        r#"New-Item -ItemType File -Force -Path '{DONE_FILE}' | Out-Null
Say 'done: restarting once so the drivers and MSI mode take effect'
shutdown.exe /r /t 30 /c "VFIO Assistant: restarting once to finish the setup"
"#
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_does_only_what_the_vm_has() {
        let bare = first_logon_script(&FirstLogon::default());
        assert!(bare.contains("virtio-win-guest-tools.exe"));
        assert!(!bare.contains("Looking Glass host:"));
        assert!(!bare.contains("msi.ps1"));
        assert!(bare.contains(DONE_FILE));
        let full = first_logon_script(&FirstLogon {
            msi_ids: vec![(0x10de, 0x2484), (0x10de, 0x228b)],
            looking_glass: true,
        });
        assert!(full.contains(LG_INSTALLER) && full.contains("'/S'"));
        assert!(full.contains("Register-ScheduledTask"));
        let msi = msi_script(&[(0x10de, 0x2484), (0x10de, 0x228b)]);
        assert!(
            msi.contains("'PCI\\VEN_10DE&DEV_2484*', 'PCI\\VEN_10DE&DEV_228B*'"),
            "{msi}"
        );
        assert!(msi.contains("MessageSignaledInterruptProperties"));
    }
}
