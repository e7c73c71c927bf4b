//! Why working with another machine failed, in words that say what to do.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RemoteError {
    #[error(
        "{0:?}: give ssh://[user@]host[:port][/path], e.g. ssh://anna@server or ssh://server:2222"
    )]
    BadTarget(String),
    #[error(
        "{host} cannot be reached: {detail}. Check the name and that the machine is on and runs an SSH server (ssh {login} should log you in)."
    )]
    Unreachable {
        host: String,
        login: String,
        detail: String,
    },
    #[error(
        "{host} refused your key ({detail}). Add your public key to its ~/.ssh/authorized_keys (ssh-copy-id {login}) or name the key in ~/.ssh/config; a password is never asked here."
    )]
    KeyRefused {
        host: String,
        login: String,
        detail: String,
    },
    #[error(
        "{host}'s host key is not the one known before: {detail}. If you know why (the machine was reinstalled), remove the old key (ssh-keygen -R '{known}') and connect once with ssh {login} to check and accept the new one."
    )]
    HostKeyChanged {
        host: String,
        login: String,
        known: String,
        detail: String,
    },
    #[error(
        "{host}'s host key is not known yet: {detail}. Connect once in a terminal with ssh {login}, check the fingerprint it shows and accept it; then try again."
    )]
    HostKeyUnknown {
        host: String,
        login: String,
        detail: String,
    },
    #[error(
        "{host} has no vfio-assistant ({detail}). Install the same package there (.deb, .rpm or the AUR package, version {ours})."
    )]
    NotInstalled {
        host: String,
        ours: String,
        detail: String,
    },
    #[error(
        "{host} runs vfio-assistant {theirs}, this is {ours}: install {ours} there (or this one's version of {theirs}); different versions are not mixed."
    )]
    Version {
        host: String,
        ours: String,
        theirs: String,
    },
    #[error("{what} on {host} failed: {detail}")]
    Failed {
        host: String,
        what: String,
        detail: String,
    },
    #[error(
        "sudo on {host} asks for a password, and there is no terminal here to type it in. Run the same command in a terminal (it asks there){}",
        crate::helper_line(user, *helper)
    )]
    SudoPassword {
        host: String,
        user: String,
        /// Whether what asked is the helper (a tuning): then the one
        /// sudoers line that allows it without a password is said.
        helper: bool,
    },
    #[error(
        "{host} has no sudo and you log in there as a user, not root: changing that machine needs root (log in as root with ssh://root@{name}, or install sudo there)."
    )]
    NoSudo { host: String, name: String },
    #[error("{what} from the other machine could not be read: {detail}")]
    Unreadable { what: &'static str, detail: String },
    #[error("the ssh command could not be run: {0} (install the OpenSSH client: openssh-client)")]
    NoSsh(String),
}
