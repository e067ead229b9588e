//! What the crate's unit tests share: scratch directories, stand-in executables, and the
//! Zed-registry agent several tests of `setup` and `doctor` start from.

use std::path::{Path, PathBuf};

use crate::agents::Profile;
use crate::agents::installed::{Distribution, Found, Place, Registered};

/// An empty directory of its own under the system's temp dir, for one test: `area` names the
/// module, `name` the test; this process's id keeps parallel runs apart.
pub fn scratch(area: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("acp-usage-{area}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A stand-in executable at `path` (a shell script that does nothing), with its directories.
pub fn executable(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Claude's agent as added in Zed from the ACP registry (an npx package), with `env`.
pub fn claude_from_zed_registry(settings: PathBuf, env: &[(&str, &str)]) -> Found {
    let claude = Profile::named("claude").unwrap();
    Found {
        profile: claude,
        launch: &claude.launches()[0],
        path: settings,
        place: Place::EditorRegistry("Zed".into()),
        registry: Some(Registered {
            id: "claude-acp".into(),
            distribution: Distribution::Npx,
            argv: ["npx", "-y", "@agentclientprotocol/claude-agent-acp@0.33.1"]
                .map(String::from)
                .to_vec(),
            env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        }),
        editor_env: Default::default(),
    }
}
