//! `argus demo-backend`: the demo's fixtures server (hidden from help).
//! One JSON line in, one out, as lynkeus' fixtures protocol has it. Its one
//! fixture, `promo_text`, answers a stale promotion the first time in a run
//! and the real one after: the demo's flaky case fails on its first
//! attempt, leaving a screenshot and evidence, and passes on its retry.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

/// The answer to one request, given how many `promo_text` calls came before.
fn answer(command: &str, promo_calls: &mut u32) -> Value {
    match command {
        "lynkeus.describe" => json!({ "commands": ["promo_text"] }),
        "promo_text" => {
            *promo_calls += 1;
            // A cache that still holds last week's banner on its first read.
            let text = if *promo_calls == 1 { "Summer sale: 20% off" } else { "Welcome to Shop" };
            json!({ "ok": true, "text": text })
        }
        other => json!({ "ok": false, "error": format!("no fixture {other}") }),
    }
}

pub fn run() -> ExitCode {
    let mut promo_calls = 0;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(request) => answer(request["command"].as_str().unwrap_or(""), &mut promo_calls),
            Err(error) => json!({ "ok": false, "error": format!("not a JSON request: {error}") }),
        };
        let mut out = stdout.lock();
        if writeln!(out, "{reply}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_promotion_is_stale_once() {
        let mut calls = 0;
        assert_eq!(answer("promo_text", &mut calls)["text"], "Summer sale: 20% off");
        assert_eq!(answer("promo_text", &mut calls)["text"], "Welcome to Shop");
        assert_eq!(answer("lynkeus.describe", &mut calls)["commands"], json!(["promo_text"]));
        assert_eq!(answer("nope", &mut calls)["error"], "no fixture nope");
    }
}
