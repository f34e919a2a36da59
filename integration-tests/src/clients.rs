//! The real Kafka clients the tests drive as subprocesses, and running them
//! with a deadline.
//!
//! - `kcat` (librdkafka) from `PATH`, or `WEIR_KCAT`.
//! - The venv Python at `<repo>/.venv/bin/python` (or `WEIR_PYTHON`) with
//!   confluent-kafka and kafka-python, and the scripts in
//!   `integration-tests/python/`.
//! - The Java client harness `integration-tests/java` (kafka-clients), built
//!   by `scripts/test` into `target/weir-itest-java.jar` plus
//!   `target/classpath.txt` (or `WEIR_JAVA_JAR` / `WEIR_JAVA_CLASSPATH_FILE`).
//! - Apache Kafka's own server-side tools (the `kafka_2.13` artifact, e.g.
//!   `kafka.tools.DumpLogSegments`, and `kafka-tools`, e.g.
//!   `ConsumerGroupCommand`), whose classpath `scripts/test` resolves
//!   from `integration-tests/java-kafka-tools/pom.xml` into
//!   `target/classpath.txt` there (or `WEIR_KAFKA_TOOLS_CLASSPATH_FILE`).
//! - KafkaJS, pinned in `integration-tests/node/package-lock.json` and
//!   installed there by `scripts/test` with `npm ci`; `node` from `PATH` (or
//!   `WEIR_NODE`).
//!
//! All of them are installed by `scripts/test`; a missing one is a setup
//! error reported with that hint.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

use crate::error::HarnessError;

const SETUP_HINT: &str = "run scripts/test once (it installs the test clients)";

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration-tests lives inside the workspace")
        .to_path_buf()
}

fn from_env_or(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or(default)
}

fn existing(what: &'static str, path: PathBuf) -> Result<PathBuf, HarnessError> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(HarnessError::Missing {
            what,
            path,
            hint: SETUP_HINT,
        })
    }
}

/// Finds `name` in `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// The `kcat` binary: `WEIR_KCAT`, else `kcat` from `PATH`.
///
/// # Errors
///
/// [`HarnessError::Missing`] when it is not installed.
pub fn kcat() -> Result<PathBuf, HarnessError> {
    match std::env::var_os("WEIR_KCAT") {
        Some(path) => existing("kcat", PathBuf::from(path)),
        None => which("kcat").ok_or(HarnessError::Missing {
            what: "kcat",
            path: PathBuf::from("$PATH"),
            hint: SETUP_HINT,
        }),
    }
}

/// `promtool` from `PATH`, if installed.
pub fn promtool() -> Option<PathBuf> {
    which("promtool")
}

/// The venv Python with confluent-kafka and kafka-python: `WEIR_PYTHON`,
/// else `<repo>/.venv/bin/python`.
///
/// # Errors
///
/// [`HarnessError::Missing`] when the venv does not exist.
pub fn python() -> Result<PathBuf, HarnessError> {
    existing(
        "the test venv's python",
        from_env_or("WEIR_PYTHON", repo_root().join(".venv/bin/python")),
    )
}

/// A command running `integration-tests/python/<script>` with the venv
/// Python (unbuffered output).
///
/// # Errors
///
/// [`HarnessError::Missing`] for the venv or the script.
pub fn python_script(script: &str) -> Result<Command, HarnessError> {
    let python = python()?;
    let script = existing(
        "a python test script",
        repo_root().join("integration-tests/python").join(script),
    )?;
    let mut command = Command::new(python);
    command.arg("-u").arg(script);
    Ok(command)
}

/// The Java harness jar and its dependency classpath joined with `:`.
///
/// # Errors
///
/// [`HarnessError::Missing`] when `scripts/test` has not built them, and
/// [`HarnessError::Io`] when the classpath file cannot be read.
pub fn java_classpath() -> Result<String, HarnessError> {
    let java_dir = repo_root().join("integration-tests/java/target");
    let jar = existing(
        "the Java client harness jar",
        from_env_or("WEIR_JAVA_JAR", java_dir.join("weir-itest-java.jar")),
    )?;
    let classpath_file = existing(
        "the Java client classpath file",
        from_env_or("WEIR_JAVA_CLASSPATH_FILE", java_dir.join("classpath.txt")),
    )?;
    let dependencies = std::fs::read_to_string(&classpath_file)
        .map_err(|e| HarnessError::io(format!("reading {}", classpath_file.display()), e))?;
    Ok(format!("{}:{}", jar.display(), dependencies.trim()))
}

/// A `java` command running `dev.weir.itest.ClientTool` (see
/// `integration-tests/java`); append the subcommand and its arguments.
///
/// # Errors
///
/// As [`java_classpath`].
pub fn java_client_tool() -> Result<Command, HarnessError> {
    let mut command = Command::new("java");
    command
        .arg("-Xmx1g")
        .arg("-cp")
        .arg(java_classpath()?)
        .arg("dev.weir.itest.ClientTool");
    Ok(command)
}

/// The runtime classpath of Apache Kafka's server-side tools (`kafka_2.13`
/// and its dependencies), joined with `:`: the contents of
/// `WEIR_KAFKA_TOOLS_CLASSPATH_FILE`, else of
/// `<repo>/integration-tests/java-kafka-tools/target/classpath.txt`.
///
/// # Errors
///
/// [`HarnessError::Missing`] when `scripts/test` has not resolved it, and
/// [`HarnessError::Io`] when the file cannot be read.
pub fn kafka_tools_classpath() -> Result<String, HarnessError> {
    let classpath_file = existing(
        "the Kafka tools classpath file",
        from_env_or(
            "WEIR_KAFKA_TOOLS_CLASSPATH_FILE",
            repo_root().join("integration-tests/java-kafka-tools/target/classpath.txt"),
        ),
    )?;
    let classpath = std::fs::read_to_string(&classpath_file)
        .map_err(|e| HarnessError::io(format!("reading {}", classpath_file.display()), e))?;
    Ok(classpath.trim().to_owned())
}

/// A `java` command running one of Apache Kafka's tools, `main_class` (for
/// example `kafka.tools.DumpLogSegments`, what `bin/kafka-dump-log.sh`
/// runs), on [`kafka_tools_classpath`]; append the tool's arguments.
///
/// # Errors
///
/// As [`kafka_tools_classpath`].
pub fn kafka_tool(main_class: &str) -> Result<Command, HarnessError> {
    let mut command = Command::new("java");
    command
        .arg("-Xmx512m")
        .arg("-cp")
        .arg(kafka_tools_classpath()?)
        .arg(main_class);
    Ok(command)
}

/// What a finished subprocess left behind.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// The command line, for messages.
    pub command: String,
    /// The exit status.
    pub status: ExitStatus,
    /// Everything written to stdout.
    pub stdout: Vec<u8>,
    /// Everything written to stderr (lossy UTF-8).
    pub stderr: String,
}

impl CommandOutput {
    /// stdout as (lossy) UTF-8.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Panics with the command, status, stdout tail and stderr unless the
    /// process exited 0. Returns `self` for chaining.
    ///
    /// # Panics
    ///
    /// When the exit status is not success.
    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "{} exited with {}\n--- stdout (last 4000 bytes) ---\n{}\n--- stderr ---\n{}",
            self.command,
            self.status,
            tail(&self.stdout_text(), 4000),
            tail(&self.stderr, 20_000)
        );
        self
    }
}

fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        let arg = arg.to_string_lossy();
        // Keep long classpaths out of messages.
        if arg.len() > 200 {
            text.push_str(" <…>");
        } else {
            text.push(' ');
            text.push_str(&arg);
        }
    }
    text
}

/// Runs `command` to completion with `stdin` as its standard input, killing
/// it after `timeout`.
///
/// # Errors
///
/// [`HarnessError::Io`] when it cannot be spawned, and
/// [`HarnessError::Timeout`] (with the partial stderr in the message) when it
/// runs longer than `timeout`.
pub fn run(
    mut command: Command,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<CommandOutput, HarnessError> {
    let description = describe(&command);
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| HarnessError::io(format!("spawning {description}"), e))?;
    let stdin_writer = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        std::thread::spawn(move || {
            // A client that exits early closes the pipe; that is its business.
            let _ = pipe.write_all(&bytes);
        })
    });
    let stdout_reader = drain(child.stdout.take().expect("stdout is piped"));
    let stderr_reader = drain(child.stderr.take().expect("stderr is piped"));
    let status = wait_or_kill(&mut child, timeout, &description);
    if let Some(writer) = stdin_writer {
        let _ = writer.join();
    }
    let stdout = stdout_reader.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr_reader.join().unwrap_or_default()).into_owned();
    match status {
        Ok(status) => Ok(CommandOutput {
            command: description,
            status,
            stdout,
            stderr,
        }),
        Err(HarnessError::Timeout { timeout, .. }) => Err(HarnessError::Timeout {
            what: format!("{description}\n--- stderr ---\n{}", tail(&stderr, 8000)),
            timeout,
        }),
        Err(other) => Err(other),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// Waits for `child` up to `timeout`, killing it when the time is up.
///
/// # Errors
///
/// [`HarnessError::Timeout`] or [`HarnessError::Io`].
pub fn wait_or_kill(
    child: &mut Child,
    timeout: Duration,
    what: &str,
) -> Result<ExitStatus, HarnessError> {
    match child.wait_timeout(timeout) {
        Ok(Some(status)) => Ok(status),
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(HarnessError::Timeout {
                what: what.to_owned(),
                timeout,
            })
        }
        Err(e) => Err(HarnessError::io(format!("waiting for {what}"), e)),
    }
}

/// A `kcat` command with `-b <bootstrap>` and the given arguments.
///
/// # Errors
///
/// As [`kcat`].
pub fn kcat_command(bootstrap: &str, args: &[&str]) -> Result<Command, HarnessError> {
    let mut command = Command::new(kcat()?);
    command.arg("-b").arg(bootstrap).args(args);
    Ok(command)
}

/// A `node` command running `integration-tests/node/<script>` with the
/// KafkaJS package that `scripts/test` installs there with `npm ci`.
///
/// # Errors
///
/// [`HarnessError::Missing`] when `node`, the script or
/// `integration-tests/node/node_modules/kafkajs` is missing.
pub fn node_script(script: &str) -> Result<Command, HarnessError> {
    let node_dir = repo_root().join("integration-tests/node");
    let node = match std::env::var_os("WEIR_NODE") {
        Some(path) => existing("node", PathBuf::from(path))?,
        None => which("node").ok_or(HarnessError::Missing {
            what: "node",
            path: PathBuf::from("$PATH"),
            hint: SETUP_HINT,
        })?,
    };
    existing(
        "KafkaJS (npm ci in integration-tests/node)",
        node_dir.join("node_modules/kafkajs/package.json"),
    )?;
    let script = existing("a node test script", node_dir.join(script))?;
    let mut command = Command::new(node);
    command.arg(script).current_dir(node_dir);
    Ok(command)
}

/// A client subprocess that runs alongside the test: its stdout lines arrive
/// as they are printed, its stdin takes commands, and it is killed when
/// dropped.
///
/// The group tests use it for consumers that must stay members while the
/// test starts others or restarts the broker.
pub struct RunningClient {
    description: String,
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    stdout: Vec<String>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl std::fmt::Debug for RunningClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningClient")
            .field("command", &self.description)
            .field("pid", &self.child.id())
            .finish()
    }
}

impl RunningClient {
    /// Spawns `command` with piped stdin, stdout and stderr.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when it cannot be spawned.
    pub fn spawn(mut command: Command) -> Result<Self, HarnessError> {
        let description = describe(&command);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| HarnessError::io(format!("spawning {description}"), e))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = drain(child.stderr.take().expect("stderr is piped"));
        Ok(Self {
            description,
            child,
            stdin,
            lines,
            stdout: Vec::new(),
            stderr,
        })
    }

    /// Every stdout line received so far, in order.
    pub fn lines(&mut self) -> &[String] {
        while let Ok(line) = self.lines.try_recv() {
            self.stdout.push(line);
        }
        &self.stdout
    }

    /// Waits until a stdout line (received before or during the call)
    /// satisfies `matches`, and returns the first such line.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Timeout`] when none does within `timeout` or the
    /// process closed stdout first.
    pub fn wait_for_line(
        &mut self,
        timeout: Duration,
        what: &str,
        mut matches: impl FnMut(&str) -> bool,
    ) -> Result<String, HarnessError> {
        if let Some(line) = self.lines().iter().find(|l| matches(l)) {
            return Ok(line.clone());
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stdout.push(line.clone());
                    if matches(&line) {
                        return Ok(line);
                    }
                }
                Err(_) => {
                    return Err(HarnessError::Timeout {
                        what: format!(
                            "{what} from {}\n--- stdout (last 40 lines) ---\n{}",
                            self.description,
                            self.stdout[self.stdout.len().saturating_sub(40)..].join("\n")
                        ),
                        timeout,
                    })
                }
            }
        }
    }

    /// Writes `line` and a newline to the process's stdin.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the pipe is closed.
    pub fn send_line(&mut self, line: &str) -> Result<(), HarnessError> {
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            HarnessError::io("writing stdin", std::io::Error::other("stdin is closed"))
        })?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| HarnessError::io(format!("writing to {}", self.description), e))
    }

    /// Closes stdin, waits up to `timeout` for the exit and returns
    /// everything the process printed.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Timeout`] (the process is then killed) or
    /// [`HarnessError::Io`].
    pub fn finish(mut self, timeout: Duration) -> Result<CommandOutput, HarnessError> {
        self.stdin = None;
        let status = wait_or_kill(&mut self.child, timeout, &self.description);
        let stderr = std::mem::replace(&mut self.stderr, std::thread::spawn(Vec::new));
        let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
        // The reader thread ends when the process's stdout closes.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stdout.push(line);
        }
        let mut stdout = self.stdout.join("\n").into_bytes();
        stdout.push(b'\n');
        match status {
            Ok(status) => Ok(CommandOutput {
                command: self.description.clone(),
                status,
                stdout,
                stderr,
            }),
            Err(HarnessError::Timeout { timeout, .. }) => Err(HarnessError::Timeout {
                what: format!(
                    "{}\n--- stdout (last 4000 bytes) ---\n{}\n--- stderr ---\n{}",
                    self.description,
                    tail(&String::from_utf8_lossy(&stdout), 4000),
                    tail(&stderr, 8000)
                ),
                timeout,
            }),
            Err(other) => Err(other),
        }
    }
}

impl RunningClient {
    /// Stops the process with SIGTERM (as ducktape stops Kafka's verifiable
    /// tools: their shutdown hooks flush and report), waits up to `timeout`
    /// for it to exit and returns everything it printed.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Signal`] when the signal cannot be sent, else as
    /// [`Self::finish`].
    pub fn terminate(self, timeout: Duration) -> Result<CommandOutput, HarnessError> {
        let pid = self.child.id();
        if let Some(raw) = rustix::process::Pid::from_raw(pid as i32) {
            rustix::process::kill_process(raw, rustix::process::Signal::TERM).map_err(
                |source| HarnessError::Signal {
                    signal: "SIGTERM",
                    pid,
                    source,
                },
            )?;
        }
        self.finish(timeout)
    }

    /// Kills the process (SIGKILL) and returns everything it printed.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when it cannot be waited for.
    pub fn kill(mut self) -> Result<CommandOutput, HarnessError> {
        let _ = self.child.kill();
        self.finish(Duration::from_secs(30))
    }
}

impl Drop for RunningClient {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
