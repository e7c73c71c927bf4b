//! The answer file (`autounattend.xml`) Windows Setup finds at the root of
//! our answer media, in Microsoft's unattend schema
//! (`urn:schemas-microsoft-com:unattend`). Three passes:
//! * **windowsPE**: the host's language and keyboard
//!   (`Microsoft-Windows-International-Core-WinPE`), the disk wiped and laid
//!   out for UEFI as GPT (EFI 300 MB FAT32, MSR 16 MB, Windows NTFS on the
//!   rest), the edition chosen by its index in `install.wim`, the EULA.
//!   No driver paths: the storage, network and serial drivers sit in the
//!   media's `$WinPEDriver$` folder, which Setup loads from the root of any
//!   attached drive whatever its letter (a fixed `E:\` in `DriverPaths` is
//!   what breaks when the drives come in another order).
//! * **specialize**: the computer's name and time zone.
//! * **oobeSystem**: language again (`International-Core`), the online
//!   account and privacy pages skipped, one local administrator the user
//!   named, one automatic logon to run the first-logon script, which finds
//!   our media by its own marker file on any drive letter.
//!
//! No `LabConfig` bypass: our VMs have TPM 2.0 and Secure Boot. The
//! password is in the answer file because Setup needs it there: the media
//! lives only until the install is over (`install::finish`), and nothing we
//! keep holds it.

use super::host_locale::HostLocale;
use crate::domain::template::Windows;
use quick_xml::escape::escape;
use std::fmt::Write as _;

/// The folder on our media that holds the scripts; finding it tells the
/// first logon which drive is ours.
pub const MEDIA_DIR: &str = "vfio-assistant";
/// The script the first logon runs from `MEDIA_DIR`.
pub const FIRST_LOGON: &str = "first-logon.ps1";

/// A password, never printed by `{:?}`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Everything the answer file says.
#[derive(Debug, Clone)]
pub struct Answer {
    pub windows: Windows,
    /// "amd64" or "arm64" (the image's architecture).
    pub arch: String,
    /// The edition's index in `install.wim`.
    pub image_index: u32,
    pub locale: HostLocale,
    /// Windows' computer name (at most 15 characters).
    pub computer_name: String,
    pub user: String,
    pub password: Secret,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnswerError {
    #[error(
        "\"{0}\" cannot be a Windows account name: use 1 to 20 letters, digits, spaces, dots, dashes or underscores, not only dots and spaces"
    )]
    BadUser(String),
    #[error("\"{0}\" is a name Windows keeps for itself: choose another account name")]
    ReservedUser(String),
    #[error("the password cannot hold control characters (a line break or a tab)")]
    BadPassword,
}

/// A local account name Windows accepts: at most 20 characters, none of
/// `"/\[]:;|=,+*?<>@`, not only dots and spaces (Microsoft's rules for user
/// names), and not one of the built-in accounts.
pub fn check_user(name: &str) -> Result<(), AnswerError> {
    let ok_char = |c: char| c.is_alphanumeric() || matches!(c, ' ' | '.' | '-' | '_');
    if name.is_empty()
        || name.chars().count() > 20
        || !name.chars().all(ok_char)
        || name.chars().all(|c| c == '.' || c == ' ')
    {
        return Err(AnswerError::BadUser(name.into()));
    }
    let reserved = [
        "administrator",
        "guest",
        "defaultaccount",
        "wdagutilityaccount",
        "system",
    ];
    if reserved.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(AnswerError::ReservedUser(name.into()));
    }
    Ok(())
}

/// A NetBIOS-safe computer name from the VM's: letters, digits and dashes,
/// at most 15, not only digits.
pub fn computer_name(vm: &str) -> String {
    let mut s: String = vm
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .chars()
        .take(15)
        .collect();
    s = s.trim_end_matches('-').to_string();
    if s.is_empty() {
        s = "WINDOWS-VM".into();
    } else if s.chars().all(|c| c.is_ascii_digit()) {
        s = format!("VM-{s}").chars().take(15).collect();
    }
    s
}

fn component(x: &mut String, name: &str, arch: &str, body: &str) {
    let _ = writeln!(
        x,
        "    <component name=\"{name}\" processorArchitecture=\"{arch}\" publicKeyToken=\"31bf3856ad364e35\" language=\"neutral\" versionScope=\"nonSxS\">\n{body}    </component>"
    );
}

fn languages(l: &HostLocale, winpe: bool) -> String {
    let lang = escape(&l.language);
    let mut b = String::new();
    if winpe {
        let _ = writeln!(
            b,
            "      <SetupUILanguage>\n        <UILanguage>{lang}</UILanguage>\n      </SetupUILanguage>"
        );
    }
    let _ = writeln!(
        b,
        "      <InputLocale>{}</InputLocale>\n      <SystemLocale>{lang}</SystemLocale>\n      <UILanguage>{lang}</UILanguage>\n      <UserLocale>{lang}</UserLocale>",
        escape(&l.input_locale)
    );
    b
}

const DISK: &str = "      <DiskConfiguration>
        <Disk wcm:action=\"add\">
          <DiskID>0</DiskID>
          <WillWipeDisk>true</WillWipeDisk>
          <CreatePartitions>
            <CreatePartition wcm:action=\"add\"><Order>1</Order><Type>EFI</Type><Size>300</Size></CreatePartition>
            <CreatePartition wcm:action=\"add\"><Order>2</Order><Type>MSR</Type><Size>16</Size></CreatePartition>
            <CreatePartition wcm:action=\"add\"><Order>3</Order><Type>Primary</Type><Extend>true</Extend></CreatePartition>
          </CreatePartitions>
          <ModifyPartitions>
            <ModifyPartition wcm:action=\"add\"><Order>1</Order><PartitionID>1</PartitionID><Label>System</Label><Format>FAT32</Format></ModifyPartition>
            <ModifyPartition wcm:action=\"add\"><Order>2</Order><PartitionID>2</PartitionID></ModifyPartition>
            <ModifyPartition wcm:action=\"add\"><Order>3</Order><PartitionID>3</PartitionID><Label>Windows</Label><Letter>C</Letter><Format>NTFS</Format></ModifyPartition>
          </ModifyPartitions>
        </Disk>
      </DiskConfiguration>
";

/// The command the first logon runs: every drive letter is tried for our
/// folder, so the media is found whatever letter Windows gave it.
pub fn first_logon_command() -> String {
    format!(
        "cmd.exe /c for %d in (D E F G H I J K L M N O P Q R S T U V W X Y Z) do @if exist %d:\\{MEDIA_DIR}\\{FIRST_LOGON} powershell.exe -NoProfile -ExecutionPolicy Bypass -File %d:\\{MEDIA_DIR}\\{FIRST_LOGON} -Media %d:"
    )
}

/// The whole answer file.
pub fn answer_xml(a: &Answer) -> Result<String, AnswerError> {
    check_user(&a.user)?;
    if a.password.0.chars().any(char::is_control) {
        return Err(AnswerError::BadPassword);
    }
    let arch = if a.arch == "arm64" { "arm64" } else { "amd64" };
    let user = escape(&a.user);
    let password = escape(&a.password.0);
    let mut x = String::from(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!-- Written by VFIO Assistant for one unattended install. It holds the account's password: the media it is on is removed when the install is over. -->\n<unattend xmlns=\"urn:schemas-microsoft-com:unattend\" xmlns:wcm=\"http://schemas.microsoft.com/WMIConfig/2002/State\">\n  <settings pass=\"windowsPE\">\n",
    );
    component(
        &mut x,
        "Microsoft-Windows-International-Core-WinPE",
        arch,
        &languages(&a.locale, true),
    );
    let setup = format!(
        "{DISK}      <ImageInstall>
        <OSImage>
          <InstallFrom>
            <MetaData wcm:action=\"add\"><Key>/IMAGE/INDEX</Key><Value>{}</Value></MetaData>
          </InstallFrom>
          <InstallTo><DiskID>0</DiskID><PartitionID>3</PartitionID></InstallTo>
        </OSImage>
      </ImageInstall>
      <UserData>
        <AcceptEula>true</AcceptEula>
        <ProductKey><Key>00000-00000-00000-00000-00000</Key><WillShowUI>OnError</WillShowUI></ProductKey>
      </UserData>
",
        a.image_index
    );
    component(&mut x, "Microsoft-Windows-Setup", arch, &setup);
    x.push_str("  </settings>\n  <settings pass=\"specialize\">\n");
    let shell = format!(
        "      <ComputerName>{}</ComputerName>\n      <TimeZone>{}</TimeZone>\n",
        escape(computer_name(&a.computer_name)),
        escape(&a.locale.time_zone)
    );
    component(&mut x, "Microsoft-Windows-Shell-Setup", arch, &shell);
    x.push_str("  </settings>\n  <settings pass=\"oobeSystem\">\n");
    component(
        &mut x,
        "Microsoft-Windows-International-Core",
        arch,
        &languages(&a.locale, false),
    );
    let oobe = format!(
        "      <OOBE>
        <HideEULAPage>true</HideEULAPage>
        <HideOEMRegistrationScreen>true</HideOEMRegistrationScreen>
        <HideOnlineAccountScreens>true</HideOnlineAccountScreens>
        <HideWirelessSetupInOOBE>true</HideWirelessSetupInOOBE>
        <ProtectYourPC>3</ProtectYourPC>
      </OOBE>
      <UserAccounts>
        <LocalAccounts>
          <LocalAccount wcm:action=\"add\">
            <Name>{user}</Name>
            <DisplayName>{user}</DisplayName>
            <Group>Administrators</Group>
            <Password><Value>{password}</Value><PlainText>true</PlainText></Password>
          </LocalAccount>
        </LocalAccounts>
      </UserAccounts>
      <AutoLogon>
        <Enabled>true</Enabled>
        <LogonCount>1</LogonCount>
        <Username>{user}</Username>
        <Password><Value>{password}</Value><PlainText>true</PlainText></Password>
      </AutoLogon>
      <FirstLogonCommands>
        <SynchronousCommand wcm:action=\"add\">
          <Order>1</Order>
          <Description>VFIO Assistant: guest tools, Looking Glass, MSI mode</Description>
          <CommandLine>{}</CommandLine>
        </SynchronousCommand>
      </FirstLogonCommands>
",
        escape(first_logon_command())
    );
    component(&mut x, "Microsoft-Windows-Shell-Setup", arch, &oobe);
    x.push_str("  </settings>\n</unattend>\n");
    Ok(x)
}

#[cfg(test)]
mod tests;
