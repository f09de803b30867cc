//! `lcx play`: bot-vs-bot matches with alternating seats, summarised as a
//! table or one JSON object. The games themselves are played by
//! `lcx_core::bots::arena`; this file parses flags, shows progress and prints.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::args::{formats, Format};
use crate::bad_input;
use lcx_core::bots::arena::{self, MatchSpec, MatchSummary, DEFAULT_MAX_STEPS};
use lcx_core::bots::BotKind;
use lcx_core::game::Rules;
use lcx_core::text::markdown_table;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx play --p0 heuristic-balanced --p1 random --games 100")]
pub struct Args {
    /// First bot (random, discard-only, heuristic-balanced, heuristic-aggressive,
    /// heuristic-cautious, heuristic-noisy); seat 0 in even games, seat 1 in odd ones.
    #[arg(long)]
    p0: String,
    /// Second bot.
    #[arg(long)]
    p1: String,
    /// Number of games.
    #[arg(long, default_value_t = 100)]
    games: u64,
    /// Base seed: game k deals from seed+k; each bot's seed derives from it, k and its seat.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output format.
    #[arg(long, value_parser = formats(&[(Format::Table, None), (Format::Json, None)]), default_value = "table")]
    format: Format,
    /// Stop a game after this many actions and score it as it stands.
    #[arg(long, default_value_t = DEFAULT_MAX_STEPS)]
    max_steps: u64,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let p0 = BotKind::parse(&args.p0)
        .context("--p0")
        .map_err(bad_input)?;
    let p1 = BotKind::parse(&args.p1)
        .context("--p1")
        .map_err(bad_input)?;
    let spec = MatchSpec {
        bots: [p0, p1],
        games: args.games,
        seed: args.seed,
        max_steps: args.max_steps,
    };
    let rules = Rules::default();

    let progress = progress_bar(args.games);
    let started = Instant::now();
    let summary =
        arena::play_match(&rules, &spec, &|| progress.inc(1)).context("playing the match")?;
    let seconds = started.elapsed().as_secs_f64();
    progress.finish_and_clear();

    let games_per_second = if seconds > 0.0 {
        summary.games as f64 / seconds
    } else {
        0.0
    };
    // `--format` offers table and json.
    if args.format == Format::Json {
        println!("{}", json_summary(&spec, &summary, games_per_second));
    } else {
        println!("{}", table_summary(&spec, &summary, games_per_second));
    }
    Ok(0)
}

/// A bar on stderr when it is a terminal; hidden otherwise so piped output
/// and test logs stay clean.
fn progress_bar(games: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(games), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(games);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} games [{elapsed_precise} < {eta}]")
    {
        bar.set_style(style);
    }
    bar
}

fn json_summary(spec: &MatchSpec, s: &MatchSummary, games_per_second: f64) -> serde_json::Value {
    serde_json::json!({
        "bots": [spec.bots[0].name(), spec.bots[1].name()],
        "seed": spec.seed,
        "max_steps": spec.max_steps,
        "games": s.games,
        "wins": s.wins,
        "draws": s.draws,
        "mean_score": s.mean_score,
        "mean_score_diff": s.mean_score_diff,
        "mean_length": s.mean_length,
        "games_per_second": games_per_second,
        "truncated": s.truncated,
    })
}

fn table_summary(spec: &MatchSpec, s: &MatchSummary, games_per_second: f64) -> String {
    let rate = |wins: u64| {
        if s.games == 0 {
            0.0
        } else {
            100.0 * wins as f64 / s.games as f64
        }
    };
    let mut per_bot = markdown_table();
    per_bot.set_header(["", "bot", "wins", "win rate", "mean score"]);
    for (i, kind) in spec.bots.iter().enumerate() {
        per_bot.add_row([
            format!("p{i}"),
            kind.name().to_string(),
            s.wins[i].to_string(),
            format!("{:.1} %", rate(s.wins[i])),
            format!("{:.2}", s.mean_score[i]),
        ]);
    }
    let mut totals = markdown_table();
    totals.set_header([
        "games",
        "draws",
        "mean diff (p0 − p1)",
        "mean length",
        "games/s",
        "truncated",
    ]);
    totals.add_row([
        s.games.to_string(),
        s.draws.to_string(),
        format!("{:+.2}", s.mean_score_diff),
        format!("{:.1}", s.mean_length),
        format!("{games_per_second:.1}"),
        s.truncated.to_string(),
    ]);
    format!("{per_bot}\n\n{totals}")
}
