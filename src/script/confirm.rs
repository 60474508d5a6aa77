//! The confirmation run's test command (docs/audit.md, "Confirmation run"):
//! what the eval script runs instead of the spec's `test_cmd` when a pass is
//! confirmed. The FAIL_TO_PASS tests run again under conditions a
//! test-aware candidate cannot tell from an ordinary run by the signals it
//! could read in the graded one (the runner's entry point and variables,
//! the test files' names, the binary's name, the order, state kept between
//! calls), while the working directory and the tree stay where they were.
//!
//! - pytest ([`Driver::Pytest`]): `harness-scripts/confirm/pytest_driver.py`
//!   under a random name calls `pytest.main` with the spec's options.
//! - `go test` ([`Driver::GoTest`]): `harness-scripts/confirm/gotest.sh`,
//!   the packages' test binaries built under random names and run from
//!   their package folders.
//!
//! Other runners have no driver ([`Unsupported`]): the check is then
//! `could_not_run`, never passed. Plain code: the spec's command line is
//! read here, the shell text made here.

use super::{delimiter, quote};
use crate::parse::LogParser;
use crate::spec::Spec;

const PYTEST_DRIVER: &str = include_str!("../../harness-scripts/confirm/pytest_driver.py");
const GOTEST: &str = include_str!("../../harness-scripts/confirm/gotest.sh");

/// Why a spec's tests have no confirmation run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("no confirmation driver for the {parser} runner (pytest and go test have one)")]
    Runner { parser: &'static str },
    #[error("the test command {command:?} is not one plain command ({what})")]
    NotPlain { command: String, what: String },
    #[error("the test command {command:?} is not `go test`")]
    NotGoTest { command: String },
}

/// How the confirmation run drives one spec's tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Driver {
    Pytest(Pytest),
    GoTest(GoTest),
}

/// pytest driven by `pytest.main` from a file with a random name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pytest {
    /// `NAME=value` words before the command.
    pub env: Vec<String>,
    /// The interpreter: the one the command names (`python3.9 -m pytest`),
    /// else the env's `python`.
    pub python: Option<String>,
    /// The command's pytest options (its test paths, and options that stop
    /// early or spread tests over workers, left out).
    pub args: Vec<String>,
    /// `python -m pytest` puts the working directory first on sys.path.
    pub cwd_on_path: bool,
}

/// `go test -c` per package, the binaries run from the package folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoTest {
    pub env: Vec<String>,
    pub packages: Vec<String>,
    /// Flags for `go test -c` (`-tags`, `-race`, ...).
    pub build_flags: Vec<String>,
    /// The command's test flags the binary keeps, as `-test.` flags.
    pub test_flags: Vec<String>,
}

/// The confirmation driver for a spec, from its log parser and test command.
pub fn driver(spec: &Spec) -> Result<Driver, Unsupported> {
    match spec.log_parser {
        LogParser::Pytest
        | LogParser::PytestOptions
        | LogParser::PytestV2
        | LogParser::Seaborn
        | LogParser::Matplotlib => pytest(&spec.test_cmd).map(Driver::Pytest),
        LogParser::GoTest => gotest(&spec.test_cmd).map(Driver::GoTest),
        other => Err(Unsupported::Runner {
            parser: other.name(),
        }),
    }
}

impl Driver {
    /// What the confirmation run changes, for evidence and messages.
    pub fn conditions(&self) -> &'static str {
        match self {
            Driver::Pytest(_) => "pytest.main called from a randomly named file (no pytest command, argv without the tests), PYTEST_* variables removed and PYTEST_CURRENT_TEST never set, the FAIL_TO_PASS test files renamed at random, their tests in reverse order then the FAIL_TO_PASS tests again in one process",
            Driver::GoTest(_) => "the test binary built with go test -c under a random name outside go-build, run from its package folder with only the FAIL_TO_PASS tests, shuffled, twice in one process (-test.count=2)",
        }
    }

    /// The shell text run in place of the spec's test command; its exit
    /// status is the run's.
    pub fn command(&self, fail_to_pass: &[String]) -> String {
        match self {
            Driver::Pytest(p) => p.command(fail_to_pass),
            Driver::GoTest(g) => g.command(fail_to_pass),
        }
    }
}

impl Pytest {
    fn command(&self, fail_to_pass: &[String]) -> String {
        let config = serde_json::json!({
            "fail_to_pass": fail_to_pass,
            "args": self.args,
            "cwd_on_path": self.cwd_on_path,
        })
        .to_string();
        let python = match &self.python {
            Some(p) => quote(p),
            None => String::from("\"$(command -v python || command -v python3)\""),
        };
        let mut env = self.env.join(" ");
        if !env.is_empty() {
            env.push(' ');
        }
        let (d1, d2) = (delimiter(PYTEST_DRIVER), delimiter(&config));
        format!(
            "{{\npgc_dir=$(mktemp -d /tmp/XXXXXXXXXX)\npgc_driver=$(mktemp \"$pgc_dir/XXXXXXXXXX\")\npgc_config=$(mktemp \"$pgc_dir/XXXXXXXXXX\")\ncat > \"$pgc_driver\" <<'{d1}'\n{PYTEST_DRIVER}{d1}\ncat > \"$pgc_config\" <<'{d2}'\n{config}\n{d2}\n{env}{python} \"$pgc_driver\" \"$pgc_config\"\npgc_code=$?\nrm -rf \"$pgc_dir\"\n(exit $pgc_code)\n}}"
        )
    }
}

impl GoTest {
    fn command(&self, fail_to_pass: &[String]) -> String {
        let mut top: Vec<String> = fail_to_pass
            .iter()
            .map(|t| go_regex_escape(t.split('/').next().unwrap_or(t)))
            .collect();
        top.sort();
        top.dedup();
        let run = quote(&format!("^({})$", top.join("|")));
        let words = |w: &[String]| w.iter().map(|s| quote(s)).collect::<Vec<_>>().join(" ");
        // The file's leading comment is for its readers, not the log.
        let body = GOTEST.trim_start_matches(|c| c != '{');
        let text = body
            .replace("{{packages}}", &words(&self.packages))
            .replace("{{build_flags}}", &words(&self.build_flags))
            .replace("{{run}}", &run)
            .replace("{{test_flags}}", &words(&self.test_flags));
        if self.env.is_empty() {
            return text.trim_end().to_string();
        }
        // The command's variables for everything the block runs.
        let exports: Vec<String> = self.env.iter().map(|e| format!("export {e}")).collect();
        format!("{}\n{}", exports.join("\n"), text.trim_end())
    }
}

/// Go regexp metacharacters escaped (test names are identifiers, and
/// subtest names anything).
fn go_regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A command line split into words as the shell would (quotes and
/// backslashes), refused when it is more than one plain command.
fn words(command: &str) -> Result<Vec<String>, Unsupported> {
    let refuse = |what: &str| Unsupported::NotPlain {
        command: command.to_string(),
        what: what.to_string(),
    };
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if let Some(w) = cur.take() {
                    out.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(refuse("an unclosed quote")),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(refuse("an unclosed quote")),
                        },
                        Some('$' | '`') => return Err(refuse("a substitution")),
                        Some(c) => w.push(c),
                        None => return Err(refuse("an unclosed quote")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => cur.get_or_insert_with(String::new).push(c),
                None => return Err(refuse("a trailing backslash")),
            },
            ';' | '&' | '|' | '<' | '>' | '(' | ')' | '$' | '`' => {
                return Err(refuse(&format!("`{c}`")))
            }
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(cur);
    Ok(out)
}

/// Leading `NAME=value` words, and the rest.
fn split_env(words: Vec<String>) -> (Vec<String>, Vec<String>) {
    let n = words
        .iter()
        .take_while(|w| {
            w.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .count();
    let mut words = words;
    let rest = words.split_off(n);
    (words.iter().map(|w| env_word(w)).collect(), rest)
}

/// `NAME=value` quoted for the shell.
fn env_word(w: &str) -> String {
    let (k, v) = w.split_once('=').unwrap_or((w, ""));
    format!("{k}={}", quote(v))
}

/// pytest options that take the next word as their value.
const PYTEST_VALUED: [&str; 22] = [
    "-p",
    "-k",
    "-m",
    "-o",
    "-W",
    "-c",
    "-n",
    "--tb",
    "--import-mode",
    "--rootdir",
    "--basetemp",
    "--confcutdir",
    "--override-ini",
    "--deselect",
    "--ignore",
    "--ignore-glob",
    "--durations",
    "--maxfail",
    "--numprocesses",
    "--dist",
    "--log-level",
    "--pythonwarnings",
];
/// pytest options left out: they stop early, reorder by the last run, or
/// spread the tests over worker processes.
const PYTEST_DROPPED: [&str; 12] = [
    "-x",
    "--exitfirst",
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "--sw",
    "--stepwise",
    "-n",
    "--numprocesses",
    "--maxfail",
    "--dist",
];

fn pytest(command: &str) -> Result<Pytest, Unsupported> {
    let (env, words) = split_env(words(command)?);
    let program = words.first().map(|w| w.rsplit('/').next().unwrap_or(w));
    let (python, options, cwd_on_path) = match program {
        Some("pytest" | "py.test") => (None, &words[1..], false),
        Some(p)
            if p.starts_with("python")
                && words.get(1).map(String::as_str) == Some("-m")
                && matches!(words.get(2).map(String::as_str), Some("pytest" | "py.test")) =>
        {
            (Some(words[0].clone()), &words[3..], true)
        }
        // Another front end (tox, a script): pytest with no options of
        // the command's own, from the env's interpreter.
        _ => (None, &[][..], false),
    };
    let mut args = Vec::new();
    let mut it = options.iter();
    while let Some(w) = it.next() {
        let name = w.split_once('=').map_or(w.as_str(), |(n, _)| n);
        let takes_value = PYTEST_VALUED.contains(&name) && !w.contains('=');
        let value = if takes_value { it.next() } else { None };
        if !w.starts_with('-') || PYTEST_DROPPED.contains(&name) {
            continue;
        }
        args.push(w.clone());
        args.extend(value.cloned());
    }
    Ok(Pytest {
        env,
        python,
        args,
        cwd_on_path,
    })
}

/// `go test` flags that are the binary's (`-test.<name>`), by whether the
/// confirmation keeps them; the others are build flags.
const GO_TEST_KEPT: [&str; 4] = ["timeout", "parallel", "cpu", "short"];
const GO_TEST_DROPPED: [&str; 10] = [
    "v",
    "run",
    "skip",
    "count",
    "shuffle",
    "failfast",
    "json",
    "list",
    "bench",
    "benchtime",
];
/// Flags whose value is the next word when not written `-flag=value`.
const GO_VALUED: [&str; 20] = [
    "run",
    "skip",
    "count",
    "shuffle",
    "list",
    "bench",
    "benchtime",
    "timeout",
    "parallel",
    "cpu",
    "tags",
    "ldflags",
    "gcflags",
    "asmflags",
    "mod",
    "p",
    "o",
    "coverpkg",
    "covermode",
    "exec",
];

fn gotest(command: &str) -> Result<GoTest, Unsupported> {
    let (env, words) = split_env(words(command)?);
    if words.len() < 2 || words[0].rsplit('/').next() != Some("go") || words[1] != "test" {
        return Err(Unsupported::NotGoTest {
            command: command.to_string(),
        });
    }
    let mut g = GoTest {
        env,
        packages: Vec::new(),
        build_flags: Vec::new(),
        test_flags: Vec::new(),
    };
    let mut it = words[2..].iter();
    while let Some(w) = it.next() {
        let Some(flag) = w.strip_prefix("--").or_else(|| w.strip_prefix('-')) else {
            g.packages.push(w.clone());
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let value = match inline {
            Some(v) => Some(v),
            None if GO_VALUED.contains(&name) => it.next().cloned(),
            None => None,
        };
        if GO_TEST_DROPPED.contains(&name) || name == "o" || name == "c" {
            continue;
        }
        if GO_TEST_KEPT.contains(&name) {
            g.test_flags.push(match value {
                Some(v) => format!("-test.{name}={v}"),
                None => format!("-test.{name}"),
            });
        } else {
            g.build_flags.push(match value {
                Some(v) => format!("-{name}={v}"),
                None => format!("-{name}"),
            });
        }
    }
    if g.packages.is_empty() {
        g.packages.push(".".into());
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(test_cmd: &str, parser: &str) -> Spec {
        serde_json::from_value(serde_json::json!({"test_cmd": test_cmd, "log_parser": parser}))
            .unwrap()
    }

    fn pytest_of(test_cmd: &str, parser: &str) -> Pytest {
        match driver(&spec(test_cmd, parser)) {
            Ok(Driver::Pytest(p)) => p,
            other => panic!("{test_cmd}: {other:?}"),
        }
    }

    fn go_of(test_cmd: &str) -> GoTest {
        match driver(&spec(test_cmd, "gotest")) {
            Ok(Driver::GoTest(g)) => g,
            other => panic!("{test_cmd}: {other:?}"),
        }
    }

    #[test]
    fn pytest_commands_keep_their_options_and_lose_their_paths() {
        let p = pytest_of(
            "PYTHONWARNINGS='ignore::UserWarning' pytest -rA -p no:cacheprovider --tb=no -x tests/ -k 'a or b' -n 4",
            "pytest",
        );
        assert_eq!(p.env, vec!["PYTHONWARNINGS='ignore::UserWarning'"]);
        assert_eq!(p.python, None);
        assert_eq!(
            p.args,
            vec!["-rA", "-p", "no:cacheprovider", "--tb=no", "-k", "a or b"]
        );
        assert!(!p.cwd_on_path);
        let p = pytest_of("python3.9 -m pytest -v", "pytest_v2");
        assert_eq!(
            (p.python.as_deref(), p.args, p.cwd_on_path),
            (Some("python3.9"), vec!["-v".to_string()], true)
        );
        // tox runs pytest: pytest without the command's options.
        let p = pytest_of("tox --current-env -epy39 -v --", "pytest_v2");
        assert!(p.args.is_empty() && p.python.is_none());
    }

    #[test]
    fn go_commands_split_into_build_and_test_flags() {
        let g = go_of(
            "CGO_ENABLED=0 go test -v ./promql ./model/labels -run \"^(TestRangeQuery|TestLabels)\" -tags netgo -timeout=20m -count 1",
        );
        assert_eq!(g.env, vec!["CGO_ENABLED='0'"]);
        assert_eq!(g.packages, vec!["./promql", "./model/labels"]);
        assert_eq!(g.build_flags, vec!["-tags=netgo"]);
        assert_eq!(g.test_flags, vec!["-test.timeout=20m"]);
        let text = Driver::GoTest(g).command(&["TestLabels/a.b".into(), "TestRangeQuery".into()]);
        assert!(text.starts_with("export CGO_ENABLED='0'\n{\n"), "{text}");
        assert!(
            text.contains("-test.run '^(TestLabels|TestRangeQuery)$' '-test.timeout=20m')"),
            "{text}"
        );
        assert!(text.contains("go list -f '{{.Dir}}' './promql' './model/labels'"));
        assert!(text.contains("go test -c -o \"$pgc_bin\" '-tags=netgo' ."));
        assert!(text.ends_with("(exit $pgc_code)\n}"), "{text}");
        let g = go_of("go test .");
        assert!(g.build_flags.is_empty() && g.test_flags.is_empty());
        assert_eq!(
            driver(&spec("make test", "gotest")),
            Err(Unsupported::NotGoTest {
                command: "make test".into()
            })
        );
    }

    #[test]
    fn other_runners_and_shell_constructs_have_no_driver() {
        assert_eq!(
            driver(&spec("./tests/runtests.py --verbosity 2", "django")),
            Err(Unsupported::Runner { parser: "django" })
        );
        let e = driver(&spec("pytest -rA; echo done", "pytest")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the test command \"pytest -rA; echo done\" is not one plain command (`;`)"
        );
        assert!(matches!(
            driver(&spec("pytest \"$(ls)\"", "pytest")),
            Err(Unsupported::NotPlain { .. })
        ));
    }

    #[test]
    fn the_pytest_command_writes_the_driver_and_its_configuration() {
        let text = Driver::Pytest(pytest_of("pytest -rA", "pytest"))
            .command(&["tests/test_a.py::test_x[a b]".into()]);
        assert!(text.contains(PYTEST_DRIVER));
        assert!(text.contains(
            r#"{"fail_to_pass":["tests/test_a.py::test_x[a b]"],"args":["-rA"],"cwd_on_path":false}"#
        ));
        assert!(text.contains(
            "\"$(command -v python || command -v python3)\" \"$pgc_driver\" \"$pgc_config\"\npgc_code=$?"
        ));
        // Nothing names the tests or pytest on the driver's command line.
        let run_line = text
            .lines()
            .find(|l| l.contains("\"$pgc_driver\" \""))
            .unwrap();
        assert!(!run_line.contains("test_a") && !run_line.contains("pytest"));
    }

    #[test]
    fn words_follow_the_shell() {
        assert_eq!(
            words(r#"a 'b c' "d \"e\" \x" f\ g"#).unwrap(),
            vec!["a", "b c", r#"d "e" \x"#, "f g"]
        );
        assert!(words("a 'b").is_err());
    }
}
