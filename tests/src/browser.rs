//! A real headless Chromium, driven through chromedriver (WebDriver), for the console tests.
//!
//! Debian's `chromium` and `chromium-driver` packages provide both (`.ci/run` installs them);
//! without them a test fails saying how to install them. One browser runs at a time: the
//! tests that need one take [`Browser::start`]'s lock, so two Chromiums never share the
//! machine's two cores with the rest of the suite.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::sync::{Mutex, MutexGuard};

static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// A headless Chromium session; the driver and the browser stop when it is dropped.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    _turn: MutexGuard<'static, ()>,
}

impl Drop for Browser {
    /// Stops chromedriver and every process it started: it runs in a process group of its own
    /// ([`Browser::start`]), and the whole group is killed, so no Chromium outlives the test.
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([
            PathBuf::from("/usr/bin"),
            PathBuf::from("/usr/lib/chromium"),
        ])
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile, `width` by `height`.
    ///
    /// # Panics
    /// If either is missing, with how to install them.
    pub async fn start(width: u32, height: u32) -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let how = "install Debian's `chromium` and `chromium-driver` \
                   (`apt-get install chromium chromium-driver`; `.ci/run` does)";
        let driver = find(&["chromedriver"])
            .unwrap_or_else(|| panic!("the console tests need chromedriver: {how}"));
        let chromium = find(&["chromium", "chromium-browser"])
            .unwrap_or_else(|| panic!("the console tests need Chromium: {how}"));
        let port = crate::free_port();
        let driver = Command::new(&driver)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver.display()));
        assert!(
            crate::listening(port).await,
            "chromedriver did not start listening on {port}"
        );
        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    // Root in a container has no user namespace for Chromium's sandbox.
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("an object literal")
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("chromedriver could not start Chromium: {e}"));
        Self {
            client,
            driver,
            _profile: profile,
            _turn: turn,
        }
    }

    /// The element matching CSS `selector`, waiting up to `timeout` for it.
    ///
    /// # Panics
    /// If none appears by then, with the page's text.
    pub async fn wait(&self, selector: &str, timeout: Duration) -> fantoccini::elements::Element {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(element) = self.client.find(Locator::Css(selector)).await {
                return element;
            }
            if Instant::now() >= deadline {
                let text = self.text("body").await;
                panic!("`{selector}` did not appear within {timeout:?}; the page reads:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits up to `timeout` for the text of `selector` to contain `expected`, and returns it.
    ///
    /// # Panics
    /// If it does not by then.
    pub async fn wait_text(&self, selector: &str, expected: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text(selector).await;
            if text.contains(expected) {
                return text;
            }
            if Instant::now() >= deadline {
                panic!(
                    "`{selector}` did not come to contain {expected:?} within {timeout:?}; it reads {text:?}; the page reads:\n{}",
                    self.text("body").await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The text of the first element matching `selector` (empty if there is none).
    pub async fn text(&self, selector: &str) -> String {
        match self.client.find(Locator::Css(selector)).await {
            Ok(element) => element.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Whether an element matches `selector` now.
    pub async fn has(&self, selector: &str) -> bool {
        self.client.find(Locator::Css(selector)).await.is_ok()
    }

    /// Clicks the element matching `selector`.
    pub async fn click(&self, selector: &str) {
        self.wait(selector, Duration::from_secs(10))
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("cannot click `{selector}`: {e}"));
    }

    /// Types `text` into the element matching `selector`.
    pub async fn type_into(&self, selector: &str, text: &str) {
        self.wait(selector, Duration::from_secs(10))
            .await
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("cannot type into `{selector}`: {e}"));
    }

    /// Runs `script` (a function body; `arguments[0]` is the callback) in the page and returns
    /// what it passes to the callback.
    pub async fn run_async(&self, script: &str) -> Value {
        self.client
            .execute_async(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("the script failed: {e}"))
    }

    /// Writes a PNG screenshot of the window to `path`.
    pub async fn screenshot(&self, path: &std::path::Path) {
        let png = self.client.screenshot().await.expect("a screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}
