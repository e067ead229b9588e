#!/usr/bin/env node
// The npm launcher of acp-usage: runs the prebuilt binary of this machine's platform package
// (acp-usage-<os>-<cpu>, an optional dependency) and ends the way the binary ended.
//
// It sits on the editor's ACP byte path, so the binary inherits the launcher's own stdin, stdout
// and stderr (the same file descriptors): no byte passes through JavaScript, nothing is buffered.
// Plain CommonJS with no dependencies, for every Node from 18 on.
'use strict';

const childProcess = require('child_process');
const os = require('os');
const path = require('path');
const tty = require('tty');

const manifest = require('../package.json');

const platform = `${process.platform}-${process.arch}`;
const platformPackage = `acp-usage-${platform}`;

// Every message is one line on stderr, then exit 1: the editor shows the agent's stderr, and one
// line saying what is missing and what to do beats a stack trace.
function fail(message) {
  process.stderr.write(`acp-usage: ${message}\n`);
  process.exit(1);
}

// The source repository, from this package's own manifest (filled in from Cargo.toml).
function repositoryUrl() {
  const repo = manifest.repository;
  const url = typeof repo === 'string' ? repo : repo && repo.url;
  return url ? url.replace(/^git\+/, '').replace(/\.git$/, '') : undefined;
}

// The other ways to a binary, for the messages below.
function elsewhere() {
  const repo = repositoryUrl();
  if (!repo) return 'set ACP_USAGE_BINARY to an acp-usage binary';
  return (
    `download the archive for your platform from ${repo}/releases/tag/v${manifest.version} ` +
    'and set ACP_USAGE_BINARY to the acp-usage binary inside'
  );
}

function binaryPath() {
  // A binary built or downloaded by hand, e.g. where no platform package exists.
  if (process.env.ACP_USAGE_BINARY) return process.env.ACP_USAGE_BINARY;
  const supported = Object.keys(manifest.optionalDependencies || {});
  if (!supported.includes(platformPackage)) {
    const list = supported.map((name) => name.replace(/^acp-usage-/, '')).join(', ');
    const repo = repositoryUrl() || '<the acp-usage repository>';
    fail(
      `there is no prebuilt binary for ${platform}${list ? ` (there is for ${list})` : ''}; ` +
        `build one with \`cargo install --locked --git ${repo} acp-usage\` and run that, ` +
        'or set ACP_USAGE_BINARY to it',
    );
  }
  const spec = `${platformPackage}@${manifest.version}`;
  let packageJson;
  try {
    packageJson = require.resolve(`${platformPackage}/package.json`);
  } catch (_) {
    // npm skips an optional dependency it could not fetch (or was told to omit) without failing
    // the install, so this is where such an install ends up.
    fail(
      `the package ${spec}, which holds the binary for ${platform}, is not installed (npm ` +
        'skips optional dependencies it cannot fetch, and --omit=optional skips them all); ' +
        `install it with \`npm install ${spec}\`, or ${elsewhere()}`,
    );
  }
  const exe = process.platform === 'win32' ? 'acp-usage.exe' : 'acp-usage';
  return path.join(path.dirname(packageJson), 'bin', exe);
}

const binary = binaryPath();
const child = childProcess.spawn(binary, process.argv.slice(2), { stdio: 'inherit' });

// Signals meant for acp-usage reach the launcher (the process the editor started); each goes on
// to the binary, which ends its agent's process group and exits with a status the launcher then
// repeats. On Windows the console delivers Ctrl-C, Ctrl-Break and close events to every process
// attached to it, the binary included, and Node's child.kill() there is TerminateProcess, not a
// request to stop: the launcher only has to survive them and report how the binary ended.
const forwarding = [];
function forward(signal) {
  const handler = () => {
    if (process.platform === 'win32') return;
    // Ctrl-C at a terminal signals the whole foreground process group, the binary included:
    // sending it again would make it two.
    if (signal === 'SIGINT' && tty.isatty(0)) return;
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  process.on(signal, handler);
  forwarding.push([signal, handler]);
}
const signals =
  process.platform === 'win32' ? ['SIGINT', 'SIGBREAK', 'SIGHUP'] : ['SIGINT', 'SIGTERM', 'SIGHUP'];
signals.forEach(forward);

child.on('error', (err) => {
  if (process.env.ACP_USAGE_BINARY) fail(`cannot run ACP_USAGE_BINARY=${binary}: ${err.message}`);
  fail(`cannot run ${binary}: ${err.message}; reinstall ${platformPackage}, or ${elsewhere()}`);
});

child.on('exit', (code, signal) => {
  if (signal === null) process.exit(code === null ? 1 : code);
  // A binary killed by a signal must never look like success: the launcher dies of the same
  // signal, which takes its own handler out of the way first.
  for (const [name, handler] of forwarding) process.removeListener(name, handler);
  if (process.platform !== 'win32') process.kill(process.pid, signal);
  // Only reached where the signal could not end this process (Windows, or a signal whose
  // default action is to be ignored): the shell's convention for "killed by a signal".
  process.exit(128 + (os.constants.signals[signal] || 0));
});
