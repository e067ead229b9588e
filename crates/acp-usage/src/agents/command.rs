//! What an agent's command line says about the agent, before it starts: the tap must be pointed
//! at an agent before its first call, and `initialize`'s `agentInfo` comes too late for that.
//!
//! Users start agents through launchers, so the command is read the way each launcher reads it,
//! down to the agent's own program and package ([`names`]); [`super::Profile::detect_launch`]
//! then matches those against each profile. The rules:
//!
//! - **Launchers are unwrapped.** `env [-i] [-u VAR] [-C DIR] [-S "…"] [VAR=…]… CMD`; `exec`,
//!   `command`, `nohup`, `setsid`, `time`, `nice [-n N]`, `timeout [opts] DURATION`,
//!   `stdbuf [opts]`; `npx`, `npm exec`/`npm x`, `pnpm dlx`/`pnpm exec`, `pnpx`, `bunx`,
//!   `bun x`, `yarn dlx`/`yarn exec` (their flags skipped, `-y`/`--yes`, `--package=<pkg>`,
//!   `-p <pkg>`, `-c "<cmd>"`); `uvx`, `uv tool run`, `uv run` (`--from <pkg>`, `<cmd>@<ver>`,
//!   `<pkg>==<ver>`); `pipx run [--spec <pkg>] <app>`; interpreters (`node`, `bun`, `deno run`,
//!   `python`, `python3.x`) running a script; a script of npm's or pnpm's own (Zed runs
//!   `node …/npm-cli.js exec --yes -- <pkg>`) is that launcher; `sh`/`bash`/`zsh`/`dash`/`ksh
//!   -c "<script>"`, whose script is split into words and commands (`cd x && exec agent "$@"`),
//!   the last command that names an agent winning; a shell running a script file names it by
//!   the file's name.
//! - **What names the agent**: the program the launchers lead to (its file name, without a
//!   version or a `.js`/`.exe`-like extension), the package a launcher installs (`npx
//!   <pkg>@<ver>`, `--package`, `uvx --from`, `pipx --spec`, the command `uvx` runs when no
//!   `--from` is given), and the package a path lies in (`…/node_modules/[@scope/]<pkg>/…`,
//!   `…/uv/tools/<pkg>/…`, `…/pipx/venvs/<pkg>/…`), and a Zed registry agent's id
//!   (`…/external_agents/registry/<id>/…`). The program word may be a symlink: the caller
//!   passes what it resolves to (`real_path`), and the target's names count as well.
//! - **Nothing else does.** Other path segments (`/home/codex/bin/agent`), option values
//!   (`--model claude-sonnet`) and the agent's own arguments never name an agent.
//!
//! Everything here is pure: `real_path` is the one look at the file system, and the tests pass
//! a table instead.

/// The words of a command that can name its agent (see the module's rules).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Names {
    /// Programs, lowercase, without directory, version or extension (`claude-agent-acp`).
    pub programs: Vec<String>,
    /// Packages, lowercase, without version (`@agentclientprotocol/claude-agent-acp`).
    pub packages: Vec<String>,
    /// Zed registry ids (`claude-acp`).
    pub registry_ids: Vec<String>,
}

impl Names {
    fn is_empty(&self) -> bool {
        self.programs.is_empty() && self.packages.is_empty() && self.registry_ids.is_empty()
    }
}

/// What a path resolves to (a symlink's target), when it is anything but itself.
pub type RealPath<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The names each command of `command` gives, the most telling first: one entry per command
/// (a shell script may run several; the last one is the agent, most likely).
pub fn names(command: &[String], real_path: RealPath) -> Vec<Names> {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    Reader { real_path, depth: 0 }.command(&words, &mut out);
    out.retain(|n| !n.is_empty());
    out
}

/// How deep launchers may nest (`sh -c "env npx …"`).
const MAX_DEPTH: usize = 8;

struct Reader<'a> {
    real_path: RealPath<'a>,
    depth: usize,
}

impl Reader<'_> {
    /// Reads one command (a program and its arguments), pushing what it names onto `out`, the
    /// most telling first.
    fn command(&mut self, words: &[&str], out: &mut Vec<Names>) {
        let Some((&program, rest)) = words.split_first() else { return };
        if self.depth >= MAX_DEPTH {
            return;
        }
        self.depth += 1;
        match program_name(program).as_str() {
            "env" => self.env(rest, out),
            "exec" | "command" | "builtin" | "nohup" | "setsid" | "time" | "nice" | "stdbuf"
            | "timeout" => self.command(prefix_command(&program_name(program), rest), out),
            "npx" | "pnpx" | "bunx" => {
                let names = self.npm_exec(rest, out);
                out.push(names);
            }
            name @ ("npm" | "pnpm" | "yarn") => self.package_manager(name, rest, out),
            "uvx" => out.push(uv_run(rest)),
            "uv" => self.uv(rest, out),
            "pipx" => out.push(pipx(rest)),
            "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" => self.shell(rest, out),
            "node" | "nodejs" | "tsx" | "ts-node" => self.node(rest, out),
            "bun" | "deno" => self.bun(rest, out),
            name if is_python(name) => self.python(rest, out),
            _ => out.push(self.path(program)),
        }
        self.depth -= 1;
    }

    /// `env [-i] [-0] [-u VAR] [-C DIR] [-S STRING] [VAR=VALUE]… CMD`.
    fn env(&mut self, rest: &[&str], out: &mut Vec<Names>) {
        let mut i = 0;
        while let Some(&w) = rest.get(i) {
            if w == "--" {
                i += 1;
                break;
            }
            if let Some(string) = split_string(w, rest.get(i + 1).copied()) {
                // `env -S "npx -y pkg"`: the string's words, then the rest.
                let skip = if w.contains('=') { 1 } else { 2 };
                let words = split_words(string);
                let mut tail: Vec<&str> = words.iter().map(String::as_str).collect();
                tail.extend(rest.iter().skip(i + skip));
                return self.env(&tail, out);
            }
            let takes_value = matches!(w, "-u" | "--unset" | "-C" | "--chdir");
            if takes_value {
                i += 2;
            } else if w.starts_with('-') || is_assignment(w) {
                i += 1;
            } else {
                break;
            }
        }
        self.command(&rest[i.min(rest.len())..], out);
    }

    /// `npm exec`/`npm x` and `pnpm dlx`/`yarn dlx` run a package's program, `pnpm exec` and
    /// `yarn exec` a program of the project's.
    fn package_manager(&mut self, manager: &str, rest: &[&str], out: &mut Vec<Names>) {
        // Global flags may come first (`pnpm --package=x dlx cmd`).
        let at = rest.iter().position(|w| !w.starts_with('-')).unwrap_or(rest.len());
        let args: Vec<&str> = rest[..at].iter().chain(rest.iter().skip(at + 1)).copied().collect();
        match (manager, rest.get(at).copied()) {
            ("npm", Some("exec" | "x")) | (_, Some("dlx")) => {
                let names = self.npm_exec(&args, out);
                out.push(names);
            }
            (_, Some("exec")) => {
                let i = skip_flags(&args, NPM_VALUE_FLAGS);
                self.command(&args[i..], out);
            }
            _ => {}
        }
    }

    /// The arguments of `npx` (or `npm exec`, `pnpm dlx`, `bunx`, `yarn dlx`): flags, then
    /// `<pkg>[@version]` (or, with `--package`, a program), then the agent's own arguments.
    /// With `-c "<cmd>"`, the command string's names go to `out` first.
    fn npm_exec(&mut self, rest: &[&str], out: &mut Vec<Names>) -> Names {
        let mut names = Names::default();
        let mut i = 0;
        while let Some(&w) = rest.get(i) {
            i += 1;
            if w == "--" {
                break;
            }
            let (flag, inline) = match w.split_once('=') {
                Some((flag, value)) if w.starts_with("--") => (flag, Some(value)),
                _ => (w, None),
            };
            let value = |i: &mut usize| {
                inline.or_else(|| {
                    *i += 1;
                    rest.get(*i - 1).copied()
                })
            };
            match flag {
                "--package" | "-p" => names.packages.extend(value(&mut i).and_then(npm_package)),
                "--call" | "-c" => {
                    if let Some(script) = value(&mut i) {
                        self.script(script, out);
                    }
                }
                _ if NPM_VALUE_FLAGS.contains(&flag) && inline.is_none() => i += 1,
                _ if w.starts_with('-') => {}
                _ => {
                    i -= 1;
                    break;
                }
            }
        }
        match rest.get(i) {
            // A program of the packages named.
            Some(program) if !names.packages.is_empty() => {
                names.programs.push(program_name(program));
            }
            Some(spec) if is_path(spec) => return self.path(spec),
            Some(spec) => {
                // An unscoped name may be a program installed already, which npx runs first.
                let package = npm_package(spec);
                if let Some(name) = package.as_deref().filter(|p| !p.starts_with('@')) {
                    names.programs.push(name.to_owned());
                }
                names.packages.extend(package);
            }
            None => {}
        }
        names
    }

    /// `uv tool run …` is `uvx …`; `uv run [opts] CMD` runs a program of the project's
    /// environment.
    fn uv(&mut self, rest: &[&str], out: &mut Vec<Names>) {
        match rest {
            ["tool", "run", args @ ..] => out.push(uv_run(args)),
            ["run", args @ ..] => {
                let i = skip_flags(args, UV_VALUE_FLAGS);
                self.command(&args[i..], out);
            }
            _ => {}
        }
    }

    /// `sh [-opts] -c "<script>" [name args…]`, or `sh <script file>`.
    fn shell(&mut self, rest: &[&str], out: &mut Vec<Names>) {
        let mut i = 0;
        let mut script = false;
        while let Some(&w) = rest.get(i) {
            i += 1;
            if w == "--" {
                break;
            }
            if matches!(w, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
                i += 1;
            } else if w.starts_with('-') || w.starts_with('+') {
                // `-c`, and bundles such as `-lc`, `-ec`, `-xc`.
                script |= w.starts_with('-') && !w.starts_with("--") && w.contains('c');
            } else {
                i -= 1;
                break;
            }
        }
        match rest.get(i) {
            Some(text) if script => self.script(text, out),
            Some(file) => out.push(self.path(file)),
            None => {}
        }
    }

    /// A shell script's commands, the last first.
    fn script(&mut self, text: &str, out: &mut Vec<Names>) {
        let words = shell_words(text);
        for command in words.split(|w| w.is_none()).rev() {
            let words: Vec<&str> = command.iter().flatten().map(String::as_str).collect();
            // Assignments before the command (`FOO=1 agent`), and grouping words.
            let start = words
                .iter()
                .position(|w| !is_assignment(w) && !SHELL_KEYWORDS.contains(w))
                .unwrap_or(words.len());
            self.command(&words[start..], out);
        }
    }

    /// `bun x …` is `bunx …`; `bun [run] <script>` and `deno run <script>` run a script.
    fn bun(&mut self, rest: &[&str], out: &mut Vec<Names>) {
        match rest {
            ["x", args @ ..] => {
                let names = self.npm_exec(args, out);
                out.push(names);
            }
            ["run", args @ ..] => self.node(args, out),
            _ => self.node(rest, out),
        }
    }

    /// `node [flags] <script> [args]`: the script.
    fn node(&mut self, rest: &[&str], out: &mut Vec<Names>) {
        let mut i = 0;
        while let Some(&w) = rest.get(i) {
            if matches!(w, "-e" | "--eval" | "-p" | "--print") {
                return;
            }
            if w == "--" {
                i += 1;
                break;
            }
            if !w.starts_with('-') {
                break;
            }
            i += if NODE_VALUE_FLAGS.contains(&w) { 2 } else { 1 };
        }
        self.script_file(&rest[i.min(rest.len())..], out);
    }

    /// `python [flags] (<script> | -m <module>) [args]`.
    fn python(&mut self, rest: &[&str], out: &mut Vec<Names>) {
        let mut i = 0;
        while let Some(&w) = rest.get(i) {
            match w {
                "-c" => return,
                "-m" => {
                    if let Some(module) = rest.get(i + 1) {
                        let program = module.to_ascii_lowercase();
                        out.push(Names { programs: vec![program], ..Names::default() });
                    }
                    return;
                }
                "-W" | "-X" | "--check-hash-based-pycs" => i += 2,
                "--" => {
                    i += 1;
                    break;
                }
                _ if w.starts_with('-') => i += 1,
                _ => break,
            }
        }
        self.script_file(&rest[i.min(rest.len())..], out);
    }

    /// An interpreter's script and its arguments: npm's and pnpm's own scripts are those
    /// launchers; any other names the agent by its path.
    fn script_file(&mut self, words: &[&str], out: &mut Vec<Names>) {
        let Some((&script, args)) = words.split_first() else { return };
        let launcher = match program_name(script).as_str() {
            "npm-cli" => "npm",
            "npx-cli" => "npx",
            "pnpm" => "pnpm",
            "pnpx" => "pnpx",
            "yarn" => "yarn",
            _ => return out.push(self.path(script)),
        };
        let mut launched = vec![launcher];
        launched.extend(args);
        self.command(&launched, out);
    }

    /// A program or script named by its path: its file name and the packages it lies in, and
    /// those of the file it is a symlink to.
    fn path(&self, word: &str) -> Names {
        let mut names = Names::default();
        let real = (self.real_path)(word).filter(|r| r != word);
        for path in std::iter::once(word).chain(real.as_deref()) {
            names.programs.push(program_name(path));
            let segments: Vec<&str> = path.split(['/', '\\']).collect();
            names.packages.extend(package_in(&segments));
            names.registry_ids.extend(registry_id_in(&segments));
        }
        names.programs.dedup();
        names
    }
}

/// Words a shell command may start with before its program (`if agent; then …`).
const SHELL_KEYWORDS: &[&str] =
    &["(", "{", "!", "if", "then", "else", "elif", "do", "while", "until", "time"];

/// Flags of npm's, pnpm's, yarn's and bun's `exec`/`dlx` that take a value.
#[rustfmt::skip]
const NPM_VALUE_FLAGS: &[&str] = &[
    "--registry", "--cache", "--prefix", "--userconfig", "--globalconfig", "--workspace", "-w",
    "--loglevel", "--node-options", "--script-shell", "--reporter", "--dir", "-C",
    "--allow-build", "--filter", "-F",
];

/// Flags of `uvx`/`uv tool run`/`uv run` that take a value (`--from` is read).
#[rustfmt::skip]
const UV_VALUE_FLAGS: &[&str] = &[
    "--from", "--with", "-w", "--with-editable", "--with-requirements", "--python", "-p",
    "--index", "--default-index", "--index-url", "-i", "--extra-index-url", "--find-links",
    "-f", "--cache-dir", "--directory", "--project", "--config-file", "--env-file",
    "--constraints", "-c", "--overrides", "--build-constraints", "-b", "--index-strategy",
    "--keyring-provider", "--resolution", "--prerelease", "--exclude-newer",
    "--exclude-newer-package", "--link-mode", "--refresh-package", "--reinstall-package",
    "--upgrade-package", "-P", "--color", "--python-preference", "--allow-insecure-host",
    "--no-binary-package", "--only-binary-package", "--no-build-package",
    "--no-build-isolation-package", "--config-setting", "-C", "--fork-strategy",
    "--torch-backend", "--package", "--extra", "--group", "--only-group", "--no-group",
];

/// Flags of `node` (and `bun`, `deno`) that take a value as the next word.
#[rustfmt::skip]
const NODE_VALUE_FLAGS: &[&str] = &[
    "-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions",
    "--inspect-port", "--title", "--env-file", "--input-type", "--disable-warning",
    "--stack-size", "--max-old-space-size",
];

/// `uvx [opts] [--from <pkg>] <cmd>[@ver] [args]`: without `--from`, the command's name is
/// its package's.
fn uv_run(rest: &[&str]) -> Names {
    let mut names = Names::default();
    let (i, from) = options_then_command(rest, UV_VALUE_FLAGS, "--from");
    if let Some(cmd) = rest.get(i) {
        let program = python_requirement(cmd);
        names.programs.extend(program.clone());
        if from.is_none() {
            names.packages.extend(program);
        }
    }
    names.packages.extend(from.and_then(python_requirement));
    names
}

/// `pipx run [opts] [--spec <pkg>] <app>[==ver] [args]`.
fn pipx(rest: &[&str]) -> Names {
    let Some(("run", rest)) = rest.split_first().map(|(a, r)| (*a, r)) else {
        return Names::default();
    };
    let takes = ["--spec", "--python", "--index-url", "-i", "--pip-args", "--backend"];
    let (i, spec) = options_then_command(rest, &takes, "--spec");
    let mut names = Names::default();
    let app = rest.get(i).and_then(|a| python_requirement(a));
    names.programs.extend(app.clone());
    names.packages.extend(spec.and_then(python_requirement).or(app));
    names
}

/// A Python tool runner's options up to its command: the command's index in `rest` (past the
/// end when there is none) and the value of the option `wanted` (`--from pkg`, `--spec=pkg`).
/// `takes` are the options whose value is the next word unless given with `=`.
fn options_then_command<'a>(
    rest: &[&'a str],
    takes: &[&str],
    wanted: &str,
) -> (usize, Option<&'a str>) {
    let mut found = None;
    let mut i = 0;
    while let Some(&w) = rest.get(i) {
        i += 1;
        if w == "--" {
            break;
        }
        let (flag, inline) = match w.split_once('=') {
            Some((flag, value)) if w.starts_with("--") => (flag, Some(value)),
            _ => (w, None),
        };
        let value = if takes.contains(&flag) && inline.is_none() {
            i += 1;
            rest.get(i - 1).copied()
        } else {
            inline
        };
        if flag == wanted {
            found = value;
        } else if !w.starts_with('-') {
            i -= 1;
            break;
        }
    }
    (i, found)
}

/// The command after a prefix command's own options (`nice -n 5 cmd`, `timeout 10m cmd`,
/// `stdbuf -oL cmd`, `exec -a name cmd`).
fn prefix_command<'a, 'b>(prefix: &str, rest: &'b [&'a str]) -> &'b [&'a str] {
    let value_flags: &[&str] = match prefix {
        "nice" => &["-n", "--adjustment"],
        "timeout" => &["-s", "--signal", "-k", "--kill-after"],
        "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
        "exec" => &["-a"],
        _ => &[],
    };
    let mut i = skip_flags(rest, value_flags);
    if prefix == "timeout" {
        // The duration.
        i += 1;
    }
    &rest[i.min(rest.len())..]
}

/// Where the first word after the flags is (`--` ends them); `value_flags` take the next word.
fn skip_flags(words: &[&str], value_flags: &[&str]) -> usize {
    let mut i = 0;
    while let Some(&w) = words.get(i) {
        if w == "--" {
            return i + 1;
        }
        if !w.starts_with('-') || w == "-" {
            break;
        }
        i += if value_flags.contains(&w) { 2 } else { 1 };
    }
    i.min(words.len())
}

/// A program's name: its file name, lowercase, without a version (`pkg@1.2`) or an
/// extension that only says how it runs (`.js`, `.exe`, `.sh`…).
fn program_name(word: &str) -> String {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word).to_ascii_lowercase();
    let base = match base.rfind('@') {
        Some(at) if at > 0 => base[..at].to_owned(),
        _ => base,
    };
    const EXTENSIONS: [&str; 11] =
        [".exe", ".cmd", ".bat", ".ps1", ".js", ".cjs", ".mjs", ".ts", ".py", ".sh", ".bash"];
    EXTENSIONS
        .iter()
        .find_map(|ext| base.strip_suffix(ext))
        .filter(|stem| !stem.is_empty())
        .map_or_else(|| base.clone(), str::to_owned)
}

/// An npm package spec's name: `@scope/name@1.2.3` is `@scope/name`; `None` for a URL, a git
/// spec or a path.
fn npm_package(spec: &str) -> Option<String> {
    let spec = spec.strip_prefix("npm:").unwrap_or(spec);
    if spec.contains(':') || is_path(spec) || spec.is_empty() {
        return None;
    }
    let name = match spec.rfind('@') {
        Some(at) if at > 0 => &spec[..at],
        _ => spec,
    };
    Some(name.to_ascii_lowercase())
}

/// A Python requirement's (or `uvx`'s `cmd@ver`) name: `mistral-vibe==3.0.3`,
/// `mistral-vibe[extra]>=3`, `vibe-acp@latest` are `mistral-vibe` and `vibe-acp`; `None` for a
/// URL or a path.
fn python_requirement(spec: &str) -> Option<String> {
    if spec.contains("://") || is_path(spec) {
        return None;
    }
    let end = spec.find(['@', '=', '<', '>', '!', '~', '[', ';', ' ']).unwrap_or(spec.len());
    let name = spec[..end].trim();
    (!name.is_empty()).then(|| name.to_ascii_lowercase())
}

/// The package a path lies in: the last `node_modules/[@scope/]<pkg>`, or a `uv tool` or
/// `pipx` environment's package (`uv/tools/<pkg>`, `pipx/venvs/<pkg>`).
fn package_in(segments: &[&str]) -> Option<String> {
    let mut found = None;
    for (i, pair) in segments.windows(2).enumerate() {
        let next = segments.get(i + 2).copied();
        let package = match (pair[0], pair[1]) {
            ("node_modules", scope) if scope.starts_with('@') => {
                next.filter(|n| !n.is_empty()).map(|n| format!("{scope}/{n}"))
            }
            ("node_modules", name) if !name.starts_with('.') && !name.is_empty() => {
                Some(name.to_owned())
            }
            ("uv", "tools") | ("pipx", "venvs") => next.map(str::to_owned),
            _ => None,
        };
        if let Some(package) = package {
            found = Some(package.to_ascii_lowercase());
        }
    }
    found
}

/// A Zed registry agent's id, from where Zed extracts it (`external_agents/registry/<id>/…`).
fn registry_id_in(segments: &[&str]) -> Option<String> {
    let at = segments.windows(2).position(|w| w == ["external_agents", "registry"])?;
    // The id is a directory: the index file beside it is not one.
    segments.get(at + 3)?;
    segments.get(at + 2).map(|id| id.to_ascii_lowercase())
}

fn is_path(word: &str) -> bool {
    word.starts_with(['/', '.', '~']) || word.contains('\\') || word.contains("/.")
}

fn is_python(name: &str) -> bool {
    let version = name.strip_prefix("python").or_else(|| name.strip_prefix("pypy"));
    version.is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// `NAME=value`.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else { return false };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `env -S STRING` (`-S`, `--split-string`, `--split-string=STRING`): the string.
fn split_string<'a>(word: &'a str, next: Option<&'a str>) -> Option<&'a str> {
    match word {
        "-S" | "--split-string" => next,
        _ => word.strip_prefix("--split-string="),
    }
}

/// The words of a string split as a shell would (`env -S`), every one of them.
fn split_words(text: &str) -> Vec<String> {
    shell_words(text).into_iter().flatten().collect()
}

/// A shell script's words, quotes and backslashes undone, with `None` between commands (at
/// `;`, `&&`, `||`, `|`, `&` and newlines). Expansions stay as they are written.
fn shell_words(text: &str) -> Vec<Option<String>> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                w.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if chars.peek().is_some_and(|n| "\"\\$`\n".contains(*n)) => {
                            w.extend(chars.next());
                        }
                        _ => w.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            '&' if word.as_deref().is_some_and(|w| w.ends_with(['>', '<'])) => {
                word.get_or_insert_with(String::new).push(c);
            }
            ';' | '&' | '|' | '\n' => {
                out.extend(word.take().map(Some));
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                out.push(None);
            }
            '#' if word.is_none() => {
                chars.by_ref().take_while(|&c| c != '\n').for_each(drop);
                out.push(None);
            }
            c if c.is_whitespace() => out.extend(word.take().map(Some)),
            _ => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word.take().map(Some));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_undo_quotes_and_split_commands() {
        let words =
            shell_words(r#"cd '/my dir' && FOO="a b" exec npx -y pkg "$@" 2>&1; echo \"x\""#);
        let words: Vec<Option<&str>> = words.iter().map(|w| w.as_deref()).collect();
        assert_eq!(
            words,
            [
                Some("cd"),
                Some("/my dir"),
                None,
                Some("FOO=a b"),
                Some("exec"),
                Some("npx"),
                Some("-y"),
                Some("pkg"),
                Some("$@"),
                Some("2>&1"),
                None,
                Some("echo"),
                Some("\"x\""),
            ]
        );
    }

    #[test]
    fn names_of_specs_and_paths() {
        assert_eq!(npm_package("@scope/name@1.2.3").as_deref(), Some("@scope/name"));
        assert_eq!(npm_package("name@latest").as_deref(), Some("name"));
        assert_eq!(npm_package("@scope/name").as_deref(), Some("@scope/name"));
        assert_eq!(npm_package("github:a/b"), None);
        assert_eq!(python_requirement("mistral-vibe==3.0.3").as_deref(), Some("mistral-vibe"));
        assert_eq!(python_requirement("Mistral-Vibe[x]>=3").as_deref(), Some("mistral-vibe"));
        assert_eq!(python_requirement("git+https://x/y"), None);
        assert_eq!(program_name("/x/bin/Codex-ACP.exe"), "codex-acp");
        assert_eq!(program_name("run.sh"), "run");
        assert_eq!(program_name(".js"), ".js");
        let segs = |p: &'static str| p.split('/').collect::<Vec<_>>();
        assert_eq!(
            package_in(&segs("/a/node_modules/@x/y/node_modules/z/bin/z")).as_deref(),
            Some("z")
        );
        assert_eq!(package_in(&segs("/a/node_modules/.bin/gemini")), None);
        assert_eq!(
            package_in(&segs("/h/.local/share/uv/tools/mistral-vibe/bin/vibe-acp")).as_deref(),
            Some("mistral-vibe")
        );
        assert_eq!(
            registry_id_in(&segs("/d/zed/external_agents/registry/opencode/v_1/opencode"))
                .as_deref(),
            Some("opencode")
        );
        assert_eq!(registry_id_in(&segs("/d/zed/external_agents/registry/registry.json")), None);
    }
}
