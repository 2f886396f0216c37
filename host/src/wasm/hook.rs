//! The hooks of the operator contract ([`Hook`]): which call into a plugin
//! an instance is in, for its error messages, for the host calls each hook
//! may make, and for whether a failure in it can pass with a restart.

use std::fmt;

/// A call into a plugin, named as the WIT world names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// Creating the component instance (its start functions).
    Instantiate,
    /// `describe`: the plugin's name, version and ports.
    Describe,
    /// `open`, with the operator's config.
    Open,
    /// `restore`, with a checkpoint's snapshot.
    Restore,
    /// `process`, with a batch.
    Process,
    /// `on-timers`, with the timers due.
    OnTimers,
    /// `on-checkpoint`, before the instance's state is taken.
    OnCheckpoint,
    /// `finish`, at the end of input.
    Finish,
    /// `snapshot`, the plugin's own bytes for a checkpoint.
    Snapshot,
}

impl Hook {
    /// The hook's name in the WIT world (`on-timers`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Hook::Instantiate => "instantiate",
            Hook::Describe => "describe",
            Hook::Open => "open",
            Hook::Restore => "restore",
            Hook::Process => "process",
            Hook::OnTimers => "on-timers",
            Hook::OnCheckpoint => "on-checkpoint",
            Hook::Finish => "finish",
            Hook::Snapshot => "snapshot",
        }
    }

    /// Whether the hook builds an instance before it processes anything
    /// (`instantiate`, `open`, `restore`): a failure in it comes back at
    /// every restart from a checkpoint, so restarting cannot help.
    pub fn sets_up(self) -> bool {
        matches!(self, Hook::Instantiate | Hook::Open | Hook::Restore)
    }

    /// Whether the plugin may emit records in this hook.
    pub fn may_emit(self) -> bool {
        matches!(
            self,
            Hook::Process | Hook::OnTimers | Hook::OnCheckpoint | Hook::Finish
        )
    }

    /// Whether the plugin may write keyed state in this hook (not before
    /// its instance exists, nor once the state was cut for a checkpoint).
    pub fn may_write_state(self) -> bool {
        !matches!(self, Hook::Describe | Hook::Snapshot | Hook::Instantiate)
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<&str> for Hook {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}
