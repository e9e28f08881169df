//! A real OCI registry on loopback for the tests: the CNCF distribution server, as Debian
//! packages it (`docker-registry`; `.ci/run` installs it). Anonymous over plain http, or with
//! htpasswd (basic) auth over TLS from a [`TestCa`]. Its storage outlives a stop, so a test can
//! stop the registry and start it again on the same content.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::upstream::TestCa;

/// The registry's user and password when it has auth.
pub const USER: &str = "publisher";
/// See [`USER`].
pub const PASSWORD: &str = "registry-s3cret";

/// A `docker-registry serve` process; killed when dropped.
pub struct Registry {
    child: Option<Child>,
    /// `127.0.0.1:PORT`, as references name it.
    pub host: String,
    /// The CA whose certificate the registry presents, if it speaks TLS.
    pub ca: Option<TestCa>,
    config: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The registry binary: `docker-registry` (Debian), else `registry` (upstream's name).
fn binary() -> &'static str {
    for name in ["docker-registry", "registry"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return name;
        }
    }
    panic!(
        "no OCI registry binary: the registry tests need the CNCF distribution server. Install \
         Debian's package (`apt-get install docker-registry`; `.ci/run` does) or put a \
         `registry` binary on PATH"
    );
}

impl Registry {
    /// An anonymous registry over plain http.
    pub fn anonymous() -> Self {
        Self::start(false, "")
    }

    /// A registry that wants [`USER`] and [`PASSWORD`] (htpasswd), over TLS.
    pub fn with_auth_and_tls() -> Self {
        Self::start(true, "")
    }

    /// A registry over plain http that wants bearer tokens (the distribution spec's token
    /// flow): issued by `realm` for `service`, signed by `issuer` with the key of the
    /// certificate in `certificate` (PEM).
    pub fn with_tokens(realm: &str, service: &str, issuer: &str, certificate: &Path) -> Self {
        Self::start(
            false,
            &format!(
                "auth:\n  token:\n    realm: {realm}\n    service: {service}\n    issuer: {issuer}\n    rootcertbundle: {}\n",
                certificate.display()
            ),
        )
    }

    fn start(secured: bool, auth: &str) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = crate::free_port();
        let host = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n",
            dir.path().join("data").display()
        );
        let ca = secured.then(|| {
            let ca = TestCa::new();
            let (cert, key) = ca.server_pem_files(&["127.0.0.1"], dir.path());
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert.display(),
                key.display()
            ));
            let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{USER}:{hash}\n")).expect("write htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: gatehouse-tests\n    path: {}\n",
                htpasswd.display()
            ));
            ca
        });
        config.push_str(auth);
        let file = dir.path().join("config.yml");
        std::fs::write(&file, config).expect("write the registry config");
        let mut registry = Self {
            child: None,
            host,
            ca,
            config: file,
            dir,
        };
        registry.start_again();
        registry
    }

    /// Starts the registry (again, after [`Registry::stop`]) on the same storage and port, and
    /// waits until it accepts connections.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the registry is running");
        let log = std::fs::File::create(self.dir.path().join("registry.log")).expect("log file");
        let child = Command::new(binary())
            .arg("serve")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the registry");
        self.child = Some(child);
        let port: u16 = self.host.rsplit(':').next().unwrap().parse().unwrap();
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("the registry did not start: {}", self.log());
    }

    /// Stops it (SIGKILL): what a crashed or unreachable registry looks like to a client.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// `oci://HOST/REPOSITORY` plus `rest` (`:tag`, `@sha256:...`).
    pub fn reference(&self, repository: &str, rest: &str) -> String {
        format!("oci://{}/{repository}{rest}", self.host)
    }

    /// The `[[oci.registry]]` entry a gateway needs for this registry (with `allow_tags`), the
    /// password in the file `password_file` names.
    pub fn config_entry(&self, allow_tags: bool) -> String {
        let mut entry = format!(
            "[[oci.registry]]\nhost = \"{}\"\nallow_tags = {allow_tags}\n",
            self.host
        );
        if let Some(ca) = &self.ca {
            let password = self.dir.path().join("password");
            std::fs::write(&password, format!("{PASSWORD}\n")).expect("write the password");
            entry.push_str(&format!(
                "username = \"{USER}\"\npassword_file = \"{}\"\nca_file = \"{}\"\n",
                toml_path(&password),
                toml_path(&ca.pem_file())
            ));
        }
        entry
    }
}

fn toml_path(path: &Path) -> String {
    path.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}
