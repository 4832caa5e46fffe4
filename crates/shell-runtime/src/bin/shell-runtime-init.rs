//! The init of a sandboxed command's PID namespace, for programs that
//! cannot call [`shell_runtime::run_if_init`] first thing in their own
//! `main`: name this binary as `ConfinementSpec::init`.

#[expect(
    clippy::print_stderr,
    reason = "the one line a person who runs it by hand sees"
)]
fn main() {
    shell_runtime::run_if_init();
    eprintln!(
        "{}: the init of a sandboxed command's PID namespace; not meant to be run by hand",
        shell_runtime::INIT_NAME
    );
    std::process::exit(2);
}
