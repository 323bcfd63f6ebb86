//! One module's flags (its clap `Args`) parsed on their own, outside a command line: the defaults,
//! the environment's values (for the tests and the bench, which have no command line of their
//! own), or given flags. The same parser as the commands', so a value means the same everywhere.

use clap::{Args, Command, FromArgMatches};

/// `A` from the environment alone, as a command given no flags would read it.
pub fn from_env<A: Args + FromArgMatches>() -> Result<A, clap::Error> {
    parse(command::<A>(), &[])
}

/// `A` from `flags` alone: the environment is not read, so unset flags take their defaults.
pub fn given<A: Args + FromArgMatches>(flags: &[&str]) -> Result<A, clap::Error> {
    parse(command::<A>().mut_args(|a| a.env(None::<&str>)), flags)
}

fn command<A: Args>() -> Command {
    A::augment_args(Command::new("honcho-graphql"))
}

fn parse<A: FromArgMatches>(command: Command, flags: &[&str]) -> Result<A, clap::Error> {
    let matches = command
        .try_get_matches_from(std::iter::once("honcho-graphql").chain(flags.iter().copied()))?;
    A::from_arg_matches(&matches)
}
