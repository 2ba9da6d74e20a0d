//! The request decoder: any line must decode to a request or to an error, and any params to
//! a method's parameters or to an error; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    if let Ok(request) = ckpt::protocol::decode_request(line) {
        let _ = ckpt::daemon::check_params(&request.method, request.params);
    }
});
