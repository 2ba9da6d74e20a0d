//! `ckpt`: the command-line client of ckptd.
#![forbid(unsafe_code)]

fn main() {
    std::process::exit(ckpt::client::main());
}
