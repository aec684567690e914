//! An endpoint recipe, as data (`lut-adapters/endpoints/NAME.toml`): how a stack's own interop
//! endpoint is built from its checkout and how its server and client are started. Templates
//! carry `{placeholders}` that [`expand`] fills; every placeholder a recipe names is checked
//! when it is read, so a typo fails before anything is built.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::EndpointError;

/// The recipes shipped with Nesquic: (file name, text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("quic-go.toml", include_str!("../../endpoints/quic-go.toml")),
    ("picoquic.toml", include_str!("../../endpoints/picoquic.toml")),
    ("quicly.toml", include_str!("../../endpoints/quicly.toml")),
];

/// How one stack's endpoint is built and driven.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// `--lut NAME`.
    pub name: String,
    /// One line for listings.
    pub description: String,
    /// Where the checkout comes from (for the user; nothing is fetched).
    pub repository: String,
    /// The TLS library as the probe catalog names it ("go crypto", "picotls", "BoringSSL").
    pub tls: String,
    /// What the client asks for and how its result is checked.
    #[serde(default)]
    pub transfer: Transfer,
    /// Building server and client.
    pub build: BuildRecipe,
    /// Starting the server.
    pub server: ServerRecipe,
    /// Starting the client.
    pub client: ClientRecipe,
    /// What a user should know (the client's certificate check, fixed paths), shown by `nesquic luts`.
    #[serde(default)]
    pub notes: String,
}

/// What the endpoint's client transfers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transfer {
    /// The interop runner's `transfer` test: the server serves a directory, the client downloads
    /// URLs into one; Nesquic checks the downloaded file byte for byte.
    #[default]
    Http09,
    /// A perf protocol (the client asks for `{size}` bytes and discards them): Nesquic counts
    /// what was asked for, the payload is not verified.
    Perf,
}

/// How server and client are built from the checkout.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildRecipe {
    /// Debian packages the build needs (checked with dpkg-query; the error says what to install).
    #[serde(default)]
    pub debian: Vec<String>,
    /// Programs that must be on PATH (`go`, `cargo`, `cmake`).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Other checkouts the build needs (a TLS library), given as `--lut-dep NAME=PATH`.
    #[serde(default)]
    pub checkouts: Vec<Dependency>,
    /// Shell commands run in the checkout, in order (`{checkout}`, `{out}`, `{dep.NAME}`).
    pub steps: Vec<String>,
}

/// A checkout the build needs besides the stack's own.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    /// `--lut-dep NAME=PATH`, `{dep.NAME}`.
    pub name: String,
    /// Where to get it.
    pub repository: String,
}

/// The server's command.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerRecipe {
    /// The directory it runs in (quicly's serves files relative to it and downloads into it);
    /// default: nesquic's.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The executable (probes resolve function names against it).
    pub program: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Fixed paths the program uses, bound onto the run's directories in a private mount
    /// namespace (`"/www" = "{www}"`).
    #[serde(default)]
    pub mounts: BTreeMap<String, String>,
    /// A port the program cannot be told (quic-go's interop server: 443); 0: Nesquic picks one
    /// and passes it as `{port}`.
    #[serde(default)]
    pub port: u16,
    /// Whether it exits after serving (interop servers do not: Nesquic stops it with SIGTERM
    /// once the client is done).
    #[serde(default)]
    pub exits: bool,
    /// Where its certificate goes, as PEM.
    pub cert: String,
    /// Where its private key goes, as PEM (PKCS#8).
    pub key: String,
}

/// The client's command.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRecipe {
    /// The directory it runs in (quicly's serves files relative to it and downloads into it);
    /// default: nesquic's.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The executable.
    pub program: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Fixed paths, as the server's.
    #[serde(default)]
    pub mounts: BTreeMap<String, String>,
    /// Where the downloaded file lands (http09).
    #[serde(default)]
    pub download: Option<String>,
}

/// Placeholders of the build steps.
pub const BUILD_PLACEHOLDERS: &[&str] = &["checkout", "out", "jobs"];
/// Placeholders of the server's and client's commands, environments and paths.
pub const RUN_PLACEHOLDERS: &[&str] = &[
    "checkout",
    "out",
    "www",
    "downloads",
    "logs",
    "qlog",
    "certs",
    "cert",
    "key",
    "host",
    "port",
    "file",
    "url",
    "size",
];

impl Recipe {
    /// Parses and checks a recipe; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, EndpointError> {
        let recipe: Recipe =
            toml::from_str(text).map_err(|e| EndpointError::Recipe { origin: origin.into(), why: e.to_string() })?;
        recipe.check().map_err(|why| EndpointError::Recipe { origin: origin.into(), why })?;
        Ok(recipe)
    }

    /// Reads a recipe file (`--endpoint-recipe FILE`).
    pub fn load(path: &Path) -> Result<Self, EndpointError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| EndpointError::Recipe { origin: path.display().to_string(), why: e.to_string() })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Every template names only known placeholders.
    fn check(&self) -> Result<(), String> {
        let deps: Vec<String> = self.build.checkouts.iter().map(|d| format!("dep.{}", d.name)).collect();
        let mut build: Vec<&str> = BUILD_PLACEHOLDERS.to_vec();
        build.extend(deps.iter().map(String::as_str));
        for step in &self.build.steps {
            check_template(step, &build).map_err(|e| format!("build step {step:?}: {e}"))?;
        }
        if self.build.steps.is_empty() {
            return Err("[build] steps is empty: say how server and client are built".into());
        }
        let (s, c) = (&self.server, &self.client);
        for p in [&s.program, &c.program] {
            check_template(p, &["checkout", "out"]).map_err(|e| format!("program {p:?}: {e}"))?;
        }
        let run = [&s.program, &s.cert, &s.key, &c.program].into_iter().chain(&s.args).chain(&c.args);
        let run = run.chain(s.env.values()).chain(c.env.values()).chain(s.mounts.values()).chain(c.mounts.values());
        for t in run.chain(c.download.as_ref()).chain(s.cwd.as_ref()).chain(c.cwd.as_ref()) {
            check_template(t, RUN_PLACEHOLDERS).map_err(|e| format!("{t:?}: {e}"))?;
        }
        for target in s.mounts.keys().chain(c.mounts.keys()) {
            if !target.starts_with('/') || target == "/" || target.contains("..") {
                return Err(format!("mount target {target:?}: an absolute directory other than / is needed"));
            }
        }
        match (self.transfer, &c.download) {
            (Transfer::Http09, None) => {
                Err("[client] download: an http09 endpoint must say where the file lands".into())
            }
            (Transfer::Perf, Some(_)) => Err("[client] download: a perf endpoint writes no file".into()),
            _ => Ok(()),
        }
    }
}

/// Every `{name}` in `template` is one of `known`.
fn check_template(template: &str, known: &[&str]) -> Result<(), String> {
    for name in placeholders(template)? {
        if !known.contains(&name) {
            return Err(format!("unknown placeholder {{{name}}}; known: {}", known.join(", ")));
        }
    }
    Ok(())
}

/// The `{name}`s of a template, in order.
fn placeholders(template: &str) -> Result<Vec<&str>, String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(|| "a '{' without its '}'".to_string())?;
        names.push(&after[..close]);
        rest = &after[close + 1..];
    }
    Ok(names)
}

/// Fills a template's placeholders from `vars` (checked names: a missing one is an error).
pub fn expand(template: &str, vars: &BTreeMap<String, String>) -> Result<String, EndpointError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(|| EndpointError::Template { template: template.into() })?;
        let name = &after[..close];
        let value = vars.get(name).ok_or_else(|| EndpointError::Placeholder { name: name.into() })?;
        out.push_str(value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A shipped recipe by name.
pub fn builtin(name: &str) -> Option<Result<Recipe, EndpointError>> {
    BUILTIN
        .iter()
        .find(|(file, _)| file.strip_suffix(".toml").is_some_and(|n| n.eq_ignore_ascii_case(name)))
        .map(|(file, text)| Recipe::parse(text, &format!("lut-adapters/endpoints/{file}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_recipe_parses_and_is_named_as_its_file() {
        for (file, text) in BUILTIN {
            let recipe = Recipe::parse(text, file).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(format!("{}.toml", recipe.name), *file);
        }
    }

    #[test]
    fn an_unknown_placeholder_is_refused_when_read() {
        let text = BUILTIN[0].1.replace("{www}", "{wwww}");
        let err = Recipe::parse(&text, "t").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("unknown placeholder {wwww}"), "{err}");
    }

    #[test]
    fn expand_fills_every_placeholder_and_refuses_a_missing_one() {
        let vars: BTreeMap<String, String> = [("port".to_string(), "443".to_string())].into();
        assert_eq!(expand("https://h:{port}/x", &vars).ok(), Some("https://h:443/x".into()));
        assert!(matches!(expand("{file}", &vars), Err(EndpointError::Placeholder { .. })));
    }
}
