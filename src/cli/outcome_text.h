#pragma once
// What a call's typed result (core/client_call.h) says, in words, and its
// exit code (core/exit_codes.h): the sentences of `wait`, `decide` and
// `abort`. Pure: results in, text out (tests/unit/outcome_text_test.cpp).
#include <string>

#include "client.h"
#include "client_call.h"

namespace tfb::cmd {

/// The exit code, stdout (the chief's message) and stderr text of a result.
outcome outcome_of(const client::call_result& r);
/// decide: the verdict is recorded, and not delivered a second later.
std::string note_text(const client::recorded& r);

}  // namespace tfb::cmd
